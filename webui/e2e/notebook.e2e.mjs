#!/usr/bin/env node
// A notebook on the cluster in Debian's Chromium, through the master's proxy (docs/tasks.md,
// "Notebooks"): the browser's dashboard session is the only credential it has.
//
//   SF_MASTER_URL=http://127.0.0.1:8080 SF_E2E_USERNAME=admin SF_E2E_PASSWORD=... \
//     SF_NOTEBOOK_ID=12 SF_ARTIFACTS_DIR=/tmp/notebook-e2e node e2e/notebook.e2e.mjs
//
// Env: SF_MASTER_URL (default http://127.0.0.1:8080; the master serves the built dashboard at
// "/"), SF_E2E_USERNAME and SF_E2E_PASSWORD (a user who may reach the notebook: its owner, an
// editor or admin of its workspace, an admin), SF_NOTEBOOK_ID (a notebook task that is RUNNING
// and answers at MASTER/proxy/ID/api/status), SF_ARTIFACTS_DIR (screenshots, default
// ./e2e-artifacts).
//
// Steps: a browser without a session gets 401 from MASTER/proxy/ID/tree → log in through the
// dashboard's login page → MASTER/proxy/ID/tree shows Jupyter's file list (no Jupyter login or
// token prompt) → "New" → "Python 3" opens the new notebook in a tab of its own → its kernel
// connects (the kernel's WebSocket, through the proxy) → a cell typed into the first cell and
// run with Shift+Enter prints the versions of torch and steadfast → Ctrl+S saves the notebook,
// and the browser reads the saved cell back from Jupyter's contents API. Screenshots at each
// page, and on failure. Exit 0 when all passed, 1 on a failed check, 2 when the master cannot be
// reached.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { launch, trustMaster } from './browser.mjs';
import { checks, pageLogin } from './live.mjs';

