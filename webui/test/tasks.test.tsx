// Every task (docs/tasks.md): commands (`sf cmd run`), servers, notebooks and experiments' trials
// (kind TRIAL, numbered apart from tasks), as the cluster page's Tasks card shows them. The client's task calls and normaliser, the card's rules (what may be
// killed, the program line, the order), who may kill a task, and the card itself: each task with
// its kind, state (a queued one's pending reason), exit code, program, slots, agent, owner and age;
// Kill behind a confirmation (one POST /tasks/{id}/kill), disabled with the reason where the
// master's policy says no; a task's logs under its row from GET /tasks/{id}/logs, polled while it
// runs; the empty state, and a master without the task routes. A trial sharing its id with a
// command: its own row (`t54`, linking to its trial page, its experiment linked), no Kill (its
// experiment's page instead), its logs from GET /trials/{id}/logs, never the task route.
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiClient, normTask } from '../src/api/client';
import type { Whoami } from '../src/api/types';
import { formatDateTime } from '../src/lib/format';
import { canActOnTask } from '../src/lib/permissions';
import { parseHash } from '../src/lib/router';
import { SessionProvider } from '../src/lib/session';
import { ClusterPage } from '../src/pages/ClusterPage';
import { taskLogsSource, taskNoun } from '../src/pages/TaskLogs';
import { canBeKilled, entrypointText, experimentHref, revealTask, sortTasks, taskHref, taskIdText, taskKey, truncate } from '../src/pages/Tasks';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

// As the master lists them (GET /api/v1/tasks?include_ended=true, by id): int64 as strings, proto3
// defaults left out, exitCode present (0 too) once a command exited.
const LONG = ['python3', '-m', 'sacrebleu', '/data/wmt14/newstest2014.en', '--input', '/data/out/wmt-de-en-v3.newstest2014.hyp', '--metrics', 'bleu chrf'];
const COMPLETED = { id: '44', kind: 'COMMAND', state: 'COMPLETED', owner: 'alice', workspace: 'nlp', entrypoint: ['python3', 'evaluate.py', '--split', 'test'], slots: 1, resourcePool: 'default', priority: 42, agentId: 'agent-1', createdAt: '2026-11-26T09:00:00Z', endedAt: '2026-11-26T09:12:00Z', exitCode: 0, allocationId: 'task44-r0-a1' };
const FAILED = { id: '47', kind: 'COMMAND', state: 'FAILED', owner: 'bob', workspace: 'Uncategorized', entrypoint: ['./preprocess.sh'], slots: 2, priority: 42, agentId: 'agent-1', createdAt: '2026-11-26T09:30:00Z', endedAt: '2026-11-26T09:31:00Z', error: 'rank 0 exited with status 3', exitCode: 3 };
const SERVER = { id: '52', kind: 'SERVER', state: 'RUNNING', owner: 'alice', workspace: 'nlp', entrypoint: ['sf-serve', '--cluster-task'], slots: 1, priority: 42, agentId: 'agent-1', createdAt: '2026-11-26T10:00:00Z', allocationId: 'task52-r0-a1' };
const RUNNING = { id: '54', kind: 'COMMAND', state: 'RUNNING', owner: 'alice', workspace: 'nlp', entrypoint: LONG, slots: 1, priority: 42, agentId: 'agent-1', createdAt: '2026-11-26T11:30:00Z', allocationId: 'task54-r0-a1' };
const QUEUED = { id: '55', kind: 'COMMAND', state: 'QUEUED', owner: 'bob', workspace: 'Uncategorized', entrypoint: ['./train_tokenizer.sh'], slots: 4, resourcePool: 'gpu', priority: 42, createdAt: '2026-11-26T12:00:00Z', pendingReason: 'needs 4 slots of pool gpu; no agent of the pool has that many free' };
const ALL = () => [COMPLETED, FAILED, SERVER, RUNNING, QUEUED].map((t) => ({ ...t }));
// Experiment 17's trials as ListTasks lists them beside the tasks: trial 54 shares its id with
// command 54 (trials are numbered apart from tasks); trial 55 is paused, trial 50 completed.
const TRIAL = { id: '54', kind: 'TRIAL', state: 'RUNNING', owner: 'carol', workspace: 'nlp', entrypoint: ['sf-trainer'], slots: 2, resourcePool: 'default', priority: 42, agentId: 'agent-2', createdAt: '2026-11-26T11:45:00Z', allocationId: 't54-r0-a1', experimentId: '17' };
const PAUSED = { ...TRIAL, id: '55', state: 'PAUSED', agentId: undefined, allocationId: 't55-r0-a1', createdAt: '2026-11-26T11:44:00Z' };
const TRIAL_DONE = { ...TRIAL, id: '50', state: 'COMPLETED', agentId: 'agent-2', createdAt: '2026-11-26T08:00:00Z', endedAt: '2026-11-26T08:50:00Z', allocationId: 't50-r0-a1' };
const WITH_TRIALS = () => [...ALL(), ...[TRIAL, PAUSED, TRIAL_DONE].map((t) => ({ ...t }))];

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: unknown;
}

