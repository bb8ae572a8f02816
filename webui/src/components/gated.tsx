// Buttons that act on something behind a confirmation, shared by the Servers and Tasks cards and
// the model page's Serve: GatedButton shows what the logged-in user may not do as a disabled
// button with the reason (lib/permissions.ts), and useConfirmed runs one request behind a
// ConfirmDialog, keeping the dialog open with the master's message when it fails.
import { useId, useState, type ReactNode } from 'react';
import { toApiError } from '../lib/hooks';
import type { Permission } from '../lib/permissions';

/** A button that asks first; where `may` says no it stays focusable but aria-disabled, with the
 *  reason as its tooltip and accessible description (as the experiment actions do). */
export function GatedButton(props: { may: Permission; label: string; ariaLabel: string; testId: string; danger?: boolean; onClick: () => void }) {
  const whyId = useId();
  const { may } = props;
  return (
    <>
      <button
        type="button"
        className={`btn btn-small ${props.danger ? 'btn-danger-outline' : ''} ${may.ok ? '' : 'btn-denied'}`}
        onClick={() => may.ok && props.onClick()}
        aria-disabled={may.ok ? undefined : true}
        aria-describedby={may.ok ? undefined : whyId}
        title={may.ok ? undefined : may.reason}
        aria-label={props.ariaLabel}
        data-testid={props.testId}
        data-denied={may.ok ? undefined : 'true'}
      >
        {props.label}
      </button>
      {!may.ok && (
        <span id={whyId} className="sr-only">
          {may.reason}
        </span>
      )}
    </>
  );
}

/** One request behind a confirmation: the dialog stays open with the master's message when the
 *  request fails, and closes when it succeeds. */
export function useConfirmed<T>(request: () => Promise<T>, onDone: (result: T) => void) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string>();
  const run = async () => {
    setBusy(true);
    setErr(undefined);
    try {
      const result = await request();
      setOpen(false);
      onDone(result);
    } catch (e) {
      setErr(toApiError(e).message);
    } finally {
      setBusy(false);
    }
  };
  const ask = () => {
    setErr(undefined);
    setOpen(true);
  };
  const errorLine: ReactNode = err ? (
    <p className="error-inline" role="alert">
      {err}
    </p>
  ) : null;
  return { open, busy, run, ask, cancel: () => setOpen(false), errorLine };
}
