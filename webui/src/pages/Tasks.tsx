// Every task (docs/tasks.md, "Every task"): the cluster page's "Tasks" card, one row per command
// (`sf cmd run`), server (`sf serve start`), notebook (`sf notebook start`), shell, experiment's
// trial (kind TRIAL), or a kind newer than this file, as the master lists them (GET
// /api/v1/tasks?include_ended=true; the cluster page polls it with the rest of the page): id, kind,
// state (while QUEUED with why it waits, the scheduler's pending reason), exit code, the program it
// runs (cut to one line, in full as its title; under a running server's, the request its clients
// send through the master's proxy), slots, agent, a Logs button that opens its logs under the row
// (TaskLogs.tsx, polled while it runs), owner and age; a running notebook's Open (its page through
// the proxy, in a new tab; lib/taskService.ts decides which task has a service), and Kill behind a
// confirmation (POST /api/v1/tasks/{id}/kill). Who may kill mirrors the master's policy
// (canActOnTask in lib/permissions.ts); the master decides.
// A trial is numbered apart from the tasks, so a TRIAL row and a command may share an id, and the
// task routes do not take a trial's id (KillTask would kill the other task): a TRIAL row shows its
// id as `t12` (as `sf task list` does) linking to the trial's page, its experiment linked, its logs
// from the trial's route, and no Kill: a trial is paused or killed with its experiment, on its
// page, which its Actions cell links to.
import { useId, useState } from 'react';
import { api, type ApiError } from '../api/client';
import type { Task } from '../api/types';
import { ConfirmDialog, Empty, Skeleton, StateBadge } from '../components/common';
import { GatedButton, useConfirmed } from '../components/gated';
import { formatDateTime, formatRelative, stateLabel } from '../lib/format';
import type { Loaded } from '../lib/hooks';
import { canActOnTask } from '../lib/permissions';
import { useSession } from '../lib/session';
import { taskService, type TaskService } from '../lib/taskService';
import { TaskLogs, taskLogsLive, taskNoun } from './TaskLogs';

/** States in which a task has ended or is ending: there is nothing left to kill. Any other state
 *  (a newer one too) offers Kill; the master answers with the task as it is when it cannot. */
const ENDING = ['STOPPING', 'STOPPED', 'COMPLETED', 'FAILED'];

/** Whether the row is an experiment's trial (kind TRIAL): its id is a trial's, not a task's. */
export function isTrialRow(t: Pick<Task, 'kind'>): boolean {
  return t.kind === 'TRIAL';
}

/** Whether the row offers Kill: a task that has not ended or begun to end. Never a trial: the
 *  task route would take its id for another task's (a trial stops with its experiment). */
export function canBeKilled(t: Pick<Task, 'state'> & { kind?: string }): boolean {
  return t.kind !== 'TRIAL' && !ENDING.includes(t.state);
}

/** The row's id as `sf task list` prints it, and its `data-id`: `t12` for trial 12, `12` for task
 *  12, so that a trial and a task with the same id stay apart. */
export function taskIdText(t: Pick<Task, 'kind' | 'id'>): string {
  return isTrialRow(t) ? `t${t.id}` : String(t.id);
}

/** The row's React key: its kind and id (a trial and a command may share an id). */
export function taskKey(t: Pick<Task, 'kind' | 'id'>): string {
  return `${t.kind}:${t.id}`;
}

/** The dashboard's page of a row: a trial's page; a task of its own has none (undefined). */
export function taskHref(t: Pick<Task, 'kind' | 'id'>): string | undefined {
  return isTrialRow(t) ? `#/trials/${Math.trunc(t.id)}` : undefined;
}

/** The page of a trial's experiment, where it is paused or killed; undefined for other kinds. */
export function experimentHref(t: Pick<Task, 'kind' | 'experimentId'>): string | undefined {
  return isTrialRow(t) && t.experimentId > 0 ? `#/experiments/${Math.trunc(t.experimentId)}` : undefined;
}