type WireLog = { id: string; message: string; rank?: number; stream?: string; taskId?: string };
const logLines = (id: string, n: number, from = 1): WireLog[] =>
  Array.from({ length: n }, (_, i) => ({ id: String(from + i), rank: 0, stream: 'stdout', message: `task ${id} line ${from + i}`, taskId: `task${id}-r0-a1.0` }));

/** A master with these tasks: the list (the ended ones with include_ended), kill (a running task
 *  → STOPPING, a queued one → STOPPED; or `killAnswer`), each task's logs from `logs` and each
 *  trial's from `trialLogs` (a kill or the task logs of an id only a trial has: 404, as the
 *  master answers); the other cluster routes answer empty lists. 'no-route': a master older than
 *  the task routes. */
function stubMaster(tasks: Record<string, unknown>[] | 'no-route', opts: { killAnswer?: Response; logs?: Record<string, WireLog[]>; trialLogs?: Record<string, WireLog[]> } = {}) {
  const calls: Call[] = [];
  vi.stubGlobal('fetch', async (url: string, init: RequestInit = {}) => {
    const method = init.method ?? 'GET';
    calls.push({ url, method, headers: { ...(init.headers as Record<string, string>) }, body: init.body ? JSON.parse(String(init.body)) : undefined });
    const trialLogs = url.match(/^\/api\/v1\/trials\/(\d+)\/logs(\?.*)?$/);
    if (method === 'GET' && trialLogs) {
      const after = Number(new URLSearchParams(trialLogs[2] ?? '').get('afterId') ?? 0);
      return json({ logs: (opts.trialLogs?.[trialLogs[1]] ?? []).filter((l) => Number(l.id) > after).slice(0, 1000) });
    }
    if (url.startsWith('/api/v1/tasks')) {
      if (tasks === 'no-route') return json({ code: 5, message: `no route ${method} ${url}` }, 404);
      const own = tasks.filter((t) => t.kind !== 'TRIAL'); // the task routes take no trial's id
      const logs = url.match(/^\/api\/v1\/tasks\/(\d+)\/logs(\?.*)?$/);
      if (method === 'GET' && logs) {
        const after = Number(new URLSearchParams(logs[2] ?? '').get('afterId') ?? 0);
        return json({ logs: (opts.logs?.[logs[1]] ?? []).filter((l) => Number(l.id) > after).slice(0, 1000) });
      }
      const kill = url.match(/^\/api\/v1\/tasks\/(\d+)\/kill$/);
      if (method === 'POST' && kill) {
        if (opts.killAnswer) return opts.killAnswer;
        const t = own.find((x) => x.id === kill[1]);
        if (!t) return json({ code: 5, message: `no task ${kill[1]}` }, 404);
        if (t.state === 'QUEUED') Object.assign(t, { state: 'STOPPED', endedAt: '2026-11-26T12:30:00Z', pendingReason: '' });
        else t.state = 'STOPPING';
        return json({ task: t });
      }
      const ended = url.includes('includeEnded=true');
      return json({ tasks: tasks.filter((t) => ended || !['STOPPED', 'COMPLETED', 'FAILED'].includes(String(t.state))) });
    }
    if (url.startsWith('/api/v1/servings')) return json({ servings: [] });
    if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
    if (url.startsWith('/api/v1/agents')) return json({ agents: [] });
    if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: [] });
    if (url.startsWith('/api/v1/experiments')) return json({ experiments: [], pagination: { total: 0 } });
    return json({ code: 5, message: 'no route' }, 404);
  });
  return calls;
}

const who = (username: string, role: Whoami['role'], workspaces: Whoami['workspaces'] = []): Whoami => ({ username, role, workspaces });

function cluster(me?: Whoami) {
  window.location.hash = '#/cluster';
  const page = <ClusterPage route={parseHash('#/cluster')} />;
  return render(me ? <SessionProvider initial={{ status: 'in', me }}>{page}</SessionProvider> : page);
}

