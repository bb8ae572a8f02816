// Render bench fixture (dist/bench.html). Generates data in the page — no network, no mock of the
// API — and renders the real components: ?case=list&n=1000 (experiments table) or
// ?case=chart&n=100000[&downsample=5000] (trial metric chart). Reports in window.__bench and #result.
import { createRoot } from 'react-dom/client';
import { flushSync } from 'react-dom';
import '../styles.css';
import type { Experiment } from '../api/types';
import { ExperimentsTable } from '../pages/ExperimentsTable';
import { UPlotChart } from '../components/UPlotChart';
import { lttb } from '../lib/chartData';

declare global {
  interface Window {
    __bench?: { case: string; n: number; ms: number; points: number; rows?: number; shapeMs?: number; reactMs?: number; layoutMs?: number; domRows?: number; scrollMs?: number; zoomMs?: number };
  }
}

const params = new URLSearchParams(location.search);
const which = params.get('case') ?? 'list';
const n = Number(params.get('n') ?? (which === 'list' ? 1000 : 100000));
const downsample = Number(params.get('downsample') ?? 0);

const STATES: Experiment['state'][] = ['EXPERIMENT_STATE_ACTIVE', 'EXPERIMENT_STATE_PAUSED', 'EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_ERROR'];

function experiments(count: number): Experiment[] {
  const t0 = Date.parse('2026-11-01T00:00:00Z');
  return Array.from({ length: count }, (_, i) => ({
    id: count - i,
    name: `transformer-sweep-${count - i}`,
    description: '',
    state: STATES[i % STATES.length],
    configYaml: '',
    owner: ['ada', 'grace', 'alan'][i % 3],
    workspace: '',
    archived: false,
    unmanaged: false,
    searcher: i % 2 ? 'grid' : 'random',
    metric: 'bleu',
    smallerIsBetter: false,
    numTrials: 16,
    numCompletedTrials: i % 17,
    bestValidationMetric: 20 + (i % 100) / 7,
    startTime: new Date(t0 + i * 60000).toISOString(),
    endTime: i % 5 === 2 ? new Date(t0 + i * 60000 + 3600000).toISOString() : undefined,
    priority: 50,
    error: '',
  }));
}

function curve(count: number): [number[], number[]] {
  const x = new Array<number>(count);
  const y = new Array<number>(count);
  let s = 12345;
  for (let i = 0; i < count; i++) {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    x[i] = i + 1;
    y[i] = 9 * Math.exp(-i / (count / 5)) + 1.5 + ((s / 0x7fffffff) - 0.5) * 0.4;
  }
  return [x, y];
}

function afterPaint(ready: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => (ready() ? requestAnimationFrame(() => setTimeout(resolve, 0)) : requestAnimationFrame(check));
    requestAnimationFrame(check);
  });
}

async function main() {
  const root = createRoot(document.getElementById('root')!);
  const out = document.createElement('pre');
  out.id = 'result';
  if (which === 'list') {
    const rows = experiments(n);
    const t0 = performance.now();
    flushSync(() => root.render(<main><ExperimentsTable rows={rows} sort={{ key: 'id', dir: 'desc' }} onSort={() => {}} onChanged={() => {}} now={Date.parse('2026-11-02T00:00:00Z')} virtualize={params.get('virtual') !== '0'} /></main>));
    const reactMs = performance.now() - t0;
    void document.body.offsetHeight; // force style and layout
    const layoutMs = performance.now() - t0 - reactMs;
    await afterPaint(() => document.querySelector('[data-testid="experiments-table"]')?.getAttribute('data-rows') === String(n));
    const ms = performance.now() - t0;
    const domRows = document.querySelectorAll('[data-testid="experiment-row"]').length;
    // scroll to the end: the rows there must render too
    const s0 = performance.now();
    window.scrollTo(0, document.body.scrollHeight);
    await afterPaint(() => document.querySelector(`[data-testid="experiment-row"][data-id="1"]`) !== null);
    const scrollMs = performance.now() - s0;
    window.__bench = { case: 'list', n, ms, points: 0, rows: Number(document.querySelector('[data-testid="experiments-table"]')?.getAttribute('data-rows')), domRows, reactMs, layoutMs, scrollMs };
  } else {
    const [x, y] = curve(n);
    const t0 = performance.now();
    let data: [number[], (number | null)[]] = [x, y];
    if (downsample) {
      const d = lttb({ x, y }, downsample);
      data = [d.x, d.y];
    }
    const shapeMs = performance.now() - t0;
    root.render(<main style={{ width: 1200 }}><UPlotChart testId="bench-chart" title="loss" data={data} seriesLabels={['loss']} height={300} /></main>);
    await afterPaint(() => !!document.querySelector('[data-testid="bench-chart"] canvas'));
    const ms = performance.now() - t0;
    const points = Number(document.querySelector('[data-testid="bench-chart"]')?.getAttribute('data-points') ?? 0);
    // zoom: 20 x-range changes, each redrawn (uPlot commits in a microtask)
    const u = (document.querySelector('[data-testid="bench-chart"] .chart-canvas') as any)?.uplot;
    let zoomMs: number | undefined;
    if (u) {
      const z0 = performance.now();
      for (let i = 0; i < 20; i++) {
        const lo = (i * n) / 50;
        u.setScale('x', { min: lo, max: lo + n / (2 + (i % 5)) });
        await Promise.resolve();
        await new Promise((r) => setTimeout(r, 0));
      }
      zoomMs = (performance.now() - z0) / 20;
    }
    window.__bench = { case: downsample ? `chart-lttb-${downsample}` : 'chart', n, ms, points, shapeMs, zoomMs };
  }
  out.textContent = JSON.stringify(window.__bench);
  document.body.appendChild(out);
}

void main();
