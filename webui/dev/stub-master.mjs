#!/usr/bin/env node
// DEV ONLY — not used by any test. An in-memory stand-in for sf-master's REST API (the contract in
// proto/steadfast/v1/api.proto, protobuf JSON mapping) plus static serving of dist/ with the SPA
// fallback, so the dashboard can be looked at and the e2e script dry-run before the real master
// exists. Trials "train" on a timer. Usage: node dev/stub-master.mjs [port] (default 8080).
// SF_STUB_USERS="alice:pw:admin,bob:pw:user,vic:pw:viewer" turns authentication on (e2e/auth-stub.mjs:
// login page, cookie sessions, Bearer tokens, tokens page); experiments then belong to their creator
// and actions follow the master's policy (403).
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { createAuthStub } from '../e2e/auth-stub.mjs';

const auth = process.env.SF_STUB_USERS
  ? createAuthStub({
      users: process.env.SF_STUB_USERS.split(',').map((u) => {
        const [username, password, role = 'user'] = u.split(':');
        return { username, password, role };
      }),
    })
  : undefined;

const port = Number(process.argv[2] ?? process.env.PORT ?? 8080);
const dist = join(import.meta.dirname, '..', 'dist');
const now = () => new Date().toISOString();
let nextExp = 1, nextTrial = 1, nextLog = 1;
const exps = new Map(), trials = new Map(), metrics = new Map(), logs = new Map(), ckpts = [];
const followers = new Map(); // trialId -> Set(res)
const agents = [0, 1].map((i) => ({ id: `agent-${i}`, hostname: `node${i}`, resourcePool: 'default', connected: true, registeredTime: now(), version: '0.1.0', address: `127.0.0.1:${9000 + i}`, slots: [{ id: 'cpu0', type: 'SLOT_TYPE_CPU', device: 'CPU', enabled: true }] }));

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
  metrics.get(tid).push({ trialId: t.id, batches: String(b), kind: 'training', values: { loss, tokens_per_second: 5000 + Math.random() * 500, loss_scale: 128 * 2 ** Math.floor(b / 100) }, time: now() });
  addLog(tid, `step ${b} loss=${loss.toFixed(4)}`);
  if (b % 50 === 0) {
    const bleu = 30 * (1 - Math.exp(-b * lr * 5)) - dr * 10;
    metrics.get(tid).push({ trialId: t.id, batches: String(b), kind: 'validation', values: { validation_loss: loss + 0.2, bleu }, time: now() });
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
  const free = agents.flatMap((a) => a.slots.filter((s) => !s.trialId));
  for (const e of exps.values()) {
    const id = Number(e.id);
    const ts = [...trials.values()].filter((t) => t.experimentId === e.id);
    if (e.state === 'EXPERIMENT_STATE_ACTIVE') {
      for (const t of ts) {
        if (t.state === 'TRIAL_STATE_PAUSED') t.state = 'TRIAL_STATE_QUEUED';
        if (t.state === 'TRIAL_STATE_QUEUED' && free.length) {
          const s = free.shift();
          s.trialId = t.id;
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
    if (t && t.state !== 'TRIAL_STATE_RUNNING') delete s.trialId;
  }
  for (const a of agents) a.lastHeartbeat = now();
  // one utilisation point per minute: mean and peak of the busy slots sampled each tick
  const minute = new Date(Math.floor(Date.now() / 60000) * 60000).toISOString();
  const busy = agents.flatMap((a) => a.slots).filter((s) => s.trialId).length;
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
  for (const t of [...trials.values()].filter((t) => t.experimentId === e.id)) { t.state = 'TRIAL_STATE_RUNNING'; t.startTime = e.startTime; while (t.state === 'TRIAL_STATE_RUNNING') step(t, e); }
  e.numCompletedTrials = e.numTrials;
  e.state = ['EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_ERROR', 'EXPERIMENT_STATE_COMPLETED'][i];
  e.endTime = new Date(Date.parse(e.startTime) + 1800e3 * (i + 1)).toISOString();
}
setInterval(tick, 500);

const send = (res, status, body) => {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(body));
};
const err = (res, status, code, message) => send(res, status, { code, message, details: [] });
const page = (list, q) => {
  const offset = Number(q.get('offset') ?? 0), limit = Number(q.get('limit') ?? 0) || 100;
  return { items: list.slice(offset, offset + limit), pagination: { offset, limit, total: list.length, startIndex: offset, endIndex: Math.min(list.length, offset + limit) } };
};

async function api(req, res, url) {
  const who = auth ? await auth.handle(req, res, url) : { user: { username: 'root', role: 'admin', workspaces: [] } };
  if (!who) return; // answered: an auth route, or 401/403
  const p = url.pathname.replace(/^\/api\/v1/, '');
  const q = url.searchParams;
  let m;
  if (req.method === 'POST' && p === '/experiments') {
    let body = '';
    for await (const c of req) body += c;
    let j;
    try { j = JSON.parse(body); } catch { return err(res, 400, 3, 'malformed JSON body'); }
    if (!j.configYaml) return send(res, 400, { code: 3, message: 'invalid config', details: [], errors: [{ path: 'configYaml', message: 'required' }] });
    if (who.user.role === 'viewer') return err(res, 403, 7, `user ${who.user.username} (viewer) may not create experiments`);
    return send(res, 200, { experiment: createExperiment(j.configYaml, !!j.activate, { owner: who.user.username }) });
  }
  if (req.method === 'GET' && p === '/experiments') {
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
    return send(res, 200, { experiments: r.items, pagination: r.pagination });
  }
  if ((m = p.match(/^\/experiments\/(\d+)(?:\/(\w+))?$/))) {
    const e = exps.get(Number(m[1]));
    if (!e) return err(res, 404, 5, `experiment ${m[1]} not found`);
    const act = m[2];
    if (req.method === 'GET' && !act) return send(res, 200, { experiment: e });
    if (req.method === 'GET' && act === 'trials') {
      const r = page([...trials.values()].filter((t) => t.experimentId === e.id), q);
      return send(res, 200, { trials: r.items, pagination: r.pagination });
    }
    if (req.method === 'GET' && act === 'checkpoints') return send(res, 200, { checkpoints: ckpts.filter((c) => c.experimentId === e.id) });
    if (req.method === 'POST') {
      if (auth && !auth.mayAct(who.user, { owner: e.owner, workspace: e.workspace ?? '' })) return err(res, 403, 7, `user ${who.user.username} may not ${act} experiment ${e.id}: owned by ${e.owner}`);
      const terminal = ['EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_ERROR'].includes(e.state);
      if (act === 'pause' && e.state === 'EXPERIMENT_STATE_ACTIVE') e.state = 'EXPERIMENT_STATE_PAUSED';
      else if (act === 'activate' && e.state === 'EXPERIMENT_STATE_PAUSED') e.state = 'EXPERIMENT_STATE_ACTIVE';
      else if (act === 'kill' && !terminal) { e.state = 'EXPERIMENT_STATE_CANCELED'; e.endTime = now(); }
      else if (act === 'archive' && terminal) e.archived = true;
      else return err(res, 409, 9, `cannot ${act} an experiment in state ${e.state}`);
      return send(res, 200, { experiment: e });
    }
  }
  if ((m = p.match(/^\/trials\/(\d+)(?:\/(\w+))?$/)) && req.method === 'GET') {
    const tid = Number(m[1]);
    const t = trials.get(tid);
    if (!t) return err(res, 404, 5, `trial ${m[1]} not found`);
    if (!m[2]) return send(res, 200, { trial: t });
    if (m[2] === 'metrics') {
      let rows = metrics.get(tid).filter((r) => r.kind === (q.get('kind') || 'training'));
      const maxPoints = Number(q.get('maxPoints') ?? 0);
      if (maxPoints && rows.length > maxPoints) rows = Array.from({ length: maxPoints }, (_, i) => rows[Math.floor((i * (rows.length - 1)) / (maxPoints - 1))]);
      return send(res, 200, { metrics: rows });
    }
    if (m[2] === 'logs') {
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
    }
  }
  if (req.method === 'GET' && p === '/agents') return send(res, 200, { agents });
  if (req.method === 'GET' && p === '/resource-pools') {
    const slots = agents.flatMap((a) => a.slots);
    const queued = [...trials.values()].filter((t) => t.state === 'TRIAL_STATE_QUEUED').length;
    return send(res, 200, { resourcePools: [{ name: 'default', scheduler: 'priority', agents: agents.length, totalSlots: slots.length, usedSlots: slots.filter((s) => s.trialId).length, runningTrials: slots.filter((s) => s.trialId).length, queuedTrials: queued, queuedSlots: queued }] });
  }
  if (req.method === 'GET' && p === '/cluster/utilization') {
    const since = Number(q.get('since') ?? 0) * 1000;
    return send(res, 200, { points: [...utilization.values()].filter((u) => Date.parse(u.time) >= since) });
  }
  if (req.method === 'GET' && p === '/master') {
    const slots = agents.flatMap((a) => a.slots);
    return send(res, 200, { version: '0.1.0-stub', masterId: 'stub', clusterName: 'dev', connectedAgents: agents.length, totalSlots: slots.length, usedSlots: slots.filter((s) => s.trialId).length });
  }
  return err(res, 404, 5, `no route ${req.method} ${url.pathname}`);
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
