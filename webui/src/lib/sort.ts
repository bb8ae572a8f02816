// Sorting helpers for tables: stable, nulls last in either direction, numbers and strings compared
// naturally ("trial 2" < "trial 10").

export type SortDir = 'asc' | 'desc';
const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

function isMissing(v: unknown): boolean {
  return v === null || v === undefined || v === '' || (typeof v === 'number' && Number.isNaN(v));
}

/** Compares two cell values ascending; missing values compare as "after everything". */
export function compareValues(a: unknown, b: unknown): number {
  const ma = isMissing(a);
  const mb = isMissing(b);
  if (ma || mb) return ma === mb ? 0 : ma ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return collator.compare(String(a), String(b));
}

/** Returns a new array sorted by key(row); missing keys always last; ties keep input order. */
export function sortRows<T>(rows: readonly T[], key: (row: T) => unknown, dir: SortDir = 'asc'): T[] {
  const idx = rows.map((r, i) => ({ r, i, k: key(r) }));
  idx.sort((x, y) => {
    const mx = isMissing(x.k);
    const my = isMissing(y.k);
    if (mx || my) return mx === my ? x.i - y.i : mx ? 1 : -1;
    const c = compareValues(x.k, y.k);
    return (dir === 'asc' ? c : -c) || x.i - y.i;
  });
  return idx.map((x) => x.r);
}

/** Next sort state when a column header is clicked: new column → asc, same column → toggles. */
export function nextSort(cur: { key: string; dir: SortDir }, key: string): { key: string; dir: SortDir } {
  if (cur.key !== key) return { key, dir: 'asc' };
  return { key, dir: cur.dir === 'asc' ? 'desc' : 'asc' };
}
