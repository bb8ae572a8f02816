// One metric of a trial's reports as a line chart (the trial page's charts): the series on the
// chosen x axis, reduced with LTTB above DISPLAY_MAX_POINTS, optionally with a picker among the
// group's metrics; an empty panel that says so when nothing has been reported.
import { useMemo } from 'react';
import type { MetricReport } from '../api/types';
import { forLogScale, lttb, seriesFromReports } from '../lib/chartData';
import { Empty } from './common';
import { UPlotChart } from './UPlotChart';

/** Points drawn per series; more are reduced with LTTB in the browser. */
export const DISPLAY_MAX_POINTS = 5000;

export interface MetricChartProps {
  testId: string;
  title: string;
  reports: MetricReport[];
  metric: string;
  /** The metrics to pick from; with `onPick`, a select above the chart. */
  keys?: string[];
  onPick?: (k: string) => void;
  xMode: 'batches' | 'time';
  logY: boolean;
  stepped?: boolean;
}

export function MetricChart(p: MetricChartProps) {
  const shaped = useMemo(() => {
    const s = seriesFromReports(p.reports, p.metric, p.xMode);
    const d = s.x.length > DISPLAY_MAX_POINTS ? lttb(s, DISPLAY_MAX_POINTS) : s;
    return { rows: s.x.length, data: [d.x, p.logY ? forLogScale(d.y) : d.y] as [number[], (number | null)[]] };
  }, [p.reports, p.metric, p.xMode, p.logY]);
  return (
    <div className="metric-chart">
      {p.keys && p.onPick && p.keys.length > 0 && (
        <label className="small">
          {p.title} metric{' '}
          <select value={p.metric} onChange={(e) => p.onPick!(e.target.value)} data-testid={`${p.testId}-metric`}>
            {p.keys.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
      )}
      {shaped.rows === 0 ? (
        <div className="chart" data-testid={p.testId} data-points={0}>
          <div className="chart-title">{p.title}</div>
          <Empty>No {p.metric || 'metric'} reported yet.</Empty>
        </div>
      ) : (
        <UPlotChart testId={p.testId} title={`${p.title}: ${p.metric}`} data={shaped.data} seriesLabels={[p.metric]} xMode={p.xMode} logY={p.logY} height={220} stepped={p.stepped} />
      )}
    </div>
  );
}
