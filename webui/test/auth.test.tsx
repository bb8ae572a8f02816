// Logging in: the client's session transport (cookie, X-Requested-With), 401 → the login page
// (at start and when a session expires, back to the same route afterwards), the master's messages
// for 401/403/429, the user menu and logout, role gating of experiment actions, and the tokens
// page (a new token shown once; revoke behind a confirmation).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { ApiClient, ApiError, normExperiment, retryAfterSeconds } from '../src/api/client';
import type { Whoami } from '../src/api/types';
import { ExperimentActions } from '../src/components/actions';
import { ErrorBanner } from '../src/components/common';
import { actionable, canActOn, canCreate } from '../src/lib/permissions';
import { parseHash } from '../src/lib/router';
import { SessionProvider } from '../src/lib/session';
import { TokensPage } from '../src/pages/TokensPage';

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
  credentials?: RequestCredentials;
  body?: unknown;
}

function recorder(respond: (c: Call) => Response | Promise<Response>) {
  const calls: Call[] = [];
  const f = async (url: string, init: RequestInit = {}) => {
    const c: Call = {
      url,
      method: init.method ?? 'GET',
      headers: { ...(init.headers as Record<string, string>) },
      credentials: init.credentials,
      body: init.body ? JSON.parse(String(init.body)) : undefined,
    };
    calls.push(c);
    return respond(c);
  };
  return { f, calls };
}