const rowOf = (id: string) => document.querySelector(`[data-testid="task-row"][data-id="${id}"]`) as HTMLElement;
const cell = (id: string, test: string) => rowOf(id).querySelector(`[data-testid="${test}"]`) as HTMLElement;

describe('normTask', () => {
  it('reads int64 strings, keeps an exit code of 0, and fills in proto3 defaults', () => {
    expect(normTask(COMPLETED)).toEqual({
      id: 44, kind: 'COMMAND', state: 'COMPLETED', owner: 'alice', workspace: 'nlp', entrypoint: ['python3', 'evaluate.py', '--split', 'test'], slots: 1, resourcePool: 'default',
      priority: 42, agentId: 'agent-1', createdAt: '2026-11-26T09:00:00Z', endedAt: '2026-11-26T09:12:00Z', error: '', restarts: 0, exitCode: 0, pendingReason: '', allocationId: 'task44-r0-a1',
      experimentId: 0,
    });
    // a trial: its trial id and its experiment's
    expect(normTask(TRIAL)).toMatchObject({ id: 54, kind: 'TRIAL', state: 'RUNNING', experimentId: 17, entrypoint: ['sf-trainer'], allocationId: 't54-r0-a1', exitCode: undefined });
    expect(normTask(PAUSED).state).toBe('PAUSED');
    expect(normTask(QUEUED)).toMatchObject({ exitCode: undefined, agentId: '', pendingReason: QUEUED.pendingReason });
    expect(normTask({ id: '5' })).toMatchObject({ id: 5, kind: 'UNKNOWN', state: 'UNKNOWN', entrypoint: [], exitCode: undefined });
    expect(normTask(null as never).id).toBe(0); // a malformed answer gives defaults, never a throw
  });
});

describe('ApiClient task calls', () => {
  it('call the generated routes: list (include_ended, kind), one, kill and logs, with X-Requested-With', async () => {
    const calls: Call[] = [];
    const c = new ApiClient({
      fetch: async (url: string, init: RequestInit = {}) => {
        calls.push({ url, method: init.method ?? 'GET', headers: { ...(init.headers as Record<string, string>) }, body: init.body ? JSON.parse(String(init.body)) : undefined });
        if (url.includes('/logs')) return json({ logs: logLines('54', 2, 3) });
        if (/^\/api\/v1\/tasks(\?|$)/.test(url)) return json({ tasks: [RUNNING, QUEUED] });
        return json({ task: { ...RUNNING, state: 'STOPPING' } });
      },
    });
    expect((await c.getTasks()).map((t) => t.id)).toEqual([54, 55]);
    await c.getTasks({ includeEnded: true });
    await c.getTasks({ kind: 'COMMAND', includeEnded: true });
    await c.getTasks({ kind: 'TRIAL' });
    expect((await c.getTask(54)).entrypoint).toEqual(LONG);
    expect((await c.killTask(54)).state).toBe('STOPPING');
    expect((await c.getTaskLogs(54, { afterId: 2, limit: 50 })).map((l) => [l.id, l.message, l.taskId])).toEqual([
      [3, 'task 54 line 3', 'task54-r0-a1.0'],
      [4, 'task 54 line 4', 'task54-r0-a1.0'],
    ]);
    expect(calls.map((x) => `${x.method} ${x.url}`)).toEqual([
      'GET /api/v1/tasks',
      'GET /api/v1/tasks?includeEnded=true',
      'GET /api/v1/tasks?kind=COMMAND&includeEnded=true',
      'GET /api/v1/tasks?kind=TRIAL',
      'GET /api/v1/tasks/54',
      'POST /api/v1/tasks/54/kill',
      'GET /api/v1/tasks/54/logs?afterId=2&limit=50',
    ]);
    expect(calls.every((x) => x.headers['X-Requested-With'] === 'steadfast')).toBe(true);
    expect(calls[5].body).toEqual({});
  });
});

