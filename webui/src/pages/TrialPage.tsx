// One trial: what it ran (its arch, precision and parameter count, or its experiment's entrypoint: WhatRan.tsx),
// metric charts (training and validation; throughput and loss scale when the trial
// reports them, as the native trainer does; one section per metric group its code named), a
// speech trial's latest validation transcripts beside their references (TrialTranscripts.tsx,
// when it reported them), checkpoints and logs; where its latest run ran (the agents in its Summary; for a trial Slurm
// places, its nodes with its job id, pool and Slurm's reason in TrialSlurm.tsx).
import { api } from '../api/client';
import type { Trial } from '../api/types';
import { Empty, ErrorBanner, Skeleton, StateBadge } from '../components/common';
import { MetricChart } from '../components/MetricChart';
import { trialParameters } from '../lib/archCompare';
import { metricKeys } from '../lib/chartData';
import { durationBetween, formatBytes, formatDateTime, formatDuration, formatHParam, formatInt, formatMetric } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { TRANSCRIPTS_GROUP } from '../lib/transcripts';
import { useQueryState, type Route } from '../lib/router';
import { flattenHParams } from '../lib/chartData';
import { LogsView } from './LogsView';
import { TrialMetricGroups, useTrialMetrics } from './TrialMetricGroups';
import { isSlurmTrial, TrialSlurmCard, trialPool } from './TrialSlurm';
import { TrialTranscripts } from './TrialTranscripts';
import { TrialWhatRanRows } from './WhatRan';

const running = (t?: Trial) => !t || t.state === 'TRIAL_STATE_RUNNING' || t.state === 'TRIAL_STATE_QUEUED';

