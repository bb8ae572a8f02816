// Servers the master schedules (`sf serve start`), each a task of its own: the client's calls and
// normalisers, the rules of the Servers card (what may be stopped, what is a link, an older master,
// whose logs are still polled), who may stop one, the cluster page's Servers table (links, URL once
// READY, a server's logs under its row, empty state, Stop behind a confirmation, Show stopped in the
// URL, a viewer's disabled Stop), the logs panel's polling, and Serve on a model version.
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiClient, ApiError, normLog, normServing } from '../src/api/client';
import type { Whoami } from '../src/api/types';
import { canStopServing } from '../src/lib/permissions';
import { parseHash } from '../src/lib/router';
import { SessionProvider } from '../src/lib/session';
import { ClusterPage } from '../src/pages/ClusterPage';
import { ModelPage } from '../src/pages/ModelPage';
import { TaskLogs, taskLogsLive } from '../src/pages/TaskLogs';
import { canBeStopped, serverLink, servingsUnsupported } from '../src/pages/Servers';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

// As the master lists them: int64 as strings, proto3 defaults left out.
const READY = { id: '12', modelName: 'wmt-de-en', modelVersion: 3, checkpointUuid: 'uuid-3', state: 'READY', url: 'http://node1:8500', slots: 1, owner: 'alice', workspace: 'nlp', agentId: 'agent-1', createdAt: '2026-11-26T10:00:00Z' };
const QUEUED = { id: '13', modelName: 'tiny lm', modelVersion: 1, state: 'QUEUED', slots: 2, resourcePool: 'gpu', owner: 'bob', createdAt: '2026-11-26T11:00:00Z' };
const FAILED = { id: '9', modelName: 'wmt-de-en', modelVersion: 2, state: 'FAILED', slots: 1, owner: 'alice', error: 'sf-serve exited with status 1: checkpoint not found', restarts: 5, createdAt: '2026-11-25T10:00:00Z', endedAt: '2026-11-25T10:05:00Z' };

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: unknown;
}

type WireLog = { id: string; message: string; rank?: number; stream?: string; taskId?: string; time?: string };

/** A server's wire log lines 1..n (ids as strings), as the master answers them. */
const logLines = (id: string, n: number, from = 1): WireLog[] =>
  Array.from({ length: n }, (_, i) => ({ id: String(from + i), rank: 0, stream: 'stdout', message: `server ${id} line ${from + i}`, taskId: `task${id}-r0-a1.0` }));

/** A master with these servers: the list (live ones unless include_stopped), stop (READY/QUEUED →
 *  STOPPING, or `stopAnswer`), start, and each server's logs from `logs` (by server id, on its
 *  task's route GET /tasks/{id}/logs; lines after `afterId`, at most `limit`, or `logsAnswer`);
 *  the task list and the other cluster routes answer empty lists. */
