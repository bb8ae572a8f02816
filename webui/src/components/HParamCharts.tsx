// Hyperparameter views drawn on canvas: parallel coordinates (one line per trial across the varying
// hyperparameters and the metric, coloured by the metric) and a metric-vs-hyperparameter scatter.
import { useEffect, useMemo, useRef, useState } from 'react';
import type { Trial } from '../api/types';
import { axisPosition, axisTicks, buildAxis, flattenHParams, trialMetric } from '../lib/chartData';
import { estimateWidth, LABEL_FONT_PX, LABEL_LINE_PX, layoutHorizontalLabels, layoutParallelLabels, truncateToWidth, type LabelBox, type Measure } from '../lib/chartLabels';

function useWidth(ref: React.RefObject<HTMLElement | null>): number {
  const [w, setW] = useState(0);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    setW(el.clientWidth);
    if (typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => setW(el.clientWidth));
    ro.observe(el);
    return () => ro.disconnect();
  }, [ref]);
  return w;
}

/** Blue (good) → red (bad) colour for a metric value scaled to [0,1] where 1 = best. */
function goodness(t: number): string {
  const h = 0 + 220 * Math.max(0, Math.min(1, t));
  return `hsl(${h}, 70%, 45%)`;
}

function setupCanvas(c: HTMLCanvasElement, w: number, h: number): CanvasRenderingContext2D | null {
  const dpr = window.devicePixelRatio || 1;
  c.width = Math.round(w * dpr);
  c.height = Math.round(h * dpr);
  c.style.width = `${w}px`;
  c.style.height = `${h}px`;
  const ctx = c.getContext('2d');
  if (!ctx) return null;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = '12px system-ui, sans-serif';
  return ctx;
}

/** A text measurer in the labels' font, made once the chart is laid out (never in jsdom, where
 *  the layout estimates widths instead). */
function useMeasure(ready: boolean): Measure | undefined {
  const [measure, setMeasure] = useState<Measure>();
  useEffect(() => {
    if (!ready || measure) return;
    const ctx = document.createElement('canvas').getContext('2d');
    if (!ctx) return;
    ctx.font = LABEL_FONT;
    setMeasure(() => (text: string) => ctx.measureText(text).width);
  }, [ready, measure]);
  return measure;
}

const LABEL_FONT = `${LABEL_FONT_PX}px system-ui, sans-serif`;

/** Labels as elements over the canvas, sized exactly as laid out (chartLabels.ts). */
function Labels({ boxes, testId }: { boxes: readonly LabelBox[]; testId: string }) {
  return (
    <>
      {boxes.map((b, i) => (
        <span key={i} className={`chart-label chart-label-${b.role}`} data-testid={testId} data-axis={b.axis} data-role={b.role} title={b.full} style={{ left: b.left, top: b.top, width: b.width, height: b.height, lineHeight: `${b.height}px`, font: LABEL_FONT }}>
          {b.text}
        </span>
      ))}
    </>
  );
}

/** Hyperparameter axes at most, after the constant ones are left out (the metric axis comes on top). */
const MAX_PC_HPARAMS = 10;

