// Shaping of API data into chart series: metric extraction, alignment of many trials onto one x
// axis (uPlot's AlignedData), downsampling (LTTB), and the axes of the hyperparameter charts.
import type { MetricReport, Trial, UtilizationPoint } from '../api/types';
import { formatMetric } from './format';

export interface XY {
  x: number[];
  y: (number | null)[];
}

/** Numeric metric names present in any report, sorted, with the usual ones first (a speech
 *  model's error rates right after its loss). */
export function metricKeys(reports: readonly MetricReport[]): string[] {
  const seen = new Set<string>();
  for (const r of reports) for (const [k, v] of Object.entries(r.values)) if (typeof v === 'number') seen.add(k);
  const pref = ['loss', 'validation_loss', 'wer', 'cer', 'bleu', 'perplexity', 'ppl'];
  return [...seen].sort((a, b) => {
    const pa = pref.indexOf(a);
    const pb = pref.indexOf(b);
    if (pa !== -1 || pb !== -1) return (pa === -1 ? 99 : pa) - (pb === -1 ? 99 : pb);
    return a.localeCompare(b);
  });
}

/** One metric of a trial as x/y arrays sorted by x. Rows without a numeric value for `key` are
 *  skipped. x is the step (batches) or the report time in seconds since the epoch. When a restart
 *  re-reports a step, the later report wins (steps only; on the time axis every report is kept,
 *  in report order for equal times). */
export function seriesFromReports(reports: readonly MetricReport[], key: string, xMode: 'batches' | 'time' = 'batches'): XY {
  const pts: [number, number][] = [];
  for (const r of reports) {
    const v = r.values[key];
    if (typeof v !== 'number') continue;
    const x = xMode === 'batches' ? r.batches : r.time ? Date.parse(r.time) / 1000 : NaN;
    if (!Number.isFinite(x)) continue;
    pts.push([x, v]);
  }
  pts.sort((a, b) => a[0] - b[0]);
  const x: number[] = [];
  const y: number[] = [];
  for (const [px, py] of pts) {
    // a repeated step is a re-report (keep the later one); equal times are distinct reports
    if (xMode === 'batches' && x.length && x[x.length - 1] === px) {
      y[y.length - 1] = py;
      continue;
    }
    x.push(px);
    y.push(py);
  }
  return { x, y };
}

/** Number of rows that carry a numeric value for `key` (what the e2e test compares against). */
export function countRowsWithMetric(reports: readonly MetricReport[], key: string): number {
  let n = 0;
  for (const r of reports) if (typeof r.values[key] === 'number') n++;
  return n;
}

/** Largest-Triangle-Three-Buckets downsampling to at most `threshold` points. Keeps the first and
 *  last point and the visual shape; null y values are dropped first. Returns the input unchanged
 *  when it is already small enough. */
export function lttb(s: XY, threshold: number): XY {
  let xs = s.x;
  let ys = s.y;
  if (ys.some((v) => v === null || !Number.isFinite(v as number))) {
    const nx: number[] = [];
    const ny: number[] = [];
    for (let i = 0; i < xs.length; i++) {
      const v = ys[i];
      if (v !== null && Number.isFinite(v)) {
        nx.push(xs[i]);
        ny.push(v);
      }
    }
    xs = nx;
    ys = ny;
  }
  const n = xs.length;
  if (threshold >= n || threshold < 3) return { x: xs.slice(), y: ys.slice() };
  const outX: number[] = [xs[0]];
  const outY: number[] = [ys[0] as number];
  const every = (n - 2) / (threshold - 2);
  let a = 0;
  for (let i = 0; i < threshold - 2; i++) {
    // average of the next bucket
    const nStart = Math.floor((i + 1) * every) + 1;
    const nEnd = Math.min(Math.floor((i + 2) * every) + 1, n);
    let avgX = 0;
    let avgY = 0;
    for (let j = nStart; j < nEnd; j++) {
      avgX += xs[j];
      avgY += ys[j] as number;
    }
    const cnt = Math.max(1, nEnd - nStart);
    avgX /= cnt;
    avgY /= cnt;
    // pick the point of this bucket with the largest triangle
    const start = Math.floor(i * every) + 1;
    const end = Math.floor((i + 1) * every) + 1;
    const ax = xs[a];
    const ay = ys[a] as number;
    let best = start;
    let bestArea = -1;
    for (let j = start; j < end; j++) {
      const area = Math.abs((ax - avgX) * ((ys[j] as number) - ay) - (ax - xs[j]) * (avgY - ay));
      if (area > bestArea) {
        bestArea = area;
        best = j;
      }
    }
    outX.push(xs[best]);
    outY.push(ys[best] as number);
    a = best;
  }
  outX.push(xs[n - 1]);
  outY.push(ys[n - 1] as number);
  return { x: outX, y: outY };
}