function stubMaster(servings: Record<string, unknown>[] | 'no-route', opts: { stopAnswer?: Response; logs?: Record<string, WireLog[]>; logsAnswer?: () => Response | undefined } = {}) {
  const calls: Call[] = [];
  vi.stubGlobal('fetch', async (url: string, init: RequestInit = {}) => {
    const method = init.method ?? 'GET';
    calls.push({ url, method, headers: { ...(init.headers as Record<string, string>) }, body: init.body ? JSON.parse(String(init.body)) : undefined });
    // an older master has neither the servings nor the task routes
    if (servings === 'no-route' && (url.startsWith('/api/v1/servings') || url.startsWith('/api/v1/tasks'))) return json({ code: 5, message: `no route ${method} ${url}` }, 404);
    const logs = url.match(/^\/api\/v1\/tasks\/(\d+)\/logs(\?.*)?$/);
    if (method === 'GET' && logs) {
      const answer = opts.logsAnswer?.();
      if (answer) return answer;
      const q = new URLSearchParams(logs[2] ?? '');
      const after = Number(q.get('afterId') ?? 0);
      const limit = Number(q.get('limit') ?? 10000);
      return json({ logs: (opts.logs?.[logs[1]] ?? []).filter((l) => Number(l.id) > after).slice(0, limit) });
    }
    if (url.startsWith('/api/v1/tasks')) return json({ tasks: [] });
    if (url.startsWith('/api/v1/servings') && servings !== 'no-route') {
      const stop = url.match(/^\/api\/v1\/servings\/(\d+)\/stop$/);
      if (method === 'POST' && stop) {
        if (opts.stopAnswer) return opts.stopAnswer;
        const s = servings.find((x) => x.id === stop[1])!;
        s.state = 'STOPPING';
        s.url = '';
        return json({ serving: s });
      }
      if (method === 'POST' && url === '/api/v1/servings') {
        const b = JSON.parse(String(init.body));
        return json({ serving: { id: '50', modelName: b.model, modelVersion: b.version, state: 'QUEUED', slots: 1 } });
      }
      const all = url.includes('includeStopped=true');
      return json({ servings: servings.filter((s) => all || !['STOPPED', 'FAILED'].includes(String(s.state))) });
    }
    if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
    if (url.startsWith('/api/v1/agents')) return json({ agents: [] });
    if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: [] });
    if (url.startsWith('/api/v1/experiments')) return json({ experiments: [], pagination: { total: 0 } });
    if (url.startsWith('/api/v1/models/wmt-de-en/versions/')) return json({ version: { modelName: 'wmt-de-en', version: 3 } });
    if (url.startsWith('/api/v1/models/wmt-de-en')) return json({ model: { id: '1', name: 'wmt-de-en' }, versions: [{ modelId: '1', modelName: 'wmt-de-en', version: 3, checkpointUuid: 'uuid-3' }] });
    return json({ code: 5, message: 'no route' }, 404);
  });
  return calls;
}

const who = (username: string, role: Whoami['role'], workspaces: Whoami['workspaces'] = []): Whoami => ({ username, role, workspaces });

function clusterAt(hash: string, me?: Whoami) {
  window.location.hash = hash;
  const page = <ClusterPage route={parseHash(hash)} />;
  return render(me ? <SessionProvider initial={{ status: 'in', me }}>{page}</SessionProvider> : page);
}

const rowOf = (id: string) => document.querySelector(`[data-testid="server-row"][data-id="${id}"]`) as HTMLElement;

describe('normServing', () => {
  it('reads int64 strings and fills in proto3 defaults', () => {
    expect(normServing(READY)).toEqual({
      id: 12, modelName: 'wmt-de-en', modelVersion: 3, checkpointUuid: 'uuid-3', state: 'READY', url: 'http://node1:8500', slots: 1, resourcePool: '',
      owner: 'alice', workspace: 'nlp', agentId: 'agent-1', createdAt: '2026-11-26T10:00:00Z', endedAt: undefined, error: '', restarts: 0,
    });
    const bare = normServing({ id: '5' });
    expect(bare).toMatchObject({ id: 5, state: 'UNKNOWN', url: '', slots: 0, agentId: '', restarts: 0 });
    expect(normServing(null as never).id).toBe(0); // a malformed answer gives defaults, never a throw
  });
});

describe('normLog', () => {
  it("reads a server's line, with its task id and no trial", () => {
    expect(normLog({ id: '7', rank: 0, stream: 'stderr', message: 'sf-serve: listening', time: '2026-11-26T10:00:00Z', agentId: 'agent-1', taskId: 'task12-r0-a1.0' })).toEqual({
      id: 7, trialId: 0, rank: 0, stream: 'stderr', message: 'sf-serve: listening', time: '2026-11-26T10:00:00Z', agentId: 'agent-1', taskId: 'task12-r0-a1.0',
    });
    expect(normLog({ id: '8', trialId: '40', message: 'x' })).toMatchObject({ id: 8, trialId: 40, taskId: '' }); // a master or agent without task ids
  });
});

