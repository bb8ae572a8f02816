// What an experiment trains, read from its config (lib/experimentConfig.ts, lib/arch.ts), and the
// comparison of a sweep's archs (lib/archCompare.ts).
import { describe, expect, it } from 'vitest';
import { normMetric, normTrial } from '../src/api/client';
import { archFilterOptions, archKeys, archLabel, archValues, experimentArch, trialArch } from '../src/lib/arch';
import { archsOfTrials, compareArchs, meanTokensPerSecond, trialParameters } from '../src/lib/archCompare';
import { experimentConfig, parseExperimentConfig } from '../src/lib/experimentConfig';

const CATEGORICAL_FLOW = `name: arch-sweep
data:
  train: {src: /data/train.de, tgt: /data/train.en}
hyperparameters:
  arch: {type: categorical, vals: [lstm_small, transformer_tiny, fconv_small]}  # three families
  dropout: 0.2
searcher: {name: grid, metric: bleu, smaller_is_better: false}
`;

const CATEGORICAL_BLOCK = `name: "block sweep"
hyperparameters:
  lr: {type: log, minval: -4, maxval: -2}
  arch:
    type: categorical
    vals:
      - "transformer_lm_small"
      - 'speech_transformer_ctc_small'   # a comment
      - transformer_lm_small
  dropout: 0.1
resources:
  resource_pool: hpc
  slots_per_trial: 2
`;

describe('experimentConfig', () => {
  it('reads the arch, entrypoint and resources out of block and flow mappings, lists, quotes and comments', () => {
    expect(parseExperimentConfig(CATEGORICAL_FLOW)).toEqual({
      arch: { type: 'categorical', vals: ['lstm_small', 'transformer_tiny', 'fconv_small'] },
      entrypoint: '',
      precision: 'fp32',
      precisionSet: false,
      data: [{ split: 'train', files: [{ role: 'src', path: '/data/train.de' }, { role: 'tgt', path: '/data/train.en' }] }],
      resourcePool: 'default',
      slotsPerTrial: undefined,
    });
    expect(parseExperimentConfig(CATEGORICAL_BLOCK)).toEqual({
      arch: { type: 'categorical', vals: ['transformer_lm_small', 'speech_transformer_ctc_small', 'transformer_lm_small'] },
      entrypoint: '',
      precision: 'fp32',
      precisionSet: false,
      data: [],
      resourcePool: 'hpc',
      slotsPerTrial: 2,
    });
    expect(parseExperimentConfig('hyperparameters: {arch: {type: const, val: "lstm"}}  # flow\nresources: {resource_pool: \'it\'\'s\', slots_per_trial: "4"}\n')).toEqual({
      arch: { type: 'const', val: 'lstm' },
      entrypoint: '',
      precision: 'fp32',
      precisionSet: false,
      data: [],
      resourcePool: "it's",
      slotsPerTrial: 4,
    });
  });

  it('keeps URLs and paths with colons and # whole, reads a list entrypoint, and skips what it does not need', () => {
    const y = [
      'entrypoint:',
      '- python3',
      '- "train.py"',
      '- --data=http://data.example/wmt#de-en   # a comment',
      'webhooks:',
      '  - url: http://hooks.example/x#frag',
      '    events: [COMPLETED]',
      '  - url: https://b',
      'data: {train: {text: /data/a:b.txt}}',
      'resources:',
      '  resource_pool: gpu:a100',
      '  slots_per_trial: 8',
      'hyperparameters:',
      '  arch: &small lstm_small',
      '  fallback: *small',
    ].join('\n');
    expect(parseExperimentConfig(y)).toEqual({ arch: 'lstm_small', entrypoint: 'python3 train.py --data=http://data.example/wmt#de-en', precision: 'fp32', precisionSet: false, data: [{ split: 'train', files: [{ role: 'text', path: '/data/a:b.txt' }] }], resourcePool: 'gpu:a100', slotsPerTrial: 8 });
    expect(parseExperimentConfig('entrypoint: /usr/bin/python3 /src/a:b/train.py\n')?.entrypoint).toBe('/usr/bin/python3 /src/a:b/train.py');
    // absent, empty and not-a-positive-integer fields take the declared defaults
    expect(parseExperimentConfig('name: x\nhyperparameters:\n  arch:\nresources:\n  slots_per_trial: 1.5\n')).toEqual({ arch: undefined, entrypoint: '', precision: 'fp32', precisionSet: false, data: [], resourcePool: 'default', slotsPerTrial: undefined });
  });

  it('yields nothing (unknown) for a config that is empty, does not parse or is not a mapping', () => {
    for (const bad of ['', '  \n', 'hyperparameters: {arch: [lstm\n', 'name: a\nname: b\n', 'a:\n\t- tab\n', '- just\n- a list\n', 'plain text', 'a: 1\n---\nb: 2\n']) {
      expect(parseExperimentConfig(bad), JSON.stringify(bad)).toBeUndefined();
      expect(experimentArch(bad), JSON.stringify(bad)).toEqual({ kind: 'unknown' });
    }
  });

  it('parses each config text once', () => {
    const y = `${CATEGORICAL_BLOCK}# once\n`;
    expect(parseExperimentConfig(y)).not.toBe(parseExperimentConfig(y)); // a fresh parse each call
    const first = experimentConfig(y);
    expect(first?.resourcePool).toBe('hpc');
    expect(experimentConfig(y)).toBe(first); // remembered
    expect(Object.isFrozen(first)).toBe(true);
  });
});

