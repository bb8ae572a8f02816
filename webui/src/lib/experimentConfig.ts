// The few fields the dashboard reads out of an experiment's config (the YAML as submitted, which
// the master has already validated): what it trains (`hyperparameters.arch`, `entrypoint`), how
// and on what (`precision`, the `data` splits' files) and where (`resources.resource_pool`,
// `resources.slots_per_trial`). Parsed once per config text with
// the `yaml` package (YAML 1.2, core schema) into one typed record, declared here with its
// defaults so no page reads the config by path with a default of its own.
//
// Failure model: a config that is empty, does not parse (the parser's first error), or is not a
// mapping yields undefined ("unknown" to the callers); nothing here throws.
import { parse } from 'yaml';

/** A value as YAML's core schema gives it (no tags, anchors resolved). */
export type ConfigValue = string | number | boolean | null | ConfigValue[] | { [key: string]: ConfigValue };

/** `precision` when the config leaves it out (docs/config.md, "Top level"). */
export const DEFAULT_PRECISION = 'fp32';

/** A data split's files as docs/config.md's `data` section names them: `src` and `tgt` (parallel
 *  text), `text` (one side's text) or `manifest` (speech). */
export const DATA_FILE_ROLES = ['src', 'tgt', 'text', 'manifest'] as const;
export type DataFileRole = (typeof DATA_FILE_ROLES)[number];
export const DATA_SPLITS = ['train', 'valid', 'test'] as const;
export interface DataSplit {
  split: (typeof DATA_SPLITS)[number];
  /** The split's files in DATA_FILE_ROLES order; a role the config leaves out is absent. */
  files: { role: DataFileRole; path: string }[];
}

export interface ExperimentConfig {
  /** `hyperparameters.arch` as written: a scalar, or a search space (`{type: categorical, vals:
   *  [...]}`); undefined when absent or empty. */
  arch: ConfigValue | undefined;
  /** User code's command: `entrypoint` as one string (a list's arguments joined by spaces); ''
   *  for the native trainer (no or an empty entrypoint). */
  entrypoint: string;
  /** `precision` as written, DEFAULT_PRECISION when absent; `precisionSet` says which. */
  precision: string;
  precisionSet: boolean;
  /** The `data` splits that name at least one file, in DATA_SPLITS order. */
  data: DataSplit[];
  /** `resources.resource_pool`; "default" when absent, as the API names the default pool. */
  resourcePool: string;
  /** `resources.slots_per_trial` when it is a positive integer (or one quoted); undefined
   *  otherwise. */
  slotsPerTrial: number | undefined;
}

/** A scalar's text (numbers and booleans as YAML wrote them in canonical form); undefined for a
 *  mapping, a sequence, null or nothing. */
export function scalarText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

export const isMapping = (v: unknown): v is { [key: string]: ConfigValue } => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value at `path` under a parsed mapping; undefined when a key on the way is absent. */
function at(root: unknown, path: readonly string[]): ConfigValue | undefined {
  let v: unknown = root;
  for (const key of path) {
    if (!isMapping(v) || !Object.hasOwn(v, key)) return undefined;
    v = v[key];
  }
  return v as ConfigValue;
}

function fromParsed(root: unknown): ExperimentConfig | undefined {
  if (!isMapping(root)) return undefined;
  const arch = at(root, ['hyperparameters', 'arch']);
  const entry = at(root, ['entrypoint']);
  const entrypoint = Array.isArray(entry) ? entry.map((a) => scalarText(a) ?? '').join(' ') : scalarText(entry) ?? '';
  const precision = scalarText(at(root, ['precision']));
  const data: DataSplit[] = [];
  for (const split of DATA_SPLITS) {
    const files = DATA_FILE_ROLES.flatMap((role) => {
      const path = scalarText(at(root, ['data', split, role]));
      return path ? [{ role, path }] : [];
    });
    if (files.length) data.push({ split, files });
  }
  const slots = Number(scalarText(at(root, ['resources', 'slots_per_trial'])) || NaN); // "4" as 4 too
  return Object.freeze({
    arch: arch === null || arch === '' ? undefined : arch,
    entrypoint,
    precision: precision || DEFAULT_PRECISION,
    precisionSet: !!precision,
    data,
    resourcePool: scalarText(at(root, ['resources', 'resource_pool'])) || 'default',
    slotsPerTrial: Number.isInteger(slots) && slots > 0 ? slots : undefined,
  });
}

/** Parses `yaml`; undefined when it is empty, does not parse or is not a mapping. */
export function parseExperimentConfig(yaml: string): ExperimentConfig | undefined {
  if (!yaml.trim()) return undefined;
  try {
    // logLevel 'error': the first error throws (caught here), warnings are not printed.
    return fromParsed(parse(yaml, { logLevel: 'error' }));
  } catch {
    return undefined;
  }
}

// The list polls its page every few seconds and reads each row's config from several places (the
// arch column, its sort key, the filter): each text is parsed once and kept while it is among the
// last CACHE_SIZE configs read (the list's largest page is 100 rows).
const CACHE_SIZE = 256;
const cache = new Map<string, ExperimentConfig | undefined>();

/** parseExperimentConfig, remembered by the config's text. The record is shared: do not change it. */
export function experimentConfig(yaml: string): ExperimentConfig | undefined {
  if (cache.has(yaml)) {
    const hit = cache.get(yaml);
    cache.delete(yaml); // most recently used last
    cache.set(yaml, hit);
    return hit;
  }
  const parsed = parseExperimentConfig(yaml);
  cache.set(yaml, parsed);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return parsed;
}
