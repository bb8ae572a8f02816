#!/usr/bin/env node
// DEV ONLY — not used by any test. An in-memory stand-in for sf-master's REST API (the contract in
// proto/steadfast/v1/api.proto, protobuf JSON mapping) plus static serving of dist/ with the SPA
// fallback, so the dashboard can be looked at and the e2e script dry-run without a cluster.
// Trials "train" on a timer. Usage: node dev/stub-master.mjs [port] (default 8080).
// SF_STUB_USERS="alice:pw:admin,bob:pw:user,vic:pw:viewer" turns authentication on (e2e/auth-stub.mjs:
// login page, cookie sessions, Bearer tokens, tokens page); experiments then belong to their creator
// and actions follow the master's policy (403).
//
// The routes are not restated here: at start the stub reads the API description (the generated
// src/api/generated/wire.ts, or SF_OPENAPI_JSON=path/to/openapi.json) and refuses to start if a
// handler below serves a route the description does not list. A path the description does not
// have answers 404, a method it does not list for the path 405 with Allow, as the master does;
// a described route the stub does not serve answers 404 too.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { createAuthStub } from '../e2e/auth-stub.mjs';
import { createRouter, loadOperations } from './api-routes.mjs';
import { contextHandlers, fixedContext } from './context-fixtures.mjs';
import { modelHandlers } from './model-fixtures.mjs';
import { fixedServingStore, servingHandlers, settleServings } from './serving-fixtures.mjs';
import { allTasks, fixedCommandStore, placeTasks, settleCommands, taskHandlers, trialAsTask } from './task-fixtures.mjs';

/** A stub that cannot start says why in one line and exits 1. */
function startOrExit(what, fn) {
  try {
    return fn();
  } catch (e) {
    console.error(`stub-master: ${what}: ${e.message}`);
    process.exit(1);
  }
}

const auth = process.env.SF_STUB_USERS
  ? startOrExit('authentication', () =>
      createAuthStub({
        users: process.env.SF_STUB_USERS.split(',').map((u) => {
          const [username, password, role = 'user'] = u.split(':');
          return { username, password, role };
        }),
      }),
    )
  : undefined;

const port = Number(process.argv[2] ?? process.env.PORT ?? 8080);
const dist = join(import.meta.dirname, '..', 'dist');
const now = () => new Date().toISOString();
let nextExp = 1, nextTrial = 1, nextLog = 1;
const exps = new Map(), trials = new Map(), metrics = new Map(), logs = new Map(), ckpts = [];
const followers = new Map(); // trialId -> Set(res)
// agent-1 has three slots: the seeded READY server 52 and RUNNING command 54 hold two (placeTasks)
const agents = [0, 1].map((i) => ({ id: `agent-${i}`, hostname: `node${i}`, resourcePool: 'default', connected: true, registeredTime: now(), version: '0.1.0', address: `127.0.0.1:${9000 + i}`, slots: Array.from({ length: 1 + 2 * i }, (_, k) => ({ id: `cpu${k}`, type: 'SLOT_TYPE_CPU', device: 'CPU', enabled: true })) }));
/** A slot is busy when an allocation holds it: a trial's rank (trialId and allocationId
 *  "t12-r0-a1") or a task of its own, a command or a server (allocationId "task7-r0-a1", no
 *  trialId). */
const busySlot = (s) => !!(s.trialId || s.allocationId);

function addLog(tid, message, stream = 'stdout') {
  const l = { id: String(nextLog++), trialId: String(tid), rank: 0, stream, message, time: now(), agentId: 'agent-0' };
  logs.get(tid).push(l);
  for (const res of followers.get(tid) ?? []) res.write(`data: ${JSON.stringify(l)}\n\n`);
}