describe('experimentArch', () => {
  it('reads a constant arch, a const space and a categorical one', () => {
    expect(experimentArch('name: q\nhyperparameters:\n  arch: transformer_tiny\n')).toEqual({ kind: 'native', archs: ['transformer_tiny'] });
    expect(experimentArch('hyperparameters: {arch: {type: const, val: lstm}}\n')).toEqual({ kind: 'native', archs: ['lstm'] });
    expect(experimentArch(CATEGORICAL_FLOW)).toEqual({ kind: 'native', archs: ['lstm_small', 'transformer_tiny', 'fconv_small'] });
    // repeats dropped, the config's order kept
    expect(experimentArch(CATEGORICAL_BLOCK)).toEqual({ kind: 'native', archs: ['transformer_lm_small', 'speech_transformer_ctc_small'] });
    // a space that is not over names (a typo the master refused anyway) gives none
    expect(archValues({ type: 'int', minval: 1, maxval: 2 })).toEqual([]);
    expect(archValues(['lstm', 'fconv'])).toEqual([]);
    expect(archValues(null)).toEqual([]);
  });

  it('tells user code by its entrypoint, and a config without arch or without config at all', () => {
    const user = experimentArch('name: pt\nentrypoint: /usr/bin/python3 train.py\nhyperparameters:\n  d_model: 128\n');
    expect(user).toEqual({ kind: 'user-code', entrypoint: '/usr/bin/python3 train.py', archs: [] });
    expect(experimentArch('entrypoint: [python3, train.py]\nhyperparameters: {arch: resnet50}\n')).toEqual({ kind: 'user-code', entrypoint: 'python3 train.py', archs: ['resnet50'] });
    expect(experimentArch('name: x\nhyperparameters:\n  dropout: 0.1\n')).toEqual({ kind: 'native', archs: [] });
    expect(experimentArch('')).toEqual({ kind: 'unknown' });
  });

  it('labels and filter keys', () => {
    expect(archLabel(experimentArch(CATEGORICAL_FLOW))).toBe('lstm_small, transformer_tiny, fconv_small');
    expect(archLabel({ kind: 'native', archs: [] })).toBe('default');
    expect(archLabel({ kind: 'user-code', entrypoint: 'python3 t.py', archs: [] })).toBe('user code');
    expect(archLabel({ kind: 'user-code', entrypoint: 'python3 t.py', archs: ['resnet50'] })).toBe('resnet50 (user code)');
    expect(archLabel({ kind: 'unknown' })).toBe('–');
    expect(archKeys({ kind: 'native', archs: [] })).toEqual(['default']);
    expect(archKeys({ kind: 'user-code', entrypoint: 'x', archs: ['resnet50'] })).toEqual(['user code', 'resnet50']);
    expect(archKeys({ kind: 'unknown' })).toEqual([]);
    const options = archFilterOptions([experimentArch(CATEGORICAL_FLOW), { kind: 'native', archs: [] }, { kind: 'user-code', entrypoint: 'x', archs: [] }, { kind: 'native', archs: ['lstm_small'] }], 'transformer_big');
    expect(options).toEqual(['fconv_small', 'lstm_small', 'transformer_big', 'transformer_tiny', 'default', 'user code']);
  });
});

const trial = (id: number, arch: string | undefined, best: number | undefined, extra: Record<string, unknown> = {}) =>
  normTrial({ id: String(id), experimentId: '3', state: 'TRIAL_STATE_COMPLETED', hparams: arch ? { arch, lr: 0.001 } : { lr: 0.001 }, bestValidationMetric: best, ...extra });

