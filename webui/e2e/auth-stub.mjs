// An in-memory stand-in for the master's authentication routes (docs/webui.md, "What the master
// must serve"), for the browser tests that run without a cluster (offline.e2e.mjs) and for
// dev/stub-master.mjs. Not a security implementation: passwords are compared in clear.
//
//   POST /api/v1/auth/login {username,password} → {token,user} + Set-Cookie sf_session (HttpOnly,
//        SameSite=Strict); 401 {"code":16,...}; 429 with Retry-After after `maxFailures` failures
//   POST /api/v1/auth/logout → {} and an expired cookie;  GET /api/v1/auth/me → the user
//   GET/POST /api/v1/tokens, DELETE /api/v1/tokens/{id};  GET /api/v1/users (admin)
// Every other /api/ route: 401 without a session (cookie or Bearer). Cookie-authenticated POST and
// DELETE without `X-Requested-With: steadfast` get 403, as the master's CSRF check does; every
// request without it (but a log follow) is also listed in `state.missingHeader` for the tests.
import { randomBytes } from 'node:crypto';
import { assertDescribed, loadOperations } from '../dev/api-routes.mjs';

export const COOKIE = 'sf_session';

/** The routes this stub answers itself, spelled as the API description spells them; creating a
 *  stub fails when one of them is not in the description (dev/api-routes.mjs). */
export const AUTH_ROUTES = ['POST /api/v1/auth/login', 'POST /api/v1/auth/logout', 'GET /api/v1/auth/me', 'GET /api/v1/tokens', 'POST /api/v1/tokens', 'DELETE /api/v1/tokens/{id}', 'GET /api/v1/users'];

