// Formatting of durations, numbers, dates and states for display. Pure functions (tested).

/** "45s", "3m 05s", "2h 04m", "3d 4h". Negative or non-finite → "–". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '–';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
  const d = Math.floor(h / 24);
  return `${d}d ${h % 24}h`;
}

/** Duration between two RFC 3339 times; an open interval runs to `now`. */
export function durationBetween(start?: string, end?: string, now: number = Date.now()): number {
  if (!start) return NaN;
  const a = Date.parse(start);
  const b = end ? Date.parse(end) : now;
  return b - a;
}

/** Metric values: up to 4 significant digits, exponent for very small/large, "–" for none. */
export function formatMetric(v: number | null | undefined): string {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '-∞';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(3).replace(/\.?0+e/, 'e');
  return String(Number(v.toPrecision(4)));
}

/** Integers with thousands separators: 1234567 → "1,234,567". */
export function formatInt(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return Math.round(v).toLocaleString('en-US');
}

/** Compact counts: 950 → "950", 12_300 → "12.3k", 4_500_000 → "4.5M". */
export function formatCompact(v: number): string {
  if (!Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  const f = (x: number, u: string) => `${Number(x.toFixed(x < 10 ? 1 : 0))}${u}`;
  if (a >= 1e9) return f(v / 1e9, 'G');
  if (a >= 1e6) return f(v / 1e6, 'M');
  if (a >= 1e3) return f(v / 1e3, 'k');
  return String(Number(v.toFixed(2)));
}

/** A model's parameter count in the units model sizes are quoted in: 950 → "950", 48_213 → "48 K",
 *  1_234_567 → "1.2 M", 999_999 → "1.0 M", 13e9 → "13 B" (one decimal below 10 of a unit). */
export function formatParameters(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n) || n < 0) return '–';
  const units = ['', ' K', ' M', ' B'];
  const digits = (x: number, unit: number) => (unit > 0 && x < 9.95 ? x.toFixed(1) : String(Math.round(x)));
  let unit = 0;
  let x = n;
  while (unit < units.length - 1 && Number(digits(x, unit)) >= 1000) {
    x /= 1000;
    unit++;
  }
  return digits(x, unit) + units[unit];
}

/** Bytes: 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let x = n;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${x.toFixed(x < 10 ? 1 : 0)} ${units[i]}`;
}

const pad = (n: number) => String(n).padStart(2, '0');

/** RFC 3339 → "2026-11-22 14:05:09" in local time (UTC when utc=true); "–" for none/invalid. */
export function formatDateTime(iso?: string, utc = false): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '–';
  const d = new Date(t);
  const [Y, M, D, h, m, s] = utc
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds()];
  return `${Y}-${pad(M)}-${pad(D)} ${pad(h)}:${pad(m)}:${pad(s)}`;
}

/** "3 min ago" style relative time. */
export function formatRelative(iso: string | undefined, now: number = Date.now()): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '–';
  const s = Math.round((now - t) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** "EXPERIMENT_STATE_STOPPING_COMPLETED" → "Stopping completed". */
export function stateLabel(state: string): string {
  const s = state.replace(/^(EXPERIMENT|TRIAL|SLOT_TYPE)_STATE_|^SLOT_TYPE_/, '').replace(/_/g, ' ').toLowerCase();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Colour family of a state badge (experiments, trials, and servers: READY, STARTING, FAILED…). */
export function stateTone(state: string): 'active' | 'paused' | 'done' | 'bad' | 'stopping' | 'queued' | 'neutral' {
  const s = state.replace(/^(EXPERIMENT|TRIAL)_STATE_/, '');
  if (s === 'ACTIVE' || s === 'RUNNING' || s === 'READY') return 'active';
  if (s === 'PAUSED') return 'paused';
  if (s === 'COMPLETED') return 'done';
  if (s === 'ERROR' || s === 'STOPPING_ERROR' || s === 'FAILED') return 'bad';
  if (s === 'CANCELED' || s === 'STOPPED') return 'neutral';
  if (s.startsWith('STOPPING')) return 'stopping';
  if (s === 'QUEUED' || s === 'STARTING') return 'queued';
  return 'neutral';
}

/** Hyperparameter value for a table cell. */
export function formatHParam(v: unknown): string {
  if (v === null || v === undefined) return '–';
  if (typeof v === 'number') return formatMetric(v);
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return JSON.stringify(v);
}