export function TrialPage({ id, route }: { id: number; route: Route }) {
  const [q, setQ] = useQueryState(route);
  const trial = usePolling((s) => api.getTrial(id, s), [id], 3000);
  const live = running(trial.data);
  const expId = trial.data?.experimentId;
  const exp = usePolling((s) => (expId ? api.getExperiment(expId, s) : Promise.resolve(undefined)), [expId], 0);
  const training = useTrialMetrics(id, 'training', live);
  const validation = useTrialMetrics(id, 'validation', live);
  // Which manager places the trial's pool, and its capacity; a failure only hides the Slurm card.
  const pools = usePolling((s) => api.getResourcePools(s), [], live ? 10000 : 0);
  const ckpts = usePolling((s) => (expId ? api.getExperimentCheckpoints(expId, s) : Promise.resolve([])), [expId], live ? 10000 : 0);

  const xMode = q.get('x') === 'time' ? 'time' : 'batches';
  const logY = q.get('log') === '1';

  if (trial.loading && !trial.data) return <Skeleton rows={10} />;
  if (!trial.data) return <ErrorBanner error={trial.error} onRetry={trial.reload} what={`Trial ${id}`} />;
  const t = trial.data;
  const e = exp.data;
  const hp = flattenHParams(t.hparams);
  const trainKeys = metricKeys(training.data ?? []);
  const valKeys = metricKeys(validation.data ?? []);
  const tMetric = q.get('tm') && trainKeys.includes(q.get('tm')!) ? q.get('tm')! : trainKeys.includes('loss') ? 'loss' : trainKeys.find((k) => k !== 'tokens_per_second' && k !== 'loss_scale') ?? trainKeys[0] ?? 'loss';
  const vMetric = q.get('vm') && valKeys.includes(q.get('vm')!) ? q.get('vm')! : e?.metric && valKeys.includes(e.metric) ? e.metric : valKeys[0] ?? '';
  // A Slurm trial's nodes are in its Slurm card; any other trial's places in the Summary.
  const slurm = isSlurmTrial(t, trialPool(e?.configYaml, pools.data));
  const myCkpts = (ckpts.data ?? []).filter((c) => c.trialId === t.id).sort((a, b) => b.batches - a.batches);

  return (
    <section aria-labelledby="trial-title">
      <nav className="crumbs" aria-label="Breadcrumb">
        <a href="#/experiments">Experiments</a> › <a href={`#/experiments/${t.experimentId}`}>{e?.name ? `${e.name} #${t.experimentId}` : `Experiment ${t.experimentId}`}</a> › <span>Trial {t.id}</span>
      </nav>
      <div className="page-head">
        <h1 id="trial-title">Trial {t.id}</h1>
        <StateBadge state={t.state} />
      </div>
      <ErrorBanner error={trial.error ?? training.error ?? validation.error} onRetry={() => { trial.reload(); training.reload(); validation.reload(); }} />
      {t.error && t.state === 'TRIAL_STATE_ERROR' && <div className="error-banner" role="status">{t.error}</div>}
      {/* A trial that restarted keeps the reason of its last restart: not an error of a trial that did not fail. */}
      {t.error && t.state !== 'TRIAL_STATE_ERROR' && (
        <p className="muted" role="status" data-testid="restart-reason">
          Last restart: {t.error}
        </p>
      )}
      {(t.state === 'TRIAL_STATE_QUEUED' || t.state === 'TRIAL_STATE_RUNNING') && t.pendingReason && (
        <p className="muted" role="status" data-testid="pending-reason">
          {t.state === 'TRIAL_STATE_QUEUED' ? 'Waiting' : 'Held'}: {t.pendingReason}
        </p>
      )}
      <div className="cards">
        <div className="card">
          <h2>Summary</h2>
          <dl className="kv">
            <TrialWhatRanRows trial={t} configYaml={e?.configYaml} parameters={trialParameters(training.data ?? [])} />
            <dt>Steps</dt><dd>{formatInt(t.totalBatches)}{t.targetBatches ? ` / ${formatInt(t.targetBatches)}` : ''}</dd>
            <dt>Best {e?.metric ?? 'metric'}</dt><dd>{formatMetric(t.bestValidationMetric)}</dd>
            <dt>Latest {e?.metric ?? 'metric'}</dt><dd>{formatMetric(t.latestValidationMetric)}</dd>
            <dt>Restarts</dt><dd>{t.restarts}</dd>
            {!slurm && <HostsRow t={t} />}
            <dt>Started</dt><dd>{formatDateTime(t.startTime)}</dd>
            <dt>Duration</dt><dd>{formatDuration(durationBetween(t.startTime, t.endTime))}</dd>
          </dl>
        </div>
        <div className="card">
          <h2>Hyperparameters</h2>
          {Object.keys(hp).length === 0 ? (
            <p className="muted" data-testid="no-hparams">None: this trial was given no hyperparameters.</p>
          ) : (
            <dl className="kv">
              {Object.entries(hp).map(([k, v]) => (
                <HP key={k} k={k} v={formatHParam(v)} />
              ))}
            </dl>
          )}
        </div>
        <TrialSlurmCard trial={t} configYaml={e?.configYaml} pools={pools.data} />
      </div>
      <div className="card">
        <div className="card-head">
          <h2>Metrics</h2>
          <fieldset className="seg">
            <legend className="sr-only">X axis</legend>
            <label className="check"><input type="radio" name="xaxis" checked={xMode === 'batches'} onChange={() => setQ({ x: undefined })} /> steps</label>
            <label className="check"><input type="radio" name="xaxis" checked={xMode === 'time'} onChange={() => setQ({ x: 'time' })} data-testid="x-time" /> time</label>
          </fieldset>
          <label className="check">
            <input type="checkbox" checked={logY} onChange={(ev) => setQ({ log: ev.target.checked ? '1' : undefined })} data-testid="log-toggle" /> log scale
          </label>
          <span className="muted small">Drag on a chart to zoom, double-click to reset.</span>
        </div>
        {training.loading && !training.data ? (
          <Skeleton rows={6} height={30} />
        ) : (
          <div className="grid-2">
            <MetricChart testId="chart-training" title="Training" reports={training.data ?? []} metric={tMetric} keys={trainKeys} onPick={(k) => setQ({ tm: k })} xMode={xMode} logY={logY} />
            <MetricChart testId="chart-validation" title="Validation" reports={validation.data ?? []} metric={vMetric} keys={valKeys} onPick={(k) => setQ({ vm: k })} xMode={xMode} logY={logY} />
            {/* The native trainer's own metrics: no empty panel for a trial (a Core API one) that never reports them. */}
            {trainKeys.includes('tokens_per_second') && <MetricChart testId="chart-throughput" title="Throughput (tokens/s)" reports={training.data ?? []} metric="tokens_per_second" xMode={xMode} logY={false} />}
            {trainKeys.includes('loss_scale') && <MetricChart testId="chart-loss-scale" title="Loss scale" reports={training.data ?? []} metric="loss_scale" xMode={xMode} logY={logY} stepped />}
          </div>
        )}
        <TrialMetricGroups trialId={t.id} groups={t.metricGroups} live={live} xMode={xMode} logY={logY} />
      </div>
      {t.metricGroups.includes(TRANSCRIPTS_GROUP) && <TrialTranscripts trialId={t.id} live={live} />}
      <div className="card">
        <h2>Checkpoints</h2>
        {ckpts.loading && !ckpts.data ? (
          <Skeleton rows={3} />
        ) : myCkpts.length === 0 ? (
          <Empty>No checkpoints yet.</Empty>
        ) : (
          <div className="table-wrap">
            <table className="table" data-testid="checkpoints-table">
              <thead>
                <tr>
                  <th scope="col">Step</th>
                  <th scope="col">Time</th>
                  <th scope="col">Size</th>
                  <th scope="col">{e?.metric ?? 'Metric'}</th>
                  <th scope="col">State</th>
                  <th scope="col">UUID</th>
                  <th scope="col">Path</th>
                </tr>
              </thead>
              <tbody>
                {myCkpts.map((c) => (
                  <tr key={c.uuid}>
                    <td className="num">{formatInt(c.batches)}</td>
                    <td>{formatDateTime(c.time)}</td>
                    <td className="num">{formatBytes(c.size)}</td>
                    <td className="num">{formatMetric(c.validationMetric)}</td>
                    <td>{c.state || '–'}</td>
                    <td className="mono small">{c.uuid}</td>
                    <td className="mono small break">{c.path}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
      <LogsView trialId={t.id} live={live} route={route} />
    </section>
  );
}

/** "Ran on: agent-0, agent-1" (agents in rank order); "Runs on" while it runs. */
function HostsRow({ t }: { t: Trial }) {
  return (
    <>
      <dt>{t.state === 'TRIAL_STATE_RUNNING' ? 'Runs on' : 'Ran on'}</dt>
      <dd data-testid="trial-hosts" title="its latest run's agents, in rank order">
        {t.hosts.length ? <span className="mono">{t.hosts.join(', ')}</span> : <span className="muted">{t.state === 'TRIAL_STATE_QUEUED' ? 'not yet' : '–'}</span>}
      </dd>
    </>
  );
}

function HP({ k, v }: { k: string; v: string }) {
  return (
    <>
      <dt>{k}</dt>
      <dd className="mono">{v}</dd>
    </>
  );
}
