// The login form, shown in place of any page whenever the master answers 401. The route stays as it
// was, so a successful login shows the page the user was on. The master's own message is shown for
// a wrong password; a 429 (too many failed logins) counts down its retry time.
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { api, ApiError } from '../api/client';
import { toApiError } from '../lib/hooks';
import { useSession, type LoginReason } from '../lib/session';

const INTRO: Record<LoginReason, string> = {
  start: '',
  expired: 'Your session has ended. Log in again to go on where you were.',
  logout: 'You have logged out.',
};

export function LoginPage({ reason }: { reason: LoginReason }) {
  const session = useSession();
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | Error>();
  const [retryUntil, setRetryUntil] = useState(0);
  const [now, setNow] = useState(() => Date.now());
  const passwordRef = useRef<HTMLInputElement>(null);
  const userRef = useRef<HTMLInputElement>(null);

  useEffect(() => userRef.current?.focus(), []);
  useEffect(() => {
    if (retryUntil <= now) return;
    const t = setTimeout(() => setNow(Date.now()), 1000);
    return () => clearTimeout(t);
  }, [retryUntil, now]);
  const waitS = Math.max(0, Math.ceil((retryUntil - now) / 1000));

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    if (busy || waitS > 0 || !username || !password) return;
    setBusy(true);
    setError(undefined);
    try {
      const user = await api.login(username, password);
      await session.loggedIn(user);
    } catch (e) {
      const err = e instanceof ApiError || !(e instanceof Error) ? toApiError(e) : e;
      setError(err);
      if (err instanceof ApiError && err.status === 429) {
        setRetryUntil(Date.now() + (err.retryAfterS ?? 30) * 1000);
        setNow(Date.now());
      }
      setPassword('');
      passwordRef.current?.focus();
    } finally {
      setBusy(false);
    }
  };

  let message = '';
  if (error instanceof ApiError) {
    if (error.status === 429) message = waitS > 0 ? `Too many failed logins. Try again in ${waitS} s.` : 'Too many failed logins. You may try again now.';
    else if (error.unreachable) message = `The master cannot be reached (${error.message}).`;
    else if (error.status === 401) message = error.message || 'Wrong username or password.';
    else message = error.message;
  } else if (error) message = error.message;

  return (
    <section className="login" aria-labelledby="login-h" data-testid="login-page">
      <form className="card login-card" onSubmit={submit} noValidate>
        <h1 id="login-h">Log in to Steadfast</h1>
        {INTRO[reason] && (
          <p className="muted" data-testid="login-reason" role="status">
            {INTRO[reason]}
          </p>
        )}
        <label>
          Username
          <input ref={userRef} name="username" autoComplete="username" value={username} onChange={(e) => setUsername(e.target.value)} required data-testid="login-username" />
        </label>
        <label>
          Password
          <input ref={passwordRef} name="password" type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required data-testid="login-password" />
        </label>
        {message && (
          <p className="error-inline" role="alert" data-testid="login-error" data-status={error instanceof ApiError ? error.status : undefined}>
            {message}
            {error instanceof ApiError && error.status === 429 && error.message && <span className="muted small"> ({error.message})</span>}
          </p>
        )}
        <button type="submit" className="btn btn-primary" disabled={busy || waitS > 0 || !username || !password} data-testid="login-submit">
          {busy ? 'Logging in…' : waitS > 0 ? `Log in (wait ${waitS} s)` : 'Log in'}
        </button>
        <p className="muted small">
          Scripts and CI use API tokens instead: after logging in, see <em>API tokens</em> in the user menu, or <code>sf token create</code>.
        </p>
      </form>
    </section>
  );
}
