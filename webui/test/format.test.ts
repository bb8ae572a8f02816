import { describe, expect, it } from 'vitest';
import { durationBetween, formatBytes, formatCompact, formatDateTime, formatDuration, formatHParam, formatInt, formatMetric, formatParameters, formatRelative, stateLabel, stateTone } from '../src/lib/format';

describe('formatDuration', () => {
  it('formats seconds, minutes, hours and days', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(45_900)).toBe('45s');
    expect(formatDuration(185_000)).toBe('3m 05s');
    expect(formatDuration(2 * 3600_000 + 4 * 60_000)).toBe('2h 04m');
    expect(formatDuration(3 * 86400_000 + 4 * 3600_000)).toBe('3d 4h');
  });
  it('shows a dash for negative or missing durations', () => {
    expect(formatDuration(-1)).toBe('–');
    expect(formatDuration(NaN)).toBe('–');
  });
  it('measures open intervals up to now', () => {
    const now = Date.parse('2026-11-22T03:00:00Z');
    expect(durationBetween('2026-11-22T02:00:00Z', undefined, now)).toBe(3600_000);
    expect(durationBetween('2026-11-22T02:00:00Z', '2026-11-22T02:00:30.5Z', now)).toBe(30_500);
    expect(Number.isNaN(durationBetween(undefined, undefined, now))).toBe(true);
  });
});

describe('numbers', () => {
  it('formats metrics with 4 significant digits', () => {
    expect(formatMetric(2.345678)).toBe('2.346');
    expect(formatMetric(27.5)).toBe('27.5');
    expect(formatMetric(1234.5)).toBe('1235');
    expect(formatMetric(0)).toBe('0');
    expect(formatMetric(0.0001234)).toBe('1.234e-4');
    expect(formatMetric(12345678)).toBe('1.235e+7');
    expect(formatMetric(undefined)).toBe('–');
    expect(formatMetric(NaN)).toBe('–');
    expect(formatMetric(Infinity)).toBe('∞');
  });
  it('formats integers, compact counts and bytes', () => {
    expect(formatInt(1234567)).toBe('1,234,567');
    expect(formatInt(undefined)).toBe('–');
    expect(formatCompact(950)).toBe('950');
    expect(formatCompact(12_300)).toBe('12k');
    expect(formatCompact(4_500_000)).toBe('4.5M');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(3 * 1024 ** 3)).toBe('3.0 GiB');
  });
  it('formats parameter counts in K, M and B, rounding up into the next unit', () => {
    expect([950, 1000, 48_213, 803_712, 999_499, 999_999, 1_234_567, 9_960_000, 123_456_789, 13e9].map(formatParameters)).toEqual(['950', '1.0 K', '48 K', '804 K', '999 K', '1.0 M', '1.2 M', '10 M', '123 M', '13 B']);
    expect([undefined, NaN, -1].map(formatParameters)).toEqual(['–', '–', '–']);
  });
  it('formats hyperparameter values', () => {
    expect(formatHParam(0.000316)).toBe('3.16e-4');
    expect(formatHParam('radam')).toBe('radam');
    expect(formatHParam(true)).toBe('true');
    expect(formatHParam([0.9, 0.98])).toBe('[0.9,0.98]');
    expect(formatHParam(undefined)).toBe('–');
  });
});

describe('dates', () => {
  it('formats RFC 3339 in UTC', () => {
    expect(formatDateTime('2026-11-22T14:05:09.123Z', true)).toBe('2026-11-22 14:05:09');
    expect(formatDateTime('2026-11-22T14:05:09+02:00', true)).toBe('2026-11-22 12:05:09');
    expect(formatDateTime(undefined)).toBe('–');
    expect(formatDateTime('not a date')).toBe('–');
  });
  it('formats relative times', () => {
    const now = Date.parse('2026-11-22T03:00:00Z');
    expect(formatRelative('2026-11-22T02:59:58Z', now)).toBe('just now');
    expect(formatRelative('2026-11-22T02:59:00Z', now)).toBe('1 min ago');
    expect(formatRelative('2026-11-22T02:30:00Z', now)).toBe('30 min ago');
    expect(formatRelative('2026-11-21T03:00:00Z', now)).toBe('1 d ago');
  });
});

describe('states', () => {
  it('labels and colours states', () => {
    expect(stateLabel('EXPERIMENT_STATE_STOPPING_COMPLETED')).toBe('Stopping completed');
    expect(stateLabel('TRIAL_STATE_QUEUED')).toBe('Queued');
    expect(stateLabel('SLOT_TYPE_CUDA')).toBe('Cuda');
    expect(stateTone('EXPERIMENT_STATE_ACTIVE')).toBe('active');
    expect(stateTone('TRIAL_STATE_RUNNING')).toBe('active');
    expect(stateTone('EXPERIMENT_STATE_STOPPING_ERROR')).toBe('bad');
    expect(stateTone('EXPERIMENT_STATE_STOPPING_CANCELED')).toBe('stopping');
    expect(stateTone('EXPERIMENT_STATE_COMPLETED')).toBe('done');
    // servers (serving.proto): plain state names
    expect(['QUEUED', 'STARTING', 'READY', 'PAUSED', 'STOPPING', 'STOPPED', 'FAILED'].map(stateTone)).toEqual(['queued', 'queued', 'active', 'paused', 'stopping', 'neutral', 'bad']);
    expect(stateLabel('READY')).toBe('Ready');
  });
});