describe('ApiClient servings calls', () => {
  it("call the generated routes: list (with include_stopped), one, logs (its task's), stop and start, with X-Requested-With", async () => {
    const calls: Call[] = [];
    const c = new ApiClient({
      fetch: async (url: string, init: RequestInit = {}) => {
        calls.push({ url, method: init.method ?? 'GET', headers: { ...(init.headers as Record<string, string>) }, body: init.body ? JSON.parse(String(init.body)) : undefined });
        if (init.method === 'GET' && (url === '/api/v1/servings' || url.startsWith('/api/v1/servings?'))) return json({ servings: [READY, FAILED] });
        if (url.startsWith('/api/v1/tasks/12/logs')) return json({ logs: logLines('12', 2, 8) });
        return json({ serving: READY });
      },
    });
    expect((await c.getServings()).map((s) => s.id)).toEqual([12, 9]);
    await c.getServings(true);
    expect((await c.getServing(12)).url).toBe('http://node1:8500');
    const lines = await c.getTaskLogs(12, { afterId: 7, limit: 100, search: 'line' });
    expect(lines.map((l) => [l.id, l.message, l.taskId])).toEqual([
      [8, 'server 12 line 8', 'task12-r0-a1.0'],
      [9, 'server 12 line 9', 'task12-r0-a1.0'],
    ]);
    await c.getTaskLogs(12);
    expect((await c.stopServing(12)).id).toBe(12);
    await c.startServing('wmt-de-en', 3);
    expect(calls.map((x) => `${x.method} ${x.url}`)).toEqual([
      'GET /api/v1/servings',
      'GET /api/v1/servings?includeStopped=true',
      'GET /api/v1/servings/12',
      'GET /api/v1/tasks/12/logs?afterId=7&limit=100&search=line',
      'GET /api/v1/tasks/12/logs',
      'POST /api/v1/servings/12/stop',
      'POST /api/v1/servings',
    ]);
    expect(calls.every((x) => x.headers['X-Requested-With'] === 'steadfast')).toBe(true);
    expect(calls[6].body).toEqual({ model: 'wmt-de-en', version: 3 });
  });
});

describe('Servers rules', () => {
  it('offer Stop for a live server only', () => {
    expect(['QUEUED', 'STARTING', 'READY', 'UNKNOWN'].map((state) => canBeStopped({ state }))).toEqual([true, true, true, true]);
    expect(['STOPPING', 'STOPPED', 'FAILED'].map((state) => canBeStopped({ state }))).toEqual([false, false, false]);
  });

  it('poll the logs of a task (a server, a command) until it is STOPPED, COMPLETED or FAILED', () => {
    expect(['QUEUED', 'STARTING', 'READY', 'RUNNING', 'STOPPING', 'UNKNOWN'].map(taskLogsLive)).toEqual([true, true, true, true, true, true]);
    expect(['STOPPED', 'COMPLETED', 'FAILED'].map(taskLogsLive)).toEqual([false, false, false]);
  });

  it('make a link of an http(s) URL of a READY server only', () => {
    expect(serverLink({ state: 'READY', url: 'http://node1:8500' })).toBe('http://node1:8500');
    expect(serverLink({ state: 'READY', url: 'https://serve.example:443' })).toBe('https://serve.example:443');
    expect(serverLink({ state: 'STARTING', url: 'http://node1:8500' })).toBeUndefined();
    expect(serverLink({ state: 'READY', url: '' })).toBeUndefined();
    expect(serverLink({ state: 'READY', url: 'javascript:alert(1)' })).toBeUndefined();
  });

  it("tell an older master's missing route from other errors", () => {
    expect(servingsUnsupported(new ApiError('http', 'no route', 404, 5))).toBe(true);
    expect(servingsUnsupported(new ApiError('http', '404 Not Found', 404, undefined, [], false))).toBe(false); // not the master
    expect(servingsUnsupported(new ApiError('http', 'boom', 500, 13))).toBe(false);
    expect(servingsUnsupported(new ApiError('network', 'down'))).toBe(false);
    expect(servingsUnsupported(undefined)).toBe(false);
  });

  it('let the owner, workspace editors and admins stop a server, and say why not to others', () => {
    const s = normServing(READY); // alice's, in workspace nlp
    expect(canStopServing(undefined, s).ok).toBe(true); // no authentication: the master decides
    expect(canStopServing(who('root', 'admin'), s).ok).toBe(true);
    expect(canStopServing(who('alice', 'user'), s).ok).toBe(true);
    expect(canStopServing(who('bob', 'user', [{ name: 'nlp', role: 'editor' }]), s).ok).toBe(true);
    expect(canStopServing(who('vic', 'viewer'), s)).toEqual({ ok: false, reason: 'Your role is viewer: you can look at servers but not stop them.' });
    expect(canStopServing(who('bob', 'user', [{ name: 'nlp', role: 'viewer' }]), s).reason).toBe(
      'Server 12 belongs to alice in workspace nlp, where you are a viewer: you can stop only your own servers and those of workspaces where you are an editor or admin.',
    );
    expect(canStopServing(who('bob', 'user'), s).reason).toMatch(/of which you are not a member/);
  });
});

