// Small shared building blocks: state badge, progress bar, error banner, skeletons, empty state,
// confirmation dialog.
import { useEffect, useRef, type ReactNode } from 'react';
import { createPortal } from 'react-dom';
import { ApiError } from '../api/client';
import { stateLabel, stateTone } from '../lib/format';

export function StateBadge({ state }: { state: string }) {
  return (
    <span className={`badge badge-${stateTone(state)}`} data-testid="state-badge" data-state={state}>
      {stateLabel(state)}
    </span>
  );
}

/** A bar filled to done/total; its text is "done/total" unless `text` says otherwise. */
export function ProgressBar({ done, total, label, text }: { done: number; total: number; label?: string; text?: string }) {
  const pct = total > 0 ? Math.max(0, Math.min(100, (done / total) * 100)) : 0;
  return (
    <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(pct)} aria-label={label ?? 'Progress'}>
      <div className="progress-fill" style={{ width: `${pct}%` }} />
      <span className="progress-text">{text ?? (total > 0 ? `${done}/${total}` : '–')}</span>
    </div>
  );
}

export function ErrorBanner({ error, onRetry, what }: { error: ApiError | undefined; onRetry?: () => void; what?: string }) {
  if (!error) return null;
  const title = error.unreachable
    ? error.kind === 'http'
      ? `The master cannot be reached: HTTP ${error.status} from something else at this address`
      : 'The master cannot be reached'
    : error.kind === 'parse'
      ? 'The master sent an answer the dashboard does not understand'
      : error.status === 404
        ? `${what ?? 'This item'} was not found`
        : error.status === 403
          ? 'You are not allowed to do this'
          : error.status === 401
            ? 'You are not logged in'
            : `The master answered with an error (${error.status})`;
  return (
    <div className="error-banner" role="alert" data-testid="error-banner">
      <div>
        <strong>{title}</strong>
        <div className="error-detail">{error.message}</div>
      </div>
      {onRetry && (
        <button type="button" onClick={onRetry} className="btn">
          Retry
        </button>
      )}
    </div>
  );
}

export function Skeleton({ rows = 5, height = 18 }: { rows?: number; height?: number }) {
  return (
    <div className="skeleton" aria-busy="true" aria-label="Loading" data-testid="skeleton">
      {Array.from({ length: rows }, (_, i) => (
        <div key={i} className="skeleton-row" style={{ height }} />
      ))}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return (
    <div className="empty" data-testid="empty-state">
      {children}
    </div>
  );
}

/** Modal confirmation. Focus starts on Cancel; Escape cancels; Tab stays inside. */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  body: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const cancelRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!props.open) return;
    const prev = document.activeElement as HTMLElement | null;
    cancelRef.current?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') props.onCancel();
      if (e.key === 'Tab' && ref.current) {
        const f = ref.current.querySelectorAll<HTMLElement>('button:not([disabled])');
        if (f.length === 0) return;
        const first = f[0];
        const last = f[f.length - 1];
        if (e.shiftKey && document.activeElement === first) {
          e.preventDefault();
          last.focus();
        } else if (!e.shiftKey && document.activeElement === last) {
          e.preventDefault();
          first.focus();
        }
      }
    };
    document.addEventListener('keydown', onKey);
    return () => {
      document.removeEventListener('keydown', onKey);
      prev?.focus?.();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [props.open]);
  if (!props.open) return null;
  return createPortal(
    <div className="modal-backdrop" onClick={props.onCancel}>
      <div className="modal" role="dialog" aria-modal="true" aria-labelledby="confirm-title" ref={ref} onClick={(e) => e.stopPropagation()} data-testid="confirm-dialog">
        <h2 id="confirm-title">{props.title}</h2>
        <div className="modal-body">{props.body}</div>
        <div className="modal-actions">
          <button type="button" className="btn" ref={cancelRef} onClick={props.onCancel}>
            Cancel
          </button>
          <button type="button" className={`btn ${props.danger ? 'btn-danger' : 'btn-primary'}`} onClick={props.onConfirm} disabled={props.busy} data-testid="confirm-button">
            {props.busy ? 'Working…' : props.confirmLabel}
          </button>
        </div>
      </div>
    </div>,
    document.body,
  );
}

/** Column header button that sorts a table; announces the direction through aria-sort. */
export function SortHeader(props: { label: string; col: string; sort: { key: string; dir: 'asc' | 'desc' }; onSort: (col: string) => void; className?: string }) {
  const active = props.sort.key === props.col;
  return (
    <th scope="col" aria-sort={active ? (props.sort.dir === 'asc' ? 'ascending' : 'descending') : 'none'} className={props.className}>
      <button type="button" className="th-btn" onClick={() => props.onSort(props.col)}>
        {props.label}
        <span aria-hidden="true" className="sort-ind">{active ? (props.sort.dir === 'asc' ? '▲' : '▼') : ''}</span>
      </button>
    </th>
  );
}