async function caught(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error('expected a rejection');
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

describe('ApiClient session transport', () => {
  it('sends the session cookie (same-origin credentials) and X-Requested-With on every request', async () => {
    const { f, calls } = recorder(() => json(200, { experiments: [], experiment: { id: '1' }, tokens: [] }));
    const c = new ApiClient({ fetch: f });
    await c.getExperiments();
    await c.experimentAction(1, 'kill');
    await c.getTokens();
    await c.revokeToken('7');
    expect(calls.map((x) => `${x.method} ${x.url}`)).toEqual(['GET /api/v1/experiments', 'POST /api/v1/experiments/1/kill', 'GET /api/v1/tokens', 'DELETE /api/v1/tokens/7']);
    for (const x of calls) {
      expect(x.headers['X-Requested-With']).toBe('steadfast');
      expect(x.credentials).toBe('same-origin');
      expect(x.headers.Authorization).toBeUndefined(); // the browser authenticates with the cookie only
    }
  });

  it('logs in with {username, password}, keeps no token, and does not raise the 401 alarm for a wrong password', async () => {
    let ok = true;
    const { f, calls } = recorder(() => (ok ? json(200, { token: 'sft_secret', user: { username: 'alice', role: 'admin' } }) : json(401, { code: 16, message: 'wrong username or password' })));
    const c = new ApiClient({ fetch: f });
    const alarms: string[] = [];
    c.onUnauthorized((_e, path) => alarms.push(path));
    const me = await c.login('alice', 'pw');
    expect(me).toEqual({ username: 'alice', role: 'admin', workspaces: [] });
    expect(JSON.stringify(me)).not.toContain('sft_secret');
    expect(calls[0]).toMatchObject({ method: 'POST', url: '/api/v1/auth/login', body: { username: 'alice', password: 'pw' } });
    ok = false;
    const e = await caught(c.login('alice', 'nope'));
    expect(e).toMatchObject({ status: 401, code: 16, message: 'wrong username or password' });
    expect(alarms).toEqual([]);
    expect(window.localStorage.length + window.sessionStorage.length).toBe(0);
  });

  it('tells the onUnauthorized listeners about a 401 from any other route', async () => {
    const { f } = recorder(() => json(401, { code: 16, message: 'session expired' }));
    const c = new ApiClient({ fetch: f });
    const alarms: string[] = [];
    const stop = c.onUnauthorized((e, path) => alarms.push(`${path}: ${e.message}`));
    const e = await caught(c.getAgents());
    expect(e.unauthenticated).toBe(true);
    expect(alarms).toEqual(['/agents: session expired']);
    stop();
    await caught(c.getAgents());
    expect(alarms.length).toBe(1);
  });

  it("reports a 403 with the master's reason", async () => {
    const { f } = recorder(() => json(403, { code: 7, message: 'user bob may not kill experiment 12: owned by alice' }));
    const e = await caught(new ApiClient({ fetch: f }).experimentAction(12, 'kill'));
    expect(e).toMatchObject({ status: 403, code: 7, message: 'user bob may not kill experiment 12: owned by alice', forbidden: true, unreachable: false });
    render(<ErrorBanner error={e} />);
    expect(screen.getByRole('alert').textContent).toMatch(/not allowed.*user bob may not kill experiment 12/);
  });

  it('reads the retry time of a 429 from Retry-After, or else from the message', async () => {
    const { f } = recorder(() => json(429, { message: 'too many failed logins for alice; retry in 30 s' }, { 'Retry-After': '42' }));
    expect((await caught(new ApiClient({ fetch: f }).login('alice', 'x'))).retryAfterS).toBe(42);
    expect(retryAfterSeconds(null, 'too many failed logins; retry in 17 s')).toBe(17);
    expect(retryAfterSeconds(new Date(1000 + 5000).toUTCString(), '', 1000)).toBe(5);
    expect(retryAfterSeconds(undefined, 'nothing')).toBeUndefined();
  });
});

// ---------- a fake master for the whole app ----------

interface FakeMaster {
  calls: Call[];
  loggedIn: boolean;
  failNextLogin?: Response;
  me: Whoami;
  experiments: unknown[];
}

function stubMaster(init: Partial<FakeMaster> = {}): FakeMaster {
  const m: FakeMaster = { calls: [], loggedIn: false, me: { username: 'alice', role: 'user', workspaces: [{ name: 'nlp', role: 'editor' }] }, experiments: [], ...init };
  const unauth = () => json(401, { code: 16, message: 'not logged in' });
  vi.stubGlobal('fetch', async (url: string, init: RequestInit = {}) => {
    const c: Call = { url, method: init.method ?? 'GET', headers: { ...(init.headers as Record<string, string>) }, credentials: init.credentials, body: init.body ? JSON.parse(String(init.body)) : undefined };
    m.calls.push(c);
    const path = url.replace(/\?.*$/, '');
    if (path === '/api/v1/auth/login') {
      if (m.failNextLogin) {
        const r = m.failNextLogin;
        m.failNextLogin = undefined;
        return r;
      }
      const b = c.body as { username: string; password: string };
      if (b.username !== m.me.username || b.password !== 'pw') return json(401, { code: 16, message: 'wrong username or password' });
      m.loggedIn = true;
      return json(200, { token: 'sft_session', user: { username: m.me.username, role: m.me.role } });
    }
    if (path === '/api/v1/auth/logout') {
      m.loggedIn = false;
      return json(200, {});
    }
    if (!m.loggedIn) return unauth();
    if (path === '/api/v1/auth/me') return json(200, m.me);
    if (path === '/api/v1/experiments') return json(200, { experiments: m.experiments, pagination: { total: m.experiments.length } });
    return json(404, { code: 5, message: `no route ${path}` });
  });
  return m;
}

async function renderApp(hash: string) {
  window.location.hash = hash;
  const { App } = await import('../src/App');
  return render(<App />);
}

async function logIn(user = 'alice', password = 'pw') {
  const page = await screen.findByTestId('login-page');
  fireEvent.change(within(page).getByLabelText('Username'), { target: { value: user } });
  fireEvent.change(within(page).getByLabelText('Password'), { target: { value: password } });
  fireEvent.click(within(page).getByRole('button', { name: 'Log in' }));
}

describe('login page', () => {
  beforeEach(() => {
    window.location.hash = '';
  });

  it('is shown when the master answers 401 and returns to the page the user was on', async () => {
    const m = stubMaster({ experiments: [{ id: '3', name: 'mine', owner: 'alice', state: 'EXPERIMENT_STATE_ACTIVE' }] });
    await renderApp('#/experiments?name=mine');
    await logIn();
    expect(await screen.findByRole('heading', { level: 1, name: 'Experiments' })).toBeTruthy();
    expect(parseHash(window.location.hash)).toMatchObject({ path: '/experiments' });
    expect(parseHash(window.location.hash).params.get('name')).toBe('mine');
    expect(screen.getByTestId('user-menu-name').textContent).toBe('alice');
    expect(await screen.findByRole('button', { name: 'Pause experiment 3' })).toBeTruthy();
    // no request went out without the CSRF header or the cookie
    expect(m.calls.every((c) => c.headers['X-Requested-With'] === 'steadfast' && c.credentials === 'same-origin')).toBe(true);
  });

  it("shows the master's message for a wrong password and keeps the username", async () => {
    stubMaster();
    await renderApp('#/experiments');
    await logIn('alice', 'wrong');
    expect((await screen.findByTestId('login-error')).textContent).toBe('wrong username or password');
    expect((screen.getByLabelText('Username') as HTMLInputElement).value).toBe('alice');
    expect((screen.getByLabelText('Password') as HTMLInputElement).value).toBe('');
  });

  it('shows a 429 with its retry time and holds the button until then', async () => {
    const m = stubMaster();
    m.failNextLogin = json(429, { message: 'too many failed logins for alice; retry in 30 s' }, { 'Retry-After': '30' });
    await renderApp('#/experiments');
    await logIn();
    const err = await screen.findByTestId('login-error');
    expect(err.textContent).toMatch(/Too many failed logins\. Try again in (30|29) s\./);
    expect(err.getAttribute('data-status')).toBe('429');
    expect((screen.getByTestId('login-submit') as HTMLButtonElement).disabled).toBe(true);
  });

  it('comes back when the session expires mid-session, and logging in again resumes the page', async () => {
    const m = stubMaster();
    await renderApp('#/experiments');
    await logIn();
    await screen.findByRole('heading', { level: 1, name: 'Experiments' });
    m.loggedIn = false; // the master forgets the session; the next poll gets 401
    const page = await screen.findByTestId('login-page', {}, { timeout: 5000 });
    expect(within(page).getByTestId('login-reason').textContent).toMatch(/session has ended/);
    expect(window.location.hash).toBe('#/experiments');
    await logIn();
    expect(await screen.findByRole('heading', { level: 1, name: 'Experiments' })).toBeTruthy();
  });

  it('the user menu shows who is logged in and logs out to the login page', async () => {
    const m = stubMaster();
    await renderApp('#/experiments');
    await logIn();
    fireEvent.click(await screen.findByTestId('user-menu-button'));
    const panel = screen.getByTestId('user-menu-panel');
    expect(panel.textContent).toMatch(/Logged in as alice/);
    expect(panel.textContent).toMatch(/role: user/);
    expect(within(panel).getByTestId('user-workspaces').textContent).toBe('Workspaces: nlp (editor)');
    expect(within(panel).getByRole('link', { name: 'API tokens' }).getAttribute('href')).toBe('#/tokens');
    expect(within(panel).queryByRole('link', { name: 'Users' })).toBeNull(); // not an admin
    fireEvent.click(within(panel).getByRole('button', { name: 'Log out' }));
    const page = await screen.findByTestId('login-page');
    expect(within(page).getByTestId('login-reason').textContent).toBe('You have logged out.');
    expect(m.calls.some((c) => c.method === 'POST' && c.url === '/api/v1/auth/logout' && c.headers['X-Requested-With'] === 'steadfast')).toBe(true);
    expect(screen.queryByTestId('user-menu')).toBeNull();
    // a second login works and starts with the menu closed
    await logIn();
    expect((await screen.findByTestId('user-menu-name')).textContent).toBe('alice');
    expect(screen.queryByTestId('user-menu-panel')).toBeNull();
  });

  it('shows no login when the master has no /auth routes (404 from the master)', async () => {
    vi.stubGlobal('fetch', async (url: string) => (url.startsWith('/api/v1/auth/') ? json(404, { code: 5, message: 'no route' }) : json(200, { experiments: [], pagination: { total: 0 } })));
    await renderApp('#/experiments');
    expect(await screen.findByRole('heading', { level: 1, name: 'Experiments' })).toBeTruthy();
    expect(screen.queryByTestId('login-page')).toBeNull();
    expect(screen.queryByTestId('user-menu')).toBeNull();
  });
});

// ---------- role gating ----------

const who = (username: string, role: Whoami['role'], workspaces: Whoami['workspaces'] = []): Whoami => ({ username, role, workspaces });
const expOf = (owner: string, workspace = '', id = 12) => normExperiment({ id: String(id), name: 'x', owner, workspace, state: 'EXPERIMENT_STATE_ACTIVE' });

describe('permissions', () => {
  it('mirror the policy for viewer, user, owner, workspace member and admin', () => {
    const e = expOf('alice', 'nlp');
    expect(canActOn(who('vic', 'viewer'), e).ok).toBe(false);
    expect(canActOn(who('vic', 'viewer'), e).reason).toMatch(/viewer/);
    expect(canActOn(who('alice', 'user'), e).ok).toBe(true); // owner
    expect(canActOn(who('bob', 'user'), e)).toMatchObject({ ok: false });
    expect(canActOn(who('bob', 'user'), e).reason).toMatch(/belongs to alice in workspace nlp, of which you are not a member/);
    expect(canActOn(who('bob', 'user', [{ name: 'nlp', role: 'editor' }]), e).ok).toBe(true);
    expect(canActOn(who('bob', 'user', [{ name: 'nlp', role: 'admin' }]), e).ok).toBe(true);
    expect(canActOn(who('bob', 'user', [{ name: 'nlp', role: 'viewer' }]), e).reason).toMatch(/where you are a viewer/);
    expect(canActOn(who('root', 'admin'), e).ok).toBe(true);
    expect(canActOn(undefined, e).ok).toBe(true); // no authentication on the master: it decides
    expect(canCreate(who('vic', 'viewer')).ok).toBe(false);
    expect(canCreate(who('bob', 'user')).ok).toBe(true);
    expect(actionable(who('bob', 'user'), [expOf('bob', '', 1), expOf('alice', '', 2), expOf('carol', 'nlp', 3)]).map((x) => x.id)).toEqual([1]);
  });
});

describe('ExperimentActions role gating', () => {
  const renderAs = (me: Whoami, e = expOf('alice', 'nlp')) =>
    render(
      <SessionProvider initial={{ status: 'in', me }}>
        <ExperimentActions exp={e} onDone={() => {}} />
      </SessionProvider>,
    );

  for (const [label, me, allowed] of [
    ['a viewer', who('vic', 'viewer'), false],
    ['a user on another user’s experiment', who('bob', 'user'), false],
    ['the owner', who('alice', 'user'), true],
    ['a workspace editor', who('bob', 'user', [{ name: 'nlp', role: 'editor' }]), true],
    ['an admin', who('root', 'admin'), true],
  ] as const) {
    it(`${allowed ? 'enables' : 'disables with a reason'} the actions for ${label}`, () => {
      renderAs(me);
      for (const name of ['Pause experiment 12', 'Kill experiment 12']) {
        const b = screen.getByRole('button', { name });
        expect(b.getAttribute('aria-disabled')).toBe(allowed ? null : 'true');
        if (!allowed) {
          expect(b.getAttribute('title')).toBe(canActOn(me, expOf('alice', 'nlp')).reason);
          expect(document.getElementById(b.getAttribute('aria-describedby') ?? '')?.textContent).toBe(b.getAttribute('title'));
        }
      }
      fireEvent.click(screen.getByRole('button', { name: 'Kill experiment 12' }));
      expect(screen.queryByTestId('confirm-dialog') !== null).toBe(allowed);
    });
  }
});

// ---------- tokens page ----------

describe('TokensPage', () => {
  function stubTokens() {
    const tokens = [
      { id: '12', name: 'ci', username: 'alice', createdAt: '2026-11-01T10:00:00Z', expiresAt: '2027-01-30T10:00:00Z', lastUsedAt: '2026-11-20T08:00:00Z', revoked: false },
      { id: '9', name: 'old', username: 'alice', createdAt: '2026-10-01T10:00:00Z', expiresAt: '', lastUsedAt: '', revoked: true },
      { id: '20', name: '', username: 'alice', kind: 'session', createdAt: '2026-11-24T20:00:00Z', expiresAt: '2026-11-25T20:00:00Z', lastUsedAt: '2026-11-24T20:30:00Z', revoked: false },
    ];
    const { f, calls } = recorder((c) => {
      if (c.method === 'GET' && c.url.startsWith('/api/v1/tokens')) return json(200, { tokens });
      if (c.method === 'POST' && c.url === '/api/v1/tokens') {
        const b = c.body as { name: string; expiresInSeconds: string };
        const expiresAt = Number(b.expiresInSeconds) ? '2027-02-22T21:00:00Z' : '';
        tokens.unshift({ id: '13', name: b.name, username: 'alice', createdAt: '2026-11-24T21:00:00Z', expiresAt, lastUsedAt: '', revoked: false });
        return json(200, { id: '13', name: b.name, token: 'sft_0123456789abcdef', expiresAt });
      }
      const m = c.url.match(/^\/api\/v1\/tokens\/(\w+)$/);
      if (c.method === 'DELETE' && m) {
        tokens.find((t) => t.id === m[1])!.revoked = true;
        return json(200, {});
      }
      return json(404, { code: 5, message: 'no route' });
    });
    vi.stubGlobal('fetch', f);
    return calls;
  }
  const renderPage = () =>
    render(
      <SessionProvider initial={{ status: 'in', me: who('alice', 'user') }}>
        <TokensPage route={parseHash('#/tokens')} />
      </SessionProvider>,
    );

  it('lists tokens with created, expires, last used and state', async () => {
    stubTokens();
    renderPage();
    const rows = await screen.findAllByTestId('token-row');
    expect(rows.map((r) => r.getAttribute('data-state'))).toEqual(['active', 'revoked']);
    expect(rows[1].textContent).toMatch(/never.*never.*revoked/);
    expect(within(rows[1]).queryByRole('button', { name: /Revoke/ })).toBeNull();
    // the master also lists live login sessions (kind "session"): apart, with End instead of Revoke
    const sessions = screen.getAllByTestId('session-row');
    expect(sessions.map((r) => r.getAttribute('data-id'))).toEqual(['20']);
    expect(within(screen.getByTestId('tokens-table')).queryByText('session 20')).toBeNull();
    expect(within(sessions[0]).getByRole('button', { name: 'End session 20' })).toBeTruthy();
  });

  it('creates a token with the chosen expiry and shows the secret once', async () => {
    const calls = stubTokens();
    renderPage();
    await screen.findAllByTestId('token-row');
    fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'nightly' } });
    fireEvent.change(screen.getByLabelText('Expires after'), { target: { value: String(30 * 86400) } });
    fireEvent.click(screen.getByRole('button', { name: 'Create token' }));
    const shown = await screen.findByTestId('token-created');
    expect(shown.textContent).toMatch(/you will not see it again/);
    expect((screen.getByTestId('token-secret') as HTMLInputElement).value).toBe('sft_0123456789abcdef');
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ name: 'nightly', expiresInSeconds: String(30 * 86400) }); // int64: a string on the wire
    await waitFor(() => expect(screen.getAllByTestId('token-row').length).toBe(3));
    expect(screen.getAllByTestId('session-row').length).toBe(1);
    // the list never carries the secret, and nothing is kept in web storage
    expect(screen.getByTestId('tokens-table').textContent).not.toContain('sft_0123456789abcdef');
    expect(window.localStorage.length + window.sessionStorage.length).toBe(0);
    fireEvent.click(screen.getByRole('button', { name: 'Done' }));
    expect(screen.queryByTestId('token-created')).toBeNull();
    expect(document.body.textContent).not.toContain('sft_0123456789abcdef');
  });

  it('never-expiring tokens send expiresInSeconds 0', async () => {
    const calls = stubTokens();
    renderPage();
    await screen.findAllByTestId('token-row');
    fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'forever' } });
    fireEvent.change(screen.getByLabelText('Expires after'), { target: { value: '0' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create token' }));
    await screen.findByTestId('token-created');
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ name: 'forever', expiresInSeconds: '0' });
    expect(screen.getByTestId('token-created').textContent).toMatch(/never expires/);
  });

  it('revokes a token only after the confirmation', async () => {
    const calls = stubTokens();
    renderPage();
    await screen.findAllByTestId('token-row');
    fireEvent.click(screen.getByRole('button', { name: 'Revoke token ci' }));
    const dialog = screen.getByRole('dialog', { name: 'Revoke token “ci”?' });
    expect(calls.some((c) => c.method === 'DELETE')).toBe(false);
    await act(async () => {
      fireEvent.click(within(dialog).getByRole('button', { name: 'Revoke' }));
    });
    expect(calls.find((c) => c.method === 'DELETE')).toMatchObject({ url: '/api/v1/tokens/12', headers: { 'X-Requested-With': 'steadfast' } });
    await waitFor(() => expect(screen.getAllByTestId('token-row')[0].getAttribute('data-state')).toBe('revoked'));
    expect(screen.queryByRole('dialog')).toBeNull();
  });
});
