// What the live browser tests against a real master share (dashboard.e2e.mjs, notebook.e2e.mjs).

/** A script's checks: `log` prefixes the seconds since it started, `check(ok, what, detail)`
 *  logs "ok"/"FAIL" and counts into `tally` ({passed, failed}), returning `ok`. */
export function checks() {
  const tally = { passed: 0, failed: 0 };
  const t0 = Date.now();
  const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s]`, ...a);
  function check(ok, what, detail = '') {
    if (ok) {
      tally.passed++;
      log(`ok   ${what}`);
    } else {
      tally.failed++;
      log(`FAIL ${what}${detail ? `: ${detail}` : ''}`);
    }
    return ok;
  }
  return { log, check, tally };
}

/** Logs in as `username` through the dashboard's login page (which must be showing) and waits
 *  for it to go. A 429 (an earlier wrong password, another test's) is waited out once; `log`
 *  says so. */
export async function pageLogin(page, username, password, log) {
  await page.waitForSelector('[data-testid="login-page"]', { timeout: 30000 });
  for (let attempt = 0; ; attempt++) {
    await page.fill('[data-testid="login-username"]', username);
    await page.fill('[data-testid="login-password"]', password);
    await page.click('[data-testid="login-submit"]');
    const outcome = await Promise.race([
      page.waitForSelector('[data-testid="login-page"]', { state: 'detached', timeout: 30000 }).then(() => 'in'),
      page.waitForFunction(() => document.querySelector('[data-testid="login-error"]')?.getAttribute('data-status') === '429', null, { timeout: 30000 }).then(() => '429'),
    ]).catch(() => 'timeout');
    if (outcome === 'in') return;
    if (outcome === '429' && attempt === 0) {
      const wait = Number(((await page.innerText('[data-testid="login-error"]')).match(/in (\d+) s/) ?? [])[1] ?? 30);
      log(`login page rate limited; waiting ${wait}s`);
      await page.waitForTimeout(Math.min(120, wait + 1) * 1000);
      continue;
    }
    throw new Error(`login through the page failed: ${await page.innerText('[data-testid="login-error"]').catch(() => outcome)}`);
  }
}

/** The script's own REST client for a master at `master` (no trailing slash). `api(method, path,
 *  body)` sends JSON to /api/v1`path` with `X-Requested-With` and, after `login`, the session as
 *  `Authorization: Bearer`; it returns the parsed body, or throws an Error with the master's
 *  message, `status` and `retryAfter` (s) for a non-2xx answer. `login(username, password)`
 *  (POST /auth/login) waits out one 429, `log` saying so. The browser has a session of its own. */
export function restClient(master, log) {
  let bearer = '';
  async function api(method, path, body) {
    const headers = { 'X-Requested-With': 'steadfast' };
    if (body) headers['Content-Type'] = 'application/json';
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    const res = await fetch(`${master}/api/v1${path}`, {
      method,
      headers,
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30000),
    });
    const text = await res.text();
    let json;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      throw new Error(`${method} ${path}: ${res.status}, body is not JSON: ${text.slice(0, 200)}`);
    }
    if (!res.ok) throw Object.assign(new Error(`${method} ${path}: ${res.status} ${json.message ?? text.slice(0, 200)}`), { status: res.status, retryAfter: Number(res.headers.get('Retry-After') ?? 0) });
    return json;
  }
  async function login(username, password) {
    for (let attempt = 0; ; attempt++) {
      try {
        bearer = (await api('POST', '/auth/login', { username, password })).token ?? '';
        if (!bearer) throw new Error('POST /auth/login answered without a token');
        return;
      } catch (e) {
        if (e.status === 429 && attempt === 0) {
          log(`login rate limited; waiting ${e.retryAfter || 30}s`);
          await new Promise((r) => setTimeout(r, Math.min(120, e.retryAfter || 30) * 1000));
          continue;
        }
        throw e;
      }
    }
  }
  return { api, login };
}