describe('ClusterPage Servers', () => {
  it('shows each live server with its model, version, state, URL once READY, slots, agent, Logs and owner', async () => {
    const calls = stubMaster([READY, QUEUED, FAILED]);
    clusterAt('#/cluster');
    const table = await screen.findByTestId('servers-table');
    const rows = within(table).getAllByTestId('server-row');
    expect(rows.map((r) => r.getAttribute('data-id'))).toEqual(['12', '13']); // FAILED is not live
    expect(calls.find((c) => c.url.startsWith('/api/v1/servings'))!.url).toBe('/api/v1/servings');

    const ready = within(rowOf('12'));
    expect(ready.getByRole('link', { name: 'wmt-de-en' }).getAttribute('href')).toBe('#/models/wmt-de-en');
    expect(ready.getByTestId('server-version').textContent).toBe('v3');
    expect(ready.getByTestId('state-badge').textContent).toBe('Ready');
    const url = ready.getByRole('link', { name: 'http://node1:8500' });
    expect(url.getAttribute('href')).toBe('http://node1:8500');
    expect(url.getAttribute('target')).toBe('_blank');
    expect(url.getAttribute('rel')).toBe('noreferrer');
    expect(ready.getByTestId('server-proxy').textContent).toBe('through the master: POST /proxy/12/v1/translate'); // its API through the proxy
    expect(ready.getByTestId('server-slots').textContent).toBe('1');
    expect(ready.getByTestId('server-agent').textContent).toBe('agent-1');
    expect(rowOf('12').querySelector('a[href^="#/trials/"]')).toBeNull(); // a server is no trial's
    const logs = within(ready.getByTestId('server-logs')).getByRole('button', { name: 'Logs of server 12' });
    expect(logs.getAttribute('aria-expanded')).toBe('false');
    expect(calls.some((c) => c.url.includes('/logs'))).toBe(false); // nothing read before it is asked for
    expect(rowOf('12').textContent).toContain('alice');
    expect(rowOf('12').textContent).toContain('nlp');

    const queued = within(rowOf('13'));
    expect(queued.getByRole('link', { name: 'tiny lm' }).getAttribute('href')).toBe('#/models/tiny%20lm');
    expect(queued.getByTestId('server-state').textContent).toBe('Queuedwaiting for slots');
    expect(queued.getByTestId('server-url').textContent).toBe('–'); // no URL before READY
    expect(queued.queryByTestId('server-proxy')).toBeNull();
    expect(queued.getByTestId('server-slots').textContent).toBe('2pool gpu');
    expect(queued.getByTestId('server-agent').textContent).toBe('–');
    expect(queued.getByRole('button', { name: 'Stop server 13' })).toBeTruthy();
    expect(screen.queryByTestId('error-banner')).toBeNull();
  });

  it('says how to start one when none is running', async () => {
    stubMaster([]);
    clusterAt('#/cluster');
    const card = await screen.findByTestId('servers-card');
    await waitFor(() => expect(within(card).getByTestId('empty-state').textContent).toMatch(/No server is running\..*sf serve start --model NAME/));
    expect(within(card).queryByTestId('servers-table')).toBeNull();
  });

  it('stops a server only after the confirmation, then shows it STOPPING without Stop', async () => {
    const calls = stubMaster([{ ...READY }, { ...QUEUED }]);
    clusterAt('#/cluster');
    await screen.findByTestId('servers-table');
    const posts = () => calls.filter((c) => c.method === 'POST');

    fireEvent.click(within(rowOf('12')).getByRole('button', { name: 'Stop server 12' }));
    let dialog = screen.getByRole('dialog', { name: 'Stop server 12?' });
    expect(dialog.textContent).toContain('wmt-de-en v3 at http://node1:8500');
    expect(dialog.textContent).toContain('sf serve start --model wmt-de-en --version 3');
    fireEvent.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(posts()).toEqual([]);

    fireEvent.click(within(rowOf('12')).getByRole('button', { name: 'Stop server 12' }));
    dialog = screen.getByRole('dialog', { name: 'Stop server 12?' });
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Stop' }));
    });
    expect(posts()).toHaveLength(1);
    expect(posts()[0]).toMatchObject({ url: '/api/v1/servings/12/stop', headers: { 'X-Requested-With': 'steadfast' } });
    await waitFor(() => expect(rowOf('12').getAttribute('data-state')).toBe('STOPPING'));
    expect(within(rowOf('12')).queryByRole('button', { name: /Stop/ })).toBeNull();
    expect(within(rowOf('12')).getByTestId('server-url').textContent).toBe('–');
    expect(screen.queryByRole('dialog')).toBeNull();
  });

  it("keeps the dialog open with the master's message when Stop fails", async () => {
    stubMaster([{ ...READY }], { stopAnswer: json({ code: 9, message: 'server 12 is already stopping' }, 409) });
    clusterAt('#/cluster');
    await screen.findByTestId('servers-table');
    fireEvent.click(screen.getByRole('button', { name: 'Stop server 12' }));
    const dialog = screen.getByRole('dialog', { name: 'Stop server 12?' });
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Stop' }));
    });
    expect((await within(dialog).findByRole('alert')).textContent).toBe('server 12 is already stopping');
  });

  it('lists stopped and failed servers too with servers=all, with the error, and no Stop', async () => {
    const calls = stubMaster([READY, FAILED]);
    clusterAt('#/cluster?servers=all');
    await screen.findByTestId('servers-table');
    expect(calls.find((c) => c.url.startsWith('/api/v1/servings'))!.url).toBe('/api/v1/servings?includeStopped=true');
    expect((screen.getByTestId('servers-show-stopped') as HTMLInputElement).checked).toBe(true);
    const failed = within(rowOf('9'));
    expect(failed.getByTestId('server-error').textContent).toBe('sf-serve exited with status 1: checkpoint not found');
    expect(failed.getByTestId('server-state').textContent).toContain('restarted 5×');
    expect(rowOf('9').textContent).toMatch(/ended \d{4}-\d\d-\d\d/);
    expect(failed.queryByRole('button', { name: /Stop/ })).toBeNull();
  });

  it('puts Show stopped in the URL', async () => {
    stubMaster([READY]);
    clusterAt('#/cluster');
    await screen.findByTestId('servers-table');
    fireEvent.click(screen.getByTestId('servers-show-stopped'));
    expect(window.location.hash).toBe('#/cluster?servers=all');
  });

  it('disables Stop for a viewer, with the reason, and opens no dialog', async () => {
    stubMaster([READY]);
    clusterAt('#/cluster', who('vic', 'viewer'));
    const b = await screen.findByRole('button', { name: 'Stop server 12' });
    expect(b.getAttribute('aria-disabled')).toBe('true');
    expect(b.getAttribute('title')).toMatch(/viewer/);
    expect(document.getElementById(b.getAttribute('aria-describedby') ?? '')?.textContent).toBe(b.getAttribute('title'));
    fireEvent.click(b);
    expect(screen.queryByRole('dialog')).toBeNull();
  });

  it('says so in the card, not in the page banner, when the master has no servings routes', async () => {
    stubMaster('no-route');
    clusterAt('#/cluster');
    const card = await screen.findByTestId('servers-card');
    await waitFor(() => expect(within(card).getByTestId('empty-state').textContent).toMatch(/does not schedule servers/));
    expect(screen.queryByTestId('error-banner')).toBeNull();
  });
});