/** True when the master has no task routes (one older than the dashboard): its own 404 for the
 *  list, which has no id that could be missing. */
export function tasksUnsupported(e: ApiError | undefined): boolean {
  return !!e && e.kind === 'http' && e.status === 404 && e.fromMaster;
}

/** The program and its arguments as one line, an argument with spaces or quotes in single quotes
 *  (as a shell would take it back). */
export function entrypointText(argv: string[]): string {
  return argv.map((a) => (a === '' || /[\s'"\\$`]/.test(a) ? `'${a.replace(/'/g, `'\\''`)}'` : a)).join(' ');
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
export function truncate(text: string, max = 60): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** When a row was created, in ms since the epoch; 0 (the oldest) when the master sent no time. */
function createdMs(t: Pick<Task, 'createdAt'>): number {
  const ms = t.createdAt ? Date.parse(t.createdAt) : NaN;
  return Number.isFinite(ms) ? ms : 0;
}

/** The card's order: live tasks first, then ended ones; newest (by creation) first within each,
 *  then the higher id, then by kind. Ids alone cannot order the list: trials are numbered apart
 *  from tasks. */
export function sortTasks(rows: Task[]): Task[] {
  return [...rows].sort(
    (a, b) => Number(!taskLogsLive(a.state)) - Number(!taskLogsLive(b.state)) || createdMs(b) - createdMs(a) || b.id - a.id || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0),
  );
}

/** Brings task `id`'s row of the Tasks card into view and focuses its first control (the cluster
 *  page's slots link here: a slot held by task 7, allocation "task7-…"); a trial's row, `data-id`
 *  "t7", is never taken for it. Falls back to the card when the row is not listed. */
export function revealTask(id: number): void {
  const row = document.querySelector<HTMLElement>(`[data-testid="task-row"][data-id="${Math.trunc(id)}"]`);
  const target = row ?? document.querySelector<HTMLElement>('[data-testid="tasks-card"]');
  target?.scrollIntoView?.({ block: 'center' });
  target?.querySelector<HTMLElement>('a, button, input')?.focus({ preventScroll: true });
}

/** The cluster page's card: the list the page polls, its empty state, and the table. `onChanged`
 *  after a kill (the page reloads the tasks and the servers). */
export function TasksSection({ tasks, onChanged }: { tasks: Loaded<Task[]>; onChanged: () => void }) {
  return (
    <div className="card" data-testid="tasks-card">
      <div className="card-head">
        <h2 id="tasks-h">Tasks</h2>
        <span className="muted small">Trials, commands, servers, notebooks and shells, live and the latest ended</span>
      </div>
      {tasksUnsupported(tasks.error) ? (
        <Empty>This master runs no tasks of their own: it has no <code>/api/v1/tasks</code> (it is older than this dashboard).</Empty>
      ) : tasks.loading && !tasks.data ? (
        <Skeleton rows={2} />
      ) : !tasks.data ? null : tasks.data.length === 0 ? (
        <Empty>
          No task has run on this cluster yet. Run a program on the cluster's slots with <code>sf cmd run -- PROGRAM [ARGS…]</code>.
        </Empty>
      ) : (
        <TasksTable rows={tasks.data} onChanged={onChanged} />
      )}
    </div>
  );
}

/** The table's columns: the logs panel's row spans them all. */
const COLUMNS = 11;

export function TasksTable({ rows, onChanged }: { rows: Task[]; onChanged: () => void }) {
  return (
    <div className="table-wrap">
      <table className="table" data-testid="tasks-table" aria-labelledby="tasks-h">
        <thead>
          <tr>
            <th scope="col">ID</th>
            <th scope="col">Kind</th>
            <th scope="col">State</th>
            <th scope="col" className="num">Exit</th>
            <th scope="col">Program</th>
            <th scope="col" className="num">Slots</th>
            <th scope="col">Agent</th>
            <th scope="col">Logs</th>
            <th scope="col">Owner</th>
            <th scope="col">Created</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {sortTasks(rows).map((t) => (
            <TaskRow key={taskKey(t)} t={t} onChanged={onChanged} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function TaskRow({ t, onChanged }: { t: Task; onChanged: () => void }) {
  const [logsOpen, setLogsOpen] = useState(false);
  const panelId = useId();
  const noun = taskNoun(t.kind);
  const program = entrypointText(t.entrypoint);
  const pending = t.state === 'QUEUED' ? t.pendingReason || 'waiting for slots' : '';
  const service = taskService(t);
  const idText = taskIdText(t);
  const page = taskHref(t);
  const experiment = experimentHref(t);
  return (
    <>
      <tr data-testid="task-row" data-id={idText} data-kind={t.kind} data-state={t.state}>
        <td className="strong" data-testid="task-id">
          {page ? (
            <a href={page} aria-label={`${idText}: ${noun} ${t.id}`} title={`The page of ${noun} ${t.id}`} data-testid="task-link">
              {idText}
            </a>
          ) : (
            idText
          )}
        </td>
        <td data-label="Kind" data-testid="task-kind">
          {stateLabel(t.kind)}
        </td>
        <td className="task-state" data-label="State" data-testid="task-state" title={pending || undefined}>
          <StateBadge state={t.state} />
          {pending && (
            <div className="muted small" data-testid="task-pending">
              {pending}
            </div>
          )}
          {t.restarts > 0 && <div className="muted small">restarted {t.restarts}×</div>}
          {t.error && (
            <div className="error-inline small" data-testid="task-error">
              {t.error}
            </div>
          )}
        </td>
        <td className="num" data-label="Exit" data-testid="task-exit" title={t.exitCode === undefined ? undefined : `exit status of rank 0${t.exitCode > 128 ? ` (signal ${t.exitCode - 128})` : ''}`}>
          {t.exitCode ?? <span className="muted">–</span>}
        </td>
        <td className="mono task-entrypoint" data-label="Program" data-testid="task-entrypoint" title={program || undefined}>
          {experiment && (
            <>
              <a href={experiment} data-testid="task-experiment">
                experiment {t.experimentId}
              </a>
              {program && ': '}
            </>
          )}
          {program ? truncate(program) : !experiment && <span className="muted">–</span>}
          {service?.kind === 'api' && <ServiceEndpoint service={service} />}
        </td>
        <td className="num" data-label="Slots" data-testid="task-slots">
          {t.slots}
          {t.resourcePool && t.resourcePool !== 'default' && <div className="muted small">pool {t.resourcePool}</div>}
        </td>
        <td data-label="Agent" data-testid="task-agent">
          {t.agentId || <span className="muted">–</span>}
        </td>
        <td data-label="Logs">
          <button
            type="button"
            className="btn btn-small"
            aria-expanded={logsOpen}
            aria-controls={logsOpen ? panelId : undefined}
            aria-label={`${logsOpen ? 'Hide logs' : 'Logs'} of ${noun} ${t.id}`}
            onClick={() => setLogsOpen((o) => !o)}
            data-testid="task-logs-toggle"
          >
            {logsOpen ? 'Hide logs' : 'Logs'}
          </button>
        </td>
        <td data-label="Owner" data-testid="task-owner">
          {t.owner || '–'}
          {t.workspace && <div className="muted small">{t.workspace}</div>}
        </td>
        <td data-label="Created" data-testid="task-created" title={formatDateTime(t.createdAt)}>
          {formatRelative(t.createdAt)}
          {t.endedAt && (
            <div className="muted small" title={formatDateTime(t.endedAt)}>
              ended {formatRelative(t.endedAt)}
            </div>
          )}
        </td>
        <td data-testid="task-actions">
          <div className="actions">
            {service?.kind === 'page' && <OpenService service={service} name={`${noun} ${t.id}`} />}
            {canBeKilled(t) ? (
              <KillTaskButton t={t} onDone={onChanged} />
            ) : isTrialRow(t) && experiment && !ENDING.includes(t.state) ? (
              <ExperimentLink href={experiment} trialId={t.id} experimentId={t.experimentId} />
            ) : (
              !service && <span className="muted">–</span>
            )}
          </div>
        </td>
      </tr>
      {logsOpen && (
        <tr data-testid="task-logs-row" data-id={idText}>
          <td colSpan={COLUMNS} className="task-logs-cell">
            <TaskLogs id={t.id} kind={t.kind} state={t.state} panelId={panelId} />
          </td>
        </tr>
      )}
    </>
  );
}

/** In a live trial's Actions, where a task has Kill: its experiment's page, where the trial is
 *  paused or killed with its experiment (the task route cannot kill a trial). */
function ExperimentLink({ href, trialId, experimentId }: { href: string; trialId: number; experimentId: number }) {
  return (
    <a className="btn btn-small" href={href} aria-label={`Experiment ${experimentId}: pause or kill trial ${trialId} there`} title="A trial is paused or killed with its experiment, on its page" data-testid="task-experiment-action">
      Experiment
    </a>
  );
}

/** Open, beside Kill: a task's page (a notebook's Jupyter) through the master's proxy, on the
 *  dashboard's origin, whose session cookie authorises it; in a new tab. `name`: "notebook 56". */
export function OpenService({ service, name }: { service: TaskService & { kind: 'page' }; name: string }) {
  return (
    <a className="btn btn-small" href={service.href} target="_blank" rel="noopener" aria-label={`Open ${name} in a new tab`} data-testid="task-open">
      Open
    </a>
  );
}

/** Under a server's program: the request its clients send through the master's proxy, selected
 *  whole by one click, to copy. */
function ServiceEndpoint({ service }: { service: TaskService & { kind: 'api' } }) {
  return (
    <div className="small select-all" title={`Its API through the master at ${service.href}: a program sends its sf token as Authorization: Bearer`} data-testid="task-endpoint">
      {service.usage}
    </div>
  );
}

/** Kill, behind a confirmation; `onDone` after the master took it (the list then shows STOPPING,
 *  or STOPPED for a task that was still queued). */
export function KillTaskButton({ t, onDone }: { t: Task; onDone: () => void }) {
  const { me } = useSession();
  const c = useConfirmed(() => api.killTask(t.id), onDone);
  const noun = taskNoun(t.kind);
  const program = entrypointText(t.entrypoint);
  const what =
    t.state === 'QUEUED'
      ? 'It leaves the queue and never runs.'
      : t.kind === 'SERVER'
        ? `Its sf-serve process ends and ${(t.slots || 1) === 1 ? 'its slot is' : `its ${t.slots} slots are`} freed; requests to it fail from then on.`
        : t.kind === 'NOTEBOOK'
          ? `Jupyter stops, what its kernels held is lost, and ${(t.slots || 1) === 1 ? 'its slot is' : `its ${t.slots} slots are`} freed.`
          : `Its processes are stopped and ${(t.slots || 1) === 1 ? 'its slot is' : `its ${t.slots} slots are`} freed; it is not run again.`;
  return (
    <div className="actions">
      <GatedButton may={canActOnTask(me, t)} label="Kill" ariaLabel={`Kill ${noun} ${t.id}`} testId="task-kill" danger onClick={c.ask} />
      <ConfirmDialog
        open={c.open}
        title={`Kill ${noun} ${t.id}?`}
        body={
          <>
            {program && (
              <p>
                <code>{truncate(program, 120)}</code>
                {t.owner ? <> ({t.owner}'s)</> : null}
              </p>
            )}
            <p>{what} This cannot be undone.</p>
            {c.errorLine}
          </>
        }
        confirmLabel="Kill"
        danger
        busy={c.busy}
        onConfirm={c.run}
        onCancel={c.cancel}
      />
    </div>
  );
}
