// Readers of the fields of the master's protobuf JSON, which leaves default values out (proto3),
// writes int64 as strings and NaN/Infinity as strings: each gives the field's value, or the
// default when it is absent or of the wrong type. Used by the normalisers and by ApiClient for
// the answers it reads in place.
export const num = (v: unknown, d = 0): number => {
  if (v === undefined || v === null || v === '') return d;
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isFinite(n) ? n : d;
};
export const optNum = (v: unknown): number | undefined => {
  if (v === undefined || v === null || v === '') return undefined;
  // protobuf JSON writes NaN/Infinity as strings
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isNaN(n) && v !== 'NaN' ? undefined : n;
};
export const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v));
export const optStr = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
export const bool = (v: unknown): boolean => v === true || v === 'true';
export const obj = (v: unknown): Record<string, any> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, any>) : {});
/** A wire message as its generated type, or {} when the master sent something that is not a JSON
 *  object there (every wire field is optional, so {} is a valid, all-defaults message). */
export const msg = <T extends object>(v: T | null | undefined): T => (v && typeof v === 'object' && !Array.isArray(v) ? v : ({} as T));
/** A repeated wire field, or [] when it is absent or not an array. */
export const list = <T>(v: readonly T[] | null | undefined): T[] => (Array.isArray(v) ? (v as T[]) : []);