function createExperiment(yaml, activate, opts = {}) {
  const id = nextExp++;
  const name = (yaml.match(/^name:\s*(.+)$/m)?.[1] ?? `experiment-${id}`).trim();
  const target = Number(yaml.match(/max_length:\s*\{\s*batches:\s*(\d+)/)?.[1] ?? 200);
  opts.target ??= Math.min(target, 100000);
  const e = { id: String(id), name, state: activate ? 'EXPERIMENT_STATE_ACTIVE' : 'EXPERIMENT_STATE_PAUSED', configYaml: yaml, owner: opts.owner ?? 'root', searcher: 'grid', metric: 'bleu', numTrials: 0, startTime: opts.start ?? now(), priority: 50 };
  exps.set(id, e);
  const grid = opts.grid ?? [[0.001, 0.1], [0.001, 0.2], [0.0003, 0.1], [0.0003, 0.2]];
  for (const [lr, dropout] of grid) {
    const tid = nextTrial++;
    trials.set(tid, { id: String(tid), experimentId: String(id), state: 'TRIAL_STATE_QUEUED', hparams: { lr, dropout, d_model: 64, optimizer: { type: 'radam' } }, totalBatches: '0', targetBatches: String(opts.target ?? 200) });
    metrics.set(tid, []);
    logs.set(tid, []);
    addLog(tid, `trial ${tid} created with lr=${lr} dropout=${dropout}`, 'master');
  }
  e.numTrials = grid.length;
  return e;
}

function step(t, e) {
  const tid = Number(t.id);
  const b = Number(t.totalBatches) + 10;
  t.totalBatches = String(b);
  const lr = t.hparams.lr, dr = t.hparams.dropout;
  const loss = 2 + 7 * Math.exp(-b * lr * 10) + dr + Math.random() * 0.1;
  // the native trainer reports throughput, loss scale and its model's size; user code (an entrypoint) its loss only
  const native = !/^entrypoint:/m.test(e.configYaml);
  metrics.get(tid).push({ trialId: t.id, batches: String(b), kind: 'training', values: native ? { loss, tokens_per_second: 5000 + Math.random() * 500, loss_scale: 128 * 2 ** Math.floor(b / 100), parameters: 2345678 } : { loss }, time: now() });
  addLog(tid, `step ${b} loss=${loss.toFixed(4)}`);
  if (b % 50 === 0) {
    const bleu = 30 * (1 - Math.exp(-b * lr * 5)) - dr * 10;
    metrics.get(tid).push({ trialId: t.id, batches: String(b), kind: 'validation', values: { validation_loss: loss + 0.2, bleu }, time: now() });
    // a group of the trial's own, as Core API code reports one (ctx.train.report_metrics("inference", ...))
    metrics.get(tid).push({ trialId: t.id, batches: String(b), kind: 'inference', values: { examples: 64, latency_ms: 20 + 30 * dr + Math.random() * 5 }, time: now() });
    t.latestValidationMetric = bleu;
    t.bestValidationMetric = Math.max(t.bestValidationMetric ?? -Infinity, bleu);
    e.bestValidationMetric = Math.max(e.bestValidationMetric ?? -Infinity, bleu);
  }
  if (b % 100 === 0) ckpts.push({ uuid: crypto.randomUUID(), trialId: t.id, experimentId: t.experimentId, batches: String(b), path: `/var/lib/steadfast/checkpoints/${t.id}-${b}`, size: String(1234567 + b), time: now(), state: 'ACTIVE', validationMetric: t.latestValidationMetric });
  if (b >= Number(t.targetBatches)) {
    t.state = 'TRIAL_STATE_COMPLETED';
    t.endTime = now();
    addLog(tid, 'trial completed', 'master');
  }
}

function tick() {
  placeTasks(agents, allTasks({ servings, commands }));
  const free = agents.flatMap((a) => a.slots.filter((s) => !busySlot(s)).map((s) => ({ agent: a, s })));
  for (const e of exps.values()) {
    const id = Number(e.id);
    const ts = [...trials.values()].filter((t) => t.experimentId === e.id);
    if (e.state === 'EXPERIMENT_STATE_ACTIVE') {
      for (const t of ts) {
        if (t.state === 'TRIAL_STATE_PAUSED') t.state = 'TRIAL_STATE_QUEUED';
        if (t.state === 'TRIAL_STATE_QUEUED' && free.length) {
          const { agent, s } = free.shift();
          s.trialId = t.id;
          s.allocationId = `t${t.id}-r0-a1`;
          t.hosts = [agent.id]; // where its latest run runs, kept after it ends (Trial.hosts)
          t.state = 'TRIAL_STATE_RUNNING';
          t.startTime ??= now();
        }
        if (t.state === 'TRIAL_STATE_RUNNING') step(t, e);
      }
      e.numCompletedTrials = ts.filter((t) => t.state === 'TRIAL_STATE_COMPLETED').length;
      if (e.numCompletedTrials === ts.length) {
        e.state = 'EXPERIMENT_STATE_COMPLETED';
        e.endTime = now();
      }
    } else if (e.state === 'EXPERIMENT_STATE_PAUSED' || e.state === 'EXPERIMENT_STATE_CANCELED') {
      for (const t of ts) if (t.state === 'TRIAL_STATE_RUNNING' || t.state === 'TRIAL_STATE_QUEUED') t.state = e.state === 'EXPERIMENT_STATE_PAUSED' ? 'TRIAL_STATE_PAUSED' : 'TRIAL_STATE_CANCELED';
    }
    void id;
  }
  for (const a of agents) for (const s of a.slots) {
    const t = s.trialId && trials.get(Number(s.trialId));
    if (t && t.state !== 'TRIAL_STATE_RUNNING') {
      delete s.trialId;
      delete s.allocationId;
    }
  }
  for (const a of agents) a.lastHeartbeat = now();
  // one utilisation point per minute: mean and peak of the busy slots sampled each tick
  const minute = new Date(Math.floor(Date.now() / 60000) * 60000).toISOString();
  const busy = agents.flatMap((a) => a.slots).filter(busySlot).length;
  const u = utilization.get(minute) ?? { pool: 'default', time: minute, slotsTotal: agents.flatMap((a) => a.slots).length, slotsBusy: 0, slotsBusyMax: 0, samples: 0 };
  u.slotsBusy = (u.slotsBusy * u.samples + busy) / (u.samples + 1);
  u.slotsBusyMax = Math.max(u.slotsBusyMax, busy);
  u.samples++;
  utilization.set(minute, u);
}
const utilization = new Map(); // minute (RFC 3339) -> point

// seed: some history for the list, and one finished sweep with curves
for (let i = 0; i < 5; i++) {
  const e = createExperiment(`name: seed-sweep-${i}\nsearcher:\n  name: grid\n  metric: bleu\n  smaller_is_better: false\n  max_length: {batches: 200}\n  max_concurrent_trials: 2\nhyperparameters:\n  lr: {type: categorical, vals: [0.001, 0.0003]}\n`, true, { owner: ['ada', 'grace', 'alan'][i % 3], start: new Date(Date.now() - (10 - i) * 3600e3).toISOString() });
  for (const t of [...trials.values()].filter((t) => t.experimentId === e.id)) { t.state = 'TRIAL_STATE_RUNNING'; t.startTime = e.startTime; t.hosts = [agents[Number(t.id) % agents.length].id]; while (t.state === 'TRIAL_STATE_RUNNING') step(t, e); }
  e.numCompletedTrials = e.numTrials;
  e.state = ['EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_ERROR', 'EXPERIMENT_STATE_COMPLETED'][i];
  e.endTime = new Date(Date.parse(e.startTime) + 1800e3 * (i + 1)).toISOString();
}
// seed: user code (the Core API): one with its context uploaded, and one a script started by hand
// reports into (unmanaged, no context: its context route answers 404)
const contexts = new Map();
{
  const yaml = (name, entry) => `name: ${name}\nentrypoint: ${entry}\nsearcher: {name: grid, metric: bleu, smaller_is_better: false, max_length: {batches: 100}}\nhyperparameters:\n  lr: {type: categorical, vals: [0.001]}\n`;
  const core = createExperiment(yaml('core-api-demo', '[python3, train.py, --epochs, "3"]'), true, { owner: 'ada', grid: [[0.001, 0.1]] });
  contexts.set(core.id, fixedContext());
  const byHand = createExperiment(yaml('by-hand', 'python3 run.py'), true, { owner: 'grace', grid: [[0.001, 0.2]] });
  byHand.unmanaged = true;
}
// seed: a model registry over the seeded sweeps' last checkpoints (read-only in the dashboard)
const models = {
  models: [
    { id: '1', name: 'seed-sweep', description: 'Best checkpoints of the seeded sweeps', labels: ['nlp', 'demo'], owner: 'ada', workspace: 'Uncategorized', createdAt: now(), updatedAt: now() },
    { id: '2', name: 'empty-model', description: '', labels: [], owner: 'grace', workspace: 'Uncategorized', createdAt: now(), updatedAt: now() },
    { id: '3', name: 'retired', description: 'Archived', labels: [], owner: 'alan', workspace: 'Uncategorized', archived: true, createdAt: now(), updatedAt: now() },
  ],
  versions: [],
  source: (v) => {
    const e = exps.get(Number(v.experimentId)), t = trials.get(Number(v.trialId));
    const latestValidation = metrics.get(Number(v.trialId))?.filter((r) => r.kind === 'validation').at(-1);
    return { checkpoint: ckpts.find((c) => c.uuid === v.checkpointUuid), metric: e?.metric ?? '', smallerIsBetter: e?.smallerIsBetter ?? false, bestValidationMetric: t?.bestValidationMetric, latestValidationMetric: t?.latestValidationMetric, latestValidation };
  },
};
for (const eid of ['1', '3', '5']) {
  const c = ckpts.filter((x) => x.experimentId === eid).at(-1);
  if (!c) continue;
  const version = models.versions.length + 1;
  models.versions.push({ modelId: '1', modelName: 'seed-sweep', version, checkpointUuid: c.uuid, experimentId: c.experimentId, trialId: c.trialId, notes: `from experiment ${eid}`, creator: 'ada', createdAt: now() });
}
for (const m of models.models) {
  const vs = models.versions.filter((v) => v.modelId === m.id);
  m.numVersions = vs.length;
  m.latestVersion = vs.at(-1)?.version ?? 0;
}
// seed: servers (`sf serve start`): one READY, one QUEUED, one FAILED; new ones start over a few
// seconds (QUEUED → STARTING → READY), stopped ones end (STOPPING → STOPPED); and commands
// (`sf cmd run`): one RUNNING (printing now and then), one QUEUED, one COMPLETED, one FAILED;
// killed ones end (STOPPING → STOPPED). Both are tasks (GET /api/v1/tasks).
const servings = fixedServingStore();
const commands = fixedCommandStore();
placeTasks(agents, allTasks({ servings, commands }));
setInterval(tick, 500);
setInterval(() => {
  settleServings(servings);
  settleCommands(commands);
}, 4000);

const send = (res, status, body) => {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(body));
};
const err = (res, status, code, message) => send(res, status, { code, message, details: [] });
const page = (list, q) => {
  const offset = Number(q.get('offset') ?? 0), limit = Number(q.get('limit') ?? 0) || 100;
  return { items: list.slice(offset, offset + limit), pagination: { offset, limit, total: list.length, startIndex: offset, endIndex: Math.min(list.length, offset + limit) } };
};

