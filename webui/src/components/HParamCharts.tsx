// Hyperparameter views drawn on canvas: parallel coordinates (one line per trial across the varying
// hyperparameters and the metric, coloured by the metric) and a metric-vs-hyperparameter scatter.
import { useEffect, useMemo, useRef, useState } from 'react';
import type { Trial } from '../api/types';
import { axisPosition, buildAxis, flattenHParams, trialMetric, type HParamAxis } from '../lib/chartData';
import { formatMetric } from '../lib/format';

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

const axisTick = (a: HParamAxis, t: number): string => {
  if (a.kind === 'categorical') return a.categories[Math.round(t * (a.categories.length - 1))] ?? '';
  const v = a.log ? 10 ** (Math.log10(a.min) + t * (Math.log10(a.max) - Math.log10(a.min))) : a.min + t * (a.max - a.min);
  return formatMetric(v);
};

export function ParallelCoordinates({ trials, hparams, metric, smallerIsBetter, highlight, onHover }: { trials: Trial[]; hparams: string[]; metric: string; smallerIsBetter: boolean; highlight?: number; onHover?: (trialId: number | undefined) => void }) {
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const width = useWidth(wrap);
  const height = 280;
  const rows = useMemo(() => trials.map((t) => ({ t, h: flattenHParams(t.hparams), m: trialMetric(t) })), [trials]);
  const axes = useMemo(() => {
    const a = hparams.map((name) => buildAxis(name, rows.map((r) => r.h[name])));
    a.push(buildAxis(metric || 'metric', rows.map((r) => r.m)));
    return a;
  }, [rows, hparams, metric]);
  const drawn = rows.filter((r) => r.m !== undefined || hparams.length > 0);
  const geom = useMemo(() => {
    const padX = 50;
    const top = 28;
    const bottom = 28;
    const n = axes.length;
    const xAt = (i: number) => (n === 1 ? width / 2 : padX + (i * (width - 2 * padX)) / (n - 1));
    const yAt = (t: number) => top + (1 - t) * (height - top - bottom);
    return { xAt, yAt };
  }, [axes.length, width]);

  useEffect(() => {
    const c = canvas.current;
    if (!c || width <= 0) return;
    const ctx = setupCanvas(c, width, height);
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
        const x = geom.xAt(i);
        const y = geom.yAt(t);
        if (!started) ctx.moveTo(x, y);
        else ctx.lineTo(x, y);
        started = true;
      });
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    // axes
    axes.forEach((a, i) => {
      const x = geom.xAt(i);
      ctx.strokeStyle = '#374151';
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, geom.yAt(1));
      ctx.lineTo(x, geom.yAt(0));
      ctx.stroke();
      ctx.fillStyle = '#111827';
      ctx.textAlign = i === 0 ? 'left' : i === axes.length - 1 ? 'right' : 'center';
      const labelX = i === 0 ? x - 10 : i === axes.length - 1 ? x + 10 : x;
      ctx.fillText(a.name, labelX, 16);
      ctx.fillStyle = '#4b5563';
      ctx.textAlign = 'left';
      const ticks = a.kind === 'categorical' ? a.categories.map((_, k) => (a.categories.length === 1 ? 0.5 : k / (a.categories.length - 1))) : [0, 0.5, 1];
      for (const t of ticks) {
        const y = geom.yAt(t);
        ctx.fillText(axisTick(a, t), Math.min(x + 4, width - 40), y + 4);
      }
    });
  }, [axes, drawn, width, highlight, smallerIsBetter, geom]);

  const onMove = (e: React.MouseEvent) => {
    if (!onHover || !canvas.current) return;
    const rect = canvas.current.getBoundingClientRect();
    const mx = e.clientX - rect.left;
    const my = e.clientY - rect.top;
    // nearest trial by vertical distance at the nearest axis
    let ai = 0;
    let best = Infinity;
    axes.forEach((_, i) => {
      const d = Math.abs(geom.xAt(i) - mx);
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
      const d = Math.abs(geom.yAt(t) - my);
      if (d < bd) {
        bd = d;
        found = r.t.id;
      }
    }
    onHover(found);
  };

  return (
    <figure className="chart" data-testid="chart-parallel-coordinates" data-points={drawn.length} aria-label={`Parallel coordinates of ${drawn.length} trials over ${hparams.join(', ')} and ${metric}`}>
      <figcaption className="chart-title">Parallel coordinates (colour: {metric || 'metric'}, blue = better)</figcaption>
      <div ref={wrap} className="chart-canvas">
        <canvas ref={canvas} role="img" aria-label="Parallel coordinates chart" onMouseMove={onMove} onMouseLeave={() => onHover?.(undefined)} />
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
  useEffect(() => {
    const c = canvas.current;
    if (!c || width <= 0) return;
    const ctx = setupCanvas(c, width, height);
    if (!ctx) return;
    const L = 60;
    const R = 16;
    const T = 12;
    const B = 36;
    const inset = 8; // keep dots at the extremes inside the frame
    const xa = buildAxis(hp, pts.map((p) => p.v));
    const ya = buildAxis(metric, pts.map((p) => p.m));
    ctx.strokeStyle = '#9ca3af';
    ctx.strokeRect(L, T, width - L - R, height - T - B);
    ctx.fillStyle = '#4b5563';
    for (const t of xa.kind === 'categorical' ? xa.categories.map((_, k) => (xa.categories.length === 1 ? 0.5 : k / (xa.categories.length - 1))) : [0, 0.5, 1]) {
      const x = L + t * (width - L - R);
      ctx.textAlign = t === 0 ? 'left' : t === 1 ? 'right' : 'center';
      ctx.fillText(axisTick(xa, t), x, height - B + 16);
    }
    ctx.textAlign = 'center';
    ctx.fillText(hp, L + (width - L - R) / 2, height - 4);
    ctx.textAlign = 'right';
    for (const t of [0, 0.5, 1]) ctx.fillText(axisTick(ya, t), L - 6, T + (1 - t) * (height - T - B) + 4);
    for (const p of pts) {
      const tx = axisPosition(xa, p.v);
      const ty = axisPosition(ya, p.m);
      if (Number.isNaN(tx) || Number.isNaN(ty)) continue;
      ctx.fillStyle = 'rgba(37, 99, 235, 0.75)';
      ctx.beginPath();
      ctx.arc(L + inset + tx * (width - L - R - 2 * inset), T + inset + (1 - ty) * (height - T - B - 2 * inset), 5, 0, Math.PI * 2);
      ctx.fill();
    }
  }, [pts, width, hp, metric]);
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
        <canvas ref={canvas} role="img" aria-label={`Scatter of ${metric} against ${hp}, ${pts.length} trials`} />
      </div>
    </figure>
  );
}
