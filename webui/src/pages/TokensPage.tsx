// API tokens for scripts and CI: the user's tokens (an admin may list everyone's), a form to create
// one, and revoke behind a confirmation. A new token's secret is in the create answer only: it is
// shown once, in this component's state, with a copy button, and never stored anywhere.
import { useState, type FormEvent } from 'react';
import { api } from '../api/client';
import type { ApiToken, CreatedToken } from '../api/types';
import { ConfirmDialog, Empty, ErrorBanner, Skeleton } from '../components/common';
import { formatDateTime } from '../lib/format';
import { toApiError, usePolling } from '../lib/hooks';
import { isAdmin } from '../lib/permissions';
import { useQueryState, type Route } from '../lib/router';
import { useSession } from '../lib/session';

const DAY_S = 24 * 3600;
export const EXPIRY_CHOICES: { label: string; seconds: number }[] = [
  { label: '30 days', seconds: 30 * DAY_S },
  { label: '90 days', seconds: 90 * DAY_S },
  { label: '365 days', seconds: 365 * DAY_S },
  { label: 'Never', seconds: 0 },
];

function tokenState(t: ApiToken, now: number): string {
  if (t.revoked) return 'revoked';
  if (t.expiresAt && Date.parse(t.expiresAt) <= now) return 'expired';
  return 'active';
}

