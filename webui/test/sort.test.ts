import { describe, expect, it } from 'vitest';
import { compareValues, nextSort, sortRows } from '../src/lib/sort';
import { orderPage } from '../src/pages/ExperimentsTable';
import { normExperiment } from '../src/api/client';

describe('sortRows', () => {
  it('sorts numbers and natural strings both ways', () => {
    expect(sortRows([3, 1, 2], (x) => x)).toEqual([1, 2, 3]);
    expect(sortRows([3, 1, 2], (x) => x, 'desc')).toEqual([3, 2, 1]);
    expect(sortRows(['trial 10', 'trial 2', 'Trial 1'], (x) => x)).toEqual(['Trial 1', 'trial 2', 'trial 10']);
  });
  it('keeps missing values last in both directions and is stable', () => {
    const rows = [{ k: undefined, i: 0 }, { k: 2, i: 1 }, { k: null, i: 2 }, { k: 1, i: 3 }, { k: 2, i: 4 }];
    expect(sortRows(rows, (r) => r.k).map((r) => r.i)).toEqual([3, 1, 4, 0, 2]);
    expect(sortRows(rows, (r) => r.k, 'desc').map((r) => r.i)).toEqual([1, 4, 3, 0, 2]);
  });
  it('compares mixed values without throwing', () => {
    expect(compareValues(1, 'a')).not.toBeNaN();
    expect(compareValues(true, false)).toBeGreaterThan(0);
    expect(compareValues(NaN, 1)).toBeGreaterThan(0);
  });
  it('toggles direction on the same column and resets on a new one', () => {
    expect(nextSort({ key: 'id', dir: 'asc' }, 'id')).toEqual({ key: 'id', dir: 'desc' });
    expect(nextSort({ key: 'id', dir: 'desc' }, 'name')).toEqual({ key: 'name', dir: 'asc' });
  });
});

describe('experiment columns', () => {
  const now = Date.parse('2026-11-22T03:00:00Z');
  const exps = [
    normExperiment({ id: '1', owner: 'zed', numTrials: 4, numCompletedTrials: 4, startTime: '2026-11-22T02:00:00Z', endTime: '2026-11-22T02:10:00Z' }),
    normExperiment({ id: '2', owner: 'amy', numTrials: 4, numCompletedTrials: 1, startTime: '2026-11-22T01:00:00Z' }),
    normExperiment({ id: '3', numTrials: 0 }),
  ];
  it('sorts by progress, owner and duration on the client', () => {
    expect(orderPage(exps, 'progress', 'desc', now).map((e) => e.id)).toEqual([1, 2, 3]);
    expect(orderPage(exps, 'owner', 'asc', now).map((e) => e.id)).toEqual([2, 1, 3]);
    expect(orderPage(exps, 'duration', 'desc', now).map((e) => e.id)).toEqual([2, 1, 3]);
  });
});
