// The operations of the generated API description (generated/wire.ts, written by `npm run gen:api`)
// that the dashboard calls, all under /api/v1: their typed arguments (path parameters, query,
// body), their typed answers, and the path of each with its parameters filled in. A removed route
// or path parameter fails `tsc` here or where the operation is called.
import { operations } from './generated/wire';
import type { OperationId, OperationTypes } from './generated/wire';
import type { ExperimentsQuery, ModelsQuery } from './types';

/** The JSON answer of an operation, as the generated description types it. */
export type ResponseOf<O extends OperationId> = OperationTypes[O]['response'];

const API_PREFIX = '/api/v1';
/** The operations under /api/v1, the only ones the dashboard calls. */
export type ApiOperation = { [O in OperationId]: (typeof operations)[O]['path'] extends `${typeof API_PREFIX}/${string}` ? O : never }[OperationId];
type PathParam<O extends OperationId> = (typeof operations)[O]['pathParams'][number];
/** protobuf's JSON name of a query parameter (`sort_by` → `sortBy`); the master takes both. */
type CamelCase<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;
/** The query parameters an operation takes, by their JSON names; values are written as text. */
export type QueryOf<O extends OperationId> = { [K in keyof OperationTypes[O]['query'] as CamelCase<K & string>]?: unknown };
/** The JSON body of an operation; one that declares none may still be sent `{}`. */
type BodyOf<O extends OperationId> = OperationTypes[O]['request'] extends undefined ? Record<string, never> : OperationTypes[O]['request'];
/** The arguments of a call: path parameters (required when the operation has any), query, body. */
export type CallArgs<O extends OperationId> = { query?: QueryOf<O>; body?: BodyOf<O>; signal?: AbortSignal; quiet401?: boolean } & ([PathParam<O>] extends [never] ? { path?: undefined } : { path: Record<PathParam<O>, string | number> });

/** The path under /api/v1 of an operation, its {parameters} filled in (percent-encoded). */
export function operationPath<O extends ApiOperation>(op: O, params: Partial<Record<PathParam<O>, string | number>> = {}): string {
  const values = params as Record<string, string | number | undefined>;
  return operations[op].path.slice(API_PREFIX.length).replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(String(values[name] ?? '')));
}

// The dashboard's own query types use the operations' parameter names (checked here, at compile time).
true satisfies [Exclude<keyof ExperimentsQuery, keyof QueryOf<'GetExperiments'>>] extends [never] ? true : false;
true satisfies [Exclude<keyof ModelsQuery, keyof QueryOf<'ListModels'>>] extends [never] ? true : false;
