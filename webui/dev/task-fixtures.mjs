// Tasks (docs/tasks.md; proto/steadfast/v1/tasks.proto): commands (`sf cmd run`) and a notebook
// (`sf notebook start`) as fixtures, experiments' trials as ListTasks lists them (kind TRIAL, the
// trial's own id), and the task routes over them and over the servers of serving-fixtures.mjs (a
// server is a task: the same id, its own states mapped to the task's), for
// the in-memory stand-ins of the master: the dev stub (dev/stub-master.mjs) and the offline
// browser test (e2e/offline.e2e.mjs). The routes are spelled as the API description spells them,
// so createRouter (dev/api-routes.mjs) refuses them if the description drops one. The wire JSON
// is the master's: int64 ids as strings, proto3 defaults left out.

const ENDED = ['STOPPED', 'COMPLETED', 'FAILED'];
/** How many log lines a store keeps: the dev stub runs for days. */
const KEEP_LOGS = 20000;

/** The allocation the master places on the slot of task `id`'s rank 0 (a command or a server):
 *  Slot.allocationId in the agent listing, with no trialId. */
export const taskAllocationId = (id) => `task${id}-r0-a1`;

/** Appends one line to task `id`'s logs in `store` (a commands or a servings store, each
 *  { logs: [wire LogLine], nextLogId }), as the agent it runs on reports it (rank 0). Each line
 *  carries `ofTask` (its task's id) for the handlers, which leave it out of their answers. */
export function addTaskLog(store, id, stream, message, time = new Date().toISOString(), agentId = '') {
  store.logs ??= [];
  store.nextLogId ??= 1;
  store.logs.push({ id: String(store.nextLogId++), rank: 0, stream, message, time, agentId, taskId: `${taskAllocationId(id)}.0`, ofTask: String(id) });
  if (store.logs.length > KEEP_LOGS) store.logs.splice(0, store.logs.length - KEEP_LOGS);
}

/** A store: { commands: [wire Task], logs: [wire LogLine], nextLogId }. Four commands and a
 *  notebook (tasks of kinds other than SERVER) beside the servers of fixedServingStore() (ids 41,
 *  52, 53; new ones from 60): 44 COMPLETED (exit 0, alice's), 47 FAILED (exit 3, bob's), 54
 *  RUNNING on agent-1 with log lines (alice's, in workspace nlp, a long program line), 55 QUEUED
 *  with why it waits (bob's, 4 slots of pool gpu), and notebook 56 RUNNING on agent-1 (alice's, its
 *  Jupyter at /proxy/56/; it holds no slot of fixedTaskAgents()). */
