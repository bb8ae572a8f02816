#!/usr/bin/env node
// End-to-end test of the dashboard against a running Steadfast cluster, in Debian's Chromium.
//
//   SF_MASTER_URL=http://127.0.0.1:8080 SF_ARTIFACTS_DIR=/tmp/webui-e2e node e2e/dashboard.e2e.mjs
//
// Env: SF_MASTER_URL (default http://127.0.0.1:8080; the master must serve the built dashboard at
// "/" and the REST API at /api/v1), SF_ARTIFACTS_DIR (screenshots, default ./e2e-artifacts),
// SF_E2E_CONFIG (experiment YAML; default ../experiments/quickstart.yaml with relative data paths
// made absolute, as the CLI does), SF_E2E_TIMEOUT_S (how long the sweep may take, default 900),
// SF_E2E_EXPECT_GPUS (how many GPU slots the cluster's agents have; default 0: the GPU table is
// checked for whatever the master lists), SF_E2E_USERNAME and SF_E2E_PASSWORD (a user of the master; when set, the script's own REST calls
// use a session of theirs as a Bearer token, and the browser logs in through the login page; when
// unset, no login step, for a master without authentication).
//
// Steps: [log in through the login page: a wrong password shows the master's message; the user
// menu shows the user; the session is an HttpOnly cookie, nothing in web storage] → submit a grid experiment through the REST API → it shows in the list → it reaches
// COMPLETED in the open page (no reload) → experiment page: learning curves and hyperparameter
// charts drew as many points as the API has → trial page: metric charts likewise, logs shown →
// a second, longer experiment: follow a running trial's logs over SSE, then pause, activate and
// kill it from the UI, checking each state through the API → cluster page: resource pools, agents and slots, each
// GPU's name, memory in use and utilisation as the API lists them, the
// "Busy slots" chart drew the master's recorded minutes (GET /cluster/utilization) and is as full
// right after a reload → [log out from the user menu: the login page, the master no longer knows
// the session; a second login comes back to the same page] → 375 px. Screenshots of every page.
// Exit 0 when all passed, 1 on a failed check, 2 when the master cannot be reached.
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { launch, trustMaster } from './browser.mjs';
import { checks, pageLogin, restClient } from './live.mjs';

