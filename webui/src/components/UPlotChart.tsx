// A uPlot line chart that fills its container's width. Drag to zoom on x, double-click to reset.
// Exposes data-testid and data-points (the number of non-null points handed to uPlot) so tests
// can compare with the API.
import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { countDrawnPoints } from '../lib/chartData';
import { formatCompact, formatMetric } from '../lib/format';

export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d', '#7c3aed', '#0d9488'];

export interface ChartProps {
  testId: string;
  title: string;
  data: uPlot.AlignedData;
  seriesLabels: string[];
  xMode?: 'batches' | 'time';
  logY?: boolean;
  height?: number;
  yLabel?: string;
  /** Called with the focused series index (0-based, -1 none) when hovering near a line. */
  onFocusSeries?: (i: number) => void;
  highlight?: number; // series to emphasise from outside (e.g. a hovered table row)
  stepped?: boolean;
  /** Fixed y range (e.g. [0, total slots]); default: fit the data. */
  yRange?: [number, number];
}

export function UPlotChart(p: ChartProps) {
  const wrap = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const [width, setWidth] = useState(0);
  const height = p.height ?? 260;
  const points = countDrawnPoints(p.data as (number | null)[][]);
  const focusCb = useRef(p.onFocusSeries);
  focusCb.current = p.onFocusSeries;

  useEffect(() => {
    const el = wrap.current;
    if (!el) return;
    setWidth(el.clientWidth);
    if (typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => setWidth(el.clientWidth));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  // (re)create the plot when its shape changes
  const shapeKey = `${p.seriesLabels.join('\u0001')}|${p.xMode}|${p.logY}|${height}|${p.stepped}|${p.yRange?.join(',')}`;
  useEffect(() => {
    const el = wrap.current;
    if (!el || width <= 0) return;
    const many = p.seriesLabels.length > 1;
    const opts: uPlot.Options = {
      width,
      height,
      scales: {
        // a single x value would otherwise span ~3 years (uPlot pads time by 86400/ms) or nothing
        x: {
          time: p.xMode === 'time',
          range: (u, min, max) => {
            const xs = u.data[0];
            const pad = p.xMode === 'time' ? 60 : 1;
            return xs.length === 1 || min === max ? [xs[0] - pad, xs[0] + pad] : [min, max];
          },
        },
        y: p.logY ? { distr: 3 } : p.yRange ? { auto: false, range: () => p.yRange! } : { auto: true },
      },
      axes: [
        { stroke: '#555', grid: { stroke: '#eee' }, space: p.xMode === 'time' ? 90 : 60, values: p.xMode === 'time' ? undefined : (_u, vals) => vals.map((v) => formatCompact(v)) },
        { stroke: '#555', grid: { stroke: '#eee' }, size: 60, label: p.yLabel, values: (_u, vals) => vals.map((v) => formatMetric(v)) },
      ],
      cursor: { drag: { x: true, y: false }, focus: { prox: 24 } },
      focus: { alpha: 0.25 },
      legend: { show: true, live: true },
      series: [
        { label: p.xMode === 'time' ? 'time' : 'step' },
        ...p.seriesLabels.map((label, i) => ({
          label,
          stroke: PALETTE[i % PALETTE.length],
          width: many ? 1.25 : 1.5,
          spanGaps: true,
          // uPlot's default: dots only where points are sparse enough to see
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : formatMetric(v)),
          ...(p.stepped ? { paths: uPlot.paths.stepped!({ align: 1 }) } : {}),
        })),
      ],
      hooks: {
        setSeries: [
          (_u, idx) => {
            focusCb.current?.(idx === null || idx === undefined ? -1 : idx - 1);
          },
        ],
      },
    };
    plot.current?.destroy();
    el.querySelector('.uplot')?.remove();
    plot.current = new uPlot(opts, p.data, el);
    (el as HTMLDivElement & { uplot?: uPlot }).uplot = plot.current; // for the bench and tests
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shapeKey, width]);

  // new data for the same shape: keep the zoom if the user zoomed
  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    const xs = u.data[0];
    const zoomed = xs && xs.length > 0 && u.scales.x.min !== undefined && (u.scales.x.min! > xs[0] || u.scales.x.max! < xs[xs.length - 1]);
    u.setData(p.data, !zoomed);
  }, [p.data]);

  useEffect(() => {
    const u = plot.current;
    if (!u || p.highlight === undefined) return;
    u.setSeries(p.highlight >= 0 ? p.highlight + 1 : null, { focus: true });
  }, [p.highlight]);

  return (
    <figure className="chart" data-testid={p.testId} data-points={points} data-series={p.seriesLabels.length} aria-label={`${p.title} chart, ${points} points`}>
      <figcaption className="chart-title">{p.title}</figcaption>
      <div ref={wrap} className="chart-canvas" style={{ minHeight: height }} />
    </figure>
  );
}