export function fixedCommandStore() {
  const t = (h, m = 0) => new Date(Date.UTC(2026, 10, 26, h, m)).toISOString();
  const store = {
    commands: [
      { id: '44', kind: 'COMMAND', state: 'COMPLETED', owner: 'alice', workspace: 'nlp', entrypoint: ['python3', 'evaluate.py', '--split', 'test'], slots: 1, resourcePool: 'default', priority: 42, agentId: 'agent-1', createdAt: t(9), endedAt: t(9, 12), exitCode: 0, allocationId: taskAllocationId(44) },
      { id: '47', kind: 'COMMAND', state: 'FAILED', owner: 'bob', workspace: 'Uncategorized', entrypoint: ['./preprocess.sh', '--shards', '64'], slots: 2, resourcePool: 'default', priority: 42, agentId: 'agent-1', createdAt: t(9, 30), endedAt: t(9, 31), error: 'rank 0 exited with status 3', exitCode: 3, allocationId: taskAllocationId(47) },
      { id: '54', kind: 'COMMAND', state: 'RUNNING', owner: 'alice', workspace: 'nlp', entrypoint: ['python3', '-m', 'sacrebleu', '/data/wmt14/newstest2014.en', '--input', '/data/out/wmt-de-en-v3.newstest2014.hyp', '--tokenize', '13a', '--metrics', 'bleu chrf'], slots: 1, resourcePool: 'default', priority: 42, agentId: 'agent-1', createdAt: t(11, 30), allocationId: taskAllocationId(54) },
      { id: '55', kind: 'COMMAND', state: 'QUEUED', owner: 'bob', workspace: 'Uncategorized', entrypoint: ['./train_tokenizer.sh'], slots: 4, resourcePool: 'gpu', priority: 42, createdAt: t(12), pendingReason: 'needs 4 slots of pool gpu; no agent of the pool has that many free' },
      { id: '56', kind: 'NOTEBOOK', state: 'RUNNING', owner: 'alice', workspace: 'nlp', entrypoint: ['/usr/bin/python3', '-m', 'steadfast.notebook'], slots: 1, resourcePool: 'default', priority: 42, agentId: 'agent-1', createdAt: t(12, 30), allocationId: taskAllocationId(56) },
    ],
    nextLogId: 1,
    logs: [],
  };
  addTaskLog(store, '44', 'stdout', 'loading checkpoint 1f3c0000-0000-4000-8000-000000000003', t(9, 1), 'agent-1');
  addTaskLog(store, '44', 'stdout', 'BLEU 34.1', t(9, 11), 'agent-1');
  addTaskLog(store, '47', 'stdout', 'sharding /data/wmt14 into 64 shards', t(9, 30), 'agent-1');
  addTaskLog(store, '47', 'stderr', 'preprocess.sh: /data/wmt14/train.de: No such file or directory', t(9, 31), 'agent-1');
  addTaskLog(store, '54', 'stdout', 'sacrebleu: reading /data/wmt14/newstest2014.en', t(11, 31), 'agent-1');
  addTaskLog(store, '54', 'stdout', 'sacrebleu: scored 1000/3003 sentences', t(11, 32), 'agent-1');
  addTaskLog(store, '54', 'stderr', 'sacrebleu: warning: hypothesis 812 is empty', t(11, 33), 'agent-1');
  addTaskLog(store, '56', 'stdout', 'steadfast.notebook: Jupyter answers at http://10.0.0.11:8888/proxy/56/', t(12, 31), 'agent-1');
  return store;
}

/** A server (wire Serving) as GET /api/v1/tasks lists it: kind SERVER, RUNNING where the server
 *  is STARTING or READY, and the program the master runs for it. */
export function servingAsTask(s) {
  const state = s.state === 'STARTING' || s.state === 'READY' ? 'RUNNING' : s.state;
  const task = {
    id: s.id,
    kind: 'SERVER',
    state,
    owner: s.owner,
    workspace: s.workspace,
    entrypoint: ['sf-serve', '--cluster-task', '--checkpoint', `/checkpoints/${s.checkpointUuid ?? ''}`, '--bind', '127.0.0.1', '--port', '0', '--model-label', s.modelName ?? '', '--version-label', String(s.modelVersion ?? 0)],
    slots: s.slots,
    resourcePool: s.resourcePool || 'default',
    priority: 42,
    agentId: s.agentId,
    createdAt: s.createdAt,
    endedAt: s.endedAt,
    error: s.error,
    restarts: s.restarts,
    allocationId: s.agentId ? taskAllocationId(s.id) : undefined,
    pendingReason: state === 'QUEUED' ? `needs ${s.slots ?? 1} slot${s.slots === 1 ? '' : 's'} of pool ${s.resourcePool || 'default'}; none is free` : undefined,
  };
  for (const k of Object.keys(task)) if (task[k] === undefined || task[k] === '' || task[k] === 0) delete task[k]; // proto3
  return task;
}

/** Every task of both stores, as GET /api/v1/tasks lists them (by id). Tasks of their own only:
 *  the trials a store's `trials` adds to the list are no tasks of the task routes. */
export function allTasks({ servings, commands }) {
  return [...(servings?.servings ?? []).map(servingAsTask), ...(commands?.commands ?? [])].sort((a, b) => Number(a.id) - Number(b.id));
}

