// The header's user menu: who is logged in (username, role, workspaces), the API tokens page, the
// users page for admins, and Log out. A disclosure button; Escape or a click elsewhere closes it.
import { useEffect, useRef, useState } from 'react';
import { toApiError } from '../lib/hooks';
import { isAdmin } from '../lib/permissions';
import { useSession } from '../lib/session';

export function UserMenu() {
  const session = useSession();
  const me = session.me;
  const [open, setOpen] = useState(false);
  const [err, setErr] = useState<string>();
  const [busy, setBusy] = useState(false);
  const ref = useRef<HTMLDivElement>(null);
  const buttonRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!open) return;
    const onDown = (e: MouseEvent) => {
      if (ref.current && !ref.current.contains(e.target as Node)) setOpen(false);
    };
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        setOpen(false);
        buttonRef.current?.focus();
      }
    };
    document.addEventListener('mousedown', onDown);
    document.addEventListener('keydown', onKey);
    return () => {
      document.removeEventListener('mousedown', onDown);
      document.removeEventListener('keydown', onKey);
    };
  }, [open]);
  if (!me) return null;
  const logout = async () => {
    setBusy(true);
    setErr(undefined);
    try {
      await session.logout();
    } catch (e) {
      setErr(`Could not log out: ${toApiError(e).message}`);
      setBusy(false);
    }
  };
  return (
    <div className="user-menu" ref={ref} data-testid="user-menu" data-username={me.username} data-role={me.role}>
      <button
        ref={buttonRef}
        type="button"
        className="user-button"
        aria-expanded={open}
        aria-controls="user-menu-panel"
        onClick={() => setOpen((o) => !o)}
        data-testid="user-menu-button"
      >
        <span data-testid="user-menu-name">{me.username}</span> <span className="role-tag">{me.role}</span>
        <span aria-hidden="true"> ▾</span>
      </button>
      {open && (
        <div className="user-panel" id="user-menu-panel" data-testid="user-menu-panel">
          <p className="user-who">
            Logged in as <strong>{me.username}</strong>
            <br />
            <span className="muted small">role: {me.role}</span>
          </p>
          {me.workspaces.length > 0 && (
            <p className="muted small" data-testid="user-workspaces">
              Workspaces: {me.workspaces.map((w) => `${w.name} (${w.role})`).join(', ')}
            </p>
          )}
          <a href="#/tokens" onClick={() => setOpen(false)} data-testid="user-menu-tokens">
            API tokens
          </a>
          {isAdmin(me) && (
            <a href="#/users" onClick={() => setOpen(false)} data-testid="user-menu-users">
              Users
            </a>
          )}
          <button type="button" className="btn btn-small" onClick={logout} disabled={busy} data-testid="logout">
            {busy ? 'Logging out…' : 'Log out'}
          </button>
          {err && (
            <p className="error-inline small" role="alert">
              {err}
            </p>
          )}
        </div>
      )}
    </div>
  );
}