const MASTER = (process.env.SF_MASTER_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const ART = resolve(process.env.SF_ARTIFACTS_DIR ?? 'e2e-artifacts');
const USERNAME = process.env.SF_E2E_USERNAME ?? '';
const PASSWORD = process.env.SF_E2E_PASSWORD ?? '';
const ID = process.env.SF_NOTEBOOK_ID ?? '';
const PROXIED = `${MASTER}/proxy/${ID}/`;
const CELL = "import torch, steadfast; print('torch', torch.__version__, 'steadfast', steadfast.__name__)";
const PRINTED = /torch \d+\.\d+\S* steadfast steadfast/;
// The first import of torch on a busy machine takes a while.
const CELL_TIMEOUT_MS = 180000;

const { log, check, tally } = checks();

async function shot(page, name) {
  const file = join(ART, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot ${file}`);
}

/** Records the page's requests through the proxy that were refused or failed. Not the widgets
 *  extension: the notebook page asks for it whether or not it is installed and carries on without
 *  it (notebook/static/notebook/js/main.js), and Debian's python3-notebook has none, so Jupyter
 *  itself answers 404, as it does without the proxy. */
function watchProxied(page, refused) {
  const counts = (url) => url.startsWith(PROXIED) && !url.startsWith(`${PROXIED}nbextensions/widgets/notebook/js/extension.js`);
  page.on('response', (r) => {
    if (counts(r.url()) && r.status() >= 400) refused.push(`${r.request().method()} ${r.url().slice(MASTER.length)} → ${r.status()}`);
  });
  page.on('requestfailed', (r) => {
    if (counts(r.url())) refused.push(`${r.method()} ${r.url().slice(MASTER.length)} → ${r.failure()?.errorText ?? 'failed'}`);
  });
}

async function main() {
  mkdirSync(ART, { recursive: true });
  if (!/^\d+$/.test(ID) || USERNAME === '' || PASSWORD === '') {
    console.error('Set SF_NOTEBOOK_ID (a running notebook task), SF_E2E_USERNAME and SF_E2E_PASSWORD.');
    process.exit(2);
  }
  log(`master ${MASTER}, notebook ${ID}, artifacts ${ART}, logging in as ${USERNAME}`);
  try {
    const health = await fetch(`${MASTER}/health`, { signal: AbortSignal.timeout(30000) });
    if (!health.ok) throw new Error(`GET /health: ${health.status}`);
  } catch (e) {
    console.error(`\nCannot reach the Steadfast master at ${MASTER}: ${e.message}${e.cause ? ` (${e.cause.code ?? e.cause.message ?? e.cause})` : ''}\nStart a cluster (sf deploy local up) and set SF_MASTER_URL.`);
    process.exit(2);
  }

  // The master's certificate is trusted, as where the cluster's CA was imported (not accepted
  // request by request: browser.mjs, trustMaster, says why).
  const browser = await launch(await trustMaster(MASTER));
  const options = { viewport: { width: 1280, height: 900 } };
  try {
    // ---- no session: the master refuses before anything reaches Jupyter
    const anonymous = await browser.newContext(options);
    const anonymousPage = await anonymous.newPage();
    const refusedAnonymous = await anonymousPage.goto(`${PROXIED}tree`);
    check(refusedAnonymous?.status() === 401, `without a session, GET /proxy/${ID}/tree → 401`, `status ${refusedAnonymous?.status()}`);
    await anonymous.close();

    // ---- signed in to the dashboard
    const ctx = await browser.newContext(options);
    const page = await ctx.newPage();
    const pageErrors = [];
    const refused = [];
    ctx.on('page', (p) => {
      p.on('pageerror', (e) => pageErrors.push(`${p.url()}: ${e.message}`));
      watchProxied(p, refused);
    });
    page.on('pageerror', (e) => pageErrors.push(`${page.url()}: ${e.message}`));
    watchProxied(page, refused);
    await page.goto(`${MASTER}/`);
    await pageLogin(page, USERNAME, PASSWORD, log);
    await page.waitForSelector('[data-testid="user-menu"]', { timeout: 15000 });
    check((await page.getAttribute('[data-testid="user-menu"]', 'data-username')) === USERNAME, `signed in to the dashboard as ${USERNAME}`);
    const cookie = (await ctx.cookies(MASTER)).find((c) => c.name === 'sf_session');
    check(cookie?.httpOnly === true, 'the session is the HttpOnly sf_session cookie');

    // ---- Jupyter's file list, with the dashboard's session alone
    const tree = await page.goto(`${PROXIED}tree`);
    check(tree?.status() === 200, `GET /proxy/${ID}/tree → 200`, `status ${tree?.status()}`);
    check(new URL(page.url()).pathname === `/proxy/${ID}/tree`, 'no redirect to a Jupyter login page', page.url());
    await page.waitForSelector('#notebook_list', { timeout: 30000 });
    await page.waitForSelector('#new-dropdown-button', { timeout: 30000 });
    check((await page.locator('input[type="password"], #password_input').count()) === 0, 'no Jupyter password or token prompt');
    check(/Home|Jupyter/i.test(await page.title()), "Jupyter's file tree page is shown", await page.title());
    await shot(page, 'notebook-01-tree');

    // ---- New → Python 3: Jupyter creates the notebook and opens it in a new tab
    await page.click('#new-dropdown-button');
    const item = page.locator('#new-menu #kernel-python3 a');
    await item.waitFor({ state: 'visible', timeout: 30000 });
    const [notebook] = await Promise.all([ctx.waitForEvent('page', { timeout: 30000 }), item.click()]);
    await notebook.waitForURL(new RegExp(`/proxy/${ID}/notebooks/[^/?]+\\.ipynb`), { timeout: 60000 });
    const name = decodeURIComponent(new URL(notebook.url()).pathname.split('/').pop());
    check(true, `"New" → "Python 3" opened ${name} in a new tab`, notebook.url());

    // The kernel is connected (its WebSocket goes through the proxy) and idle.
    await notebook.waitForFunction(() => window.Jupyter?.notebook?.kernel?.is_connected?.() === true, null, { timeout: 120000 });
    await notebook.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: 120000 });
    check(true, "the notebook's kernel is connected and idle");
    await shot(notebook, 'notebook-02-new');

    // ---- the cell: typed into the first cell, run with Shift+Enter
    await notebook.click('#notebook-container .cell.code_cell .CodeMirror');
    await notebook.keyboard.type(CELL);
    // CodeMirror closes brackets and quotes as they are typed and steps over the closing ones
    const typed = await notebook.evaluate(() => window.Jupyter.notebook.get_cell(0).get_text());
    check(typed === CELL, 'the first cell holds what was typed', JSON.stringify(typed));
    await notebook.keyboard.press('Shift+Enter');
    // Done when the cell's outputs hold the line, or an error; the page shows what it received.
    const outputs = await notebook
      .waitForFunction(
        () => {
          const cell = window.Jupyter.notebook.get_cell(0);
          const outs = cell.output_area.outputs;
          const text = outs.map((o) => o.text ?? '').join('');
          return outs.some((o) => o.output_type === 'error') || (cell.input_prompt_number > 0 && /steadfast steadfast/.test(text)) ? outs : null;
        },
        null,
        { timeout: CELL_TIMEOUT_MS },
      )
      .then((h) => h.jsonValue());
    const shown = (await notebook.locator('#notebook-container .cell.code_cell').first().locator('.output_area .output_subarea').allInnerTexts()).join('\n');
    check(PRINTED.test(shown), `the cell's output area shows ${PRINTED}`, JSON.stringify(shown.slice(0, 500)));
    const errors = outputs.filter((o) => o.output_type === 'error');
    check(errors.length === 0 && (await notebook.locator('#notebook-container .output_error').count()) === 0, 'no error output', errors.map((o) => `${o.ename}: ${o.evalue}`).join(' | '));
    await shot(notebook, 'notebook-03-cell');

    // ---- Ctrl+S: saved through the proxy, and read back by the browser
    await notebook.evaluate(() => window.Jupyter.notebook.events.one('notebook_saved.Notebook', () => (window.__sfSaved = true)));
    await notebook.keyboard.press('Escape');
    await notebook.keyboard.press('Control+s');
    await notebook.waitForFunction(() => window.__sfSaved === true, null, { timeout: 30000 });
    const saved = await notebook.evaluate(async (path) => {
      const r = await fetch(path, { credentials: 'same-origin' });
      return { status: r.status, body: r.status === 200 ? await r.json() : null };
    }, `/proxy/${ID}/api/contents/${encodeURIComponent(name)}`);
    const cell = saved.body?.content?.cells?.[0];
    check(saved.status === 200 && cell?.source === CELL, 'Ctrl+S saved the cell (read back from the contents API)', `status ${saved.status}, source ${JSON.stringify(cell?.source)}`);
    const stored = cell?.outputs?.map((o) => o.text ?? '').join('') ?? '';
    check(PRINTED.test(stored), "the saved notebook holds the cell's output", JSON.stringify(stored.slice(0, 300)));
    await shot(notebook, 'notebook-04-saved');

    check(refused.length === 0, 'no request through the proxy was refused or failed', refused.join(' | '));
    check(pageErrors.length === 0, 'no uncaught errors in the pages', pageErrors.join(' | '));
  } catch (e) {
    check(false, 'scenario ran to the end', e.message);
    for (const [i, p] of browser.contexts().flatMap((c) => c.pages()).entries()) await shot(p, `notebook-99-failure-${i}`).catch(() => {});
  } finally {
    await browser.close();
  }
  console.log(`\n${tally.passed} passed, ${tally.failed} failed`);
  process.exit(tally.failed ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  console.log(`\n${tally.passed} passed, ${tally.failed + 1} failed`);
  process.exit(1);
});
