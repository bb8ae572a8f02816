// The experiment page's comparison of architectures, for a sweep whose trials train more than one
// arch (a search space over `hyperparameters.arch`): one row per arch with its trials, its best
// trial by the searcher's metric, that trial's time, the arch's mean tokens/s and its parameter
// count (both read from its trials' training metrics, the native trainer's `tokens_per_second` and
// `parameters`). lib/archCompare.ts shapes the rows.
import { useMemo } from 'react';
import { api } from '../api/client';
import type { Trial } from '../api/types';
import { experimentArch } from '../lib/arch';
import { archsOfTrials, compareArchs, meanTokensPerSecond, trialParameters } from '../lib/archCompare';
import { formatDuration, formatInt, formatMetric, formatParameters } from '../lib/format';
import { usePolling } from '../lib/hooks';

/** Trials whose training metrics are read for throughput and size (the first ones, as the curves). */
export const MAX_THROUGHPUT_TRIALS = 50;
const THROUGHPUT_POINTS = 200; // the master downsamples evenly; a mean needs few

export function ArchComparison(p: { trials: Trial[]; configYaml: string; metric: string; smallerIsBetter: boolean; active: boolean }) {
  const arch = useMemo(() => experimentArch(p.configYaml), [p.configYaml]);
  const archs = useMemo(() => archsOfTrials(p.trials, arch), [p.trials, arch]);
  const shown = archs.length >= 2;
  const ids = shown ? p.trials.slice(0, MAX_THROUGHPUT_TRIALS).map((t) => t.id) : [];
  const training = usePolling(
    async (s) => {
      const throughput = new Map<number, number | undefined>();
      const parameters = new Map<number, number | undefined>();
      await Promise.all(
        ids.map(async (id) => {
          const reports = await api.getTrialMetrics(id, 'training', THROUGHPUT_POINTS, s);
          throughput.set(id, meanTokensPerSecond(reports));
          parameters.set(id, trialParameters(reports));
        }),
      );
      return { throughput, parameters };
    },
    [ids.join(',')],
    shown && p.active ? 15000 : 0,
    true,
  );
  const rows = useMemo(
    () => compareArchs(p.trials, arch, { smallerIsBetter: p.smallerIsBetter, throughput: training.data?.throughput ?? new Map(), parameters: training.data?.parameters }),
    [p.trials, arch, p.smallerIsBetter, training.data],
  );
  if (!shown) return null;
  return (
    <div className="card" data-testid="arch-comparison">
      <h2>Architectures</h2>
      <p className="muted small">
        The {archs.length} archs of this sweep side by side, the best first: each one's best trial by {p.metric || 'the searcher metric'} ({p.smallerIsBetter ? 'smaller' : 'larger'} is better), how long that trial ran, the mean training throughput of its trials and the size of its model
        {p.trials.length > MAX_THROUGHPUT_TRIALS ? ` (the first ${MAX_THROUGHPUT_TRIALS} trials)` : ''}.
      </p>
      <div className="table-wrap">
        <table className="table" data-testid="arch-table">
          <thead>
            <tr>
              <th scope="col">Arch</th>
              <th scope="col">Trials</th>
              <th scope="col">Best {p.metric}</th>
              <th scope="col">Best trial</th>
              <th scope="col">Its time</th>
              <th scope="col">Tokens/s (mean)</th>
              <th scope="col">Parameters</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.arch} data-testid="arch-row" data-arch={r.arch}>
                <td className="strong mono">{r.arch}</td>
                <td className="num" data-testid="arch-trials">
                  {r.completed}/{r.trials} completed
                </td>
                <td className="num" data-testid="arch-best">
                  {formatMetric(r.best)}
                </td>
                <td data-testid="arch-best-trial">{r.bestTrialId !== undefined ? <a href={`#/trials/${r.bestTrialId}`}>trial {r.bestTrialId}</a> : '–'}</td>
                <td className="num" data-testid="arch-time">
                  {formatDuration(r.bestDurationMs)}
                </td>
                <td className="num" data-testid="arch-tps" title={r.throughputTrials ? `mean of ${r.throughputTrials} trial${r.throughputTrials === 1 ? '' : 's'}` : 'no trial of this arch reported tokens_per_second'}>
                  {training.loading && !training.data ? '…' : r.tokensPerSecond === undefined ? '–' : formatInt(r.tokensPerSecond)}
                </td>
                <td className="num" data-testid="arch-parameters" data-parameters={r.parametersMin === r.parametersMax ? r.parametersMin : undefined} title={parametersTitle(r.parametersMin, r.parametersMax)}>
                  {training.loading && !training.data ? '…' : r.parametersMin === r.parametersMax ? formatParameters(r.parametersMin) : `${formatParameters(r.parametersMin)} – ${formatParameters(r.parametersMax)}`}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}

/** The parameters cell's tooltip: the exact count, or the range its trials' models span. */
function parametersTitle(min: number | undefined, max: number | undefined): string {
  if (min === undefined || max === undefined) return 'no trial of this arch reported parameters';
  return min === max ? `${formatInt(min)} parameters` : `${formatInt(min)} to ${formatInt(max)} parameters (its trials differ in size)`;
}