describe('compareArchs', () => {
  const sweep = experimentArch(CATEGORICAL_FLOW);
  const trials = [
    trial(1, 'lstm_small', 21.5, { startTime: '2026-11-02T10:00:00Z', endTime: '2026-11-02T10:05:00Z' }),
    trial(2, 'transformer_tiny', 27.25, { startTime: '2026-11-02T10:00:00Z', endTime: '2026-11-02T10:12:30Z' }),
    trial(3, 'lstm_small', 23, { startTime: '2026-11-02T10:00:00Z', endTime: '2026-11-02T10:07:00Z' }),
    trial(4, 'fconv_small', undefined, { state: 'TRIAL_STATE_RUNNING', startTime: '2026-11-02T10:00:00Z' }),
    trial(5, 'transformer_tiny', 26, { state: 'TRIAL_STATE_ERROR' }),
  ];

  it('gives one row per arch, the best first, with its best trial, that trial\'s time and the mean tokens/s', () => {
    const throughput = new Map<number, number | undefined>([[1, 1000], [3, 3000], [2, 5000], [5, undefined]]);
    const rows = compareArchs(trials, sweep, { smallerIsBetter: false, throughput, now: Date.parse('2026-11-02T10:30:00Z') });
    expect(rows.map((r) => r.arch)).toEqual(['transformer_tiny', 'lstm_small', 'fconv_small']);
    expect(rows[0]).toEqual({ arch: 'transformer_tiny', trials: 2, completed: 1, bestTrialId: 2, best: 27.25, bestDurationMs: 750000, tokensPerSecond: 5000, throughputTrials: 1, parametersMin: undefined, parametersMax: undefined });
    expect(rows[1]).toMatchObject({ arch: 'lstm_small', trials: 2, completed: 2, bestTrialId: 3, best: 23, bestDurationMs: 420000, tokensPerSecond: 2000, throughputTrials: 2 });
    // no validation yet: after the others, no best, no time, no throughput
    expect(rows[2]).toMatchObject({ arch: 'fconv_small', trials: 1, completed: 0, bestTrialId: undefined, best: undefined, tokensPerSecond: undefined, throughputTrials: 0 });
    expect(Number.isNaN(rows[2].bestDurationMs)).toBe(true);
  });

  it('gives each arch the smallest and largest parameter count of its trials', () => {
    const parameters = new Map<number, number | undefined>([[1, 2_000_000], [3, 1_500_000], [2, 800_000], [5, undefined]]);
    const rows = compareArchs(trials, sweep, { smallerIsBetter: false, throughput: new Map(), parameters });
    expect(rows.map((r) => [r.arch, r.parametersMin, r.parametersMax])).toEqual([
      ['transformer_tiny', 800_000, 800_000],
      ['lstm_small', 1_500_000, 2_000_000],
      ['fconv_small', undefined, undefined],
    ]);
  });

  it('orders by the metric\'s direction', () => {
    const rows = compareArchs(trials, sweep, { smallerIsBetter: true, throughput: new Map() });
    expect(rows.map((r) => [r.arch, r.bestTrialId])).toEqual([['lstm_small', 1], ['transformer_tiny', 5], ['fconv_small', undefined]]);
  });

  it('takes the experiment\'s only arch for trials without their own, and leaves out trials of no known arch', () => {
    const single = experimentArch('hyperparameters:\n  arch: lstm_small\n');
    expect(trialArch(trial(9, undefined, 1), single)).toBe('lstm_small');
    expect(trialArch(trial(9, undefined, 1), { kind: 'native', archs: [] })).toBeUndefined();
    expect(archsOfTrials([trial(1, 'lstm_small', 1), trial(2, undefined, 2), trial(3, 'fconv_small', 3), trial(4, 'lstm_small', 4)], { kind: 'native', archs: [] })).toEqual(['lstm_small', 'fconv_small']);
  });

  it('averages tokens_per_second over the reports that carry it', () => {
    const reports = [
      normMetric({ batches: '10', kind: 'training', values: { loss: 3, tokens_per_second: 4000 } }),
      normMetric({ batches: '20', kind: 'training', values: { loss: 2.5 } }),
      normMetric({ batches: '30', kind: 'training', values: { loss: 2, tokens_per_second: 5000 } }),
      normMetric({ batches: '40', kind: 'training', values: { tokens_per_second: 'NaN' } }),
    ];
    expect(meanTokensPerSecond(reports)).toBe(4500);
    expect(meanTokensPerSecond([normMetric({ batches: '1', values: { loss: 1 } })])).toBeUndefined();
  });

  it('reads a trial\'s parameter count from its latest training report that has one', () => {
    const reports = [
      normMetric({ batches: '10', kind: 'training', values: { loss: 3, parameters: 1000 } }),
      normMetric({ batches: '20', kind: 'training', values: { loss: 2.5, parameters: 803712 } }),
      normMetric({ batches: '30', kind: 'training', values: { loss: 2 } }),
      normMetric({ batches: '40', kind: 'training', values: { parameters: 'NaN' } }),
    ];
    expect(trialParameters(reports)).toBe(803712);
    expect(trialParameters([normMetric({ batches: '1', values: { loss: 1, parameters: 0 } })])).toBeUndefined();
    expect(trialParameters([])).toBeUndefined();
  });
});