describe('Tasks rules', () => {
  it('offer Kill for a live task only', () => {
    expect(['QUEUED', 'RUNNING', 'UNKNOWN'].map((state) => canBeKilled({ state }))).toEqual([true, true, true]);
    expect(['STOPPING', 'STOPPED', 'COMPLETED', 'FAILED'].map((state) => canBeKilled({ state }))).toEqual([false, false, false, false]);
    // never a trial: the task route would take its id for another task's
    expect(['QUEUED', 'RUNNING', 'PAUSED'].map((state) => canBeKilled({ state, kind: 'TRIAL' }))).toEqual([false, false, false]);
    expect(canBeKilled({ state: 'PAUSED', kind: 'COMMAND' })).toBe(true); // a state newer than the rule, on a task
  });

  it('tell a trial from a task with the same id: its id as t54, its key, its page and its experiment', () => {
    const [trial, command] = [normTask(TRIAL), normTask(RUNNING)];
    expect([taskIdText(trial), taskIdText(command)]).toEqual(['t54', '54']);
    expect(taskKey(trial)).not.toBe(taskKey(command));
    expect([taskHref(trial), taskHref(command)]).toEqual(['#/trials/54', undefined]);
    expect([experimentHref(trial), experimentHref(command), experimentHref({ ...trial, experimentId: 0 })]).toEqual(['#/experiments/17', undefined, undefined]);
    expect(['TRIAL', 'SHELL', 'NOTEBOOK', 'SERVER', 'COMMAND', 'SNAPSHOT', undefined].map(taskNoun)).toEqual(['trial', 'shell', 'notebook', 'server', 'command', 'task', 'task']);
    expect(['TRIAL', 'COMMAND', 'SERVER', undefined].map(taskLogsSource)).toEqual(['trial', 'task', 'task', 'task']);
  });

  it('write the program as one line, quoting what a shell would split, and cut it with an ellipsis', () => {
    expect(entrypointText(['python3', '-c', "print('hi')", '--name', 'a b', ''])).toBe(`python3 -c 'print('\\''hi'\\'')' --name 'a b' ''`);
    expect(truncate('abcdef', 10)).toBe('abcdef');
    expect(truncate('abcdefghijkl', 10)).toBe('abcdefghi…');
    expect(truncate('abcdefghijkl', 10)).toHaveLength(10);
  });

  it('list live tasks first, then ended ones, newest first within each', () => {
    expect(sortTasks(ALL().map(normTask)).map((t) => t.id)).toEqual([55, 54, 52, 47, 44]);
    // trials among them by when they were created (ids of trials and tasks are not comparable); a
    // PAUSED trial is live
    expect(sortTasks(WITH_TRIALS().map(normTask)).map(taskIdText)).toEqual(['55', 't54', 't55', '54', '52', '47', '44', 't50']);
    // the same id and time: still one order
    const twins = [normTask({ ...RUNNING, createdAt: TRIAL.createdAt }), normTask(TRIAL)];
    expect(sortTasks(twins).map(taskIdText)).toEqual(sortTasks([...twins].reverse()).map(taskIdText));
  });

  it('let the owner, workspace editors and admins kill a task, and say why not to others, by its kind', () => {
    const cmd = normTask(RUNNING); // alice's, in workspace nlp
    expect(canActOnTask(undefined, cmd).ok).toBe(true); // no authentication: the master decides
    expect(canActOnTask(who('root', 'admin'), cmd).ok).toBe(true);
    expect(canActOnTask(who('alice', 'user'), cmd).ok).toBe(true);
    expect(canActOnTask(who('bob', 'user', [{ name: 'nlp', role: 'admin' }]), cmd).ok).toBe(true);
    expect(canActOnTask(who('vic', 'viewer'), cmd)).toEqual({ ok: false, reason: 'Your role is viewer: you can look at commands but not kill them.' });
    expect(canActOnTask(who('bob', 'user', [{ name: 'nlp', role: 'viewer' }]), cmd).reason).toBe(
      'Command 54 belongs to alice in workspace nlp, where you are a viewer: you can kill only your own commands and those of workspaces where you are an editor or admin.',
    );
    expect(canActOnTask(who('bob', 'user'), normTask(SERVER)).reason).toMatch(/^Server 52 belongs to alice in workspace nlp, of which you are not a member: you can kill only your own servers/);
    expect(canActOnTask(who('bob', 'user'), { ...cmd, kind: 'NOTEBOOK' }).reason).toMatch(/^Notebook 54 .* your own notebooks/);
    expect(canActOnTask(who('bob', 'user'), { ...cmd, kind: 'SHELL' }).reason).toMatch(/^Shell 54 .* your own shells/);
    expect(canActOnTask(who('bob', 'user'), { ...cmd, kind: 'SNAPSHOT' }).reason).toMatch(/^Task 54 .* your own tasks/); // a kind added later
  });
});

