// Servers the master schedules (`sf serve start`; docs/serving.md): the cluster page's "Servers"
// card, one row per server with its model version, state, URL once READY (and its API through the
// master's proxy, lib/taskService.ts), slots, agent, a Logs
// button that opens its logs under the row (TaskLogs.tsx: GET /api/v1/tasks/{id}/logs, a server's id
// being its task's; polled while the server runs), owner and creation time, and Stop behind a confirmation
// (POST /api/v1/servings/{id}/stop); and the model page's Serve button, which starts
// one for a version with the master's defaults (POST /api/v1/servings). The cluster page polls the
// list (GET /api/v1/servings) with the rest of the page; this file only shows it and acts on it.
// Who may stop or start mirrors the master's policy (lib/permissions.ts); the master decides.
import { useId, useState } from 'react';
import { api, type ApiError } from '../api/client';
import type { Serving } from '../api/types';
import { ConfirmDialog, Empty, Skeleton, StateBadge } from '../components/common';
import { GatedButton, useConfirmed } from '../components/gated';
import { formatDateTime } from '../lib/format';
import type { Loaded } from '../lib/hooks';
import { canCreate, canStopServing } from '../lib/permissions';
import { useSession } from '../lib/session';
import { servingService } from '../lib/taskService';
import { TaskLogs } from './TaskLogs';

/** States in which a server has ended or is ending: there is nothing left to stop. Any other
 *  state (a newer one too) offers Stop; the master answers 409 when it cannot. */
const ENDING = ['STOPPING', 'STOPPED', 'FAILED'];

export function canBeStopped(s: Pick<Serving, 'state'>): boolean {
  return !ENDING.includes(s.state);
}

/** The server's URL when it may be shown as a link: READY, and http(s) (the master checks the
 *  same; a link is never made of anything else). */
export function serverLink(s: Pick<Serving, 'state' | 'url'>): string | undefined {
  return s.state === 'READY' && /^https?:\/\/[^\s]+$/i.test(s.url) ? s.url : undefined;
}

/** True when the master has no servings routes (one older than the dashboard): its own 404 for
 *  the list, which has no id that could be missing. */
export function servingsUnsupported(e: ApiError | undefined): boolean {
  return !!e && e.kind === 'http' && e.status === 404 && e.fromMaster;
}

const modelHref = (name: string) => `#/models/${encodeURIComponent(name)}`;

/** Brings server `id`'s row of the Servers card into view and focuses its first control (the
 *  cluster page's slots link here: the hash holds the route, so there is no anchor to jump to).
 *  Falls back to the card when the row is not listed (a master without the servings routes). */
export function revealServer(id: number): void {
  const row = document.querySelector<HTMLElement>(`[data-testid="server-row"][data-id="${Math.trunc(id)}"]`);
  const target = row ?? document.querySelector<HTMLElement>('[data-testid="servers-card"]');
  target?.scrollIntoView?.({ block: 'center' });
  target?.querySelector<HTMLElement>('a, button, input')?.focus({ preventScroll: true });
}

/** The cluster page's card: the list the page polls, a "Show stopped" switch (in the URL), the
 *  empty state, and the table. `onChanged` after a Stop (default: the list is asked again). */
export function ServersSection({ servers, showStopped, onShowStopped, onChanged = servers.reload }: { servers: Loaded<Serving[]>; showStopped: boolean; onShowStopped: (show: boolean) => void; onChanged?: () => void }) {
  const unsupported = servingsUnsupported(servers.error);
  return (
    <div className="card" data-testid="servers-card">
      <div className="card-head">
        <h2 id="servers-h">Servers</h2>
        <label className="check">
          <input type="checkbox" checked={showStopped} onChange={(e) => onShowStopped(e.target.checked)} data-testid="servers-show-stopped" />
          Show stopped
        </label>
      </div>
      {unsupported ? (
        <Empty>This master does not schedule servers: it has no <code>/api/v1/servings</code> (it is older than this dashboard).</Empty>
      ) : servers.loading && !servers.data ? (
        <Skeleton rows={2} />
      ) : !servers.data ? null : servers.data.length === 0 ? (
        <Empty>
          {showStopped ? 'No server has run on this cluster yet.' : 'No server is running.'} Start one for a registered model with{' '}
          <code>sf serve start --model NAME [--version N]</code>, or Serve on a model's page.
        </Empty>
      ) : (
        <ServersTable rows={servers.data} onChanged={onChanged} />
      )}
    </div>
  );
}

