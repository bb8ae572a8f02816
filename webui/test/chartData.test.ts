import { describe, expect, it } from 'vitest';
import { alignSeries, axisPosition, buildAxis, countDrawnPoints, countRowsWithMetric, flattenHParams, forLogScale, lttb, metricKeys, seriesFromReports, utilizationSeries, varyingHParams } from '../src/lib/chartData';
import { normMetric, normTrial, normUtilizationPoint } from '../src/api/client';
import type { UtilizationPoint } from '../src/api/types';

const rep = (batches: number, values: Record<string, unknown>, time?: string) => normMetric({ trialId: '1', batches: String(batches), kind: 'training', values, time });

describe('metric shaping', () => {
  const reports = [rep(200, { loss: 2.0, tokens_per_second: 5000 }, '2026-11-22T00:00:20Z'), rep(100, { loss: 3.0, loss_scale: 128 }, '2026-11-22T00:00:10Z'), rep(300, { loss: 'NaN-ish', accuracy: 0.5 })];
  it('lists numeric metric names with loss first', () => {
    expect(metricKeys(reports)).toEqual(['loss', 'accuracy', 'loss_scale', 'tokens_per_second']);
  });
  it('puts a speech model\'s error rates next to its validation loss', () => {
    const val = [rep(100, { cer: 20.1, bleu: 3, wer: 41.5, validation_loss: 0.9, utterances: 300 })];
    expect(metricKeys(val)).toEqual(['validation_loss', 'wer', 'cer', 'bleu', 'utterances']);
  });
  it('extracts one metric sorted by step and skips rows without it', () => {
    expect(seriesFromReports(reports, 'loss')).toEqual({ x: [100, 200], y: [3.0, 2.0] });
    expect(countRowsWithMetric(reports, 'loss')).toBe(2);
    expect(countRowsWithMetric(reports, 'tokens_per_second')).toBe(1);
  });
  it('uses seconds since the epoch for the time axis', () => {
    const s = seriesFromReports(reports, 'loss', 'time');
    expect(s.x).toEqual([Date.parse('2026-11-22T00:00:10Z') / 1000, Date.parse('2026-11-22T00:00:20Z') / 1000]);
  });
  it('keeps the later report when a restart repeats a step', () => {
    expect(seriesFromReports([rep(100, { loss: 3 }), rep(100, { loss: 2.5 })], 'loss')).toEqual({ x: [100], y: [2.5] });
  });
  it('keeps reports with equal times on the time axis', () => {
    const t = '2026-11-22T00:00:10Z';
    expect(seriesFromReports([rep(100, { loss: 3 }, t), rep(110, { loss: 2.5 }, t)], 'loss', 'time').y).toEqual([3, 2.5]);
  });
  it('aligns trials with different steps onto one x axis', () => {
    const a = alignSeries([{ x: [1, 3], y: [10, 30] }, { x: [2, 3], y: [20, 31] }]);
    expect(a).toEqual([[1, 2, 3], [10, null, 30], [null, 20, 31]]);
    expect(countDrawnPoints(a)).toBe(4);
  });
  it('drops non-positive values for log scale', () => {
    expect(forLogScale([1, 0, -2, null, 5])).toEqual([1, null, null, null, 5]);
  });
});

describe('lttb downsampling', () => {
  const n = 100_000;
  const x = Array.from({ length: n }, (_, i) => i);
  const y = x.map((i) => Math.sin(i / 1000) + (i === 54_321 ? 10 : 0));
  it('returns at most the threshold, keeps the ends and spikes', () => {
    const d = lttb({ x, y }, 1000);
    expect(d.x.length).toBe(1000);
    expect(d.x[0]).toBe(0);
    expect(d.x[d.x.length - 1]).toBe(n - 1);
    expect(d.x).toContain(54_321);
    for (let i = 1; i < d.x.length; i++) expect(d.x[i]).toBeGreaterThan(d.x[i - 1]);
  });
  it('leaves small series alone and drops nulls', () => {
    expect(lttb({ x: [1, 2, 3], y: [1, null, 3] }, 10)).toEqual({ x: [1, 3], y: [1, 3] });
  });
});

describe('hyperparameter axes', () => {
  const trials = [
    normTrial({ id: '1', hparams: { lr: 0.001, optimizer: { type: 'radam' }, d_model: 256 }, bestValidationMetric: 20 }),
    normTrial({ id: '2', hparams: { lr: 0.0001, optimizer: { type: 'adamw' }, d_model: 256 }, bestValidationMetric: 25 }),
    normTrial({ id: '3', hparams: { lr: 0.00001, optimizer: { type: 'adamw' }, d_model: 256 } }),
  ];
  it('flattens nested values and keeps the varying ones', () => {
    expect(flattenHParams({ a: { b: 1, c: [1, 2] } })).toEqual({ 'a.b': 1, 'a.c': '[1,2]' });
    expect(varyingHParams(trials)).toEqual(['lr', 'optimizer.type']);
  });
  it('maps numeric (log when wide) and categorical values to [0,1]', () => {
    const lr = buildAxis('lr', [0.001, 0.0001, 0.00001]);
    expect(lr.kind).toBe('numeric');
    expect(lr.log).toBe(true);
    expect(axisPosition(lr, 0.0001)).toBeCloseTo(0.5);
    const opt = buildAxis('opt', ['radam', 'adamw', 'adamw']);
    expect(opt.categories).toEqual(['adamw', 'radam']);
    expect(axisPosition(opt, 'radam')).toBe(1);
    expect(axisPosition(opt, undefined)).toBeNaN();
    const flat = buildAxis('c', [5, 5]);
    expect(axisPosition(flat, 5)).toBeCloseTo(0.5);
  });
});

describe('utilisation history', () => {
  const t0 = Date.parse('2026-11-24T16:01:00Z') / 1000;
  const pt = (pool: string, minute: number, busy: number, max: number, total: number): UtilizationPoint =>
    normUtilizationPoint({ pool, time: new Date((t0 + 60 * minute) * 1000).toISOString(), slotsBusy: busy, slotsBusyMax: max, slotsTotal: total, samples: 6 })!;

  it('sums the pools of each minute into one cluster series, in time order', () => {
    // out of order on purpose, and pool "gpu" missing in minute 2
    const s = utilizationSeries([pt('default', 1, 2, 3, 4), pt('default', 0, 1.5, 2, 4), pt('gpu', 0, 1, 1, 2), pt('gpu', 1, 0.5, 1, 2), pt('default', 2, 0, 0, 4)]);
    expect(s.t).toEqual([t0, t0 + 60, t0 + 120]);
    expect(s.busy).toEqual([2.5, 2.5, 0]);
    expect(s.busyMax).toEqual([3, 4, 0]);
    expect(s.total).toEqual([6, 6, 4]);
    expect(countDrawnPoints([s.t, s.busy, s.busyMax])).toBe(6);
  });

  it('keeps one pool when asked, and is empty without points', () => {
    const s = utilizationSeries([pt('default', 0, 1, 1, 4), pt('gpu', 0, 2, 2, 2)], 'gpu');
    expect(s).toEqual({ t: [t0], busy: [2], busyMax: [2], total: [2] });
    expect(utilizationSeries([])).toEqual({ t: [], busy: [], busyMax: [], total: [] });
  });
});
