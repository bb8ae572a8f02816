// Whether a task has a service to reach through the master's proxy, and how the dashboard offers
// it (docs/tasks.md, "The proxy"): every task's service answers at `/proxy/TASK_ID/` on the
// master's own origin, the dashboard's, authorised by the session cookie the dashboard already
// holds, so a plain link works with no token. Only a RUNNING task has a service: before, it has
// not reported one; after, the proxy answers 503. A kind this file does not know (SHELL, later)
// gets nothing until it is added here.
import type { Task } from '../api/types';

/** A task's service as the dashboard offers it:
 *  - `page`: a web page to open in a new tab (a NOTEBOOK's Jupyter) at `href`;
 *  - `api`: an HTTP API for programs, not a page (a SERVER's sf-serve: GET of its base answers
 *    404); `href` is its base and `usage` the request a client sends, shown as text to copy. */
export type TaskService = { kind: 'page'; href: string } | { kind: 'api'; href: string; usage: string };

/** The path of task `id`'s service through the master: `/proxy/ID/`, on the dashboard's origin. */
export function proxyPath(id: number): string {
  return `/proxy/${Math.trunc(id)}/`;
}

/** Task `t`'s service, or undefined when it has none to reach now (its kind serves nothing, or it
 *  is not RUNNING: queued, ending, ended, or a state newer than this dashboard). */
export function taskService(t: Pick<Task, 'id' | 'kind' | 'state'>): TaskService | undefined {
  if (t.state !== 'RUNNING' || !Number.isSafeInteger(t.id) || t.id <= 0) return undefined;
  const href = proxyPath(t.id);
  if (t.kind === 'NOTEBOOK') return { kind: 'page', href };
  if (t.kind === 'SERVER') return { kind: 'api', href, usage: `POST ${href}v1/translate` };
  return undefined;
}

/** A server as the Servers card lists it (GET /api/v1/servings): its service once READY, as its
 *  task's (a server's id is its task's). STARTING has no URL yet, so nothing is offered before. */
export function servingService(s: { id: number; state: string }): TaskService | undefined {
  return s.state === 'READY' ? taskService({ id: s.id, kind: 'SERVER', state: 'RUNNING' }) : undefined;
}
