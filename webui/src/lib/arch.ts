// What model an experiment trains, as its config says: the native trainer's `hyperparameters.arch`
// (a constant, or every value of a search space over it), or the user's own code (`entrypoint`).
// Read from the config YAML (GET /experiments?fields=config in the list, GET /experiments/{id}),
// since the API has no arch field of its own; lib/experimentConfig.ts parses it. No arch in a
// native config means the trainer's default arch: shown as "default", since the dashboard is not
// told which arch that is.
import type { Trial } from '../api/types';
import { experimentConfig, isMapping, scalarText } from './experimentConfig';

export type ExperimentArch =
  /** The answer carried no config (a list asked without fields=config, or an older master), or
   *  one that does not parse. */
  | { kind: 'unknown' }
  /** The native trainer; `archs` empty when the config names none (the trainer's default). */
  | { kind: 'native'; archs: string[] }
  /** User code; `archs` from its free-form `hyperparameters.arch` when it has one. */
  | { kind: 'user-code'; entrypoint: string; archs: string[] };

/** Filter key of user-code experiments, and of native ones without an arch (arch names are
 *  identifiers, so neither can be taken for one). */
export const USER_CODE = 'user code';
export const DEFAULT_ARCH = 'default';

export function experimentArch(configYaml: string): ExperimentArch {
  const config = experimentConfig(configYaml);
  if (!config) return { kind: 'unknown' };
  const archs = archValues(config.arch);
  return config.entrypoint ? { kind: 'user-code', entrypoint: config.entrypoint, archs } : { kind: 'native', archs };
}

/** The archs a hyperparameter spec can take: a constant (`lstm`, `{type: const, val: lstm}`) or
 *  the values of a categorical space, in the config's order without repeats. */
export function archValues(spec: unknown): string[] {
  const text = scalarText(spec);
  if (text !== undefined) return text ? [text] : [];
  if (!isMapping(spec)) return [];
  const type = scalarText(spec.type);
  if (type === 'const') return archValues(scalarText(spec.val));
  if (type === 'categorical' && Array.isArray(spec.vals)) {
    return [...new Set(spec.vals.map(scalarText).filter((v): v is string => !!v))];
  }
  return [];
}

/** The keys the arch filter matches an experiment by: each arch it trains (a sweep matches each
 *  of its archs), `default` for a native one naming none, `user code` for user code. */
export function archKeys(a: ExperimentArch): string[] {
  if (a.kind === 'unknown') return [];
  if (a.kind === 'user-code') return [USER_CODE, ...a.archs];
  return a.archs.length ? a.archs : [DEFAULT_ARCH];
}

/** The experiment list's cell text: "lstm_small, transformer_tiny", "default", "user code". */
export function archLabel(a: ExperimentArch): string {
  if (a.kind === 'unknown') return '–';
  if (a.kind === 'user-code') return a.archs.length ? `${a.archs.join(', ')} (user code)` : USER_CODE;
  return a.archs.length ? a.archs.join(', ') : DEFAULT_ARCH;
}

/** The options of the arch filter: the keys of the experiments shown, the selected one kept even
 *  when no row has it, sorted with `default` and `user code` last. */
export function archFilterOptions(archs: readonly ExperimentArch[], selected: string): string[] {
  const keys = new Set(archs.flatMap(archKeys));
  if (selected) keys.add(selected);
  const special = (k: string) => (k === DEFAULT_ARCH ? 1 : k === USER_CODE ? 2 : 0);
  return [...keys].sort((a, b) => special(a) - special(b) || a.localeCompare(b));
}

/** The arch a trial trained: its `arch` hyperparameter, else the experiment's only one, else
 *  undefined (the trainer's default, or code that names none). */
export function trialArch(t: Trial, experiment: ExperimentArch): string | undefined {
  const own = t.hparams.arch;
  if (typeof own === 'string' && own) return own;
  return experiment.kind !== 'unknown' && experiment.archs.length === 1 ? experiment.archs[0] : undefined;
}
