// The experiment page's side-by-side comparison of the architectures a sweep trained: one row per
// arch with its trials, its best trial by the searcher's metric, that trial's time, and the arch's
// throughput and model size. Throughput is the native trainer's `tokens_per_second` training metric,
// the size its `parameters` (the model's parameter count, in every training report); a trial that
// reports neither (user code) leaves them empty.
import type { MetricReport, Trial } from '../api/types';
import { trialArch, type ExperimentArch } from './arch';
import { durationBetween } from './format';

export interface ArchSummary {
  arch: string;
  trials: number;
  completed: number;
  /** The trial with the best validation metric among the arch's, and that value. */
  bestTrialId?: number;
  best?: number;
  /** How long the best trial ran (ms; to now while it runs); NaN when it has not started. */
  bestDurationMs: number;
  /** Mean over the arch's trials that reported throughput of each one's mean tokens/s. */
  tokensPerSecond?: number;
  /** How many of its trials reported throughput. */
  throughputTrials: number;
  /** The smallest and largest parameter count its trials reported (equal unless the sweep also
   *  sizes the arch); undefined when none did. */
  parametersMin?: number;
  parametersMax?: number;
}

/** The native trainer's training metric that holds the model's parameter count. */
export const PARAMETERS_METRIC = 'parameters';

/** A trial's parameter count: the latest training report's `parameters` (a positive count);
 *  undefined when no report has one. */
export function trialParameters(reports: readonly MetricReport[]): number | undefined {
  for (let i = reports.length - 1; i >= 0; i--) {
    const v = reports[i].values[PARAMETERS_METRIC];
    if (typeof v === 'number' && Number.isFinite(v) && v > 0) return v;
  }
  return undefined;
}

/** A trial's mean `tokens_per_second` over its training reports; undefined when it has none. */
export function meanTokensPerSecond(reports: readonly MetricReport[]): number | undefined {
  let sum = 0;
  let n = 0;
  for (const r of reports) {
    const v = r.values.tokens_per_second;
    if (typeof v === 'number' && Number.isFinite(v)) {
      sum += v;
      n++;
    }
  }
  return n ? sum / n : undefined;
}

/** The distinct archs of `trials` (in first-seen order), trials of no known arch left out. */
export function archsOfTrials(trials: readonly Trial[], experiment: ExperimentArch): string[] {
  return [...new Set(trials.map((t) => trialArch(t, experiment)).filter((a): a is string => !!a))];
}

/** One row per arch, the best first (by the metric's direction); archs without a validation
 *  result after them, by name. `throughput` holds each trial's mean tokens/s, `parameters` each
 *  trial's parameter count. */
export function compareArchs(
  trials: readonly Trial[],
  experiment: ExperimentArch,
  opts: { smallerIsBetter: boolean; throughput: ReadonlyMap<number, number | undefined>; parameters?: ReadonlyMap<number, number | undefined>; now?: number },
): ArchSummary[] {
  const groups = new Map<string, Trial[]>();
  for (const t of trials) {
    const arch = trialArch(t, experiment);
    if (!arch) continue;
    groups.set(arch, [...(groups.get(arch) ?? []), t]);
  }
  const better = (a: number, b: number) => (opts.smallerIsBetter ? a < b : a > b);
  const rows = [...groups].map(([arch, ts]): ArchSummary => {
    let bestTrial: Trial | undefined;
    for (const t of ts) {
      const v = t.bestValidationMetric;
      if (v === undefined || Number.isNaN(v)) continue;
      if (!bestTrial || better(v, bestTrial.bestValidationMetric!)) bestTrial = t;
    }
    const tps = ts.map((t) => opts.throughput.get(t.id)).filter((v): v is number => v !== undefined);
    const sizes = ts.map((t) => opts.parameters?.get(t.id)).filter((v): v is number => v !== undefined);
    return {
      arch,
      trials: ts.length,
      completed: ts.filter((t) => t.state === 'TRIAL_STATE_COMPLETED').length,
      bestTrialId: bestTrial?.id,
      best: bestTrial?.bestValidationMetric,
      bestDurationMs: bestTrial ? durationBetween(bestTrial.startTime, bestTrial.endTime, opts.now) : NaN,
      tokensPerSecond: tps.length ? tps.reduce((a, b) => a + b, 0) / tps.length : undefined,
      throughputTrials: tps.length,
      parametersMin: sizes.length ? Math.min(...sizes) : undefined,
      parametersMax: sizes.length ? Math.max(...sizes) : undefined,
    };
  });
  return rows.sort((a, b) => {
    if (a.best !== undefined && b.best !== undefined && a.best !== b.best) return better(a.best, b.best) ? -1 : 1;
    if ((a.best === undefined) !== (b.best === undefined)) return a.best === undefined ? 1 : -1;
    return a.arch.localeCompare(b.arch);
  });
}
