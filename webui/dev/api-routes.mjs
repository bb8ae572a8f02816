// The master's routes as the API description lists them, for the in-memory stand-ins of the
// master (dev/stub-master.mjs, e2e/auth-stub.mjs). Which paths exist and which methods each takes
// is read from the generated description, never restated: src/api/generated/wire.ts (`operations`,
// checked in and kept current by `npm run check:api`), or with SF_OPENAPI_JSON set, that OpenAPI
// document itself (e.g. build/openapi.json, or a copy of a master's GET /api/v1/openapi.json).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { operationsFromDoc, readGeneratedOperations } from '../scripts/gen-api-types.mjs';

export const WIRE_TS = join(import.meta.dirname, '..', 'src', 'api', 'generated', 'wire.ts');
const METHOD_ORDER = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH']; // the master's Allow order

/** operationId → {method, path, pathParams, queryParams}. Throws, naming the file, when the
 *  description cannot be read. */
export function loadOperations(env = process.env) {
  const file = env.SF_OPENAPI_JSON || WIRE_TS;
  try {
    const text = readFileSync(file, 'utf8');
    return env.SF_OPENAPI_JSON ? operationsFromDoc(JSON.parse(text)) : readGeneratedOperations(text);
  } catch (e) {
    throw new Error(`cannot read the API description from ${file}: ${e.message}`);
  }
}

/** Throws when a route ("METHOD /api/v1/path/{param}", spelled as the description spells it) is
 *  not in the description: a stand-in must not serve what the master does not. */
export function assertDescribed(operations, routes, who = 'the stub') {
  const known = new Set(Object.values(operations).map((o) => `${o.method} ${o.path}`));
  const missing = routes.filter((r) => !known.has(r));
  if (missing.length) {
    throw new Error(
      `${who} serves route(s) the API description does not list: ${missing.join(', ')}.\n` +
        'Fix the route (method, path, {parameter} names as in src/api/generated/wire.ts), or regenerate ' +
        'the description (`npm run gen:api` after building the CMake target openapi_json).',
    );
  }
}

const segments = (path) => path.split('/').slice(1);

/**
 * A router over the description's routes. `handlers` maps "METHOD /api/v1/path/{param}" to
 * `(req, res, url, params) => …`; each must be a route of the description (checked here, so a
 * stale handler fails at start, not at the first request). `match(method, pathname)` answers
 *   {status: 404}                      no route of the description has this path;
 *   {status: 405, allow: 'GET, POST'}  it has the path, not with this method;
 *   {status: 200, operationId, params, handler}  handler undefined when the stub does not serve it.
 * Literal segments win over {parameters} (`/experiments/activate` before `/experiments/{id}`).
 */
export function createRouter(operations, handlers = {}, who = 'the stub') {
  assertDescribed(operations, Object.keys(handlers), who);
  const routes = Object.entries(operations).map(([operationId, o]) => ({
    operationId,
    method: o.method,
    key: `${o.method} ${o.path}`,
    segs: segments(o.path).map((s) => (/^\{[^}]+\}$/.test(s) ? { param: s.slice(1, -1) } : { literal: s })),
  }));
  for (const r of routes) r.paramCount = r.segs.filter((s) => s.param).length;
  routes.sort((a, b) => a.paramCount - b.paramCount);
  return {
    match(method, pathname) {
      const parts = segments(pathname);
      const hits = [];
      for (const r of routes) {
        if (r.segs.length !== parts.length) continue;
        const params = {};
        let ok = true;
        for (let i = 0; ok && i < parts.length; i++) {
          const s = r.segs[i];
          if (s.literal !== undefined) ok = s.literal === parts[i];
          else if (parts[i] === '') ok = false;
          else {
            try {
              params[s.param] = decodeURIComponent(parts[i]);
            } catch {
              ok = false;
            }
          }
        }
        if (ok) hits.push({ r, params });
      }
      if (!hits.length) return { status: 404 };
      const hit = hits.find((h) => h.r.method === method);
      if (!hit) {
        const allow = METHOD_ORDER.filter((m) => hits.some((h) => h.r.method === m)).join(', ');
        return { status: 405, allow };
      }
      return { status: 200, operationId: hit.r.operationId, params: hit.params, handler: handlers[hit.r.key] };
    },
  };
}
