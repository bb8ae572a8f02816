// One experiment: header and actions (an "unmanaged" badge when a hand-started script reports into
// it), searcher summary, what ran (WhatRan.tsx: arch, precision and data, or entrypoint and
// context), learning curves of all trials, hyperparameter views, the archs of a sweep over them side by side (ArchComparison.tsx), trials table with
// hyperparameters as columns (where each ran, and a Slurm trial's job id), and the config.
import { useMemo, useState } from 'react';
import { api } from '../api/client';
import type { MetricKind, MetricReport, Trial } from '../api/types';
import { ExperimentActions } from '../components/actions';
import { Empty, ErrorBanner, ProgressBar, Skeleton, SortHeader, StateBadge } from '../components/common';
import { HParamScatter, ParallelCoordinates } from '../components/HParamCharts';
import { UPlotChart } from '../components/UPlotChart';
import { alignSeries, flattenHParams, forLogScale, hparamSummary, metricKeys, seriesFromReports, varyingHParams } from '../lib/chartData';
import { durationBetween, formatDateTime, formatDuration, formatHParam, formatInt, formatMetric } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { hostsLabel } from '../lib/hosts';
import { useQueryState, type Route } from '../lib/router';
import { nextSort, sortRows, type SortDir } from '../lib/sort';
import { topLevelBlock } from '../lib/yamlBlock';
import { ArchComparison } from './ArchComparison';
import { UnmanagedBadge, WhatRanCard } from './WhatRan';

const MAX_CURVE_TRIALS = 50;
const ACTIVE = (s: string) => s === 'EXPERIMENT_STATE_ACTIVE' || s.startsWith('EXPERIMENT_STATE_STOPPING');

export function ExperimentPage({ id, route }: { id: number; route: Route }) {
  const [q, setQ] = useQueryState(route);
  const exp = usePolling((s) => api.getExperiment(id, s), [id], 3000);
  const active = exp.data ? ACTIVE(exp.data.state) : true;
  const trials = usePolling((s) => api.getExperimentTrials(id, s), [id], active ? 3000 : 15000);
  const kind: MetricKind = q.get('kind') === 'training' ? 'training' : 'validation';
  const trialIds = (trials.data ?? []).slice(0, MAX_CURVE_TRIALS).map((t) => t.id);
  const curves = usePolling(
    async (s) => {
      const out = new Map<number, MetricReport[]>();
      await Promise.all(
        trialIds.map(async (tid) => {
          out.set(tid, await api.getTrialMetrics(tid, kind, 1000, s));
        }),
      );
      return out;
    },
    [trialIds.join(','), kind],
    active ? 5000 : 0,
    true,
  );
  const [hover, setHover] = useState<number>(); // trial id

  if (exp.loading && !exp.data) return <Skeleton rows={10} />;
  if (!exp.data) return <ErrorBanner error={exp.error} onRetry={exp.reload} what={`Experiment ${id}`} />;
  const e = exp.data;
  const searcherRows = topLevelBlock(e.configYaml, 'searcher');

  return (
    <section aria-labelledby="exp-title">
      <nav className="crumbs" aria-label="Breadcrumb">
        <a href="#/experiments">Experiments</a> › <span>Experiment {e.id}</span>
      </nav>
      <div className="page-head">
        <h1 id="exp-title">
          {e.name || `Experiment ${e.id}`} <span className="muted">#{e.id}</span>
        </h1>
        <StateBadge state={e.state} />
        {e.unmanaged && <UnmanagedBadge />}
        <div className="grow" />
        <ExperimentActions exp={e} onDone={() => exp.reload()} />
      </div>
      <ErrorBanner error={exp.error ?? trials.error} onRetry={() => { exp.reload(); trials.reload(); }} />
      {e.error && <div className="error-banner" role="status">{e.error}</div>}
      <div className="cards">
        <div className="card">
          <h2>Summary</h2>
          <dl className="kv">
            <dt>Owner</dt><dd data-testid="exp-owner">{e.owner || '–'}</dd>
            {e.workspace && <><dt>Workspace</dt><dd data-testid="exp-workspace">{e.workspace}</dd></>}
            <dt>Started</dt><dd>{formatDateTime(e.startTime)}</dd>
            <dt>Duration</dt><dd>{formatDuration(durationBetween(e.startTime, e.endTime))}</dd>
            <dt>Trials</dt><dd><ProgressBar done={e.numCompletedTrials} total={e.numTrials} label="Trials completed" /></dd>
            <dt>Best {e.metric}</dt><dd data-testid="exp-best">{formatMetric(e.bestValidationMetric)}</dd>
            <dt>Priority</dt><dd>{e.priority}</dd>
          </dl>
        </div>
        <div className="card" data-testid="searcher-summary">
          <h2>Searcher</h2>
          <dl className="kv">
            <dt>Method</dt><dd>{e.searcher || '–'}</dd>
            <dt>Metric</dt><dd>{e.metric || '–'} ({e.smallerIsBetter ? 'smaller is better' : 'larger is better'})</dd>
            {searcherRows.filter(([k]) => !['name', 'metric', 'smaller_is_better'].includes(k)).map(([k, v]) => (
              <FragmentKV key={k} k={k} v={v} />
            ))}
            <dt>Trials by state</dt><dd>{trialStateSummary(trials.data ?? [])}</dd>
          </dl>
        </div>
        <WhatRanCard experiment={e} />
      </div>
      <LearningCurves trials={trials.data ?? []} curves={curves.data} loading={curves.loading} kind={kind} metricParam={q.get('metric') ?? ''} defaultMetric={e.metric} logY={q.get('log') === '1'} setQ={setQ} hover={hover} setHover={setHover} error={curves.error} />
      <HParamSection trials={trials.data ?? []} metric={e.metric} smallerIsBetter={e.smallerIsBetter} hover={hover} setHover={setHover} />
      <ArchComparison trials={trials.data ?? []} configYaml={e.configYaml} metric={e.metric} smallerIsBetter={e.smallerIsBetter} active={active} />
      <TrialsTable trials={trials.data} loading={trials.loading} hover={hover} setHover={setHover} sortParam={q.get('tsort') ?? 'id'} dirParam={(q.get('tdir') as SortDir) ?? 'asc'} setQ={setQ} metric={e.metric} />
      <ConfigView yaml={e.configYaml} />
    </section>
  );
}