function cookies(req) {
  const out = {};
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export async function readJson(req) {
  let body = '';
  for await (const c of req) body += c;
  if (!body) return {};
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** users: [{username, password, role, workspaces?: [{name, role}]}]. */
export function createAuthStub({ users, maxFailures = 5, retryAfterS = 30 } = {}) {
  assertDescribed(loadOperations(), AUTH_ROUTES, 'e2e/auth-stub.mjs');
  const byName = new Map(users.map((u) => [u.username, { active: true, createdAt: new Date().toISOString(), workspaces: [], ...u }]));
  const sessions = new Map(); // token -> username
  const sessionInfo = new Map(); // token -> {id, createdAt}
  const failures = new Map(); // username -> count
  const tokens = []; // {id, name, username, kind: 'api', secret, createdAt, expiresAt, lastUsedAt, revoked}
  let nextToken = 1;
  const state = { missingHeader: [], requests: 0 };

  const send = (res, status, body, headers = {}) => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers });
    res.end(JSON.stringify(body));
  };
  const userJson = (u) => ({ username: u.username, role: u.role });

  /** The user behind a request, and how: {user, viaCookie} or undefined. */
  function principal(req) {
    const auth = req.headers.authorization ?? '';
    if (auth.startsWith('Bearer ')) {
      const secret = auth.slice(7);
      const name = sessions.get(secret);
      if (name) return { user: byName.get(name), viaCookie: false };
      const t = tokens.find((x) => x.secret === secret && !x.revoked && (!x.expiresAt || Date.parse(x.expiresAt) > Date.now()));
      if (t) {
        t.lastUsedAt = new Date().toISOString();
        return { user: byName.get(t.username), viaCookie: false };
      }
      return undefined;
    }
    const name = sessions.get(cookies(req)[COOKIE] ?? '');
    return name ? { user: byName.get(name), viaCookie: true } : undefined;
  }

  /** Answers the request when it is an auth route or must be refused (401/403); returns the
   *  principal for the caller to serve it otherwise, or null when it has answered. */
  async function handle(req, res, url) {
    state.requests++;
    const p = url.pathname.replace(/^\/api\/v1/, '');
    // EventSource (log follow) cannot set headers; GETs need none, but the dashboard sends it anyway
    if (req.headers['x-requested-with'] !== 'steadfast' && url.searchParams.get('follow') !== 'true') state.missingHeader.push(`${req.method} ${url.pathname}`);
    if (req.method === 'POST' && p === '/auth/login') {
      const b = (await readJson(req)) ?? {};
      const u = byName.get(String(b.username ?? ''));
      const n = failures.get(String(b.username)) ?? 0;
      if (n >= maxFailures) {
        send(res, 429, { code: 8, message: `too many failed logins for ${b.username}; retry in ${retryAfterS} s` }, { 'Retry-After': String(retryAfterS) });
        return null;
      }
      if (!u || !u.active || u.password !== b.password) {
        failures.set(String(b.username), n + 1);
        send(res, 401, { code: 16, message: 'wrong username or password' });
        return null;
      }
      failures.delete(u.username);
      const token = randomBytes(16).toString('hex');
      sessions.set(token, u.username);
      sessionInfo.set(token, { id: String(nextToken++), createdAt: new Date().toISOString() });
      send(res, 200, { token, user: userJson(u) }, { 'Set-Cookie': `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/` });
      return null;
    }
    const who = principal(req);
    if (!who) {
      send(res, 401, { code: 16, message: 'not logged in (no session or token)' });
      return null;
    }
    if (who.viaCookie && (req.method === 'POST' || req.method === 'DELETE') && req.headers['x-requested-with'] !== 'steadfast') {
      send(res, 403, { code: 7, message: 'a cookie-authenticated request must carry X-Requested-With: steadfast' });
      return null;
    }
    const u = who.user;
    if (req.method === 'POST' && p === '/auth/logout') {
      sessions.delete(cookies(req)[COOKIE] ?? '');
      send(res, 200, {}, { 'Set-Cookie': `${COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0` });
      return null;
    }
    if (req.method === 'GET' && p === '/auth/me') {
      send(res, 200, { ...userJson(u), workspaces: u.workspaces });
      return null;
    }
    if (req.method === 'GET' && p === '/tokens') {
      const all = url.searchParams.get('all') === 'true';
      if (all && u.role !== 'admin') {
        send(res, 403, { code: 7, message: `user ${u.username} may not list every user's tokens` });
        return null;
      }
      // as the master does: API tokens, and the live login sessions (kind "session")
      const list = tokens.filter((t) => all || t.username === u.username).map(({ secret: _s, ...t }) => t);
      for (const [secret, name] of sessions) {
        const info = sessionInfo.get(secret);
        if (info && (all || name === u.username)) list.push({ id: info.id, name: '', username: name, kind: 'session', createdAt: info.createdAt, expiresAt: new Date(Date.parse(info.createdAt) + 86400e3).toISOString(), lastUsedAt: '', revoked: false });
      }
      send(res, 200, { tokens: list.reverse() });
      return null;
    }
    if (req.method === 'POST' && p === '/tokens') {
      const b = (await readJson(req)) ?? {};
      if (!b.name) {
        send(res, 400, { code: 3, message: 'name: required' });
        return null;
      }
      const secs = Number(b.expiresInSeconds ?? 0);
      const t = { id: String(nextToken++), name: String(b.name), username: u.username, kind: 'api', secret: `sft_${randomBytes(20).toString('hex')}`, createdAt: new Date().toISOString(), expiresAt: secs ? new Date(Date.now() + secs * 1000).toISOString() : '', lastUsedAt: '', revoked: false };
      tokens.push(t);
      send(res, 200, { id: t.id, name: t.name, token: t.secret, expiresAt: t.expiresAt });
      return null;
    }
    let m;
    if (req.method === 'DELETE' && (m = p.match(/^\/tokens\/(\w+)$/))) {
      const live = [...sessionInfo].find(([secret, info]) => info.id === m[1] && sessions.has(secret));
      if (live && (sessions.get(live[0]) === u.username || u.role === 'admin')) {
        sessions.delete(live[0]);
        send(res, 200, {});
        return null;
      }
      const t = tokens.find((x) => x.id === m[1]);
      if (!t || (t.username !== u.username && u.role !== 'admin')) {
        send(res, 404, { code: 5, message: `token ${m[1]} not found` });
        return null;
      }
      t.revoked = true;
      send(res, 200, {});
      return null;
    }
    if (req.method === 'GET' && p === '/users') {
      if (u.role !== 'admin') send(res, 403, { code: 7, message: `user ${u.username} may not list users` });
      else send(res, 200, { users: [...byName.values()].map((x) => ({ username: x.username, role: x.role, active: x.active, createdAt: x.createdAt })) });
      return null;
    }
    return who;
  }

  /** May `user` act on an experiment {owner, workspace}? The rule the master enforces. */
  function mayAct(user, e) {
    if (user.role === 'admin') return true;
    if (user.role === 'viewer') return false;
    if (e.owner === user.username) return true;
    return user.workspaces.some((w) => w.name === e.workspace && (w.role === 'editor' || w.role === 'admin'));
  }

  return { handle, principal, mayAct, sessions, tokens, failures, state };
}