/** Puts several series on one shared, sorted x axis (uPlot AlignedData): [x, y1, y2, ...] with
 *  null where a series has no point at that x. */
export function alignSeries(series: readonly XY[]): [number[], ...(number | null)[][]] {
  const xsSet = new Set<number>();
  for (const s of series) for (const x of s.x) xsSet.add(x);
  const xs = [...xsSet].sort((a, b) => a - b);
  const pos = new Map<number, number>();
  xs.forEach((x, i) => pos.set(x, i));
  const ys = series.map((s) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    for (let i = 0; i < s.x.length; i++) col[pos.get(s.x[i])!] = s.y[i];
    return col;
  });
  return [xs, ...ys];
}

/** For a log-scale axis: values ≤ 0 cannot be drawn and become null. */
export function forLogScale(y: readonly (number | null)[]): (number | null)[] {
  return y.map((v) => (v !== null && v > 0 ? v : null));
}

/** Count of non-null y values across the series of an aligned data set. */
export function countDrawnPoints(data: readonly (readonly (number | null)[])[]): number {
  let n = 0;
  for (let s = 1; s < data.length; s++) for (const v of data[s]) if (v !== null && v !== undefined) n++;
  return n;
}

// ---------- cluster utilisation ----------

export interface UtilizationSeries {
  t: number[]; // minute starts, seconds since the epoch, ascending, each once
  busy: number[]; // mean busy slots in the minute, summed over the pools
  busyMax: number[]; // most busy slots in one sample, summed over the pools (with several pools
  //                    an upper bound: their peaks need not coincide)
  total: number[]; // slots, summed over the pools
}

/** The master's per-pool, per-minute history as one series over the whole cluster (or over
 *  `pool` only): one x value per minute, in time order whatever order the points came in. */
export function utilizationSeries(points: readonly UtilizationPoint[], pool?: string): UtilizationSeries {
  const byMinute = new Map<number, { busy: number; busyMax: number; total: number }>();
  for (const p of points) {
    if (pool !== undefined && p.pool !== pool) continue;
    if (!Number.isFinite(p.time)) continue;
    const m = byMinute.get(p.time) ?? { busy: 0, busyMax: 0, total: 0 };
    m.busy += p.slotsBusy;
    m.busyMax += p.slotsBusyMax;
    m.total += p.slotsTotal;
    byMinute.set(p.time, m);
  }
  const out: UtilizationSeries = { t: [], busy: [], busyMax: [], total: [] };
  for (const t of [...byMinute.keys()].sort((a, b) => a - b)) {
    const m = byMinute.get(t)!;
    out.t.push(t);
    out.busy.push(m.busy);
    out.busyMax.push(m.busyMax);
    out.total.push(m.total);
  }
  return out;
}

// ---------- hyperparameter views ----------

export interface HParamAxis {
  name: string;
  kind: 'numeric' | 'categorical';
  min: number;
  max: number;
  categories: string[]; // for categorical axes, in display order
  log: boolean; // numeric axis spanning > 2 decades of positive values
}

/** Flattens nested hyperparameters ({optimizer: {type: radam}} → "optimizer.type"). */
export function flattenHParams(h: Record<string, unknown>, prefix = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(h)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v)) Object.assign(out, flattenHParams(v as Record<string, unknown>, key));
    else out[key] = Array.isArray(v) ? JSON.stringify(v) : v;
  }
  return out;
}

/** Every hyperparameter name of a set of trials, sorted, and which of them are constant (the same
 *  value in every trial; one that some trials lack varies). */
export function hparamSummary(trials: readonly Trial[]): { names: string[]; constant: Set<string> } {
  const vals = new Map<string, Set<string>>();
  for (const t of trials) {
    for (const [k, v] of Object.entries(flattenHParams(t.hparams))) {
      if (!vals.has(k)) vals.set(k, new Set());
      vals.get(k)!.add(JSON.stringify(v));
    }
  }
  const names = [...vals.keys()].sort();
  for (const t of trials) {
    const flat = flattenHParams(t.hparams);
    for (const k of names) if (!(k in flat)) vals.get(k)!.add('absent');
  }
  return { names, constant: new Set(names.filter((k) => vals.get(k)!.size <= 1)) };
}

