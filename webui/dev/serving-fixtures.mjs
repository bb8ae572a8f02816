// Servers the master schedules (`sf serve start`; proto/steadfast/v1/serving.proto), as fixtures
// and handlers for the in-memory stand-ins of the master: the dev stub (dev/stub-master.mjs) and
// the offline browser test (e2e/offline.e2e.mjs). The routes are spelled as the API description
// spells them, so createRouter (dev/api-routes.mjs) refuses them if the description drops one.
// The wire JSON is the master's: int64 ids as strings, proto3 defaults left out. A server is a task
// of its own: its logs, its slots and its Kill are task-fixtures.mjs's (GET /api/v1/tasks/{id}/logs).
import { addTaskLog } from './task-fixtures.mjs';

const ENDED = ['STOPPED', 'FAILED'];
const ENDING = ['STOPPING', ...ENDED];

/** A store: { servings: [wire Serving], nextId, logs: [wire LogLine], nextLogId }. Three servers,
 *  each a task of its own (`id` its task's id, in the same space as the commands of
 *  task-fixtures.mjs): wmt-de-en v3 READY (alice's, in workspace nlp), tiny-lm v1 QUEUED (bob's, 2
 *  slots of pool gpu), and wmt-de-en v1 FAILED; log lines of the READY and the FAILED one (none of
 *  the QUEUED one). */
export function fixedServingStore() {
  const t = (h, m = 0) => new Date(Date.UTC(2026, 10, 26, h, m)).toISOString();
  const store = {
    nextId: 60,
    servings: [
      { id: '41', modelName: 'wmt-de-en', modelVersion: 1, checkpointUuid: '1f3c0000-0000-4000-8000-000000000001', state: 'FAILED', slots: 1, owner: 'alice', workspace: 'nlp', createdAt: t(8), endedAt: t(8, 5), error: 'sf-serve exited with status 1: checkpoint 1f3c0000-0000-4000-8000-000000000001 not found', restarts: 5 },
      { id: '52', modelName: 'wmt-de-en', modelVersion: 3, checkpointUuid: '1f3c0000-0000-4000-8000-000000000003', state: 'READY', url: 'http://node1:8500', slots: 1, owner: 'alice', workspace: 'nlp', agentId: 'agent-1', createdAt: t(10) },
      { id: '53', modelName: 'tiny-lm', modelVersion: 1, state: 'QUEUED', slots: 2, resourcePool: 'gpu', owner: 'bob', workspace: 'Uncategorized', createdAt: t(11) },
    ],
    nextLogId: 1,
    logs: [],
  };
  addServingLog(store, '41', 'stderr', 'sf-serve: loading checkpoint 1f3c0000-0000-4000-8000-000000000001', t(8, 1));
  addServingLog(store, '41', 'stderr', 'sf-serve: checkpoint 1f3c0000-0000-4000-8000-000000000001 not found', t(8, 1));
  addServingLog(store, '52', 'stdout', 'sf-serve: loading checkpoint 1f3c0000-0000-4000-8000-000000000003', t(10, 1));
  addServingLog(store, '52', 'stdout', 'sf-serve: listening on http://node1:8500', t(10, 2));
  return store;
}

/** Appends one line to server `id`'s logs, as the agent it runs on reports it (rank 0 of the
 *  server's task); the task routes serve them (task-fixtures.mjs). */
export function addServingLog(store, id, stream, message, time = new Date().toISOString()) {
  const agentId = store.servings.find((s) => s.id === String(id))?.agentId ?? '';
  addTaskLog(store, id, stream, message, time, agentId);
}

async function readJson(req) {
  let body = '';
  for await (const c of req) body += c;
  return body.trim() ? JSON.parse(body) : {};
}

/**
 * The servings routes over `store`; `send(res, status, body)` and `err(res, status, code, msg)` as
 * the stub writes answers. Options:
 *   mayStop(who, serving)  false → 403, as the master's policy says (default: anyone may);
 *   resolve(model, version) → {modelName, modelVersion, checkpointUuid} or a message string when
 *     the model or version does not exist (404); default: taken as given.
 * Stop moves a live server to STOPPING (settleServings ends it); start adds a QUEUED one.
 */
export function servingHandlers(store, { send, err, mayStop = () => true, resolve }) {
  const find = (id) => store.servings.find((s) => s.id === String(id));
  return {
    'GET /api/v1/servings': (req, res, url) => {
      const q = url.searchParams;
      const all = (q.get('includeStopped') ?? q.get('include_stopped')) === 'true';
      const list = store.servings.filter((s) => all || !ENDED.includes(s.state)).sort((a, b) => Number(a.id) - Number(b.id));
      return send(res, 200, { servings: list });
    },
    'GET /api/v1/servings/{id}': (req, res, url, params) => {
      const s = find(params.id);
      if (!s) return err(res, 404, 5, `server ${params.id} does not exist`);
      return send(res, 200, { serving: s });
    },
    'POST /api/v1/servings/{id}/stop': (req, res, url, params, who) => {
      const s = find(params.id);
      if (!s) return err(res, 404, 5, `server ${params.id} does not exist`);
      if (!mayStop(who, s)) return err(res, 403, 7, `user ${who?.user?.username} may not stop task ${s.id}: it belongs to ${s.owner}`);
      if (ENDING.includes(s.state)) return err(res, 409, 9, `server ${s.id} is ${s.state}: nothing to stop`);
      s.state = 'STOPPING';
      delete s.url;
      return send(res, 200, { serving: s });
    },
    'POST /api/v1/servings': async (req, res, url, params, who) => {
      let body;
      try {
        body = await readJson(req);
      } catch {
        return err(res, 400, 3, 'malformed JSON body');
      }
      if (!body.model) return err(res, 400, 3, 'model: required');
      if (who?.user?.role === 'viewer') return err(res, 403, 7, `user ${who.user.username} (viewer) may not start servers`);
      const r = resolve ? resolve(String(body.model), Number(body.version ?? 0)) : { modelName: String(body.model), modelVersion: Number(body.version ?? 0) };
      if (typeof r === 'string') return err(res, 404, 5, r);
      const s = { id: String(store.nextId++), ...r, state: 'QUEUED', slots: Number(body.slots ?? 0) || 1, owner: who?.user?.username ?? 'root', createdAt: new Date().toISOString() };
      store.servings.push(s);
      return send(res, 200, { serving: s });
    },
  };
}

/** One step of the servers' lives, for the dev stub's timer: QUEUED → STARTING → READY (with a URL),
 *  STOPPING → STOPPED, each step with a log line; a READY server logs a request now and then. */
export function settleServings(store, now = new Date().toISOString()) {
  for (const s of store.servings) {
    if (s.state === 'STOPPING') {
      Object.assign(s, { state: 'STOPPED', endedAt: now });
      addServingLog(store, s.id, 'stdout', 'sf-serve: stopped', now);
    } else if (s.state === 'STARTING') {
      Object.assign(s, { state: 'READY', url: `http://127.0.0.1:${8500 + (Number(s.id) % 100)}` });
      addServingLog(store, s.id, 'stdout', `sf-serve: listening on ${s.url}`, now);
    } else if (s.state === 'QUEUED') {
      Object.assign(s, { state: 'STARTING', agentId: 'agent-0' });
      addServingLog(store, s.id, 'stdout', `sf-serve: loading checkpoint ${s.checkpointUuid ?? ''}`.trim(), now);
    } else if (s.state === 'READY') {
      addServingLog(store, s.id, 'stdout', `sf-serve: POST /v1/translate 200 (${1 + (store.nextLogId % 7)} sentences)`, now);
    }
  }
}
