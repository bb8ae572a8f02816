// Which task has a service to reach through the master's proxy (/proxy/ID/ on the dashboard's
// origin) and how the dashboard offers it: a running notebook's page, a running server's API; no
// other kind (a kind added later included) and no other state.
import { describe, expect, it } from 'vitest';
import { proxyPath, servingService, taskService } from '../src/lib/taskService';

describe('taskService', () => {
  it('offers a running notebook as a page at /proxy/ID/', () => {
    expect(taskService({ id: 56, kind: 'NOTEBOOK', state: 'RUNNING' })).toEqual({ kind: 'page', href: '/proxy/56/' });
  });

  it("offers a running server as an API: its base and the request a client sends", () => {
    expect(taskService({ id: 52, kind: 'SERVER', state: 'RUNNING' })).toEqual({ kind: 'api', href: '/proxy/52/', usage: 'POST /proxy/52/v1/translate' });
  });

  it('offers nothing for a task that is not running', () => {
    for (const state of ['QUEUED', 'STOPPING', 'STOPPED', 'COMPLETED', 'FAILED', 'UNKNOWN', 'PAUSED'])
      for (const kind of ['NOTEBOOK', 'SERVER']) expect(taskService({ id: 56, kind, state }), `${kind} ${state}`).toBeUndefined();
  });

  it('offers nothing for a kind without a service, or one this dashboard does not know', () => {
    for (const kind of ['COMMAND', 'SHELL', 'UNKNOWN', '']) expect(taskService({ id: 54, kind, state: 'RUNNING' }), kind).toBeUndefined();
  });

  it('makes no link of an id that is not a task id', () => {
    for (const id of [0, -3, NaN, 1.5, Number.MAX_SAFE_INTEGER + 2]) expect(taskService({ id, kind: 'NOTEBOOK', state: 'RUNNING' }), String(id)).toBeUndefined();
    expect(proxyPath(7)).toBe('/proxy/7/');
  });
});

describe('servingService', () => {
  it("offers a server's API once READY, as its task's, and nothing before or after", () => {
    expect(servingService({ id: 52, state: 'READY' })).toEqual({ kind: 'api', href: '/proxy/52/', usage: 'POST /proxy/52/v1/translate' });
    for (const state of ['QUEUED', 'STARTING', 'STOPPING', 'STOPPED', 'FAILED']) expect(servingService({ id: 52, state }), state).toBeUndefined();
  });
});