/** A trial's state in the tasks' words, as ListTasks says it (docs/tasks.md, "Every task"). */
const TRIAL_TASK_STATES = {
  TRIAL_STATE_QUEUED: 'QUEUED',
  TRIAL_STATE_RUNNING: 'RUNNING',
  TRIAL_STATE_PAUSED: 'PAUSED',
  TRIAL_STATE_STOPPING_COMPLETED: 'STOPPING',
  TRIAL_STATE_STOPPING_CANCELED: 'STOPPING',
  TRIAL_STATE_STOPPING_ERROR: 'STOPPING',
  TRIAL_STATE_COMPLETED: 'COMPLETED',
  TRIAL_STATE_CANCELED: 'STOPPED',
  TRIAL_STATE_ERROR: 'FAILED',
};

/** Trial `t` (a wire Trial) of experiment `e` (a wire Experiment) as GET /api/v1/tasks lists it:
 *  kind TRIAL, `id` the trial's, `experimentId`, the experiment's owner and entrypoint (the
 *  native trainer's, sf-trainer, when its config names none), where it runs (`hosts`). */
export function trialAsTask(t, e) {
  const live = t.state === 'TRIAL_STATE_RUNNING' || String(t.state).startsWith('TRIAL_STATE_STOPPING');
  // the config's `entrypoint:` as a shell line or a YAML flow list ([python3, train.py])
  const raw = /^entrypoint:\s*(.+)$/m.exec(e?.configYaml ?? '')?.[1].trim();
  const entrypoint = !raw ? ['sf-trainer'] : raw.startsWith('[') ? raw.slice(1, -1).split(',').map((a) => a.trim().replace(/^["']|["']$/g, '')) : raw.split(/\s+/);
  const task = {
    id: t.id,
    kind: 'TRIAL',
    state: TRIAL_TASK_STATES[t.state] ?? t.state,
    owner: e?.owner,
    workspace: e?.workspace,
    entrypoint,
    slots: 1,
    resourcePool: 'default',
    priority: e?.priority,
    agentId: live ? t.hosts?.[0] : undefined,
    createdAt: t.startTime ?? e?.startTime,
    endedAt: t.endTime,
    allocationId: t.hosts?.length ? `t${t.id}-r0-a1` : undefined,
    pendingReason: t.state === 'TRIAL_STATE_QUEUED' ? 'waiting for a free slot of pool default' : undefined,
    experimentId: t.experimentId,
  };
  for (const k of Object.keys(task)) if (task[k] === undefined || task[k] === '' || task[k] === 0) delete task[k]; // proto3
  return task;
}

/** A store of experiment 17's trials as ListTasks lists them beside fixedCommandStore()'s tasks:
 *  { trials: [wire Task of kind TRIAL], logs: [wire LogLine with `ofTrial`] }. Trial 54 RUNNING on
 *  agent-1 (carol's, 2 slots; it shares its id with command 54: trials are numbered apart from
 *  tasks) with log lines, and trial 53 PAUSED (sharing its id with server 53). Served by
 *  taskHandlers (the list, with `trials`) and trialLogHandlers (their logs). */
export function fixedTrialStore() {
  const t = (h, m = 0) => new Date(Date.UTC(2026, 10, 26, h, m)).toISOString();
  const trial = (id, state, more) => ({ id, kind: 'TRIAL', state, owner: 'carol', workspace: 'nlp', entrypoint: ['sf-trainer'], slots: 2, resourcePool: 'default', priority: 42, createdAt: t(11, 45), experimentId: '17', ...more });
  const line = (id, trialId, message, time) => ({ id: String(id), trialId, rank: 0, stream: 'stdout', message, time, agentId: 'agent-1', ofTrial: trialId });
  return {
    trials: [trial('54', 'RUNNING', { agentId: 'agent-1', allocationId: 't54-r0-a1' }), trial('53', 'PAUSED', { allocationId: 't53-r0-a1' })],
    logs: [line(1, '54', 'sf-trainer: step 100 loss=3.2104', t(11, 50)), line(2, '54', 'sf-trainer: step 200 loss=2.9871', t(11, 55)), line(3, '53', 'sf-trainer: paused at step 300', t(11, 58))],
  };
}

/** GET /api/v1/trials/{id}/logs over a fixedTrialStore(), for stubs that serve no trials of their
 *  own (the dev stub has its own): a trial's lines after `afterId`, 404 for another id. */
export function trialLogHandlers(store, { send, err }) {
  return {
    'GET /api/v1/trials/{id}/logs': (req, res, url, params) => {
      if (!store.trials.some((t) => t.id === String(params.id))) return err(res, 404, 5, `trial ${params.id} not found`);
      const q = url.searchParams;
      const after = Number(q.get('afterId') ?? q.get('after_id') ?? 0);
      const limit = Math.min(Number(q.get('limit') ?? 0) || 1000, 100000);
      const lines = store.logs.filter((l) => l.ofTrial === String(params.id) && Number(l.id) > after);
      return send(res, 200, { logs: lines.slice(0, limit).map(({ ofTrial, ...l }) => l) });
    },
  };
}

/** Agents as GET /api/v1/agents lists them beside fixedServingStore() and fixedCommandStore():
 *  agent-1 (node1) with four GPUs: cuda0 held by server 52 (allocationId task52-r0-a1, trialId
 *  left out as proto3 does with 0), cuda1 by trial 7's rank 0, cuda2 free, cuda3 by command 54. */
export function fixedTaskAgents() {
  const gpu = (id, uuid, more) => ({ id, type: 'SLOT_TYPE_CUDA', device: 'NVIDIA H100 80GB HBM3', enabled: true, uuid, memoryTotalBytes: '85899345920', ...more });
  return [
    {
      id: 'agent-1', hostname: 'node1', resourcePool: 'default', connected: true, version: '0.1.0', address: '10.0.0.11:9001',
      registeredTime: '2026-11-26T09:00:00Z', lastHeartbeat: new Date().toISOString(),
      slots: [
        gpu('cuda0', 'GPU-0000', { allocationId: taskAllocationId(52), usage: { utilizationPercent: 35, memoryUsedBytes: '21474836480' } }),
        gpu('cuda1', 'GPU-0001', { trialId: '7', allocationId: 't7-r0-a1' }),
        gpu('cuda2', 'GPU-0002'),
        gpu('cuda3', 'GPU-0003', { allocationId: taskAllocationId(54), usage: { utilizationPercent: 80, memoryUsedBytes: '4294967296' } }),
      ],
    },
  ];
}

/** Keeps the agents' slots in step with the tasks (wire Tasks, allTasks()), for the dev stub's
 *  timer: a placed task that runs (RUNNING, STOPPING) and holds no slot takes a free one on its
 *  agent, when there is one; a task that ended, or is gone, frees its slot. */
export function placeTasks(agents, tasks) {
  const slots = agents.flatMap((a) => a.slots.map((s) => ({ agent: a, s })));
  const live = new Set(tasks.filter((t) => t.agentId && (t.state === 'RUNNING' || t.state === 'STOPPING')).map((t) => taskAllocationId(t.id)));
  for (const { s } of slots) if (/^task\d+-/.test(s.allocationId ?? '') && !live.has(s.allocationId)) delete s.allocationId;
  for (const t of tasks) {
    const alloc = taskAllocationId(t.id);
    if (!live.has(alloc) || slots.some(({ s }) => s.allocationId === alloc)) continue;
    const free = slots.find(({ agent, s }) => agent.id === t.agentId && s.enabled && !s.trialId && !s.allocationId);
    if (free) free.s.allocationId = alloc;
  }
}

/**
 * The task routes over `stores` ({ servings: a fixedServingStore(), commands: a
 * fixedCommandStore(), and optionally trials: a function answering the trials to list, as wire
 * Tasks of kind TRIAL }); `send(res, status, body)` and `err(res, status, code, msg)` as the stub
 * writes answers. The list has the trials too (`kind=TRIAL` only them); one task, its kill and its
 * logs take no trial's id, as the master's routes do not. Options:
 *   mayKill(who, task)  false → 403, as the master's policy says (default: anyone may).
 * Kill moves a running command to STOPPING (settleCommands ends it), a queued one to STOPPED at
 * once, a server to STOPPING (as its Stop does); an ended task is answered as it is, as the
 * master does. A task's logs are its store's lines with `ofTask` its id.
 */
export function taskHandlers(stores, { send, err, mayKill = () => true }) {
  const find = (id) => allTasks(stores).find((t) => t.id === String(id));
  const notFound = (res, id) => err(res, 404, 5, `no task ${id} (sf task list shows them)`);
  return {
    'GET /api/v1/tasks': (req, res, url) => {
      const q = url.searchParams;
      const kind = q.get('kind') ?? '';
      if (kind && !['SERVER', 'COMMAND', 'NOTEBOOK', 'SHELL', 'TRIAL'].includes(kind)) return err(res, 400, 3, `kind: "${kind.slice(0, 32)}" must be SERVER, COMMAND, NOTEBOOK, SHELL or TRIAL`);
      const ended = (q.get('includeEnded') ?? q.get('include_ended')) === 'true';
      const listed = [...allTasks(stores), ...(stores.trials?.() ?? [])];
      return send(res, 200, { tasks: listed.filter((t) => (!kind || t.kind === kind) && (ended || !ENDED.includes(t.state))) });
    },
    'GET /api/v1/tasks/{id}': (req, res, url, params) => {
      const t = find(params.id);
      return t ? send(res, 200, { task: t }) : notFound(res, params.id);
    },
    'POST /api/v1/tasks/{id}/kill': (req, res, url, params, who) => {
      const t = find(params.id);
      if (!t) return notFound(res, params.id);
      if (!mayKill(who, t)) return err(res, 403, 7, `user ${who?.user?.username} may not kill task ${t.id}: it belongs to ${t.owner}`);
      if (!ENDED.includes(t.state)) {
        const now = new Date().toISOString();
        const server = stores.servings?.servings.find((s) => s.id === t.id);
        const command = stores.commands?.commands.find((c) => c.id === t.id);
        if (server && server.state !== 'STOPPING') {
          server.state = 'STOPPING';
          delete server.url;
        } else if (command?.state === 'QUEUED') {
          Object.assign(command, { state: 'STOPPED', endedAt: now });
          delete command.pendingReason;
        } else if (command && command.state !== 'STOPPING') command.state = 'STOPPING';
      }
      return send(res, 200, { task: find(t.id) });
    },
    'GET /api/v1/tasks/{id}/logs': (req, res, url, params) => {
      const t = find(params.id);
      if (!t) return notFound(res, params.id);
      const q = url.searchParams;
      const after = Number(q.get('afterId') ?? q.get('after_id') ?? 0);
      const limit = Math.min(Number(q.get('limit') ?? 0) || 10000, 100000);
      const search = q.get('search') ?? '';
      const store = t.kind === 'SERVER' ? stores.servings : stores.commands;
      const lines = (store?.logs ?? []).filter((l) => l.ofTask === t.id && Number(l.id) > after && (!search || l.message.includes(search)));
      return send(res, 200, { logs: lines.slice(0, limit).map(({ ofTask, ...l }) => l) });
    },
  };
}

/** One step of the commands' (and the notebook's) lives, for the dev stub's timer: STOPPING →
 *  STOPPED (killed: exit 143, SIGTERM), each with a log line; a RUNNING command reports progress
 *  now and then. A queued command stays queued (its pool has no agent). */
export function settleCommands(store, now = new Date().toISOString()) {
  for (const c of store.commands) {
    if (c.state === 'STOPPING') {
      Object.assign(c, { state: 'STOPPED', endedAt: now, exitCode: 143 });
      addTaskLog(store, c.id, 'stderr', 'killed (SIGTERM)', now, c.agentId ?? '');
    } else if (c.state === 'RUNNING' && c.kind === 'COMMAND') {
      addTaskLog(store, c.id, 'stdout', `sacrebleu: scored ${Math.min(3003, 1000 + 100 * (store.nextLogId % 20))}/3003 sentences`, now, c.agentId ?? '');
    }
  }
}