async function readBody(req) {
  let body = '';
  for await (const c of req) body += c;
  return body;
}

/** The POST /experiments/{id}/<action> handler: the master's state machine, and its policy. */
const experimentAction = (act) => async (req, res, url, params, who) => {
  const e = exps.get(Number(params.id));
  if (!e) return err(res, 404, 5, `experiment ${params.id} not found`);
  if (auth && !auth.mayAct(who.user, { owner: e.owner, workspace: e.workspace ?? '' })) return err(res, 403, 7, `user ${who.user.username} may not ${act} experiment ${e.id}: owned by ${e.owner}`);
  const terminal = ['EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_ERROR'].includes(e.state);
  if (act === 'pause' && e.state === 'EXPERIMENT_STATE_ACTIVE') e.state = 'EXPERIMENT_STATE_PAUSED';
  else if (act === 'activate' && e.state === 'EXPERIMENT_STATE_PAUSED') e.state = 'EXPERIMENT_STATE_ACTIVE';
  else if (act === 'kill' && !terminal) { e.state = 'EXPERIMENT_STATE_CANCELED'; e.endTime = now(); }
  else if (act === 'archive' && terminal) e.archived = true;
  else return err(res, 409, 9, `cannot ${act} an experiment in state ${e.state}`);
  return send(res, 200, { experiment: e });
};