describe('Server logs', () => {
  const logReads = (calls: Call[], id = '12') => calls.filter((c) => c.url.startsWith(`/api/v1/tasks/${id}/logs`)).map((c) => c.url);
  const lineCount = () => Number(screen.getByTestId('task-log-lines').getAttribute('data-lines'));
  const sleep = (ms: number) => act(() => new Promise<void>((r) => setTimeout(r, ms)));

  it("opens a server's logs under its row from Logs, and closes them again", async () => {
    const calls = stubMaster([READY, QUEUED], { logs: { '12': logLines('12', 3) } });
    clusterAt('#/cluster');
    await screen.findByTestId('servers-table');
    const button = within(rowOf('12')).getByRole('button', { name: 'Logs of server 12' });
    fireEvent.click(button);
    const row = document.querySelector('[data-testid="server-logs-row"][data-id="12"]') as HTMLElement;
    expect(row).toBeTruthy();
    expect(row.previousElementSibling).toBe(rowOf('12')); // right under its server
    expect(row.querySelector('td')!.colSpan).toBe(rowOf('12').children.length);
    expect(button.getAttribute('aria-expanded')).toBe('true');
    expect(document.getElementById(button.getAttribute('aria-controls') ?? '')).toBe(within(row).getByTestId('task-logs-panel'));
    expect(button.getAttribute('aria-label')).toBe('Hide logs of server 12');
    expect(button.textContent).toBe('Hide logs');
    const log = within(row).getByRole('log', { name: 'Logs of server 12' });
    await waitFor(() => expect(log.textContent).toContain('server 12 line 3'));
    expect(log.getAttribute('data-lines')).toBe('3');
    expect(log.querySelector('.log-line')!.getAttribute('title')).toBe('task12-r0-a1.0');
    expect(logReads(calls)[0]).toBe('/api/v1/tasks/12/logs?limit=1000');
    expect(logReads(calls, '13')).toEqual([]); // only the server asked for
    expect(document.querySelectorAll('[data-testid="server-row"]')).toHaveLength(2); // the panel is no server row

    fireEvent.click(button);
    expect(document.querySelector('[data-testid="server-logs-row"]')).toBeNull();
    expect(button.getAttribute('aria-expanded')).toBe('false');
  });

  it('polls a live server after the last id seen, shows each line once, and stops once the server has ended', async () => {
    const logs = { '12': logLines('12', 3) };
    let overlapOnce = false;
    const calls = stubMaster([READY], {
      logs,
      // a master that answers an overlapping page: the lines already shown are not shown twice
      logsAnswer: () => {
        if (!overlapOnce) return undefined;
        overlapOnce = false;
        return json({ logs: logLines('12', 2, 5) });
      },
    });
    const view = render(<TaskLogs id={12} kind="SERVER" state="READY" pollMs={20} />);
    await waitFor(() => expect(lineCount()).toBe(3));
    expect(screen.getByTestId('task-logs-state').getAttribute('data-live')).toBe('true');
    logs['12'].push(...logLines('12', 2, 4));
    await waitFor(() => expect(lineCount()).toBe(5));
    expect(logReads(calls)).toContain('/api/v1/tasks/12/logs?afterId=3&limit=1000');
    overlapOnce = true;
    await waitFor(() => expect(lineCount()).toBe(6));
    await sleep(60);
    expect(lineCount()).toBe(6);
    expect([...screen.getByTestId('task-log-lines').querySelectorAll('.log-line')].map((l) => l.textContent?.replace(/^.*\] /, ''))).toEqual(
      [1, 2, 3, 4, 5, 6].map((i) => `server 12 line ${i}`),
    );

    // the server stops: one last read for its final lines, then no more (line 7 is written in the
    // same tick as the stop is seen, so no poll before it can have read it)
    logs['12'].push(...logLines('12', 1, 7));
    view.rerender(<TaskLogs id={12} kind="SERVER" state="STOPPED" pollMs={20} />);
    await waitFor(() => expect(lineCount()).toBe(7));
    const reads = logReads(calls).length;
    await sleep(100);
    expect(logReads(calls).length).toBe(reads);
    expect(screen.getByTestId('task-logs-state').textContent).toBe('server stopped: no new lines');
  });

  it('reads an ended server once, and its further lines with Load more', async () => {
    const calls = stubMaster([FAILED], { logs: { '9': logLines('9', 1500) } });
    render(<TaskLogs id={9} kind="SERVER" state="FAILED" pollMs={20} />);
    await waitFor(() => expect(lineCount()).toBe(1000));
    await sleep(80);
    expect(logReads(calls, '9')).toEqual(['/api/v1/tasks/9/logs?limit=1000']);
    fireEvent.click(screen.getByTestId('task-logs-more'));
    await waitFor(() => expect(lineCount()).toBe(1500));
    expect(logReads(calls, '9')).toEqual(['/api/v1/tasks/9/logs?limit=1000', '/api/v1/tasks/9/logs?afterId=1000&limit=1000']);
    expect(screen.queryByTestId('task-logs-more')).toBeNull(); // a short page: nothing more
  });

  it("shows the master's error, and recovers at the next poll of a live server", async () => {
    let fail = true;
    stubMaster([READY], { logs: { '12': logLines('12', 2) }, logsAnswer: () => (fail ? json({ code: 13, message: 'log store unavailable' }, 500) : undefined) });
    render(<TaskLogs id={12} kind="SERVER" state="READY" pollMs={20} />);
    expect((await screen.findByTestId('task-logs-error')).textContent).toContain('log store unavailable');
    expect(screen.getByTestId('task-log-lines').textContent).toBe('No log lines yet.');
    fail = false;
    await waitFor(() => expect(lineCount()).toBe(2));
    expect(screen.queryByTestId('task-logs-error')).toBeNull();
  });

  it('retries an ended server only when asked', async () => {
    let fail = true;
    const calls = stubMaster([FAILED], { logs: { '9': logLines('9', 2) }, logsAnswer: () => (fail ? json({ code: 13, message: 'log store unavailable' }, 500) : undefined) });
    render(<TaskLogs id={9} kind="SERVER" state="FAILED" pollMs={20} />);
    const error = await screen.findByTestId('task-logs-error');
    fail = false;
    await sleep(80);
    expect(logReads(calls, '9')).toHaveLength(1);
    fireEvent.click(within(error).getByRole('button', { name: 'Retry' }));
    await waitFor(() => expect(lineCount()).toBe(2));
    expect(screen.queryByTestId('task-logs-error')).toBeNull();
  });
});