/** Hyperparameter names that vary between trials (constants are not worth an axis). When every
 *  one is constant, all are returned. */
export function varyingHParams(trials: readonly Trial[]): string[] {
  const { names, constant } = hparamSummary(trials);
  const varying = names.filter((k) => !constant.has(k));
  return varying.length ? varying : names;
}

/** How an axis maps values: linear, log (positive numbers over ≥ 2 decades) or categorical (strings,
 *  booleans, mixtures: the distinct values evenly spaced). */
export function axisScale(axis: HParamAxis): 'linear' | 'log' | 'categorical' {
  return axis.kind === 'categorical' ? 'categorical' : axis.log ? 'log' : 'linear';
}

/** Display order of categorical values, stable whatever order the trials come in: numbers by value,
 *  then booleans (false, true), then everything else as text in natural order ("layer2" before
 *  "layer10"). */
function categoryOrder(a: unknown, b: unknown): number {
  const rank = (v: unknown) => (typeof v === 'number' ? 0 : typeof v === 'boolean' ? 1 : 2);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return (a as number) - (b as number);
  if (ra === 1) return Number(a) - Number(b);
  const sa = categoryKey(a);
  const sb = categoryKey(b);
  return sa.localeCompare(sb, 'en', { numeric: true }) || (sa < sb ? -1 : sa > sb ? 1 : 0);
}

const categoryKey = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** Builds an axis description from the values of one column. */
export function buildAxis(name: string, values: readonly unknown[]): HParamAxis {
  const present = values.filter((v) => v !== undefined && v !== null);
  const numeric = present.length > 0 && present.every((v) => typeof v === 'number' && Number.isFinite(v));
  if (numeric) {
    const nums = present as number[];
    let min = Math.min(...nums);
    let max = Math.max(...nums);
    const log = min > 0 && max / min >= 100;
    if (min === max) {
      min -= min === 0 ? 1 : Math.abs(min) * 0.1;
      max += max === 0 ? 1 : Math.abs(max) * 0.1;
    }
    return { name, kind: 'numeric', min, max, categories: [], log };
  }
  const distinct = new Map<string, unknown>();
  for (const v of present) if (!distinct.has(categoryKey(v))) distinct.set(categoryKey(v), v);
  const cats = [...distinct.values()].sort(categoryOrder).map(categoryKey);
  return { name, kind: 'categorical', min: 0, max: Math.max(1, cats.length - 1), categories: cats, log: false };
}

/** Position of a value on an axis in [0, 1] (0 = bottom); NaN when the value is missing. */
export function axisPosition(axis: HParamAxis, v: unknown): number {
  if (v === undefined || v === null) return NaN;
  if (axis.kind === 'categorical') {
    const i = axis.categories.indexOf(categoryKey(v));
    if (i < 0) return NaN;
    return axis.categories.length === 1 ? 0.5 : i / (axis.categories.length - 1);
  }
  if (typeof v !== 'number') return NaN;
  if (axis.log) return (Math.log10(v) - Math.log10(axis.min)) / (Math.log10(axis.max) - Math.log10(axis.min));
  return (v - axis.min) / (axis.max - axis.min);
}

/** The ticks of an axis as [0, 1] positions and text: every category; each decade on a log axis
 *  (the ends when it spans less than two); the ends and the middle on a linear one. Labels are
 *  thinned later, by the layout (chartLabels.ts). */
export function axisTicks(axis: HParamAxis): { t: number; text: string }[] {
  if (axis.kind === 'categorical') return axis.categories.map((c, k) => ({ t: axis.categories.length === 1 ? 0.5 : k / (axis.categories.length - 1), text: c }));
  if (axis.log) {
    const lo = Math.log10(axis.min);
    const hi = Math.log10(axis.max);
    const out: { t: number; text: string }[] = [];
    for (let e = Math.ceil(lo - 1e-9); e <= Math.floor(hi + 1e-9); e++) out.push({ t: (e - lo) / (hi - lo), text: formatMetric(10 ** e) });
    if (out.length >= 2) return out;
    return [0, 1].map((t) => ({ t, text: formatMetric(10 ** (lo + t * (hi - lo))) }));
  }
  return [0, 0.5, 1].map((t) => ({ t, text: formatMetric(axis.min + t * (axis.max - axis.min)) }));
}

/** The metric a trial is judged by in the hyperparameter views (best, else latest validation). */
export function trialMetric(t: Trial): number | undefined {
  return t.bestValidationMetric ?? t.latestValidationMetric;
}