/** An experiment's handler, after the 404 for an unknown id. */
const withExperiment = (fn) => (req, res, url, params, who) => {
  const e = exps.get(Number(params.id));
  if (!e) return err(res, 404, 5, `experiment ${params.id} not found`);
  return fn(req, res, url, e, who);
};
/** A trial's handler, after the 404 for an unknown id. */
const withTrial = (fn) => (req, res, url, params) => {
  const tid = Number(params.id);
  const t = trials.get(tid);
  if (!t) return err(res, 404, 5, `trial ${params.id} not found`);
  return fn(req, res, url, tid, t);
};

// What the stub serves, keyed by the description's own spelling of each route (checked at start).
// The auth routes are e2e/auth-stub.mjs's (with SF_STUB_USERS).
const handlers = {
  'POST /api/v1/experiments': async (req, res, url, params, who) => {
    let j;
    try { j = JSON.parse(await readBody(req)); } catch { return err(res, 400, 3, 'malformed JSON body'); }
    if (!j.configYaml) return send(res, 400, { code: 3, message: 'invalid config', details: [], errors: [{ path: 'configYaml', message: 'required' }] });
    if (who.user.role === 'viewer') return err(res, 403, 7, `user ${who.user.username} (viewer) may not create experiments`);
    return send(res, 200, { experiment: createExperiment(j.configYaml, !!j.activate, { owner: who.user.username }) });
  },
  'GET /api/v1/experiments': (req, res, url) => {
    const q = url.searchParams;
    let list = [...exps.values()];
    const states = q.getAll('states');
    if (states.length) list = list.filter((e) => states.includes(e.state));
    if (q.get('name')) list = list.filter((e) => e.name.includes(q.get('name')));
    if (q.get('includeArchived') !== 'true') list = list.filter((e) => !e.archived);
    const key = { id: (e) => Number(e.id), name: (e) => e.name, state: (e) => e.state, start_time: (e) => e.startTime, end_time: (e) => e.endTime ?? '', best_metric: (e) => e.bestValidationMetric ?? -1e9 }[q.get('sortBy') || 'id'];
    if (!key) return err(res, 400, 3, `unknown sortBy ${q.get('sortBy')}`);
    list.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    if (q.get('descending') === 'true') list.reverse();
    const r = page(list, q);
    // As the master: rows carry their config only when asked (fields=config).
    const withConfig = q.getAll('fields').includes('config');
    return send(res, 200, { experiments: r.items.map((e) => (withConfig ? e : { ...e, configYaml: undefined })), pagination: r.pagination });
  },
  'GET /api/v1/experiments/{id}': withExperiment((req, res, url, e) => send(res, 200, { experiment: e })),
  'GET /api/v1/experiments/{id}/trials': withExperiment((req, res, url, e) => {
    const r = page([...trials.values()].filter((t) => t.experimentId === e.id), url.searchParams);
    return send(res, 200, { trials: r.items, pagination: r.pagination });
  }),
  'GET /api/v1/experiments/{id}/checkpoints': withExperiment((req, res, url, e) => send(res, 200, { checkpoints: ckpts.filter((c) => c.experimentId === e.id) })),
  'POST /api/v1/experiments/{id}/pause': experimentAction('pause'),
  'POST /api/v1/experiments/{id}/activate': experimentAction('activate'),
  'POST /api/v1/experiments/{id}/kill': experimentAction('kill'),
  'POST /api/v1/experiments/{id}/archive': experimentAction('archive'),
  'GET /api/v1/trials/{id}': withTrial((req, res, url, tid, t) => send(res, 200, { trial: t, metricGroups: [...new Set(metrics.get(tid).map((r) => r.kind))].sort() })),
  'GET /api/v1/trials/{id}/metrics': withTrial((req, res, url, tid) => {
    const q = url.searchParams;
    let rows = metrics.get(tid).filter((r) => r.kind === (q.get('kind') || 'training'));
    const maxPoints = Number(q.get('maxPoints') ?? 0);
    if (maxPoints && rows.length > maxPoints) rows = Array.from({ length: maxPoints }, (_, i) => rows[Math.floor((i * (rows.length - 1)) / (maxPoints - 1))]);
    return send(res, 200, { metrics: rows });
  }),
  'GET /api/v1/trials/{id}/logs': withTrial((req, res, url, tid) => {
    const q = url.searchParams;
    const after = Number(q.get('afterId') ?? 0), search = q.get('search') ?? '';
    const match = (l) => Number(l.id) > after && (!search || l.message.includes(search));
    if (q.get('follow') === 'true') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
      for (const l of logs.get(tid).filter(match)) res.write(`data: ${JSON.stringify(l)}\n\n`);
      const set = followers.get(tid) ?? new Set();
      followers.set(tid, set);
      const w = { write: (s) => { const l = JSON.parse(s.slice(6)); if (!search || l.message.includes(search)) res.write(s); } };
      set.add(w);
      req.on('close', () => set.delete(w));
      return;
    }
    const limit = Number(q.get('limit') ?? 0) || 1000;
    return send(res, 200, { logs: logs.get(tid).filter(match).slice(0, limit) });
  }),
  'GET /api/v1/agents': (req, res) => send(res, 200, { agents }),
  'GET /api/v1/resource-pools': (req, res) => {
    const slots = agents.flatMap((a) => a.slots);
    const queued = [...trials.values()].filter((t) => t.state === 'TRIAL_STATE_QUEUED').length;
    return send(res, 200, { resourcePools: [{ name: 'default', scheduler: 'priority', agents: agents.length, totalSlots: slots.length, usedSlots: slots.filter(busySlot).length, runningTrials: slots.filter((s) => s.trialId).length, queuedTrials: queued, queuedSlots: queued }] });
  },
  'GET /api/v1/cluster/utilization': (req, res, url) => {
    const since = Number(url.searchParams.get('since') ?? 0) * 1000;
    return send(res, 200, { points: [...utilization.values()].filter((u) => Date.parse(u.time) >= since) });
  },
  ...modelHandlers(models, { send, err }),
  ...contextHandlers(contexts, { send, err, exists: (id) => exps.has(Number(id)) }),
  ...servingHandlers(servings, {
    send,
    err,
    mayStop: (who, sv) => !auth || auth.mayAct(who.user, { owner: sv.owner, workspace: sv.workspace ?? '' }),
    resolve: (model, version) => {
      const m = models.models.find((x) => x.name === model || x.id === model);
      if (!m) return `model "${model}" does not exist`;
      const vs = models.versions.filter((v) => v.modelId === m.id);
      const v = version ? vs.find((x) => x.version === version) : vs.at(-1);
      if (!v) return `model "${m.name}" has no version ${version || '(none registered)'}`;
      return { modelName: m.name, modelVersion: v.version, checkpointUuid: v.checkpointUuid, workspace: m.workspace };
    },
  }),
  ...taskHandlers({ servings, commands, trials: () => [...trials.values()].map((t) => trialAsTask(t, exps.get(Number(t.experimentId)))) }, {
    send,
    err,
    mayKill: (who, t) => !auth || auth.mayAct(who.user, { owner: t.owner, workspace: t.workspace ?? '' }),
  }),
  'GET /api/v1/master': (req, res) => {
    const slots = agents.flatMap((a) => a.slots);
    return send(res, 200, { version: '0.1.0-stub', masterId: 'stub', clusterName: 'dev', connectedAgents: agents.length, totalSlots: slots.length, usedSlots: slots.filter(busySlot).length });
  },
};
// Fails loudly (and the stub does not start) when a handler's route is not in the description.
const router = startOrExit('routes', () => createRouter(loadOperations(), handlers, 'dev/stub-master.mjs'));

