// A task's logs (GET /api/v1/tasks/{id}/logs: a command's, a notebook's, or a server's, whose id
// is its task's; for a row of kind TRIAL the trial's own, GET /api/v1/trials/{id}/logs, since a
// trial's id is no task's), in a panel that the Servers and Tasks tables open under a row. The
// panel polls (the task route has no follow mode; the trial route's is the trial page's): it reads the first page, then, while the task can still write (any state but
// STOPPED, COMPLETED and FAILED), asks every `pollMs` for the lines after the last id it has. When
// the task ends it asks once more (its last lines) and stops; an ended task's older lines come a
// page at a time with "Load more".
// Bounds: a request asks for at most PAGE lines; the panel keeps the newest KEEP and drops older
// ones. A failed request shows the master's message and, while the task is live, is tried again
// at the next poll; Retry asks at once.
import { useEffect, useRef, useState } from 'react';
import { api, type ApiError } from '../api/client';
import type { LogLine } from '../api/types';
import { formatDateTime } from '../lib/format';
import { toApiError } from '../lib/hooks';

const PAGE = 1000; // lines asked for per request
const KEEP = 5000; // lines kept in the panel
export const TASK_LOGS_POLL_MS = 2000;

/** States after which a task (a command, a server) writes no more log lines: its panel stops
 *  polling. Any other state, a newer one too, is polled. */
const ENDED = ['STOPPED', 'COMPLETED', 'FAILED'];

export function taskLogsLive(state: string): boolean {
  return !ENDED.includes(state);
}

const NOUNS: Record<string, string> = { SERVER: 'server', COMMAND: 'command', NOTEBOOK: 'notebook', SHELL: 'shell', TRIAL: 'trial' };

/** What the panel calls the task: "server", "command", "notebook", "shell", "trial", or "task"
 *  for a kind it does not know. */
export function taskNoun(kind: string | undefined): string {
  return (kind && Object.hasOwn(NOUNS, kind) && NOUNS[kind]) || 'task';
}

/** The route a row's lines come from: a trial's own for kind TRIAL (its id is a trial's, which
 *  the task route would take for another task's), the task route for every other kind. */
export function taskLogsSource(kind: string | undefined): 'trial' | 'task' {
  return kind === 'TRIAL' ? 'trial' : 'task';
}

/** The lines of `next` after the last of `prev`, appended; the newest KEEP kept. */
function appendLines(prev: LogLine[], next: LogLine[]): LogLine[] {
  const last = prev.length ? prev[prev.length - 1].id : 0;
  const fresh = next.filter((l) => l.id > last);
  if (fresh.length === 0) return prev;
  const all = prev.concat(fresh);
  return all.length > KEEP ? all.slice(all.length - KEEP) : all;
}

/** The panel of task `id` (`kind` names it, SERVER, COMMAND, ..., and says where its lines come
 *  from: TRIAL, the trial's route), polled while `state` is live. */
export function TaskLogs({ id, kind, state, pollMs = TASK_LOGS_POLL_MS, panelId }: { id: number; kind?: string; state: string; pollMs?: number; panelId?: string }) {
  const live = taskLogsLive(state);
  const noun = taskNoun(kind);
  const source = taskLogsSource(kind);
  const [lines, setLines] = useState<LogLine[]>([]);
  const [error, setError] = useState<ApiError>();
  const [loading, setLoading] = useState(true);
  const [more, setMore] = useState(false);
  const [tick, setTick] = useState(0); // Retry and Load more: ask again now
  const lastIdRef = useRef(0);
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);

  useEffect(() => {
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let alive = true;
    const step = async () => {
      if (live && document.visibilityState === 'hidden') {
        timer = setTimeout(step, 1000);
        return;
      }
      let full = false;
      try {
        const ask = { afterId: lastIdRef.current, limit: PAGE };
        const page = await (source === 'trial' ? api.getTrialLogs(id, ask, ctl.signal) : api.getTaskLogs(id, ask, ctl.signal));
        if (!alive) return;
        if (page.length) lastIdRef.current = Math.max(lastIdRef.current, page[page.length - 1].id);
        setLines((prev) => appendLines(prev, page));
        full = page.length >= PAGE;
        setError(undefined);
      } catch (e) {
        if (!alive) return;
        const err = toApiError(e);
        if (err.kind !== 'aborted') setError(err);
      }
      setLoading(false);
      setMore(!live && full);
      // a full page means more is waiting: a live task's next page is asked for at once
      if (live) timer = setTimeout(step, full ? 0 : pollMs);
    };
    void step();
    return () => {
      alive = false;
      ctl.abort();
      clearTimeout(timer);
    };
  }, [id, source, live, pollMs, tick]);

  // keep the newest line in view unless the reader scrolled up
  useEffect(() => {
    if (box.current && atBottom.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines]);

  return (
    <div className="task-logs" id={panelId} data-testid="task-logs-panel" data-id={source === 'trial' ? `t${id}` : id} data-source={source}>
      <div className="task-logs-head">
        <strong>
          Logs of {noun} {id}
        </strong>
        <span className="muted small" role="status" data-testid="task-logs-state" data-live={live ? 'true' : 'false'}>
          {live ? `live: new lines every ${Math.round(pollMs / 1000)} s` : `${noun} ${state.toLowerCase()}: no new lines`}
        </span>
      </div>
      {error && (
        <p className="error-inline small" role="alert" data-testid="task-logs-error">
          Could not read the logs: {error.message}{' '}
          <button type="button" className="btn btn-small" onClick={() => setTick((t) => t + 1)}>
            Retry
          </button>
        </p>
      )}
      <div
        className="logs"
        ref={box}
        tabIndex={0}
        role="log"
        aria-label={`Logs of ${noun} ${id}`}
        data-testid="task-log-lines"
        data-lines={lines.length}
        onScroll={(e) => {
          const el = e.currentTarget;
          atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {loading ? (
          <div className="muted">Loading logs…</div>
        ) : lines.length === 0 ? (
          <div className="muted">No log lines yet.</div>
        ) : (
          lines.map((l) => (
            <div key={l.id} className={`log-line log-${l.stream}`} title={l.taskId || undefined}>
              <span className="log-time">{formatDateTime(l.time)}</span> <span className="log-rank">[{l.rank}]</span> {l.message}
            </div>
          ))
        )}
      </div>
      {more && (
        <button type="button" className="btn btn-small" onClick={() => setTick((t) => t + 1)} data-testid="task-logs-more">
          Load more
        </button>
      )}
    </div>
  );
}