/** `hparams`: every hyperparameter name; the constant ones are hidden until the user asks for them. */
export function ParallelCoordinates({ trials, hparams, metric, smallerIsBetter, highlight, onHover }: { trials: Trial[]; hparams: string[]; metric: string; smallerIsBetter: boolean; highlight?: number; onHover?: (trialId: number | undefined) => void }) {
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const width = useWidth(wrap);
  const measure = useMeasure(width > 0);
  const [showConstant, setShowConstant] = useState(false);
  const height = 280;
  const rows = useMemo(() => trials.map((t) => ({ t, h: flattenHParams(t.hparams), m: trialMetric(t) })), [trials]);
  const constant = useMemo(() => new Set(hparams.filter((k) => new Set(rows.map((r) => JSON.stringify(r.h[k]))).size <= 1)), [rows, hparams]);
  const shown = useMemo(() => hparams.filter((k) => showConstant || !constant.has(k)).slice(0, MAX_PC_HPARAMS), [hparams, constant, showConstant]);
  const axes = useMemo(() => {
    const a = shown.map((name) => buildAxis(name, rows.map((r) => r.h[name])));
    a.push(buildAxis(metric || 'metric', rows.map((r) => r.m)));
    return a;
  }, [rows, shown, metric]);
  const drawn = rows.filter((r) => r.m !== undefined || hparams.length > 0);
  const layout = useMemo(() => layoutParallelLabels(axes.map((a) => ({ name: a.name, ticks: axisTicks(a) })), { width, height, measure }), [axes, width, measure]);
  const yAt = (t: number) => layout.plotTop + (1 - t) * (layout.plotBottom - layout.plotTop);

  useEffect(() => {
    const c = canvas.current;
    if (!c || width <= 0) return;
    const ctx = setupCanvas(c, layout.width, height);
    if (!ctx) return;
    const mAxis = axes[axes.length - 1];
    // lines
    for (const r of drawn) {
      const mt = r.m === undefined ? NaN : axisPosition(mAxis, r.m);
      const good = Number.isNaN(mt) ? 0.5 : smallerIsBetter ? 1 - mt : mt;
      const hl = highlight === r.t.id;
      ctx.strokeStyle = Number.isNaN(mt) ? '#9ca3af' : goodness(good);
      ctx.globalAlpha = highlight === undefined || hl ? 0.9 : 0.2;
      ctx.lineWidth = hl ? 3 : 1.5;
      ctx.beginPath();
      let started = false;
      axes.forEach((a, i) => {
        const v = i === axes.length - 1 ? r.m : r.h[a.name];
        const t = axisPosition(a, v);
        if (Number.isNaN(t)) {
          started = false;
          return;
        }
        if (!started) ctx.moveTo(layout.xs[i], yAt(t));
        else ctx.lineTo(layout.xs[i], yAt(t));
        started = true;
      });
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    // axes (their names and ticks are elements over the canvas)
    ctx.strokeStyle = '#374151';
    ctx.lineWidth = 1;
    for (const x of layout.xs) {
      ctx.beginPath();
      ctx.moveTo(x, yAt(1));
      ctx.lineTo(x, yAt(0));
      ctx.stroke();
    }
  }, [axes, drawn, width, highlight, smallerIsBetter, layout]);

  const onMove = (e: React.MouseEvent) => {
    if (!onHover || !canvas.current) return;
    const rect = canvas.current.getBoundingClientRect();
    const mx = e.clientX - rect.left;
    const my = e.clientY - rect.top;
    // nearest trial by vertical distance at the nearest axis
    let ai = 0;
    let best = Infinity;
    layout.xs.forEach((x, i) => {
      const d = Math.abs(x - mx);
      if (d < best) {
        best = d;
        ai = i;
      }
    });
    let found: number | undefined;
    let bd = 12;
    for (const r of drawn) {
      const v = ai === axes.length - 1 ? r.m : r.h[axes[ai].name];
      const t = axisPosition(axes[ai], v);
      if (Number.isNaN(t)) continue;
      const d = Math.abs(yAt(t) - my);
      if (d < bd) {
        bd = d;
        found = r.t.id;
      }
    }
    onHover(found);
  };

  return (
    <figure className="chart" data-testid="chart-parallel-coordinates" data-points={drawn.length} data-axes={axes.map((a) => a.name).join(',')} aria-label={`Parallel coordinates of ${drawn.length} trials over ${shown.join(', ')} and ${metric}`}>
      <figcaption className="chart-title">
        Parallel coordinates (colour: {metric || 'metric'}, blue = better)
        {constant.size > 0 && (
          <label className="chart-option">
            <input type="checkbox" data-testid="pc-show-constant" checked={showConstant} onChange={(e) => setShowConstant(e.target.checked)} /> show constant hyperparameters ({constant.size})
          </label>
        )}
      </figcaption>
      <div ref={wrap} className="chart-canvas chart-scroll">
        <div className="chart-layer" style={{ width: layout.width, height }}>
          <canvas ref={canvas} role="img" aria-label="Parallel coordinates chart" onMouseMove={onMove} onMouseLeave={() => onHover?.(undefined)} />
          <Labels boxes={layout.labels} testId="pc-label" />
        </div>
      </div>
    </figure>
  );
}

export function HParamScatter({ trials, hparams, metric }: { trials: Trial[]; hparams: string[]; metric: string }) {
  const [hp, setHp] = useState<string>(hparams[0] ?? '');
  useEffect(() => {
    if (!hparams.includes(hp)) setHp(hparams[0] ?? '');
  }, [hparams, hp]);
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const width = useWidth(wrap);
  const height = 260;
  const pts = useMemo(() => trials.map((t) => ({ id: t.id, v: flattenHParams(t.hparams)[hp], m: trialMetric(t) })).filter((p) => p.m !== undefined && p.v !== undefined), [trials, hp]);
  const measure = useMeasure(width > 0);
  const xa = useMemo(() => buildAxis(hp, pts.map((p) => p.v)), [hp, pts]);
  const ya = useMemo(() => buildAxis(metric, pts.map((p) => p.m)), [metric, pts]);
  // frame: left, right, top, bottom margins; dots at the extremes of a numeric axis stay `inset` inside
  const [L, R, T, B, inset] = [60, 16, 12, 36, 8];
  const w = Math.max(width, 240); // labels are laid out even before the first measurement (jsdom)
  const plotW = w - L - R;
  /** x of a value's position t on the x axis, in [0, 1] of the frame: categories sit in the middle
   *  of equal bands, numbers between the insets. */
  const xFrac = (t: number) => (xa.kind === 'categorical' ? (Math.round(t * (xa.categories.length - 1)) + 0.5) / xa.categories.length : (inset + t * (plotW - 2 * inset)) / plotW);
  const labels = useMemo(() => {
    const ticks = axisTicks(xa).map((tk) => ({ t: xFrac(tk.t), text: tk.text }));
    const out = layoutHorizontalLabels(hp, ticks, { left: L, right: w - R, top: height - B + 2, measure });
    const name = truncateToWidth(hp, plotW, measure);
    const nw = Math.min(plotW, Math.ceil((measure ?? estimateWidth)(name)) + 2);
    if (name) out.push({ axis: hp, role: 'name', text: name, full: hp, left: L + (plotW - nw) / 2, top: height - LABEL_LINE_PX - 2, width: nw, height: LABEL_LINE_PX });
    return out;
  }, [xa, hp, w, measure]); // xFrac depends only on xa and w
  useEffect(() => {
    const c = canvas.current;
    if (!c || width <= 0) return;
    const ctx = setupCanvas(c, width, height);
    if (!ctx) return;
    ctx.strokeStyle = '#9ca3af';
    ctx.strokeRect(L, T, plotW, height - T - B);
    ctx.fillStyle = '#4b5563';
    ctx.textAlign = 'right';
    for (const tk of axisTicks(ya).filter((_, k, all) => all.length <= 3 || k % Math.ceil(all.length / 3) === 0)) ctx.fillText(tk.text, L - 6, T + (1 - tk.t) * (height - T - B) + 4);
    for (const p of pts) {
      const tx = axisPosition(xa, p.v);
      const ty = axisPosition(ya, p.m);
      if (Number.isNaN(tx) || Number.isNaN(ty)) continue;
      ctx.fillStyle = 'rgba(37, 99, 235, 0.75)';
      ctx.beginPath();
      ctx.arc(L + xFrac(tx) * plotW, T + inset + (1 - ty) * (height - T - B - 2 * inset), 5, 0, Math.PI * 2);
      ctx.fill();
    }
  }, [pts, width, xa, ya]);
  return (
    <figure className="chart" data-testid="chart-hparam-scatter" data-points={pts.length}>
      <figcaption className="chart-title">
        <label>
          {metric || 'metric'} vs{' '}
          <select value={hp} onChange={(e) => setHp(e.target.value)} aria-label="Hyperparameter for the scatter x axis">
            {hparams.map((h) => (
              <option key={h} value={h}>
                {h}
              </option>
            ))}
          </select>
        </label>
      </figcaption>
      <div ref={wrap} className="chart-canvas">
        <div className="chart-layer" style={{ height }}>
          <canvas ref={canvas} role="img" aria-label={`Scatter of ${metric} against ${hp}, ${pts.length} trials`} />
          <Labels boxes={labels} testId="scatter-label" />
        </div>
      </div>
    </figure>
  );
}