async function api(req, res, url) {
  const route = router.match(req.method, url.pathname);
  if (route.status === 404) return err(res, 404, 5, `no route ${req.method} ${url.pathname}`);
  if (route.status === 405) {
    res.setHeader('Allow', route.allow);
    return err(res, 405, 3, `${req.method} is not allowed on ${url.pathname}; use ${route.allow}`);
  }
  const who = auth ? await auth.handle(req, res, url) : { user: { username: 'root', role: 'admin', workspaces: [] } };
  if (!who) return; // answered: an auth route, or 401/403
  if (!route.handler) return err(res, 404, 5, `no route ${req.method} ${url.pathname}`); // described, not stubbed
  return route.handler(req, res, url, route.params, who);
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png', '.json': 'application/json' };
async function statics(req, res, url) {
  let rel = normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, '');
  let file = join(dist, rel);
  let st = await stat(file).catch(() => null);
  if (!st || st.isDirectory()) {
    // SPA fallback: unknown non-asset paths get index.html
    if (st?.isDirectory() || !extname(rel)) { file = join(dist, 'index.html'); st = await stat(file).catch(() => null); }
  }
  if (!st) { res.writeHead(404, { 'Content-Type': 'text/plain' }); return res.end('not found'); }
  const immutable = rel.startsWith('/assets/');
  res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Cache-Control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache' });
  res.end(await readFile(file));
}

createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  const h = url.pathname.startsWith('/api/v1') ? api(req, res, url) : statics(req, res, url);
  h.catch((e) => err(res, 500, 13, String(e)));
}).listen(port, '127.0.0.1', () => console.log(`stub master on http://127.0.0.1:${port}`));