export function ServersTable({ rows, onChanged }: { rows: Serving[]; onChanged: () => void }) {
  return (
    <div className="table-wrap">
      <table className="table" data-testid="servers-table" aria-labelledby="servers-h">
        <thead>
          <tr>
            <th scope="col">Model</th>
            <th scope="col">Version</th>
            <th scope="col">State</th>
            <th scope="col">URL</th>
            <th scope="col" className="num">Slots</th>
            <th scope="col">Agent</th>
            <th scope="col">Logs</th>
            <th scope="col">Owner</th>
            <th scope="col">Created</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((s) => (
            <ServerRow key={s.id} s={s} onChanged={onChanged} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The table's columns: the logs panel's row spans them all. */
const COLUMNS = 10;

function ServerRow({ s, onChanged }: { s: Serving; onChanged: () => void }) {
  const link = serverLink(s);
  const proxied = servingService(s);
  const [logsOpen, setLogsOpen] = useState(false);
  const panelId = useId();
  return (
    <>
      <tr data-testid="server-row" data-id={s.id} data-state={s.state}>
        <td data-testid="server-model">
          {s.modelName ? (
            <a href={modelHref(s.modelName)} className="strong">
              {s.modelName}
            </a>
          ) : (
            <span className="muted">–</span>
          )}
          <div className="muted small">server {s.id}</div>
        </td>
        <td data-label="Version" data-testid="server-version" title={s.checkpointUuid ? `checkpoint ${s.checkpointUuid}` : undefined}>
          {s.modelVersion ? `v${s.modelVersion}` : '–'}
        </td>
        <td data-label="State" data-testid="server-state">
          <StateBadge state={s.state} />
          {s.state === 'QUEUED' && <div className="muted small">waiting for slots</div>}
          {s.restarts > 0 && <div className="muted small">restarted {s.restarts}×</div>}
          {s.error && (
            <div className="error-inline small" data-testid="server-error">
              {s.error}
            </div>
          )}
        </td>
        <td data-label="URL" data-testid="server-url">
          {link ? (
            <a href={link} target="_blank" rel="noreferrer" className="mono">
              {link}
            </a>
          ) : (
            !proxied && <span className="muted">–</span>
          )}
          {proxied?.kind === 'api' && (
            <div className="muted small" data-testid="server-proxy">
              through the master:{' '}
              <code className="mono select-all" title={`With your sf token as Authorization: Bearer; the master adds the server's own (${proxied.href})`}>
                {proxied.usage}
              </code>
            </div>
          )}
        </td>
        <td className="num" data-label="Slots" data-testid="server-slots">
          {s.slots}
          {s.resourcePool && <div className="muted small">pool {s.resourcePool}</div>}
        </td>
        <td data-label="Agent" data-testid="server-agent">
          {s.agentId || <span className="muted">–</span>}
        </td>
        <td data-label="Logs" data-testid="server-logs">
          <button
            type="button"
            className="btn btn-small"
            aria-expanded={logsOpen}
            aria-controls={logsOpen ? panelId : undefined}
            aria-label={`${logsOpen ? 'Hide logs' : 'Logs'} of server ${s.id}`}
            onClick={() => setLogsOpen((o) => !o)}
            data-testid="server-logs-toggle"
          >
            {logsOpen ? 'Hide logs' : 'Logs'}
          </button>
        </td>
        <td data-label="Owner">
          {s.owner || '–'}
          {s.workspace && <div className="muted small">{s.workspace}</div>}
        </td>
        <td data-label="Created">
          {formatDateTime(s.createdAt)}
          {s.endedAt && <div className="muted small">ended {formatDateTime(s.endedAt)}</div>}
        </td>
        <td>{canBeStopped(s) ? <StopServerButton s={s} onDone={onChanged} /> : <span className="muted">–</span>}</td>
      </tr>
      {logsOpen && (
        <tr data-testid="server-logs-row" data-id={s.id}>
          <td colSpan={COLUMNS} className="task-logs-cell">
            <TaskLogs id={s.id} kind="SERVER" state={s.state} panelId={panelId} />
          </td>
        </tr>
      )}
    </>
  );
}

/** Stop, behind a confirmation; `onDone` after the master took it (the list then shows STOPPING). */
export function StopServerButton({ s, onDone }: { s: Serving; onDone: () => void }) {
  const { me } = useSession();
  const c = useConfirmed(() => api.stopServing(s.id), onDone);
  const what = `${s.modelName || 'server'}${s.modelVersion ? ` v${s.modelVersion}` : ''}`;
  return (
    <div className="actions">
      <GatedButton may={canStopServing(me, s)} label="Stop" ariaLabel={`Stop server ${s.id}`} testId="server-stop" danger onClick={c.ask} />
      <ConfirmDialog
        open={c.open}
        title={`Stop server ${s.id}?`}
        body={
          <>
            <p>
              <strong>{what}</strong>
              {serverLink(s) ? <> at {serverLink(s)}</> : null}
            </p>
            <p>
              Its sf-serve process ends and {(s.slots || 1) === 1 ? 'its slot is' : `its ${s.slots} slots are`} freed; requests to it fail from then on. This cannot be undone: a new
              server starts with <code>sf serve start --model {s.modelName || 'NAME'}{s.modelVersion ? ` --version ${s.modelVersion}` : ''}</code>.
            </p>
            {c.errorLine}
          </>
        }
        confirmLabel="Stop"
        danger
        busy={c.busy}
        onConfirm={c.run}
        onCancel={c.cancel}
      />
    </div>
  );
}

/** Serve, on a model version: starts a server with the master's defaults after a confirmation;
 *  `onStarted` gets the new server (QUEUED, usually). */
export function ServeButton({ model, version, onStarted }: { model: string; version: number; onStarted: (s: Serving) => void }) {
  const { me } = useSession();
  const c = useConfirmed(() => api.startServing(model, version), onStarted);
  return (
    <>
      <GatedButton may={canCreate(me)} label="Serve" ariaLabel={`Serve ${model} v${version}`} testId="version-serve" onClick={c.ask} />
      <ConfirmDialog
        open={c.open}
        title={`Serve ${model} v${version}?`}
        body={
          <>
            <p>
              The master starts sf-serve for this version on one slot of the default resource pool, in the model's workspace, listening on 127.0.0.1 of the
              agent it lands on. Its URL shows on the cluster page once it is ready.
            </p>
            <p className="muted small">
              Other slots, pool or address: <code>sf serve start --model {model} --version {version} …</code>
            </p>
            {c.errorLine}
          </>
        }
        confirmLabel="Serve"
        busy={c.busy}
        onConfirm={c.run}
        onCancel={c.cancel}
      />
    </>
  );
}

/** What the model page says after Serve: the new server and where to follow it. */
export function ServeStarted({ s, onDismiss }: { s: Serving; onDismiss: () => void }) {
  return (
    <div className="card" role="status" data-testid="serve-started">
      Server {s.id} for <strong>{s.modelName} v{s.modelVersion}</strong> is {s.state.toLowerCase()}: follow it on the <a href="#/cluster">cluster page</a>.{' '}
      <button type="button" className="btn btn-small" onClick={onDismiss}>
        Dismiss
      </button>
    </div>
  );
}
