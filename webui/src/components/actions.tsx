// Pause / activate / kill / archive buttons for an experiment, each behind a confirmation. Where
// the logged-in user may not act on the experiment (a viewer; a user on someone else's experiment
// outside their editor/admin workspaces) the buttons stay visible but disabled, with the reason as
// their tooltip and description; the master enforces the same rule (403) regardless.
import { useId, useState } from 'react';
import { api } from '../api/client';
import type { Experiment, ExperimentAction } from '../api/types';
import { toApiError } from '../lib/hooks';
import { canActOn } from '../lib/permissions';
import { useSession } from '../lib/session';
import { ConfirmDialog } from './common';

const TERMINAL = ['EXPERIMENT_STATE_COMPLETED', 'EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_ERROR'];

/** Which actions make sense in a state (the master still decides; a 409 is shown). */
export function allowedActions(e: Pick<Experiment, 'state' | 'archived'>): ExperimentAction[] {
  const s = e.state;
  const out: ExperimentAction[] = [];
  if (s === 'EXPERIMENT_STATE_ACTIVE') out.push('pause');
  if (s === 'EXPERIMENT_STATE_PAUSED') out.push('activate');
  if (s === 'EXPERIMENT_STATE_ACTIVE' || s === 'EXPERIMENT_STATE_PAUSED' || s.startsWith('EXPERIMENT_STATE_STOPPING')) out.push('kill');
  if (TERMINAL.includes(s) && !e.archived) out.push('archive');
  return out;
}

const LABEL: Record<ExperimentAction, string> = { pause: 'Pause', activate: 'Activate', kill: 'Kill', archive: 'Archive' };
const EXPLAIN: Record<ExperimentAction, string> = {
  pause: 'Running trials checkpoint and stop; activating later resumes them from there.',
  activate: 'Paused trials resume from their latest checkpoints and queued trials get scheduled.',
  kill: 'All trials stop now without a final checkpoint. This cannot be undone.',
  archive: 'The experiment is hidden from the default list; its data stays.',
};

export function ExperimentActions({ exp, onDone, compact }: { exp: Experiment; onDone: () => void; compact?: boolean }) {
  const [pending, setPending] = useState<ExperimentAction>();
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string>();
  const { me } = useSession();
  const may = canActOn(me, exp);
  const whyId = useId();
  const actions = allowedActions(exp);
  const run = async () => {
    if (!pending) return;
    setBusy(true);
    setErr(undefined);
    try {
      await api.experimentAction(exp.id, pending);
      setPending(undefined);
      onDone();
    } catch (e) {
      setErr(toApiError(e).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className={`actions ${compact ? 'actions-compact' : ''}`}>
      {actions.map((a) => (
        <button
          key={a}
          type="button"
          className={`btn btn-small ${a === 'kill' ? 'btn-danger-outline' : ''} ${may.ok ? '' : 'btn-denied'}`}
          onClick={() => {
            if (!may.ok) return;
            setErr(undefined);
            setPending(a);
          }}
          // aria-disabled rather than disabled: the button stays focusable and its tooltip shows
          aria-disabled={may.ok ? undefined : true}
          aria-describedby={may.ok ? undefined : whyId}
          title={may.ok ? undefined : may.reason}
          aria-label={`${LABEL[a]} experiment ${exp.id}`}
          data-testid={`action-${a}`}
          data-denied={may.ok ? undefined : 'true'}
        >
          {LABEL[a]}
        </button>
      ))}
      {actions.length > 0 && !may.ok && (
        <span id={whyId} className="sr-only">
          {may.reason}
        </span>
      )}
      {actions.length === 0 && <span className="muted">–</span>}
      <ConfirmDialog
        open={pending !== undefined}
        title={pending ? `${LABEL[pending]} experiment ${exp.id}?` : ''}
        body={
          <>
            <p>
              <strong>{exp.name || `Experiment ${exp.id}`}</strong>
            </p>
            <p>{pending ? EXPLAIN[pending] : ''}</p>
            {err && (
              <p className="error-inline" role="alert">
                {err}
              </p>
            )}
          </>
        }
        confirmLabel={pending ? LABEL[pending] : ''}
        danger={pending === 'kill'}
        busy={busy}
        onConfirm={run}
        onCancel={() => setPending(undefined)}
      />
    </div>
  );
}