function FragmentKV({ k, v }: { k: string; v: string }) {
  return (
    <>
      <dt>{k}</dt>
      <dd>{v || '–'}</dd>
    </>
  );
}

function trialStateSummary(trials: Trial[]): string {
  if (!trials.length) return 'none yet';
  const c = new Map<string, number>();
  for (const t of trials) {
    const s = t.state.replace('TRIAL_STATE_', '').toLowerCase();
    c.set(s, (c.get(s) ?? 0) + 1);
  }
  return [...c.entries()].map(([s, n]) => `${n} ${s}`).join(', ');
}

function LearningCurves(p: {
  trials: Trial[];
  curves: Map<number, MetricReport[]> | undefined;
  loading: boolean;
  kind: MetricKind;
  metricParam: string;
  defaultMetric: string;
  logY: boolean;
  setQ: (patch: Record<string, string | undefined>) => void;
  hover?: number;
  setHover: (id: number | undefined) => void;
  error?: unknown;
}) {
  const shown = p.trials.slice(0, MAX_CURVE_TRIALS);
  const keys = useMemo(() => metricKeys([...(p.curves?.values() ?? [])].flat()), [p.curves]);
  const metric = p.metricParam && keys.includes(p.metricParam) ? p.metricParam : keys.includes(p.defaultMetric) ? p.defaultMetric : keys.includes('loss') ? 'loss' : keys[0] ?? '';
  const withData = shown.filter((t) => (p.curves?.get(t.id) ?? []).length > 0);
  const data = useMemo(() => {
    const series = withData.map((t) => seriesFromReports(p.curves?.get(t.id) ?? [], metric));
    const aligned = alignSeries(series);
    return p.logY ? [aligned[0], ...aligned.slice(1).map((y) => forLogScale(y))] : aligned;
  }, [withData.map((t) => t.id).join(','), p.curves, metric, p.logY]);
  const hoverIdx = p.hover === undefined ? -1 : withData.findIndex((t) => t.id === p.hover);
  return (
    <div className="card">
      <div className="card-head">
        <h2>Learning curves</h2>
        <label>
          Kind
          <select value={p.kind} onChange={(e) => p.setQ({ kind: e.target.value === 'training' ? 'training' : undefined, metric: undefined })} data-testid="curves-kind">
            <option value="validation">validation</option>
            <option value="training">training</option>
          </select>
        </label>
        <label>
          Metric
          <select value={metric} onChange={(e) => p.setQ({ metric: e.target.value })} data-testid="curves-metric" disabled={!keys.length}>
            {keys.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
        <label className="check">
          <input type="checkbox" checked={p.logY} onChange={(e) => p.setQ({ log: e.target.checked ? '1' : undefined })} /> log scale
        </label>
      </div>
      {p.loading && !p.curves ? (
        <Skeleton rows={6} height={30} />
      ) : withData.length === 0 ? (
        <Empty>No {p.kind} metrics reported yet.</Empty>
      ) : (
        <UPlotChart
          testId="chart-learning-curves"
          title={`${metric} (${p.kind}) of ${withData.length} trial${withData.length === 1 ? '' : 's'}${p.trials.length > MAX_CURVE_TRIALS ? `, first ${MAX_CURVE_TRIALS}` : ''}`}
          data={data as any}
          seriesLabels={withData.map((t) => `trial ${t.id}`)}
          logY={p.logY}
          highlight={hoverIdx}
          onFocusSeries={(i) => p.setHover(i >= 0 ? withData[i]?.id : undefined)}
        />
      )}
    </div>
  );
}

function HParamSection(p: { trials: Trial[]; metric: string; smallerIsBetter: boolean; hover?: number; setHover: (id: number | undefined) => void }) {
  const hps = useMemo(() => varyingHParams(p.trials), [p.trials]);
  const all = useMemo(() => hparamSummary(p.trials).names, [p.trials]);
  if (!p.trials.length) return null;
  return (
    <div className="card">
      <h2>Hyperparameters</h2>
      {hps.length === 0 ? (
        <Empty>These trials have no hyperparameters.</Empty>
      ) : (
        <div className="grid-2">
          <ParallelCoordinates trials={p.trials} hparams={all} metric={p.metric} smallerIsBetter={p.smallerIsBetter} highlight={p.hover} onHover={p.setHover} />
          <HParamScatter trials={p.trials} hparams={hps} metric={p.metric} />
        </div>
      )}
    </div>
  );
}

function TrialsTable(p: { trials?: Trial[]; loading: boolean; hover?: number; setHover: (id: number | undefined) => void; sortParam: string; dirParam: SortDir; setQ: (patch: Record<string, string | undefined>) => void; metric: string }) {
  const hcols = useMemo(() => varyingHParams(p.trials ?? []), [p.trials]);
  const flat = useMemo(() => new Map((p.trials ?? []).map((t) => [t.id, flattenHParams(t.hparams)])), [p.trials]);
  const sort = { key: p.sortParam, dir: p.dirParam === 'desc' ? ('desc' as const) : ('asc' as const) };
  const rows = useMemo(() => {
    const key = (t: Trial): unknown => {
      if (sort.key.startsWith('hp:')) return flat.get(t.id)?.[sort.key.slice(3)];
      switch (sort.key) {
        case 'state': return t.state;
        case 'hosts': return hostsLabel(t.hosts);
        case 'restarts': return t.restarts;
        case 'batches': return t.totalBatches;
        case 'latest': return t.latestValidationMetric;
        case 'best': return t.bestValidationMetric;
        case 'duration': return durationBetween(t.startTime, t.endTime);
        default: return t.id;
      }
    };
    return sortRows(p.trials ?? [], key, sort.dir);
  }, [p.trials, sort.key, sort.dir, flat]);
  const onSort = (col: string) => {
    const n = nextSort(sort, col);
    p.setQ({ tsort: n.key, tdir: n.dir });
  };
  return (
    <div className="card">
      <h2>Trials</h2>
      {p.loading && !p.trials ? (
        <Skeleton rows={4} />
      ) : !rows.length ? (
        <Empty>No trials yet: the searcher creates them once the experiment is active.</Empty>
      ) : (
        <div className="table-wrap">
          <table className="table" data-testid="trials-table">
            <thead>
              <tr>
                <SortHeader label="Trial" col="id" sort={sort} onSort={onSort} />
                <SortHeader label="State" col="state" sort={sort} onSort={onSort} />
                <SortHeader label="Ran on" col="hosts" sort={sort} onSort={onSort} />
                {hcols.map((h) => (
                  <SortHeader key={h} label={h} col={`hp:${h}`} sort={sort} onSort={onSort} />
                ))}
                <SortHeader label="Steps" col="batches" sort={sort} onSort={onSort} />
                <SortHeader label={`Latest ${p.metric}`} col="latest" sort={sort} onSort={onSort} />
                <SortHeader label={`Best ${p.metric}`} col="best" sort={sort} onSort={onSort} />
                <SortHeader label="Restarts" col="restarts" sort={sort} onSort={onSort} />
                <SortHeader label="Duration" col="duration" sort={sort} onSort={onSort} />
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => (
                <tr key={t.id} className={p.hover === t.id ? 'row-hover' : ''} onMouseEnter={() => p.setHover(t.id)} onMouseLeave={() => p.setHover(undefined)} data-testid="trial-row" data-id={t.id} data-state={t.state}>
                  <td className="num">
                    <a href={`#/trials/${t.id}`} onFocus={() => p.setHover(t.id)} onBlur={() => p.setHover(undefined)}>
                      {t.id}
                    </a>
                  </td>
                  <td>
                    <StateBadge state={t.state} />
                    {t.pendingReason && (
                      <div className="muted" data-testid="pending-reason">
                        {t.pendingReason}
                      </div>
                    )}
                    {t.jobId && (
                      <div className="muted small" data-testid="trial-job-id" title="its latest run's job at the pool's resource manager (Slurm: squeue -j, sacct -j)">
                        job {t.jobId}
                      </div>
                    )}
                  </td>
                  <td className="mono small" data-testid="trial-hosts" title="where its latest run ran: agents in rank order, or its Slurm job's nodes">
                    {hostsLabel(t.hosts) || '–'}
                  </td>
                  {hcols.map((h) => (
                    <td key={h} className="num">
                      {formatHParam(flat.get(t.id)?.[h])}
                    </td>
                  ))}
                  <td className="num">
                    {formatInt(t.totalBatches)}
                    {t.targetBatches > 0 && <span className="muted"> / {formatInt(t.targetBatches)}</span>}
                  </td>
                  <td className="num">{formatMetric(t.latestValidationMetric)}</td>
                  <td className="num">{formatMetric(t.bestValidationMetric)}</td>
                  <td className="num">{t.restarts}</td>
                  <td className="num">{formatDuration(durationBetween(t.startTime, t.endTime))}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall back below
  }
  try {
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.appendChild(ta);
    ta.select();
    const ok = document.execCommand('copy');
    ta.remove();
    return ok;
  } catch {
    return false;
  }
}

function ConfigView({ yaml }: { yaml: string }) {
  const [msg, setMsg] = useState('');
  return (
    <div className="card">
      <div className="card-head">
        <h2>Configuration</h2>
        <button
          type="button"
          className="btn btn-small"
          data-testid="copy-config"
          onClick={async () => {
            setMsg((await copyText(yaml)) ? 'Copied' : 'Copy failed: select the text instead');
            setTimeout(() => setMsg(''), 2500);
          }}
        >
          Copy YAML
        </button>
        <span className="muted small" role="status" aria-live="polite">
          {msg}
        </span>
      </div>
      {yaml ? (
        <pre className="code" tabIndex={0} aria-label="Experiment configuration (YAML, read-only)" data-testid="config-yaml">
          {yaml}
        </pre>
      ) : (
        <Empty>The master returned no configuration.</Empty>
      )}
    </div>
  );
}