describe('ModelPage Serve', () => {
  it('starts a server for a version after the confirmation and points to the cluster page', async () => {
    const calls = stubMaster([]);
    render(<ModelPage name="wmt-de-en" />);
    const row = await screen.findByTestId('version-row');
    fireEvent.click(within(row).getByRole('button', { name: 'Serve wmt-de-en v3' }));
    const dialog = screen.getByRole('dialog', { name: 'Serve wmt-de-en v3?' });
    expect(calls.some((c) => c.method === 'POST')).toBe(false);
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Serve' }));
    });
    expect(calls.find((c) => c.method === 'POST')).toMatchObject({ url: '/api/v1/servings', body: { model: 'wmt-de-en', version: 3 }, headers: { 'X-Requested-With': 'steadfast' } });
    const started = await screen.findByTestId('serve-started');
    expect(started.textContent).toMatch(/Server 50 for wmt-de-en v3 is queued/);
    expect(within(started).getByRole('link', { name: 'cluster page' }).getAttribute('href')).toBe('#/cluster');
  });

  it('disables Serve for a viewer', async () => {
    stubMaster([]);
    render(
      <SessionProvider initial={{ status: 'in', me: who('vic', 'viewer') }}>
        <ModelPage name="wmt-de-en" />
      </SessionProvider>,
    );
    const b = await screen.findByRole('button', { name: 'Serve wmt-de-en v3' });
    expect(b.getAttribute('aria-disabled')).toBe('true');
    expect(b.getAttribute('title')).toMatch(/cannot create experiments or start servers/);
  });
});