export function TokensPage({ route }: { route: Route }) {
  const { me } = useSession();
  const [q, setQ] = useQueryState(route);
  const all = isAdmin(me) && q.get('all') === '1';
  const list = usePolling((s) => api.getTokens(all, s), [all], 0);
  const [name, setName] = useState('');
  const [expiry, setExpiry] = useState(String(90 * DAY_S));
  const [creating, setCreating] = useState(false);
  const [createErr, setCreateErr] = useState<string>();
  const [created, setCreated] = useState<CreatedToken>();
  const [copied, setCopied] = useState('');
  const [revoking, setRevoking] = useState<ApiToken>();
  const [revokeBusy, setRevokeBusy] = useState(false);
  const [revokeErr, setRevokeErr] = useState<string>();
  const now = Date.now();

  const create = async (ev: FormEvent) => {
    ev.preventDefault();
    if (!name.trim() || creating) return;
    setCreating(true);
    setCreateErr(undefined);
    setCreated(undefined);
    setCopied('');
    try {
      setCreated(await api.createToken(name.trim(), Number(expiry)));
      setName('');
      list.reload();
    } catch (e) {
      setCreateErr(toApiError(e).message);
    } finally {
      setCreating(false);
    }
  };
  const copy = async () => {
    if (!created) return;
    try {
      await navigator.clipboard.writeText(created.token);
      setCopied('Copied to the clipboard.');
    } catch {
      setCopied('The browser refused the clipboard: select the token and copy it by hand.');
    }
  };
  const revoke = async () => {
    if (!revoking) return;
    setRevokeBusy(true);
    setRevokeErr(undefined);
    try {
      await api.revokeToken(revoking.id);
      setRevoking(undefined);
      list.reload();
    } catch (e) {
      setRevokeErr(toApiError(e).message);
    } finally {
      setRevokeBusy(false);
    }
  };

  const rows = (list.data ?? []).filter((t) => t.kind === 'api');
  const sessions = (list.data ?? []).filter((t) => t.kind === 'session');
  const askRevoke = (t: ApiToken) => {
    setRevokeErr(undefined);
    setRevoking(t);
  };
  return (
    <section aria-labelledby="tokens-h">
      <div className="page-head">
        <h1 id="tokens-h">API tokens</h1>
      </div>
      <p className="muted">
        A token lets a script or CI job call the API as you: <code>curl -H "Authorization: Bearer $TOKEN" …/api/v1/experiments</code>. It can
        do what you can do; revoke it when the job no longer needs it.
      </p>
      <form className="card token-form" onSubmit={create} aria-labelledby="token-new-h">
        <h2 id="token-new-h">New token</h2>
        <div className="filters">
          <label>
            Name
            <input value={name} onChange={(e) => setName(e.target.value)} placeholder="ci-nightly" maxLength={100} required data-testid="token-name" />
          </label>
          <label>
            Expires after
            <select value={expiry} onChange={(e) => setExpiry(e.target.value)} data-testid="token-expiry">
              {EXPIRY_CHOICES.map((c) => (
                <option key={c.seconds} value={c.seconds}>
                  {c.label}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" className="btn btn-primary" disabled={creating || !name.trim()} data-testid="token-create">
            {creating ? 'Creating…' : 'Create token'}
          </button>
        </div>
        {createErr && (
          <p className="error-inline" role="alert">
            {createErr}
          </p>
        )}
      </form>
      {created && (
        <div className="card token-secret" role="status" data-testid="token-created">
          <h2>Token “{created.name}” created</h2>
          <p>
            <strong>Copy it now: you will not see it again.</strong> Steadfast keeps only a hash of it.
            {created.expiresAt ? ` It expires ${formatDateTime(created.expiresAt)}.` : ' It never expires.'}
          </p>
          <div className="token-copy">
            <input readOnly value={created.token} aria-label="The new token" onFocus={(e) => e.currentTarget.select()} data-testid="token-secret" spellCheck={false} />
            <button type="button" className="btn" onClick={copy} data-testid="token-copy">
              Copy
            </button>
            <button type="button" className="btn" onClick={() => setCreated(undefined)} data-testid="token-done">
              Done
            </button>
          </div>
          {copied && <p className="muted small">{copied}</p>}
        </div>
      )}
      {isAdmin(me) && (
        <form className="filters" onSubmit={(e) => e.preventDefault()}>
          <label className="check">
            <input type="checkbox" checked={all} onChange={(e) => setQ({ all: e.target.checked ? '1' : undefined })} data-testid="tokens-all" />
            Every user's tokens
          </label>
        </form>
      )}
      <ErrorBanner error={list.error} onRetry={list.reload} />
      {list.loading && !list.data ? (
        <Skeleton rows={4} />
      ) : list.data && rows.length === 0 ? (
        <Empty>No API tokens yet. Create one above for a CI job or script.</Empty>
      ) : list.data ? (
        <TokenTable rows={rows} all={all} now={now} kind="api" onRevoke={askRevoke} />
      ) : null}
      {sessions.length > 0 && (
        <>
          <h2 className="section-h">Logged-in sessions</h2>
          <p className="muted small">Each login (the dashboard, <code>sf login</code>) is a session until it expires or logs out. End one you do not recognise.</p>
          <TokenTable rows={sessions} all={all} now={now} kind="session" onRevoke={askRevoke} />
        </>
      )}
      <ConfirmDialog
        open={revoking !== undefined}
        title={revoking ? (revoking.kind === 'session' ? `End ${revoking.username}'s session ${revoking.id}?` : `Revoke token “${revoking.name || revoking.id}”?`) : ''}
        body={
          <>
            <p>
              {revoking?.kind === 'session'
                ? 'Whoever uses that login must log in again (if it is this browser, you will see the login page).'
                : 'Every script or CI job that uses it gets 401 from its next request on. This cannot be undone.'}
            </p>
            {revokeErr && (
              <p className="error-inline" role="alert">
                {revokeErr}
              </p>
            )}
          </>
        }
        confirmLabel={revoking?.kind === 'session' ? 'End session' : 'Revoke'}
        danger
        busy={revokeBusy}
        onConfirm={revoke}
        onCancel={() => setRevoking(undefined)}
      />
    </section>
  );
}

function TokenTable({ rows, all, now, kind, onRevoke }: { rows: ApiToken[]; all: boolean; now: number; kind: ApiToken['kind']; onRevoke: (t: ApiToken) => void }) {
  const isApi = kind === 'api';
  return (
    <div className="table-wrap">
      <table className="table" data-testid={isApi ? 'tokens-table' : 'sessions-table'}>
        <caption className="sr-only">{isApi ? 'API tokens' : 'Logged-in sessions'}</caption>
        <thead>
          <tr>
            <th scope="col">{isApi ? 'Name' : 'Session'}</th>
            {all && <th scope="col">User</th>}
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            <th scope="col">Last used</th>
            <th scope="col">State</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((t) => {
            const st = tokenState(t, now);
            const label = isApi ? t.name || `token ${t.id}` : `session ${t.id}`;
            return (
              <tr key={t.id} data-testid={isApi ? 'token-row' : 'session-row'} data-id={t.id} data-state={st}>
                <td className="strong">{label}</td>
                {all && <td>{t.username}</td>}
                <td>{formatDateTime(t.createdAt)}</td>
                <td>{t.expiresAt ? formatDateTime(t.expiresAt) : 'never'}</td>
                <td>{t.lastUsedAt ? formatDateTime(t.lastUsedAt) : 'never'}</td>
                <td>
                  <span className={`badge badge-${st === 'active' ? 'done' : st === 'revoked' ? 'bad' : 'neutral'}`}>{st}</span>
                </td>
                <td>
                  {!t.revoked && (
                    <button
                      type="button"
                      className="btn btn-small btn-danger-outline"
                      onClick={() => onRevoke(t)}
                      aria-label={isApi ? `Revoke token ${t.name || t.id}` : `End session ${t.id}`}
                      data-testid={isApi ? 'token-revoke' : 'session-revoke'}
                    >
                      {isApi ? 'Revoke' : 'End'}
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