const MASTER = (process.env.SF_MASTER_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const ART = resolve(process.env.SF_ARTIFACTS_DIR ?? 'e2e-artifacts');
const TIMEOUT_S = Number(process.env.SF_E2E_TIMEOUT_S ?? 900);
const CONFIG = resolve(process.env.SF_E2E_CONFIG ?? join(import.meta.dirname, '..', '..', 'experiments', 'quickstart.yaml'));
const COLOR = [37, 99, 235]; // first series colour (#2563eb), see src/components/UPlotChart.tsx
const USERNAME = process.env.SF_E2E_USERNAME ?? '';
const PASSWORD = process.env.SF_E2E_PASSWORD ?? '';
const EXPECT_GPUS = Number(process.env.SF_E2E_EXPECT_GPUS ?? 0);
const LOGIN = USERNAME !== '' && PASSWORD !== '';

const { log, check, tally } = checks();

// The script's own REST calls (live.mjs), logged in by scriptLogin when LOGIN.
const { api, login: restLogin } = restClient(MASTER, (...a) => log(...a));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Logs the script itself in (POST /auth/login) for its REST calls. A 429 is waited out once. */
async function scriptLogin() {
  await restLogin(USERNAME, PASSWORD);
}

/** The browser's session: the sf_session cookie is HttpOnly and no token is in web storage. */
async function checkSessionCookie(page, ctx) {
  const cookie = (await ctx.cookies(MASTER)).find((c) => c.name === 'sf_session');
  check(cookie?.httpOnly === true && cookie?.sameSite === 'Strict', 'the session is an HttpOnly, SameSite=Strict cookie', JSON.stringify(cookie && { ...cookie, value: '…' }));
  const leaked = await page.evaluate((v) => (v !== '' && document.cookie.includes(v)) || localStorage.length + sessionStorage.length > 0, cookie?.value ?? '');
  check(!leaked, 'no session token in document.cookie or web storage');
}

/** The experiment YAML with relative data paths made absolute and a unique name. */
function experimentYaml(suffix, maxBatches) {
  let y = readFileSync(CONFIG, 'utf8');
  const dir = dirname(CONFIG);
  y = y.replace(/\b(src|tgt|model|path):\s*([^\s,}#]+)/g, (m, k, p) => (isAbsolute(p) || /^[a-z]+:\/\//.test(p) ? m : `${k}: ${resolve(dir, p)}`));
  y = y.replace(/^name:.*$/m, `name: webui-e2e-${suffix}-${Date.now()}`);
  if (maxBatches) y = y.replace(/max_length:\s*\{\s*batches:\s*\d+\s*\}/, `max_length: {batches: ${maxBatches}}`);
  return y;
}

async function waitFor(what, fn, timeoutS, everyMs = 1000) {
  const end = Date.now() + timeoutS * 1000;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutS}s waiting for ${what}${last instanceof Error ? ` (last error: ${last.message})` : ''}`);
}

/** Pixels of the chart's canvases close to the first series colour: > 0 means a line was drawn. */
async function seriesPixels(page, testId) {
  return page.evaluate(
    ({ testId, c }) => {
      const fig = document.querySelector(`[data-testid="${testId}"]`);
      if (!fig) return -1;
      let n = 0;
      for (const cv of fig.querySelectorAll('canvas')) {
        if (!cv.width || !cv.height) continue;
        const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && Math.abs(d[i] - c[0]) < 40 && Math.abs(d[i + 1] - c[1]) < 40 && Math.abs(d[i + 2] - c[2]) < 40) n++;
      }
      return n;
    },
    { testId, c: COLOR },
  );
}
async function anyPixels(page, testId) {
  return page.evaluate((testId) => {
    const cv = document.querySelector(`[data-testid="${testId}"] canvas`);
    if (!cv || !cv.width) return 0;
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  }, testId);
}
const attr = (page, testId, name) => page.getAttribute(`[data-testid="${testId}"]`, name);
/** Distinct steps carrying `key` (the dashboard keeps the last report of a repeated step). */
const distinctSteps = (metrics, key) => new Set(metrics.filter((m) => typeof m.values?.[key] === 'number').map((m) => String(m.batches))).size;

async function shot(page, name) {
  const file = join(ART, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot ${file}`);
}

async function main() {
  mkdirSync(ART, { recursive: true });
  log(`master ${MASTER}, artifacts ${ART}, ${LOGIN ? `logging in as ${USERNAME}` : 'no login (SF_E2E_USERNAME/SF_E2E_PASSWORD unset)'}`);
  try {
    if (LOGIN) await scriptLogin();
    const m = await api('GET', '/master');
    log(`master version ${m.version ?? m.master?.version ?? '?'}`);
  } catch (e) {
    if (e.status === 401 || e.status === 429) {
      console.error(`\nThe master at ${MASTER} refused ${LOGIN ? `the login of ${USERNAME}` : 'an unauthenticated request'}: ${e.message}\n${LOGIN ? 'Check SF_E2E_USERNAME and SF_E2E_PASSWORD.' : 'It requires a login: set SF_E2E_USERNAME and SF_E2E_PASSWORD.'}`);
      console.log(`\n${tally.passed} passed, ${tally.failed + 1} failed`);
      process.exit(1);
    }
    console.error(`\nCannot reach the Steadfast master at ${MASTER}: ${e.message}${e.cause ? ` (${e.cause.code ?? e.cause.message ?? e.cause})` : ""}\nStart a cluster (sf deploy local up) and set SF_MASTER_URL.`);
    process.exit(2);
  }
  const index = await fetch(`${MASTER}/`).then((r) => r.text()).catch(() => '');
  check(index.includes('<div id="root">'), 'master serves the dashboard at /', index.slice(0, 120));

  // ---- experiment A: a small grid that runs to completion
  const created = await api('POST', '/experiments', { configYaml: experimentYaml('grid'), activate: true });
  if (!created.experiment) throw new Error(`experiment not created: ${JSON.stringify(created.errors ?? created)}`);
  const expA = Number(created.experiment.id);
  log(`submitted experiment ${expA}`);

  // An https:// master's certificate pinned as trusted, not ignoreHTTPSErrors (browser.mjs says why).
  const browser = await launch(await trustMaster(MASTER));
  // a TLS master with a private CA (sf deploy local): Node's fetch trusts it through
  // NODE_EXTRA_CA_CERTS; the browser is told to accept it
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  try {
    await page.goto(`${MASTER}/#/experiments`);
    if (LOGIN) {
      // ---- log in through the login page
      await page.waitForSelector('[data-testid="login-page"]', { timeout: 30000 });
      check(true, 'the dashboard shows the login page before any session');
      await shot(page, '00-login');
      await page.fill('[data-testid="login-username"]', USERNAME);
      await page.fill('[data-testid="login-password"]', `not-${PASSWORD}`);
      await page.click('[data-testid="login-submit"]');
      await page.waitForSelector('[data-testid="login-error"]', { timeout: 15000 });
      const wrong = await page.innerText('[data-testid="login-error"]');
      check(wrong.length > 0 && !wrong.includes(PASSWORD), "a wrong password shows the master's message (and not the password)", wrong);
      await pageLogin(page, USERNAME, PASSWORD, log);
      await page.waitForSelector('[data-testid="user-menu"]', { timeout: 15000 });
      check((await attr(page, 'user-menu', 'data-username')) === USERNAME, `the user menu shows ${USERNAME}`, await attr(page, 'user-menu', 'data-username'));
      check(page.url().endsWith('/#/experiments'), 'after login the page asked for is shown', page.url());
      await checkSessionCookie(page, ctx);
    }
    await page.evaluate(() => (window.__sfNoReload = true));
    const row = `[data-testid="experiment-row"][data-id="${expA}"]`;
    await page.waitForSelector(row, { timeout: 30000 });
    check(true, `experiment ${expA} is in the list`);
    await shot(page, '01-experiments-list-running');
    log(`waiting up to ${TIMEOUT_S}s for COMPLETED in the open page`);
    await page.waitForSelector(`${row}[data-state="EXPERIMENT_STATE_COMPLETED"]`, { timeout: TIMEOUT_S * 1000 });
    check(await page.evaluate(() => window.__sfNoReload === true), 'list reached COMPLETED without a reload');
    const apiA = (await api('GET', `/experiments/${expA}`)).experiment;
    check(apiA.state === 'EXPERIMENT_STATE_COMPLETED', 'API agrees the experiment is COMPLETED', apiA.state);
    await shot(page, '02-experiments-list-completed');

    // ---- experiment page
    await page.click(`${row} a[href="#/experiments/${expA}"] >> nth=0`);
    await page.waitForSelector('[data-testid="trials-table"]');
    const trials = (await api('GET', `/experiments/${expA}/trials`)).trials;
    check((await page.locator('[data-testid="trial-row"]').count()) === trials.length, `trials table has ${trials.length} rows`);
    const metric = apiA.metric;
    await page.waitForSelector('[data-testid="chart-learning-curves"] canvas', { timeout: 30000 });
    const curveMetric = await page.inputValue('[data-testid="curves-metric"]');
    let expected = 0;
    for (const t of trials) expected += distinctSteps((await api('GET', `/trials/${t.id}/metrics?kind=validation&maxPoints=1000`)).metrics ?? [], curveMetric);
    check(curveMetric === metric || !metric, `learning curves show the searcher metric (${metric})`, curveMetric);
    check(Number(await attr(page, 'chart-learning-curves', 'data-points')) === expected, `learning curves drew ${expected} points`, `data-points=${await attr(page, 'chart-learning-curves', 'data-points')}`);
    check((await seriesPixels(page, 'chart-learning-curves')) > 0 || trials.length > 1, 'learning-curve canvas has drawn lines');
    check((await anyPixels(page, 'chart-parallel-coordinates')) > 0, 'parallel-coordinates canvas is not empty');
    check(Number(await attr(page, 'chart-parallel-coordinates', 'data-points')) === trials.length, `parallel coordinates drew ${trials.length} trials`);
    check((await anyPixels(page, 'chart-hparam-scatter')) > 0, 'scatter canvas is not empty');
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: MASTER });
    await page.click('[data-testid="copy-config"]');
    await page.waitForFunction(() => /Copied/.test(document.querySelector('[data-testid="copy-config"] + [role="status"]')?.textContent ?? ''), null, { timeout: 5000 }).catch(() => {});
    const clip = await page.evaluate(() => navigator.clipboard.readText()).catch(() => '');
    check(clip === apiA.configYaml, 'Copy YAML puts the experiment config on the clipboard', `${clip.length} vs ${apiA.configYaml?.length} chars`);
    await page.hover('[data-testid="trial-row"] >> nth=0');
    check((await page.locator('tr.row-hover').count()) === 1, 'hovering a trial row highlights it');
    await shot(page, '03-experiment');

    // ---- trial page
    const trial = trials[0];
    await page.click(`[data-testid="trial-row"][data-id="${trial.id}"] a`);
    await page.waitForSelector('[data-testid="chart-training"]');
    const train = (await api('GET', `/trials/${trial.id}/metrics?kind=training&maxPoints=5000`)).metrics ?? [];
    const valid = (await api('GET', `/trials/${trial.id}/metrics?kind=validation&maxPoints=5000`)).metrics ?? [];
    await page.waitForFunction(() => document.querySelector('[data-testid="chart-training"] canvas') || document.querySelector('[data-testid="chart-training"][data-points="0"]'));
    const tKey = (await page.locator('[data-testid="chart-training-metric"]').count()) ? await page.inputValue('[data-testid="chart-training-metric"]') : 'loss';
    const vKey = (await page.locator('[data-testid="chart-validation-metric"]').count()) ? await page.inputValue('[data-testid="chart-validation-metric"]') : metric;
    // throughput and loss scale are the native trainer's: no panel for a trial that never reports them
    for (const [id, rows, key, optional] of [['chart-training', train, tKey], ['chart-validation', valid, vKey], ['chart-throughput', train, 'tokens_per_second', true], ['chart-loss-scale', train, 'loss_scale', true]]) {
      const want = distinctSteps(rows, key);
      if (optional && want === 0) {
        check((await page.locator(`[data-testid="${id}"]`).count()) === 0, `${id}: no panel, ${key} never reported`);
        continue;
      }
      const got = Number(await attr(page, id, 'data-points'));
      check(got === want, `${id} (${key}) drew ${want} points`, `data-points=${got}`);
      if (want > 0) check((await seriesPixels(page, id)) > 0, `${id} canvas shows the line`);
    }
    // the groups the trial's code named (Core API): a section each, one chart per numeric metric
    const ownGroups = ((await api('GET', `/trials/${trial.id}`)).metricGroups ?? []).filter((g) => g !== 'training' && g !== 'validation');
    for (const g of ownGroups) {
      const rows = (await api('GET', `/trials/${trial.id}/metrics?kind=${g}&maxPoints=5000`)).metrics ?? [];
      const keys = [...new Set(rows.flatMap((m) => Object.keys(m.values ?? {}).filter((k) => typeof m.values[k] === 'number')))];
      const shown = await page.locator(`[data-testid="group-${g}"]`).waitFor({ timeout: 15000 }).then(() => true, () => false);
      check(shown, `metric group ${g} has its section`);
      for (const k of shown ? keys : []) {
        const got = Number(await attr(page, `chart-group-${g}-${k}`, 'data-points'));
        check(got === distinctSteps(rows, k), `group ${g} chart ${k} drew ${distinctSteps(rows, k)} points`, `data-points=${got}`);
      }
    }
    const apiLogs = (await api('GET', `/trials/${trial.id}/logs?limit=1000`)).logs ?? [];
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid="logs"]')?.getAttribute('data-lines')) === n, apiLogs.length, { timeout: 15000 }).catch(() => {});
    check(Number(await attr(page, 'logs', 'data-lines')) === apiLogs.length, `logs panel shows the ${apiLogs.length} lines the API has`, `data-lines=${await attr(page, 'logs', 'data-lines')}`);
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('[data-testid="log-download"]')]);
    const dlPath = join(ART, `trial-${trial.id}-logs.txt`);
    await download.saveAs(dlPath);
    const dlLines = readFileSync(dlPath, 'utf8').split('\n').filter(Boolean).length;
    let allLogs = 0;
    for (let after = 0; ; ) {
      const l = (await api('GET', `/trials/${trial.id}/logs?afterId=${after}&limit=5000`)).logs ?? [];
      if (!l.length || Number(l[l.length - 1].id) <= after) break;
      allLogs += l.length;
      after = Number(l[l.length - 1].id);
    }
    check(dlLines === allLogs, `Download saved ${dlLines} log lines (API: ${allLogs})`);
    if (apiLogs.length) {
      const needle = (apiLogs[apiLogs.length - 1].message ?? '').trim().slice(0, 12);
      const want = ((await api('GET', `/trials/${trial.id}/logs?limit=1000&search=${encodeURIComponent(needle)}`)).logs ?? []).length;
      await page.fill('[data-testid="log-search"]', needle);
      const ok = await page.waitForFunction((n) => Number(document.querySelector('[data-testid="logs"]')?.getAttribute('data-lines')) === n && !document.querySelector('[data-testid="logs"]')?.textContent?.includes('Loading'), want, { timeout: 15000 }).then(() => true, () => false);
      check(ok, `log search "${needle}" shows the ${want} lines the API finds`, `data-lines=${await attr(page, 'logs', 'data-lines')}`);
      await page.fill('[data-testid="log-search"]', '');
    }
    await page.check('[data-testid="log-toggle"]');
    await page.waitForTimeout(500);
    await shot(page, '04-trial-log-scale');
    await page.uncheck('[data-testid="log-toggle"]');
    await shot(page, '04-trial');

    // ---- experiment B: long enough to follow logs, pause, activate and kill from the UI
    const createdB = await api('POST', '/experiments', { configYaml: experimentYaml('pause', 100000), activate: true });
    const expB = Number(createdB.experiment.id);
    log(`submitted experiment ${expB} for follow/pause/activate/kill`);
    const running = await waitFor('a RUNNING trial of experiment B', async () => ((await api('GET', `/experiments/${expB}/trials`)).trials ?? []).find((t) => t.state === 'TRIAL_STATE_RUNNING'), 300, 2000);
    await page.goto(`${MASTER}/#/trials/${running.id}?follow=1`);
    await page.waitForSelector('[data-testid="log-stream-state"][data-state="open"]', { timeout: 30000 });
    check((await attr(page, 'log-stream-state', 'data-mode')) === 'sse', 'log follow runs over the SSE stream (not the polling fallback)', await attr(page, 'log-stream-state', 'data-mode'));
    const before = Number(await attr(page, 'logs', 'data-lines'));
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid="logs"]')?.getAttribute('data-lines')) > n, before, { timeout: 180000 });
    check(true, `followed logs grew past ${before} lines without a reload`);
    await shot(page, '05-trial-following-logs');

    const action = async (name, want) => {
      await page.goto(`${MASTER}/#/experiments?name=${encodeURIComponent(createdB.experiment.name)}`);
      const btn = `[data-testid="experiment-row"][data-id="${expB}"] [data-testid="action-${name}"]`;
      await page.waitForSelector(btn, { timeout: 60000 });
      if (name === 'pause') {
        // from the keyboard: Enter opens the dialog (focus on Cancel), Tab to confirm, Enter
        await page.focus(btn);
        await page.keyboard.press('Enter');
        await page.waitForSelector('[data-testid="confirm-dialog"]');
        await shot(page, '06-confirm-pause');
        check((await page.evaluate(() => document.activeElement?.textContent)) === 'Cancel', 'confirmation dialog opens with focus on Cancel');
        await page.keyboard.press('Tab');
        check((await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))) === 'confirm-button', 'Tab moves to the confirm button');
        await page.keyboard.press('Enter');
      } else {
        await page.click(btn);
        await page.waitForSelector('[data-testid="confirm-dialog"]');
        await page.click('[data-testid="confirm-button"]');
      }
      const st = await waitFor(`experiment ${expB} in ${want.join(' or ')}`, async () => {
        const s = (await api('GET', `/experiments/${expB}`)).experiment.state;
        return want.includes(s) ? s : false;
      }, 180, 1000).catch((e) => e.message);
      check(want.includes(st), `${name} from the UI → API state ${st}`);
      await page.waitForSelector(`[data-testid="experiment-row"][data-id="${expB}"][data-state="${st}"]`, { timeout: 15000 }).catch(() => {});
    };
    await action('pause', ['EXPERIMENT_STATE_PAUSED']);
    await shot(page, '07-experiments-paused');
    await action('activate', ['EXPERIMENT_STATE_ACTIVE']);
    await action('kill', ['EXPERIMENT_STATE_CANCELED', 'EXPERIMENT_STATE_STOPPING_CANCELED']);

    // ---- cluster page
    await page.goto(`${MASTER}/#/cluster`);
    await page.waitForSelector('[data-testid="agents-table"], [data-testid="empty-state"]');
    const agents = (await api('GET', '/agents')).agents ?? [];
    check((await page.locator('[data-testid="agent-row"]').count()) === agents.length, `cluster page lists ${agents.length} agents`);
    check((await page.locator('[data-testid="slot"]').count()) === agents.reduce((n, a) => n + (a.slots?.length ?? 0), 0), 'cluster page shows every slot');
    // GPU slots: a row each, with its name and the utilisation of the agent's last NVML sample.
    // Samples change on a busy cluster: the page (polling) and the API are read again until
    // they agree, for up to 15 s.
    const gpus = agents.flatMap((a) => (a.slots ?? []).filter((s) => s.type === 'SLOT_TYPE_CUDA').map((s) => ({ a, s })));
    check(gpus.length >= EXPECT_GPUS, `the master lists at least ${EXPECT_GPUS} GPU slot(s)`, `${gpus.length}`);
    if (gpus.length > 0) {
      await page.waitForSelector('[data-testid="gpus-table"]', { timeout: 15000 });
      check((await page.locator('[data-testid="gpu-row"]').count()) === gpus.length, `cluster page lists ${gpus.length} GPU(s)`);
      for (const { a, s } of gpus) {
        const row = page.locator(`[data-testid="gpu-row"][data-agent="${a.id}"][data-slot="${s.id}"]`);
        let seen = '';
        const agreed = await waitFor(`GPU ${a.id}/${s.id} on the page as in the API`, async () => {
          const now = ((await api('GET', '/agents')).agents ?? []).find((x) => x.id === a.id)?.slots?.find((x) => x.id === s.id);
          const want = `${now?.device} ${now?.usage ? `${now.usage.utilizationPercent ?? 0}%` : '–'}`;
          seen = `${await row.locator('[data-testid="gpu-name"]').innerText()} ${await row.locator('[data-testid="gpu-util"]').innerText()}`;
          return seen === want;
        }, 15).catch(() => false);
        check(agreed, `GPU ${a.id}/${s.id} shows its name and utilisation as the API lists them`, seen);
      }
      await shot(page, '08a-cluster-gpus');
    }
    // Resource pools: one row per pool the master reports, each with its enabled slots.
    const pools = (await api('GET', '/resource-pools')).resourcePools ?? [];
    await page.waitForSelector('[data-testid="pools-table"]', { timeout: 15000 });
    check((await page.locator('[data-testid="pool-row"]').count()) === pools.length, `cluster page lists ${pools.length} resource pool(s)`);
    const slotCells = await page.locator('[data-testid="pool-slots"]').allInnerTexts();
    check(pools.every((p, i) => (slotCells[i] ?? '').endsWith(`/${p.totalSlots ?? 0}`)), 'each pool row shows its slots', JSON.stringify(slotCells));
    await page.waitForSelector('[data-testid="chart-utilization"] canvas', { timeout: 15000 });
    // The chart is the master's history (one row per pool and minute; mean and peak series).
    const history = (await api('GET', `/cluster/utilization?since=${Math.floor(Date.now() / 1000) - 24 * 3600}`)).points ?? [];
    const minutes = new Set(history.map((p) => p.time)).size;
    check(history.some((p) => p.slotsBusy > 0), 'the master recorded busy slots while the experiments ran', JSON.stringify(history.slice(-3)));
    const drawn = Number(await attr(page, 'chart-utilization', 'data-points'));
    // a minute may begin between the page's request and ours
    check(drawn > 0 && Math.abs(drawn - 2 * minutes) <= 2, `utilization chart drew the master's ${minutes} minute(s)`, `data-points=${drawn}`);
    // one minute is a single point, which a stepped line does not draw; two or more make a line
    if (minutes >= 2) check((await seriesPixels(page, 'chart-utilization')) > 0, 'utilization canvas has drawn lines');
    else check((await anyPixels(page, 'chart-utilization')) > 0, 'utilization canvas is not empty');
    await shot(page, '08-cluster');
    await page.reload();
    await page.waitForSelector('[data-testid="chart-utilization"] canvas', { timeout: 15000 });
    const reloaded = Number(await attr(page, 'chart-utilization', 'data-points'));
    check(reloaded >= drawn, 'utilization chart is full right after a reload', `data-points=${reloaded}, before ${drawn}`);

    if (LOGIN) {
      // ---- log out from the user menu, then a second login comes back to the same page
      await page.goto(`${MASTER}/#/experiments/${expA}`);
      await page.waitForSelector('[data-testid="trials-table"]', { timeout: 30000 });
      await page.click('[data-testid="user-menu-button"]');
      await page.waitForSelector('[data-testid="user-menu-panel"]');
      await shot(page, '08b-user-menu');
      await page.click('[data-testid="logout"]');
      const out = await page.waitForSelector('[data-testid="login-page"]', { timeout: 15000 }).then(() => true, () => false);
      check(out && (await page.innerText('[data-testid="login-reason"]').catch(() => '')) === 'You have logged out.', 'logout returns to the login page');
      const meStatus = await page.evaluate(() => fetch('/api/v1/auth/me', { credentials: 'same-origin', headers: { 'X-Requested-With': 'steadfast' } }).then((r) => r.status));
      check(meStatus === 401, 'after logout the master no longer knows the browser session (GET /auth/me → 401)', `status ${meStatus}`);
      check((await api('GET', '/auth/me')).username === USERNAME, "the browser's logout left the script's own session alone");
      await pageLogin(page, USERNAME, PASSWORD, log);
      await page.waitForSelector('[data-testid="trials-table"]', { timeout: 30000 });
      check(page.url().endsWith(`/#/experiments/${expA}`), 'a second login works and comes back to the same page', page.url());
      check((await attr(page, 'user-menu', 'data-username')) === USERNAME, `the user menu shows ${USERNAME} again`);
    }

    // ---- phone width
    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto(`${MASTER}/#/experiments/${expA}`);
    await page.waitForSelector('[data-testid="chart-learning-curves"] canvas', { timeout: 30000 });
    await shot(page, '09-experiment-375px');

    check(pageErrors.length === 0, 'no uncaught errors in the page', pageErrors.join(' | '));
    check((await page.locator('[data-testid="error-banner"]').count()) === 0, 'no error banner at the end');
  } catch (e) {
    check(false, 'scenario ran to the end', e.message);
    await shot(page, '99-failure').catch(() => {});
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