describe('ClusterPage Tasks', () => {
  it('lists every task, live first, with its kind, state, exit code, program, slots, agent, owner and age', async () => {
    const calls = stubMaster(ALL());
    cluster();
    const table = await screen.findByTestId('tasks-table');
    const rows = within(table).getAllByTestId('task-row');
    expect(rows.map((r) => r.getAttribute('data-id'))).toEqual(['55', '54', '52', '47', '44']);
    expect(calls.find((c) => c.url.startsWith('/api/v1/tasks'))!.url).toBe('/api/v1/tasks?includeEnded=true');
    expect(screen.queryByTestId('error-banner')).toBeNull();

    expect(rows.map((r) => r.querySelector('[data-testid="task-kind"]')!.textContent)).toEqual(['Command', 'Command', 'Server', 'Command', 'Command']);
    expect(rows.map((r) => r.querySelector('[data-testid="state-badge"]')!.textContent)).toEqual(['Queued', 'Running', 'Running', 'Failed', 'Completed']);
    // the exit code once a command ended, 0 included; none before
    expect(rows.map((r) => r.querySelector('[data-testid="task-exit"]')!.textContent)).toEqual(['–', '–', '–', '3', '0']);

    // a queued task says why it waits, under its state and as the state's tooltip
    expect(cell('55', 'task-pending').textContent).toBe(QUEUED.pendingReason);
    expect(cell('55', 'task-state').getAttribute('title')).toBe(QUEUED.pendingReason);
    expect(rowOf('54').querySelector('[data-testid="task-pending"]')).toBeNull();
    expect(cell('47', 'task-error').textContent).toBe('rank 0 exited with status 3');

    // the program, cut to one line with all of it in the title
    const program = cell('54', 'task-entrypoint');
    expect(program.getAttribute('title')).toBe("python3 -m sacrebleu /data/wmt14/newstest2014.en --input /data/out/wmt-de-en-v3.newstest2014.hyp --metrics 'bleu chrf'");
    expect(program.textContent).toHaveLength(60);
    expect(program.textContent!.endsWith('…')).toBe(true);
    expect(cell('44', 'task-entrypoint').textContent).toBe('python3 evaluate.py --split test');

    expect(cell('55', 'task-slots').textContent).toBe('4pool gpu');
    expect(cell('54', 'task-agent').textContent).toBe('agent-1');
    expect(cell('55', 'task-agent').textContent).toBe('–');
    expect(cell('54', 'task-owner').textContent).toBe('alicenlp');
    expect(cell('54', 'task-created').textContent).toMatch(/ago$/);
    expect(cell('54', 'task-created').getAttribute('title')).toBe(formatDateTime(RUNNING.createdAt));
    expect(cell('44', 'task-created').textContent).toMatch(/ended .* ago$/);

    // Kill on the live ones only; nothing read from the logs before they are asked for
    expect(rows.map((r) => !!within(r).queryByRole('button', { name: /^Kill / }))).toEqual([true, true, true, false, false]);
    expect(within(rowOf('52')).getByRole('button', { name: 'Kill server 52' })).toBeTruthy();
    expect(calls.some((c) => c.url.includes('/logs'))).toBe(false);
  });

  it("offers a running notebook's page through the proxy in a new tab, a running server's request line, and nothing for the rest", async () => {
    const NOTEBOOK = { ...RUNNING, id: '56', kind: 'NOTEBOOK', entrypoint: ['/usr/bin/python3', '-m', 'steadfast.notebook'], allocationId: 'task56-r0-a1' };
    const SHELL = { ...RUNNING, id: '57', kind: 'SHELL', entrypoint: ['/bin/bash'], allocationId: 'task57-r0-a1' };
    stubMaster([...ALL(), NOTEBOOK, SHELL, { ...NOTEBOOK, id: '50', state: 'STOPPED', endedAt: '2026-11-26T10:30:00Z' }]);
    cluster();
    await screen.findByTestId('tasks-table');
    expect(cell('56', 'task-kind').textContent).toBe('Notebook');
    expect(cell('57', 'task-kind').textContent).toBe('Shell'); // a kind added later, as the master names it
    const open = within(rowOf('56')).getByRole('link', { name: 'Open notebook 56 in a new tab' });
    expect(open.getAttribute('href')).toBe('/proxy/56/');
    expect(open.getAttribute('target')).toBe('_blank');
    expect(open.getAttribute('rel')).toBe('noopener');
    expect(cell('52', 'task-endpoint').textContent).toBe('POST /proxy/52/v1/translate'); // under its program
    expect(cell('52', 'task-entrypoint').getAttribute('title')).toBe('sf-serve --cluster-task');
    expect(within(rowOf('52')).queryByRole('link')).toBeNull(); // an API is no page to open
    for (const id of ['57', '55', '54', '50', '47', '44']) {
      expect(within(rowOf(id)).queryByRole('link'), id).toBeNull();
      expect(rowOf(id).querySelector('[data-testid="task-endpoint"]'), id).toBeNull();
    }
    expect(cell('50', 'task-actions').textContent).toBe('–'); // ended: neither Open nor Kill
    expect(within(rowOf('56')).getByRole('button', { name: 'Kill notebook 56' })).toBeTruthy();
  });

  it('kills a task only after the confirmation, with one POST, then shows it STOPPING without Kill', async () => {
    const calls = stubMaster(ALL());
    cluster();
    await screen.findByTestId('tasks-table');
    const posts = () => calls.filter((c) => c.method === 'POST');
    fireEvent.click(within(rowOf('54')).getByRole('button', { name: 'Kill command 54' }));
    let dialog = screen.getByRole('dialog', { name: 'Kill command 54?' });
    expect(dialog.textContent).toContain('python3 -m sacrebleu');
    fireEvent.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(posts()).toEqual([]);

    fireEvent.click(within(rowOf('54')).getByRole('button', { name: 'Kill command 54' }));
    dialog = screen.getByRole('dialog', { name: 'Kill command 54?' });
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Kill' }));
    });
    expect(posts()).toHaveLength(1);
    expect(posts()[0]).toMatchObject({ url: '/api/v1/tasks/54/kill', body: {}, headers: { 'X-Requested-With': 'steadfast' } });
    await waitFor(() => expect(rowOf('54').getAttribute('data-state')).toBe('STOPPING'));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(within(rowOf('54')).queryByRole('button', { name: /^Kill / })).toBeNull();
  });

  it("keeps the dialog open with the master's message when the kill is refused", async () => {
    stubMaster(ALL(), { killAnswer: json({ code: 7, message: 'user bob may not kill task 54: it belongs to alice' }, 403) });
    cluster();
    await screen.findByTestId('tasks-table');
    fireEvent.click(within(rowOf('54')).getByRole('button', { name: 'Kill command 54' }));
    const dialog = screen.getByRole('dialog', { name: 'Kill command 54?' });
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Kill' }));
    });
    expect((await within(dialog).findByRole('alert')).textContent).toBe('user bob may not kill task 54: it belongs to alice');
  });

  it("disables Kill, with the reason, on a task the user may not act on, and opens no dialog", async () => {
    const calls = stubMaster(ALL());
    cluster(who('bob', 'user', [{ name: 'nlp', role: 'viewer' }]));
    await screen.findByTestId('tasks-table');
    const theirs = within(rowOf('54')).getByRole('button', { name: 'Kill command 54' }); // alice's
    expect(theirs.getAttribute('aria-disabled')).toBe('true');
    expect(theirs.getAttribute('title')).toBe(
      'Command 54 belongs to alice in workspace nlp, where you are a viewer: you can kill only your own commands and those of workspaces where you are an editor or admin.',
    );
    expect(document.getElementById(theirs.getAttribute('aria-describedby') ?? '')?.textContent).toBe(theirs.getAttribute('title'));
    fireEvent.click(theirs);
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(within(rowOf('52')).getByRole('button', { name: 'Kill server 52' }).getAttribute('aria-disabled')).toBe('true');
    // bob's own queued command: Kill offered
    const own = within(rowOf('55')).getByRole('button', { name: 'Kill command 55' });
    expect(own.getAttribute('aria-disabled')).toBeNull();
    fireEvent.click(own);
    const dialog = screen.getByRole('dialog', { name: 'Kill command 55?' });
    expect(dialog.textContent).toContain('It leaves the queue');
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Kill' }));
    });
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.url)).toEqual(['/api/v1/tasks/55/kill']);
    await waitFor(() => expect(rowOf('55').getAttribute('data-state')).toBe('STOPPED'));
  });

  it('disables every Kill for a viewer', async () => {
    stubMaster(ALL());
    cluster(who('vic', 'viewer'));
    await screen.findByTestId('tasks-table');
    const kills = screen.getAllByTestId('task-kill');
    expect(kills).toHaveLength(3);
    expect(kills.every((b) => b.getAttribute('aria-disabled') === 'true' && /^Your role is viewer/.test(b.getAttribute('title') ?? ''))).toBe(true);
  });

  it("opens a task's logs under its row from the task route, polls them while it runs, and closes them", async () => {
    const logs = { '54': logLines('54', 3), '44': logLines('44', 2) };
    const calls = stubMaster(ALL(), { logs });
    cluster();
    await screen.findByTestId('tasks-table');
    const button = within(rowOf('54')).getByRole('button', { name: 'Logs of command 54' });
    expect(button.getAttribute('aria-expanded')).toBe('false');
    fireEvent.click(button);
    const row = document.querySelector('[data-testid="task-logs-row"][data-id="54"]') as HTMLElement;
    expect(row.previousElementSibling).toBe(rowOf('54')); // right under its task
    expect(row.querySelector('td')!.colSpan).toBe(rowOf('54').children.length);
    expect(button.getAttribute('aria-expanded')).toBe('true');
    expect(document.getElementById(button.getAttribute('aria-controls') ?? '')).toBe(within(row).getByTestId('task-logs-panel'));
    const log = within(row).getByRole('log', { name: 'Logs of command 54' });
    await waitFor(() => expect(log.textContent).toContain('task 54 line 3'));
    const reads = () => calls.filter((c) => c.url.startsWith('/api/v1/tasks/54/logs')).map((c) => c.url);
    expect(reads()[0]).toBe('/api/v1/tasks/54/logs?limit=1000');
    expect(within(row).getByTestId('task-logs-state').getAttribute('data-live')).toBe('true');
    // a running command is polled after the last id seen (every 2 s)
    logs['54'].push(...logLines('54', 1, 4));
    await waitFor(() => expect(log.textContent).toContain('task 54 line 4'), { timeout: 4000 });
    expect(reads()).toContain('/api/v1/tasks/54/logs?afterId=3&limit=1000');
    fireEvent.click(button);
    expect(document.querySelector('[data-testid="task-logs-row"]')).toBeNull();

    // an ended command: its lines, read once
    fireEvent.click(within(rowOf('44')).getByRole('button', { name: 'Logs of command 44' }));
    const ended = document.querySelector('[data-testid="task-logs-row"][data-id="44"]') as HTMLElement;
    await waitFor(() => expect(within(ended).getByRole('log').getAttribute('data-lines')).toBe('2'));
    expect(within(ended).getByTestId('task-logs-state').textContent).toBe('command completed: no new lines');
  });

  it('lists a trial beside the command with its id apart: t54 linking to its page, its experiment, no Kill', async () => {
    const calls = stubMaster(WITH_TRIALS());
    cluster();
    const table = await screen.findByTestId('tasks-table');
    const rows = within(table).getAllByTestId('task-row');
    expect(rows.map((r) => `${r.getAttribute('data-id')}:${r.getAttribute('data-kind')}`)).toEqual(['55:COMMAND', 't54:TRIAL', 't55:TRIAL', '54:COMMAND', '52:SERVER', '47:COMMAND', '44:COMMAND', 't50:TRIAL']);
    expect(document.querySelectorAll('[data-testid="task-row"][data-id="54"]')).toHaveLength(1); // the command's alone

    // the trial: t54, a link to its trial page; its experiment linked before its program
    expect(cell('t54', 'task-id').textContent).toBe('t54');
    const link = within(cell('t54', 'task-id')).getByRole('link', { name: 't54: trial 54' });
    expect(link.getAttribute('href')).toBe('#/trials/54');
    expect(cell('t54', 'task-kind').textContent).toBe('Trial');
    expect(cell('t54', 'task-entrypoint').textContent).toBe('experiment 17: sf-trainer');
    expect(within(cell('t54', 'task-entrypoint')).getByRole('link', { name: 'experiment 17' }).getAttribute('href')).toBe('#/experiments/17');
    expect(cell('t54', 'task-owner').textContent).toBe('carolnlp');
    expect(cell('t54', 'task-slots').textContent).toBe('2');
    expect(cell('t54', 'task-agent').textContent).toBe('agent-2');
    expect(cell('t54', 'task-exit').textContent).toBe('–');
    // the command with the same id: a plain id, its own program, its Kill
    expect(cell('54', 'task-id').textContent).toBe('54');
    expect(within(cell('54', 'task-id')).queryByRole('link')).toBeNull();
    expect(cell('54', 'task-entrypoint').textContent).toMatch(/^python3 -m sacrebleu/);
    expect(within(rowOf('54')).getByRole('button', { name: 'Kill command 54' })).toBeTruthy();

    // no Kill on any trial: a live one links to its experiment's page, where it is paused or killed
    for (const id of ['t54', 't55', 't50']) {
      expect(within(rowOf(id)).queryByRole('button', { name: /^Kill / }), id).toBeNull();
      expect(rowOf(id).querySelector('[data-testid="task-kill"]'), id).toBeNull();
      expect(rowOf(id).querySelector('[data-testid="task-open"], [data-testid="task-endpoint"]'), id).toBeNull();
    }
    const manage = within(cell('t54', 'task-actions')).getByRole('link', { name: 'Experiment 17: pause or kill trial 54 there' });
    expect(manage.getAttribute('href')).toBe('#/experiments/17');
    expect(rowOf('t55').querySelector('[data-testid="state-badge"]')!.textContent).toBe('Paused');
    expect(within(cell('t55', 'task-actions')).getByRole('link').getAttribute('href')).toBe('#/experiments/17');
    expect(cell('t50', 'task-actions').textContent).toBe('–'); // ended: nothing to act on
    expect(screen.getAllByTestId('task-kill')).toHaveLength(3); // commands 55 and 54, server 52

    // the slots' "command 54" link reveals the command's row, not the trial's
    revealTask(54);
    expect(rowOf('54').contains(document.activeElement)).toBe(true);
    expect(calls.some((c) => c.method === 'POST')).toBe(false);
  });

  it("opens a trial's logs from the trial's route, never the task route of the same id, and polls them while it runs", async () => {
    const trialLines = logLines('54', 3).map((l) => ({ ...l, message: l.message.replace('task', 'trial'), taskId: 't54-r0-a1.0' }));
    const trialLogs = { '54': trialLines, '50': logLines('50', 2) };
    const calls = stubMaster(WITH_TRIALS(), { logs: { '54': logLines('54', 5) }, trialLogs });
    cluster();
    await screen.findByTestId('tasks-table');
    const button = within(rowOf('t54')).getByRole('button', { name: 'Logs of trial 54' });
    fireEvent.click(button);
    const row = document.querySelector('[data-testid="task-logs-row"][data-id="t54"]') as HTMLElement;
    expect(row.previousElementSibling).toBe(rowOf('t54'));
    expect(document.querySelector('[data-testid="task-logs-row"][data-id="54"]')).toBeNull(); // the command's stays closed
    const panel = within(row).getByTestId('task-logs-panel');
    expect(panel.getAttribute('data-source')).toBe('trial');
    const log = within(row).getByRole('log', { name: 'Logs of trial 54' });
    await waitFor(() => expect(log.textContent).toContain('trial 54 line 3'));
    expect(log.textContent).not.toContain('task 54'); // not command 54's lines
    const trialReads = () => calls.filter((c) => c.url.startsWith('/api/v1/trials/54/logs')).map((c) => c.url);
    expect(trialReads()[0]).toBe('/api/v1/trials/54/logs?limit=1000');
    // a running trial is polled after the last id seen
    trialLogs['54'].push({ ...trialLines[0], id: '4', message: 'trial 54 line 4' });
    await waitFor(() => expect(log.textContent).toContain('trial 54 line 4'), { timeout: 4000 });
    expect(trialReads()).toContain('/api/v1/trials/54/logs?afterId=3&limit=1000');
    expect(calls.some((c) => c.url.startsWith('/api/v1/tasks/54'))).toBe(false);

    // the command's own logs still come from the task route
    fireEvent.click(within(rowOf('54')).getByRole('button', { name: 'Logs of command 54' }));
    const cmd = document.querySelector('[data-testid="task-logs-row"][data-id="54"]') as HTMLElement;
    await waitFor(() => expect(within(cmd).getByRole('log').textContent).toContain('task 54 line 5'));
    expect(within(cmd).getByTestId('task-logs-panel').getAttribute('data-source')).toBe('task');

    // an ended trial: its lines, read once, from its route
    fireEvent.click(within(rowOf('t50')).getByRole('button', { name: 'Logs of trial 50' }));
    const ended = document.querySelector('[data-testid="task-logs-row"][data-id="t50"]') as HTMLElement;
    await waitFor(() => expect(within(ended).getByRole('log').getAttribute('data-lines')).toBe('2'));
    expect(within(ended).getByTestId('task-logs-state').textContent).toBe('trial completed: no new lines');
    expect(calls.some((c) => c.url.startsWith('/api/v1/tasks/50'))).toBe(false);
  });

  it('says how to run one when there is none', async () => {
    stubMaster([]);
    cluster();
    const card = await screen.findByTestId('tasks-card');
    await waitFor(() => expect(within(card).getByTestId('empty-state').textContent).toMatch(/No task has run on this cluster yet\..*sf cmd run -- PROGRAM/));
    expect(within(card).queryByTestId('tasks-table')).toBeNull();
  });

  it('says so in the card, not in the page banner, when the master has no task routes', async () => {
    stubMaster('no-route');
    cluster();
    const card = await screen.findByTestId('tasks-card');
    await waitFor(() => expect(within(card).getByTestId('empty-state').textContent).toMatch(/runs no tasks of their own/));
    expect(screen.queryByTestId('error-banner')).toBeNull();
  });
});
