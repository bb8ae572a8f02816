#!/usr/bin/env node
// Browser test that needs no cluster: serves dist/ with no API behind it and checks, in Debian's
// Chromium at 1280 px and 375 px, that every page shows the "master cannot be reached" banner with a
// Retry button instead of crashing, that deep links (/experiments/3) land on the right page, and
// that the navigation works from the keyboard. Then, against an in-memory stand-in of the master's
// auth routes (auth-stub.mjs), the login flow: the login page on 401, the master's messages for a
// wrong password and a 429, back to the same route after login, the HttpOnly cookie and nothing
// in web storage, actions gated by ownership and role, the tokens page (shown once, revoke), a
// session that expires mid-way, logout and a second login; and the cluster page's Servers card
// (dev/serving-fixtures.mjs: the table, a server's logs, a server's slot shown busy, Stop behind a confirmation, Show stopped, an older master)
// with Serve on a model version, and its Tasks card (dev/task-fixtures.mjs: commands, servers, a notebook and
// experiment 17's trials, a queued one's pending reason, exit codes, a running notebook's Open link to /proxy/ID/
// and none for a command, a command's logs, its slot, Kill behind a confirmation; a trial sharing its id with a
// command in a row of its own, t54, linking to its trial page, without Kill, its logs from the trial's route); and the experiment page's hyperparameter charts for a sweep with
// string, categorical and log hyperparameters (label boxes measured, none overlapping); and the Slurm
// and arch views (slurm-arch.flow.mjs); and what ran, native or user code with its context, and the
// unmanaged badge (what-ran.flow.mjs); and a speech trial's validation transcripts beside their
// references (speech.flow.mjs). Screenshots go to $SF_ARTIFACTS_DIR
// (default e2e-artifacts/offline). Run after `npm run build`: `npm run test:browser`.
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createRouter, loadOperations } from '../dev/api-routes.mjs';
import { fixedModelStore, modelHandlers } from '../dev/model-fixtures.mjs';
import { fixedServingStore, servingHandlers } from '../dev/serving-fixtures.mjs';
import { fixedCommandStore, fixedTaskAgents, fixedTrialStore, taskHandlers, trialLogHandlers } from '../dev/task-fixtures.mjs';
import { createAuthStub } from './auth-stub.mjs';
import { slurmArchFlow } from './slurm-arch.flow.mjs';
import { speechFlow } from './speech.flow.mjs';
import { whatRanFlow } from './what-ran.flow.mjs';
import { launch } from './browser.mjs';
import { labelBoxes, overlaps } from './views.checks.mjs';
import { serveDist } from './static-server.mjs';

const dist = join(import.meta.dirname, '..', 'dist');
if (!existsSync(join(dist, 'index.html'))) {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(2);
}
const ART = resolve(process.env.SF_ARTIFACTS_DIR ?? join('e2e-artifacts', 'offline'));
mkdirSync(ART, { recursive: true });
let passed = 0;
let failed = 0;
const check = (ok, what, detail = '') => {
  ok ? passed++ : failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${!ok && detail ? `: ${detail}` : ''}`);
};

const { server, url } = await serveDist(dist);
const browser = await launch();
try {
  for (const [w, h] of [[1280, 900], [375, 800]]) {
    const page = await browser.newPage({ viewport: { width: w, height: h } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    for (const [name, path, heading] of [
      ['experiments', '/#/experiments', 'Experiments'],
      ['experiment', '/#/experiments/3', null],
      ['trial', '/#/trials/7', null],
      ['cluster', '/#/cluster', 'Cluster'],
      ['models', '/#/models', 'Models'],
      ['model', '/#/models/wmt-de-en', null],
      ['deep-link', '/experiments/3', null],
    ]) {
      await page.goto(url + path);
      const banner = page.locator('[data-testid="error-banner"]').first();
      const shown = await banner.waitFor({ timeout: 20000 }).then(() => true, () => false);
      check(shown, `${w}px ${path}: error banner shown`);
      if (shown) {
        check(/cannot be reached/.test(await banner.innerText()), `${w}px ${path}: banner says the master cannot be reached`, await banner.innerText());
        check((await banner.getByRole('button', { name: 'Retry' }).count()) === 1, `${w}px ${path}: banner has Retry`);
      }
      if (heading) check((await page.getByRole('heading', { level: 1, name: heading }).count()) === 1, `${w}px ${path}: page heading "${heading}" still rendered`);
      if (name === 'deep-link') check(page.url().endsWith('/#/experiments/3'), `deep link rewritten to the hash route`, page.url());
      await page.screenshot({ path: join(ART, `${name}-${w}.png`), fullPage: true });
    }
    // Retry re-asks the API and keeps the page alive
    await page.goto(url + '/#/experiments');
    await page.locator('[data-testid="error-banner"] button').click();
    await page.waitForTimeout(500);
    check((await page.locator('[data-testid="error-banner"]').count()) === 1, `${w}px Retry keeps one banner`);
    if (w === 1280) {
      // keyboard: skip link (moves focus to main without changing the route), then the navigation
      await page.goto('about:blank');
      await page.goto(url + '/#/experiments');
      await page.waitForSelector('[data-testid="error-banner"]');
      await page.keyboard.press('Tab');
      check((await page.evaluate(() => document.activeElement?.textContent)) === 'Skip to content', 'first Tab reaches the skip link');
      await page.keyboard.press('Enter');
      check((await page.evaluate(() => document.activeElement?.id)) === 'main' && page.url().endsWith('#/experiments'), 'skip link focuses main and keeps the route', page.url());
      await page.goto('about:blank');
      await page.goto(url + '/#/experiments');
      await page.waitForSelector('[data-testid="error-banner"]');
      for (let i = 0; i < 5; i++) await page.keyboard.press('Tab'); // skip link, brand, Experiments, Models, Cluster
      check((await page.evaluate(() => document.activeElement?.textContent)) === 'Cluster', 'Tab reaches the Cluster link', await page.evaluate(() => document.activeElement?.outerHTML));
      await page.keyboard.press('Enter');
      await page.waitForURL(/#\/cluster/);
      check(true, 'Enter on the Cluster link navigates');
      // every form control has an accessible name
      await page.goto(url + '/#/experiments');
      const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select, button')].filter((el) => !(el.labels?.length || el.getAttribute('aria-label') || el.textContent?.trim())).map((el) => el.outerHTML));
      check(unlabelled.length === 0, 'every control on the list page is labelled', unlabelled.join(' '));
    }
    check(errors.length === 0, `${w}px no uncaught page errors`, errors.join(' | '));
    await page.close();
  }
  await hparamsFlow(browser);
  await slurmArchFlow(browser, { dist, check, ART });
  await whatRanFlow(browser, { dist, check, ART });
  await speechFlow(browser, { dist, check, ART });
  await modelsFlow(browser);
  await serversFlow(browser);
  await loginFlow(browser);
} finally {
  await browser.close();
  server.close();
}

/** The experiment page's hyperparameter charts for a sweep with a long string hyperparameter (a
 *  data path), a categorical one with many values, a log-scaled learning rate and a constant: the
 *  axis labels are elements whose boxes never intersect, long ones are cut with their full text as
 *  the title, and the constant is hidden until "show constant hyperparameters" is ticked. */
async function hparamsFlow(browser) {
  const paths = ['/data/multi30k/train.de', '/data/wmt14/train.tokenized.bpe32k.de', '/data/iwslt17/train.de'];
  const trials = Array.from({ length: 24 }, (_, i) => ({
    id: String(i + 1),
    experimentId: '3',
    state: 'TRIAL_STATE_COMPLETED',
    hparams: { data_path: paths[i % 3], activation: `activation_function_${i % 20}`, lr: 10 ** (-5 + (i % 4)), d_model: 256 },
    bestValidationMetric: 20 + i,
    totalBatches: '200',
    targetBatches: '200',
  }));
  const experiment = { id: '3', name: 'hparam-labels', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', workspace: 'Uncategorized', searcher: 'random', metric: 'validation_bleu_newstest2014', smallerIsBetter: false, numTrials: 24, numCompletedTrials: 24, configYaml: 'name: hparam-labels\n' };
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const api = async (req, res, url) => {
    const p = url.pathname.replace(/^\/api\/v1/, '');
    if (p === '/experiments/3') return send(res, 200, { experiment });
    if (p === '/experiments/3/trials') return send(res, 200, { trials, pagination: { total: trials.length } });
    if (/^\/trials\/\d+\/metrics$/.test(p)) return send(res, 200, { metrics: [] });
    if (p === '/experiments/3/checkpoints') return send(res, 200, { checkpoints: [] });
    return send(res, 404, { code: 5, message: `no route ${req.method} ${url.pathname}`, details: [] });
  };
  const { server: hpServer, url: base } = await serveDist(dist, 0, api);
  try {
    for (const [w, h] of [[1280, 900], [375, 800]]) {
      const page = await browser.newPage({ viewport: { width: w, height: h } });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const what = (s) => `hparams ${w}px: ${s}`;
      try {
        await page.goto(`${base}/#/experiments/3`);
        await page.waitForSelector('[data-testid="chart-parallel-coordinates"] [data-testid="pc-label"]', { timeout: 15000 });
        await page.locator('[data-testid="chart-parallel-coordinates"]').scrollIntoViewIfNeeded();
        await page.waitForTimeout(300); // the measured relayout after the first paint
        check((await page.getAttribute('[data-testid="chart-parallel-coordinates"]', 'data-points')) === '24', what('parallel coordinates drew 24 trials'));
        let boxes = await labelBoxes(page, '[data-testid="pc-label"]');
        const axes = [...new Set(boxes.map((b) => b.axis))];
        check(['data_path', 'activation', 'lr'].every((a) => axes.includes(a)) && !axes.includes('d_model'), what('string, categorical and log axes are labelled, the constant is hidden'), axes.join(','));
        check(boxes.length > 8 && overlaps(boxes).length === 0, what(`no two of the ${boxes.length} pc-label boxes overlap`), overlaps(boxes).slice(0, 5).join('; '));
        const cut = boxes.find((b) => b.title === '/data/wmt14/train.tokenized.bpe32k.de');
        check(!!cut && cut.text.includes('…'), what('a long path is cut with an ellipsis, the full path in its title'), JSON.stringify(cut));
        const ticks = boxes.filter((b) => b.axis === 'activation' && b.role === 'tick');
        check(ticks.length > 2 && ticks.length < 20, what('the 20 categories are thinned to fit the axis'), String(ticks.length));
        await page.screenshot({ path: join(ART, `hparams-${w}.png`), fullPage: true });
        await page.check('[data-testid="pc-show-constant"]');
        boxes = await labelBoxes(page, '[data-testid="pc-label"]');
        check(boxes.some((b) => b.axis === 'd_model') && overlaps(boxes).length === 0, what('"show constant hyperparameters" brings d_model back, still without overlaps'), overlaps(boxes).slice(0, 5).join('; '));
        await page.selectOption('[data-testid="chart-hparam-scatter"] select', 'activation');
        const sb = await labelBoxes(page, '[data-testid="scatter-label"]');
        check(sb.length > 2 && overlaps(sb).length === 0, what(`no two of the ${sb.length} scatter labels overlap (categorical x axis)`), overlaps(sb).slice(0, 5).join('; '));
        await page.screenshot({ path: join(ART, `hparams-constant-${w}.png`), fullPage: true });
      } catch (e) {
        check(false, what('the hyperparameter flow ran to the end'), e.message);
        await page.screenshot({ path: join(ART, `hparams-failure-${w}.png`), fullPage: true }).catch(() => {});
      }
      check(errors.length === 0, what('no uncaught page errors'), errors.join(' | '));
      await page.close();
    }
  } finally {
    hpServer.close();
  }
}

/** The model registry pages against the description's routes with dev/model-fixtures.mjs: with
 *  data, with an empty registry, and with the master answering errors. The model page reads every
 *  version's metrics and checkpoint path from GetModel: it must ask no GetModelVersion. */
async function modelsFlow(browser) {
  let mode = 'data'; // data | empty | error
  const requests = []; // {method, path} of every /api/ request
  const versionRequests = () => requests.filter((r) => /^\/api\/v1\/models\/[^/?]+\/versions\//.test(r.path));
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const err = (res, status, code, message) => send(res, status, { code, message, details: [] });
  const stores = { data: fixedModelStore(), empty: { models: [], versions: [], source: () => ({}) } };
  const routers = Object.fromEntries(Object.entries(stores).map(([k, st]) => [k, createRouter(loadOperations(), modelHandlers(st, { send, err }), 'e2e/offline.e2e.mjs')]));
  const api = async (req, res, url) => {
    requests.push({ method: req.method, path: url.pathname + url.search });
    if (mode === 'error' && url.pathname.startsWith('/api/v1/models')) return err(res, 503, 14, 'database unreachable');
    const route = routers[mode === 'error' ? 'data' : mode].match(req.method, url.pathname);
    if (route.status !== 200 || !route.handler) return err(res, 404, 5, `no route ${req.method} ${url.pathname}`); // /auth/me too: no login
    return route.handler(req, res, url, route.params, {});
  };
  const { server: modelServer, url: base } = await serveDist(dist, 0, api);
  try {
    for (const [w, h] of [[1280, 900], [375, 800]]) {
      const page = await browser.newPage({ viewport: { width: w, height: h } });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const rows = (sel) => page.locator(sel).count();
      const what = (s) => `models ${w}px: ${s}`;
      try {
        mode = 'data';
        await page.goto(`${base}/#/models`);
        await page.waitForSelector('[data-testid="model-row"]', { timeout: 15000 });
        check((await rows('[data-testid="model-row"]')) === 2, what('the list shows the unarchived models'), String(await rows('[data-testid="model-row"]')));
        check((await page.getAttribute('nav[aria-label="Main"] a[href="#/models"]', 'aria-current')) === 'page', what('"Models" is the current navigation item'));
        const wmt = page.locator('[data-testid="model-row"][data-name="wmt-de-en"]');
        check(/nlp/.test(await wmt.locator('[data-testid="model-labels"]').innerText()) && (await wmt.locator('[data-testid="model-versions"]').innerText()) === '2', what('a row shows labels and the versions count'));
        await page.screenshot({ path: join(ART, `models-${w}.png`), fullPage: true });
        await page.check('[data-testid="model-filter-archived"]');
        await page.waitForSelector('[data-testid="model-row"][data-name="old-baseline"]', { timeout: 10000 }).then(() => check(page.url().includes('archived=1'), what('Show archived lists archived models, in the URL')), () => check(false, what('Show archived lists archived models')));
        await page.fill('[data-testid="model-filter-name"]', 'zzz');
        await page.waitForSelector('[data-testid="empty-state"]', { timeout: 10000 }).then(() => check(true, what('a name that matches nothing says so')), () => check(false, what('a name that matches nothing says so')));
        await page.fill('[data-testid="model-filter-name"]', 'tiny');
        await page.waitForFunction(() => document.querySelectorAll('[data-testid="model-row"]').length === 1, null, { timeout: 10000 }).then(() => check(page.url().includes('name=tiny'), what('the name filter narrows the list, in the URL'), page.url()), () => check(false, what('the name filter narrows the list')));
        await page.click('[data-testid="model-row"] a');
        await page.waitForSelector('[data-testid="model-summary"]', { timeout: 10000 });
        check(/No versions yet/.test(await page.innerText('[data-testid="empty-state"]').catch(() => '')), what('a model without versions says how to register one'));

        const from = requests.length;
        await page.goto(`${base}/#/models/wmt-de-en`);
        await page.waitForSelector('[data-testid="version-row"]', { timeout: 15000 });
        check((await page.innerText('[data-testid="model-description"]')) === 'German to English', what('the model page shows the description'));
        check((await rows('[data-testid="version-row"]')) === 2, what('one row per version'));
        const v3 = page.locator('[data-testid="version-row"][data-version="3"]');
        const v1 = page.locator('[data-testid="version-row"][data-version="1"]');
        check((await v3.locator('[data-testid="version-best"]').innerText()) === '31.25' && (await v3.locator('[data-testid="version-latest"]').innerText()) === '30.5', what("a version shows its trial's best and latest metric"), await v3.innerText());
        check((await v1.locator('[data-testid="version-best"]').innerText()) === '27.5' && (await v1.locator('[data-testid="version-latest"]').innerText()) === '27.1', what('every version shows its metrics'), await v1.innerText());
        check((await v3.locator('[data-testid="version-best"]').getAttribute('title')) === 'bleu (larger is better)' && (await page.locator('th', { hasText: 'Best bleu' }).count()) === 1, what('the metric and its direction are named'));
        check((await v3.locator('a[href="#/trials/12"]').count()) === 1 && (await v3.locator('a[href="#/experiments/4"]').count()) === 1, what('a version links to its source trial and experiment'));
        const ckpt = v3.locator('[data-testid="version-checkpoint"]');
        check(/1f3c0000-0000-4000-8000-000000000003/.test(await ckpt.innerText()) && (await ckpt.getAttribute('title')) === '/var/lib/steadfast/checkpoints/1f3c0000-0000-4000-8000-000000000003', what("a version shows its checkpoint's UUID, its path as the title"), String(await ckpt.getAttribute('title')));
        await page.waitForTimeout(500); // anything the page would ask after its first render
        const gets = requests.slice(from).filter((r) => r.path.startsWith('/api/v1/models'));
        check(gets.every((r) => !/\/versions\//.test(r.path)) && gets.length === 1 && gets[0].path === '/api/v1/models/wmt-de-en', what('the model page makes one GetModel request and no GetModelVersion'), gets.map((r) => r.path).join(' '));
        await page.screenshot({ path: join(ART, `model-${w}.png`), fullPage: true });
        await v3.locator('a[href="#/trials/12"]').click();
        await page.waitForURL(/#\/trials\/12$/, { timeout: 5000 }).then(() => check(true, what('the trial link opens the trial page')), () => check(false, what('the trial link opens the trial page'), page.url()));

        await page.goto(`${base}/#/models/nope`);
        const nf = await page.locator('[data-testid="error-banner"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="error-banner"]'), () => '');
        check(/Model "nope" was not found/.test(nf) && /does not exist/.test(nf), what('an unknown model says it was not found'), nf);

        mode = 'empty';
        await page.goto('about:blank');
        await page.goto(`${base}/#/models`);
        const empty = await page.locator('[data-testid="empty-state"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="empty-state"]'), () => '');
        check(/No models yet/.test(empty), what('an empty registry says how to add a model'), empty);

        mode = 'error';
        for (const path of ['/#/models', '/#/models/wmt-de-en']) {
          await page.goto('about:blank');
          await page.goto(base + path);
          const b = await page.locator('[data-testid="error-banner"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="error-banner"]'), () => '');
          check(/database unreachable/.test(b) && (await page.locator('[data-testid="error-banner"] button', { hasText: 'Retry' }).count()) === 1, what(`${path}: the master's error is shown with Retry`), b);
        }
        await page.screenshot({ path: join(ART, `models-error-${w}.png`), fullPage: true });
        check(versionRequests().length === 0, what('no GetModelVersion request in the whole models flow (list, empty model, model, unknown, errors)'), versionRequests().map((r) => r.path).join(' '));
      } catch (e) {
        check(false, what('the models flow ran to the end'), e.message);
        await page.screenshot({ path: join(ART, `models-failure-${w}.png`), fullPage: true }).catch(() => {});
      }
      check(errors.length === 0, what('no uncaught page errors'), errors.join(' | '));
      await page.close();
    }
  } finally {
    modelServer.close();
  }
}

/** The cluster page's Servers and Tasks cards against the description's routes with
 *  dev/serving-fixtures.mjs and dev/task-fixtures.mjs (their agents, the other cluster routes answer empty lists): the table, the URL link
 *  of a READY server, its logs under its row (its task's route, polled after the last id seen), the slot it runs on
 *  shown busy as "server 52" and counted as used, linking to its row, Stop behind its confirmation (one POST, with X-Requested-With), Show stopped,
 *  an empty list, a master without the servings and task routes; Serve on a model version; and the
 *  Tasks card: every command, server, notebook and trial (t54 apart from command 54, with its trial
 *  page, its experiment, no Kill, its logs from the trial's route), live first, a queued one's pending reason, exit codes, the
 *  program cut to one line, a command's logs (GET /tasks/54/logs, polled), the slot it runs on as
 *  "command 54" linking to its row, Kill behind its confirmation (one POST /tasks/54/kill), the
 *  card stacked within a phone's width. */
async function serversFlow(browser) {
  let mode = 'data'; // data | empty | no-route
  let store;
  const requests = []; // {method, path, xrw} of every /api/ request
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const err = (res, status, code, message) => send(res, status, { code, message, details: [] });
  const empty = {
    'GET /api/v1/agents': (req, res) => send(res, 200, { agents: mode === 'data' ? fixedTaskAgents() : [] }),
    'GET /api/v1/resource-pools': (req, res) => send(res, 200, { resourcePools: [] }),
    'GET /api/v1/experiments': (req, res) => send(res, 200, { experiments: [], pagination: { total: 0 } }),
    'GET /api/v1/cluster/utilization': (req, res) => send(res, 200, { points: [] }),
  };
  const models = fixedModelStore();
  const operations = loadOperations();
  const routerOf = (st, commands, trialStore) =>
    createRouter(
      operations,
      { ...empty, ...modelHandlers(models, { send, err }), ...servingHandlers(st, { send, err }), ...taskHandlers({ servings: st, commands, trials: () => trialStore.trials }, { send, err }), ...trialLogHandlers(trialStore, { send, err }) },
      'e2e/offline.e2e.mjs',
    );
  let router;
  const reset = (m) => {
    mode = m;
    store = m === 'empty' ? { servings: [], nextId: 60 } : fixedServingStore();
    router = routerOf(store, m === 'empty' ? { commands: [] } : fixedCommandStore(), m === 'empty' ? { trials: [], logs: [] } : fixedTrialStore());
  };
  const api = async (req, res, url) => {
    requests.push({ method: req.method, path: url.pathname + url.search, xrw: req.headers['x-requested-with'] });
    // an older master: neither the servings nor the task routes
    if (mode === 'no-route' && /^\/api\/v1\/(servings|tasks)(\/|$)/.test(url.pathname)) return err(res, 404, 5, `no route ${req.method} ${url.pathname}`);
    const route = router.match(req.method, url.pathname);
    if (route.status !== 200 || !route.handler) return err(res, 404, 5, `no route ${req.method} ${url.pathname}`); // /auth/me too: no login
    return route.handler(req, res, url, route.params, undefined);
  };
  const { server: servingServer, url: base } = await serveDist(dist, 0, api);
  try {
    for (const [w, h] of [[1280, 900], [375, 800]]) {
      const page = await browser.newPage({ viewport: { width: w, height: h } });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const what = (s) => `servers ${w}px: ${s}`;
      const row = (id) => page.locator(`[data-testid="server-row"][data-id="${id}"]`);
      try {
        reset('data');
        requests.length = 0;
        await page.goto(`${base}/#/cluster`);
        await page.waitForSelector('[data-testid="server-row"]', { timeout: 15000 });
        const ids = await page.locator('[data-testid="server-row"]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-id')));
        check(ids.join(',') === '52,53', what('the table lists the live servers'), ids.join(','));
        check((await page.locator('[data-testid="error-banner"]').count()) === 0, what('no error banner'));
        const ready = row(52);
        const link = ready.locator('[data-testid="server-url"] a');
        check((await link.getAttribute('href')) === 'http://node1:8500' && (await link.getAttribute('target')) === '_blank', what("a READY server's URL is a link"));
        check((await row(53).locator('[data-testid="server-url"] a').count()) === 0, what('a QUEUED server has no URL link'));
        const proxied = await ready.locator('[data-testid="server-proxy"]').innerText().catch(() => '');
        check(proxied.trim() === 'through the master: POST /proxy/52/v1/translate' && (await row(53).locator('[data-testid="server-proxy"]').count()) === 0, what("a READY server shows its API through the master's proxy, a QUEUED one none"), proxied);
        check((await ready.locator('a[href="#/models/wmt-de-en"]').count()) === 1 && (await ready.locator('a[href^="#/trials/"]').count()) === 0, what('a server links to its model, and to no trial'));
        // Logs opens the server's logs under its row (its task's: GET /tasks/52/logs), polled while it runs
        await ready.locator('[data-testid="server-logs-toggle"]').click();
        const panel = page.locator('[data-testid="server-logs-row"][data-id="52"] [data-testid="task-log-lines"]');
        const shown = await panel.getByText('listening on http://node1:8500').waitFor({ timeout: 10000 }).then(() => true, () => false);
        check(shown, what("Logs shows the server's log lines"));
        const logReads = () => requests.filter((r) => r.path.startsWith('/api/v1/tasks/52/logs'));
        const pollSeen = () => logReads().some((r) => /[?&]afterId=4(&|$)/.test(r.path));
        for (let i = 0; i < 30 && !pollSeen(); i++) await page.waitForTimeout(200);
        const polled = pollSeen();
        check(polled, what('a live server\'s logs are polled after the last id seen'), logReads().map((r) => r.path).join(' '));
        await ready.locator('[data-testid="server-logs-toggle"]').click();
        check((await page.locator('[data-testid="server-logs-row"]').count()) === 0, what('Hide logs closes the panel'));
        check((await ready.locator('[data-testid="server-agent"]').innerText()).includes('agent-1') && /Ready/.test(await ready.locator('[data-testid="server-state"]').innerText()), what('a server shows its agent and state'));
        // the slot server 52 runs on (allocationId task52-r0-a1, no trialId) is busy, as "server 52",
        // and counted as used; its link stays on the page and brings the server's row into view
        const slots = page.locator('[aria-label="Slots of agent-1"] [data-testid="slot"]');
        const busy = await slots.evaluateAll((ls) => ls.map((l) => `${l.getAttribute('data-busy')}:${l.textContent.replace(/\s+/g, ' ').trim()}`));
        check(busy.length === 4 && busy[0].startsWith('true:') && /server 52/.test(busy[0]) && busy[1].startsWith('true:') && /trial 7/.test(busy[1]) && busy[2].startsWith('false:') && busy[3].startsWith('true:') && /command 54/.test(busy[3]), what("a server's slot shows busy as \"server 52\", a command's as \"command 54\""), busy.join(' | '));
        const summary = await page.innerText('[data-testid="cluster-summary"]');
        check(/3\/4 slots busy/.test(summary), what("a server's and a command's slots are counted as used"), summary);
        check((await page.innerText('[data-testid="gpu-row"][data-slot="cuda0"] [data-testid="gpu-holder"]')) === 'server 52', what('the GPU table says server 52 too'));
        await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
        await slots.first().getByRole('link', { name: 'server 52' }).click();
        await page.waitForTimeout(300);
        const inView = await ready.evaluate((r) => { const b = r.getBoundingClientRect(); return b.bottom > 0 && b.top < window.innerHeight && r.contains(document.activeElement); });
        check(inView && page.url().endsWith('#/cluster'), what("the slot's server link shows the server's row and keeps the route"), page.url());
        await tasksChecks(page, w, requests);

        const stop = ready.locator('[data-testid="server-stop"]');
        const box = await stop.boundingBox();
        check(!!box && box.x >= 0 && box.x + box.width <= w, what('Stop is within the viewport'), JSON.stringify(box));
        await page.screenshot({ path: join(ART, `servers-${w}.png`), fullPage: true });

        const stops = () => requests.filter((r) => r.method === 'POST' && r.path.startsWith('/api/v1/servings/'));
        await stop.click();
        await page.waitForSelector('[data-testid="confirm-dialog"]', { timeout: 5000 });
        check(/Stop server 52\?/.test(await page.innerText('[data-testid="confirm-dialog"]')), what('Stop asks first'));
        await page.screenshot({ path: join(ART, `servers-stop-${w}.png`) });
        await page.getByRole('button', { name: 'Cancel' }).click();
        check((await page.locator('[data-testid="confirm-dialog"]').count()) === 0 && stops().length === 0, what('Cancel closes the dialog and stops nothing'));
        await stop.click();
        await page.click('[data-testid="confirm-button"]');
        const stopped = await page.waitForSelector('[data-testid="server-row"][data-id="52"][data-state="STOPPING"]', { timeout: 10000 }).then(() => true, () => false);
        check(stopped, what('after the confirmation the server shows STOPPING'));
        check(stops().length === 1 && stops()[0].path === '/api/v1/servings/52/stop' && stops()[0].xrw === 'steadfast', what('one POST /servings/52/stop, with X-Requested-With: steadfast'), JSON.stringify(stops()));
        check((await row(52).locator('[data-testid="server-stop"]').count()) === 0, what('a STOPPING server offers no Stop'));

        await page.check('[data-testid="servers-show-stopped"]');
        const failed = await page.waitForSelector('[data-testid="server-row"][data-id="41"]', { timeout: 10000 }).then(() => true, () => false);
        check(failed && page.url().includes('servers=all'), what('Show stopped lists the ended servers, in the URL'), page.url());
        if (failed) check(/checkpoint .* not found/.test(await row(41).locator('[data-testid="server-error"]').innerText()), what("a FAILED server shows the master's error"));
        check(requests.some((r) => r.path === '/api/v1/servings?includeStopped=true'), what('Show stopped asks with includeStopped=true'));

        reset('empty');
        await page.goto('about:blank');
        await page.goto(`${base}/#/cluster`);
        const none = await page.locator('[data-testid="servers-card"] [data-testid="empty-state"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="servers-card"] [data-testid="empty-state"]'), () => '');
        check(/No server is running.*sf serve start/s.test(none), what('no server: says how to start one'), none);
        const noTask = await page.locator('[data-testid="tasks-card"] [data-testid="empty-state"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="tasks-card"] [data-testid="empty-state"]'), () => '');
        check(/No task has run on this cluster yet.*sf cmd run/s.test(noTask), what('no task: says how to run one'), noTask);

        reset('no-route');
        await page.goto('about:blank');
        await page.goto(`${base}/#/cluster`);
        const old = await page.locator('[data-testid="servers-card"] [data-testid="empty-state"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="servers-card"] [data-testid="empty-state"]'), () => '');
        check(/does not schedule servers/.test(old) && (await page.locator('[data-testid="error-banner"]').count()) === 0, what('a master without the servings routes: said in the card, no banner'), old);
        const oldTasks = await page.locator('[data-testid="tasks-card"] [data-testid="empty-state"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="tasks-card"] [data-testid="empty-state"]'), () => '');
        check(/runs no tasks of their own/.test(oldTasks), what('a master without the task routes: said in the Tasks card'), oldTasks);

        if (w === 1280) {
          // Serve on a model version starts one; the cluster page lists it
          reset('data');
          await page.goto(`${base}/#/models/wmt-de-en`);
          await page.click('[data-testid="version-row"][data-version="3"] [data-testid="version-serve"]');
          await page.click('[data-testid="confirm-button"]');
          const started = await page.locator('[data-testid="serve-started"]').waitFor({ timeout: 10000 }).then(() => page.innerText('[data-testid="serve-started"]'), () => '');
          const post = requests.filter((r) => r.method === 'POST' && r.path === '/api/v1/servings');
          check(/Server 60 for wmt-de-en v3 is queued/.test(started) && post.length === 1 && post[0].xrw === 'steadfast', what('Serve on a version starts a server (POST /servings)'), started);
          const perVersion = requests.filter((r) => /^\/api\/v1\/models\/[^/?]+\/versions\//.test(r.path));
          check(perVersion.length === 0, what('the model page asks no GetModelVersion'), perVersion.map((r) => r.path).join(' '));
          await page.click('[data-testid="serve-started"] a[href="#/cluster"]');
          check(await page.waitForSelector('[data-testid="server-row"][data-id="60"]', { timeout: 10000 }).then(() => true, () => false), what('the new server is on the cluster page'));
        }
      } catch (e) {
        check(false, what('the servers flow ran to the end'), e.message);
        await page.screenshot({ path: join(ART, `servers-failure-${w}.png`), fullPage: true }).catch(() => {});
      }
      check(errors.length === 0, what('no uncaught page errors'), errors.join(' | '));
      await page.close();
    }
  } finally {
    servingServer.close();
  }
}

/** The Tasks card of serversFlow's cluster page (fixedServingStore(), fixedCommandStore() and
 *  fixedTrialStore(), no login: every action allowed), at width `w`: the rows, live first and
 *  newest first, trial 54 apart from command 54 (t54, its trial page link, its experiment, no
 *  Kill, its logs from GET /trials/54/logs and never /tasks/54/logs, its page on a click); a queued
 *  command's pending reason; exit codes 3 and 0; notebook 56's Open link to /proxy/56/ in a new
 *  tab, server 52's request line through the proxy, no link for a command (running, queued or
 *  COMPLETED); the program cut with all of it in its title; a
 *  running command's logs from GET /tasks/54/logs, polled after the last id; the "command 54" slot
 *  link; the card within the viewport; Kill behind a confirmation, one POST /tasks/54/kill. */
async function tasksChecks(page, w, requests) {
  const what = (s) => `tasks ${w}px: ${s}`;
  const row = (id) => page.locator(`[data-testid="task-row"][data-id="${id}"]`);
  await page.waitForSelector('[data-testid="task-row"]', { timeout: 10000 });
  const ids = await page.locator('[data-testid="task-row"]').evaluateAll((rs) => rs.map((r) => `${r.getAttribute('data-id')}:${r.getAttribute('data-kind')}:${r.getAttribute('data-state')}`));
  check(
    ids.join(' ') === '56:NOTEBOOK:RUNNING 55:COMMAND:QUEUED t54:TRIAL:RUNNING t53:TRIAL:PAUSED 54:COMMAND:RUNNING 53:SERVER:QUEUED 52:SERVER:RUNNING 47:COMMAND:FAILED 44:COMMAND:COMPLETED 41:SERVER:FAILED',
    what('Tasks lists commands, servers, notebooks and trials (t54 apart from command 54), live first, newest first'),
    ids.join(' '),
  );
  check(requests.some((r) => r.path === '/api/v1/tasks?includeEnded=true'), what('Tasks asks with includeEnded=true'));
  const pending = await row(55).locator('[data-testid="task-pending"]').innerText();
  const pendingTitle = await row(55).locator('[data-testid="task-state"]').getAttribute('title');
  check(/needs 4 slots of pool gpu/.test(pending) && pendingTitle === pending, what("a queued command shows why it waits, also as its state's tooltip"), `${pending} | ${pendingTitle}`);
  const exits = await page.locator('[data-testid="task-row"] [data-testid="task-exit"]').allInnerTexts();
  check(exits.map((x) => x.trim()).join(',') === '–,–,–,–,–,–,–,3,0,–', what('exit codes: 3 for the failed command, 0 for the completed one, none for the rest'), exits.join(','));
  // a running notebook's page through the master's proxy, in a new tab; a running server's API as
  // its request line; nothing for a command, running or ended
  check((await row(56).locator('[data-testid="task-kind"]').innerText()).trim() === 'Notebook', what('the kind column says Notebook'));
  const open = row(56).getByRole('link', { name: 'Open notebook 56 in a new tab' });
  const [openHref, openTarget, openRel] = [await open.getAttribute('href'), await open.getAttribute('target'), await open.getAttribute('rel')];
  const resolved = await open.evaluate((a) => a.href);
  check(openHref.endsWith('/proxy/56/') && resolved === `${new URL(page.url()).origin}/proxy/56/` && openTarget === '_blank' && openRel === 'noopener', what("a RUNNING notebook's Open links to /proxy/56/ on the dashboard's origin, in a new tab"), `${openHref} ${resolved} ${openTarget} ${openRel}`);
  const openBox = await open.boundingBox();
  const wrapBox = await page.locator('[data-testid="tasks-card"] .table-wrap').boundingBox();
  check(!!openBox && !!wrapBox && openBox.x >= wrapBox.x && openBox.x + openBox.width <= Math.min(w, wrapBox.x + wrapBox.width), what('Open is in view, not scrolled out of the table'), JSON.stringify({ openBox, wrapBox }));
  const endpoint = await row(52).locator('[data-testid="task-endpoint"]').innerText().catch(() => '');
  check(endpoint.trim() === 'POST /proxy/52/v1/translate' && (await row(52).locator('a[href*="/proxy/"]').count()) === 0, what("a RUNNING server shows its API's request line, no link"), endpoint);
  for (const id of [55, 54, 44]) check((await row(id).locator('a[href*="/proxy/"], [data-testid="task-open"], [data-testid="task-endpoint"]').count()) === 0, what(`command ${id} (${id === 44 ? 'COMPLETED' : id === 54 ? 'RUNNING' : 'QUEUED'}) has no Open link`));
  const program = row(54).locator('[data-testid="task-entrypoint"]');
  const [text, title] = [await program.innerText(), await program.getAttribute('title')];
  check(text.trim().length === 60 && text.trim().endsWith('…') && title.startsWith('python3 -m sacrebleu') && title.endsWith("'bleu chrf'"), what('the program is cut to one line, all of it in its title'), `${text} | ${title}`);
  // the card's table fits its card at every width (stacked as cards on a phone)
  const fits = await page.locator('[data-testid="tasks-card"] .table-wrap').evaluate((el) => el.scrollWidth <= el.clientWidth + 1);
  if (w < 700) check(fits, what('the Tasks table fits a phone without scrolling sideways'));
  const kill = row(54).locator('[data-testid="task-kill"]');
  const box = await kill.boundingBox();
  check(!!box && box.x >= 0 && box.x + box.width <= w, what('Kill is within the viewport'), JSON.stringify(box));

  // the command's logs: its task's route, polled while it runs
  await row(54).locator('[data-testid="task-logs-toggle"]').click();
  const lines = page.locator('[data-testid="task-logs-row"][data-id="54"] [data-testid="task-log-lines"]');
  const shown = await lines.getByText('hypothesis 812 is empty').waitFor({ timeout: 10000 }).then(() => true, () => false);
  check(shown, what("Logs shows the command's log lines"));
  const reads = () => requests.filter((r) => r.path.startsWith('/api/v1/tasks/54/logs'));
  for (let i = 0; i < 30 && !reads().some((r) => /[?&]afterId=7(&|$)/.test(r.path)); i++) await page.waitForTimeout(200);
  check(reads().some((r) => /[?&]afterId=7(&|$)/.test(r.path)), what("a running command's logs are polled after the last id seen"), reads().map((r) => r.path).join(' '));
  await page.screenshot({ path: join(ART, `tasks-${w}.png`), fullPage: true });
  await row(54).locator('[data-testid="task-logs-toggle"]').click();
  check((await page.locator('[data-testid="task-logs-row"]').count()) === 0, what('Hide logs closes the command\'s panel'));

  // trial 54 beside command 54: a row of its own, t54 linking to its trial page, its experiment
  // linked, no Kill (its experiment's page instead), its logs from the trial's route
  const trial = row('t54');
  const trialId = await trial.locator('[data-testid="task-id"]').innerText();
  const trialLink = trial.locator('[data-testid="task-id"] a');
  check(trialId.trim() === 't54' && (await trialLink.getAttribute('href')) === '#/trials/54', what('trial 54 shows as t54, linking to its trial page'), trialId);
  check((await row(54).locator('[data-testid="task-id"]').innerText()).trim() === '54' && (await row(54).locator('[data-testid="task-id"] a').count()) === 0, what('command 54 keeps its plain id, no trial link'));
  check((await trial.locator('[data-testid="task-kind"]').innerText()).trim() === 'Trial' && (await row('t53').locator('[data-testid="state-badge"]').innerText()).trim() === 'Paused', what('the kind column says Trial; a paused trial says Paused'));
  const program54 = (await trial.locator('[data-testid="task-entrypoint"]').innerText()).trim();
  check(program54 === 'experiment 17: sf-trainer' && (await trial.locator('[data-testid="task-experiment"]').getAttribute('href')) === '#/experiments/17', what("a trial's program names its experiment, linked"), program54);
  const trialKills = (await trial.locator('[data-testid="task-kill"]').count()) + (await row('t53').locator('[data-testid="task-kill"]').count());
  const manage = trial.locator('[data-testid="task-experiment-action"]');
  check(trialKills === 0 && (await manage.getAttribute('href')) === '#/experiments/17', what('no Kill on a trial: its Actions link to its experiment'), `${trialKills} kill(s)`);
  const manageBox = await manage.boundingBox();
  check(!!manageBox && manageBox.x >= 0 && manageBox.x + manageBox.width <= w, what("the trial's Experiment link is within the viewport"), JSON.stringify(manageBox));
  const taskReads54 = reads().length;
  await trial.locator('[data-testid="task-logs-toggle"]').click();
  const trialLines = page.locator('[data-testid="task-logs-row"][data-id="t54"] [data-testid="task-log-lines"]');
  const trialShown = await trialLines.getByText('step 200 loss=2.9871').waitFor({ timeout: 10000 }).then(() => true, () => false);
  check(trialShown && (await trialLines.getByText('hypothesis 812').count()) === 0, what("Logs of trial 54 shows the trial's lines, not command 54's"));
  const trialReads = () => requests.filter((r) => r.path.startsWith('/api/v1/trials/54/logs'));
  for (let i = 0; i < 30 && !trialReads().some((r) => /[?&]afterId=2(&|$)/.test(r.path)); i++) await page.waitForTimeout(200);
  check(trialReads()[0]?.path === '/api/v1/trials/54/logs?limit=1000' && trialReads().some((r) => /[?&]afterId=2(&|$)/.test(r.path)), what("a running trial's logs come from GET /trials/54/logs, polled after the last id"), trialReads().map((r) => r.path).join(' '));
  check(reads().length === taskReads54, what("a trial's logs never ask the task route of its id"), reads().slice(taskReads54).map((r) => r.path).join(' '));
  await page.screenshot({ path: join(ART, `tasks-trial-${w}.png`), fullPage: true });
  await trial.locator('[data-testid="task-logs-toggle"]').click();

  // the slot command 54 runs on links to its row
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await page.locator('[aria-label="Slots of agent-1"]').getByRole('link', { name: 'command 54' }).click();
  await page.waitForTimeout(300);
  const inView = await row(54).evaluate((r) => { const b = r.getBoundingClientRect(); return b.bottom > 0 && b.top < window.innerHeight && r.contains(document.activeElement); });
  check(inView && page.url().endsWith('#/cluster'), what("the slot's command link shows the command's row and keeps the route"), page.url());

  // Kill, behind its confirmation
  const kills = () => requests.filter((r) => r.method === 'POST' && r.path.startsWith('/api/v1/tasks/'));
  await kill.click();
  await page.waitForSelector('[data-testid="confirm-dialog"]', { timeout: 5000 });
  check(/Kill command 54\?/.test(await page.innerText('[data-testid="confirm-dialog"]')), what('Kill asks first'));
  await page.getByRole('button', { name: 'Cancel' }).click();
  check((await page.locator('[data-testid="confirm-dialog"]').count()) === 0 && kills().length === 0, what('Cancel closes the dialog and kills nothing'));
  await kill.click();
  await page.click('[data-testid="confirm-button"]');
  const stopping = await page.waitForSelector('[data-testid="task-row"][data-id="54"][data-state="STOPPING"]', { timeout: 10000 }).then(() => true, () => false);
  check(stopping, what('after the confirmation the command shows STOPPING'));
  check(kills().length === 1 && kills()[0].path === '/api/v1/tasks/54/kill' && kills()[0].xrw === 'steadfast', what('one POST /tasks/54/kill, with X-Requested-With: steadfast'), JSON.stringify(kills()));
  check((await row(54).locator('[data-testid="task-kill"]').count()) === 0, what('a STOPPING command offers no Kill'));
  check((await trial.getAttribute('data-state')) === 'RUNNING', what('killing command 54 leaves trial 54 running'));

  // the trial's id opens its trial page (GET /trials/54), then back to the cluster page
  await trialLink.click();
  const trialPage = await page.waitForURL(/#\/trials\/54$/, { timeout: 5000 }).then(() => true, () => false);
  for (let i = 0; i < 25 && !requests.some((r) => r.path === '/api/v1/trials/54'); i++) await page.waitForTimeout(200);
  check(trialPage && requests.some((r) => r.path === '/api/v1/trials/54'), what("t54's link opens trial 54's page"), page.url());
  await page.goBack();
  await page.waitForSelector('[data-testid="task-row"][data-id="t54"]', { timeout: 10000 });
}

/** The login flow against auth-stub.mjs plus a two-experiment list. */
async function loginFlow(browser) {
  const auth = createAuthStub({
    users: [
      { username: 'bob', password: 'bob-pw', role: 'user', workspaces: [{ name: 'nlp', role: 'viewer' }] },
      { username: 'vic', password: 'vic-pw', role: 'viewer' },
      { username: 'carol', password: 'carol-pw', role: 'user' },
    ],
    maxFailures: 3,
    retryAfterS: 30,
  });
  auth.failures.set('carol', 3); // carol is rate limited from the start
  const exps = [
    { id: '2', name: 'bobs-sweep', owner: 'bob', workspace: 'Uncategorized', state: 'EXPERIMENT_STATE_ACTIVE', numTrials: 2 },
    { id: '1', name: 'alices-sweep', owner: 'alice', workspace: 'nlp', state: 'EXPERIMENT_STATE_ACTIVE', numTrials: 2 },
  ];
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const api = async (req, res, url) => {
    const who = await auth.handle(req, res, url);
    if (!who) return;
    const p = url.pathname.replace(/^\/api\/v1/, '');
    if (req.method === 'GET' && p === '/experiments') return send(res, 200, { experiments: exps, pagination: { total: exps.length } });
    const m = p.match(/^\/experiments\/(\d+)\/(pause|activate|kill|archive)$/);
    const e = m && exps.find((x) => x.id === m[1]);
    if (req.method === 'POST' && e) {
      if (!auth.mayAct(who.user, e)) return send(res, 403, { code: 7, message: `user ${who.user.username} may not ${m[2]} experiment ${e.id}: owned by ${e.owner}` });
      if (m[2] === 'pause') e.state = 'EXPERIMENT_STATE_PAUSED';
      return send(res, 200, { experiment: e });
    }
    return send(res, 404, { code: 5, message: `no route ${req.method} ${url.pathname}` });
  };
  const { server: authServer, url: base } = await serveDist(dist, 0, api);
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const loginPage = page.locator('[data-testid="login-page"]');
  const submitLogin = async (user, password) => {
    await loginPage.waitFor({ timeout: 15000 });
    await page.fill('[data-testid="login-username"]', user);
    await page.fill('[data-testid="login-password"]', password);
    await page.click('[data-testid="login-submit"]');
  };
  const loginError = async () => {
    const el = page.locator('[data-testid="login-error"]');
    await el.waitFor({ timeout: 10000 }).catch(() => {});
    return (await el.count()) ? el.innerText() : '';
  };
  const row = (id) => `[data-testid="experiment-row"][data-id="${id}"]`;
  try {
    await page.goto(`${base}/#/experiments?dir=asc`);
    check(await loginPage.waitFor({ timeout: 15000 }).then(() => true, () => false), 'auth: the login page is shown when the master answers 401');
    check((await page.locator('nav[aria-label="Main"]').count()) === 0, 'auth: no navigation while logged out');
    await page.screenshot({ path: join(ART, 'login-1280.png'), fullPage: true });

    await submitLogin('bob', 'wrong');
    check((await loginError()) === 'wrong username or password', "auth: a wrong password shows the master's message", await loginError());
    await submitLogin('carol', 'carol-pw');
    await page.waitForFunction(() => document.querySelector('[data-testid="login-error"]')?.getAttribute('data-status') === '429', null, { timeout: 10000 }).catch(() => {});
    const limited = await loginError();
    check(/Too many failed logins\. Try again in (30|29|28) s\./.test(limited), 'auth: a 429 shows its retry time', limited);
    check(await page.locator('[data-testid="login-submit"]').isDisabled(), 'auth: the login button waits out the retry time');
    await page.screenshot({ path: join(ART, 'login-429-1280.png'), fullPage: true });

    await page.reload(); // a fresh form (the 429 countdown belongs to the old one)
    await submitLogin('bob', 'bob-pw');
    await page.waitForSelector(row(2), { timeout: 15000 });
    check(page.url().endsWith('/#/experiments?dir=asc'), 'auth: after login the route the user asked for is shown', page.url());
    check((await page.getAttribute('[data-testid="user-menu"]', 'data-username')) === 'bob', 'auth: the user menu shows the user');
    const cookie = (await ctx.cookies()).find((c) => c.name === 'sf_session');
    check(cookie?.httpOnly === true && cookie?.sameSite === 'Strict', 'auth: the session is an HttpOnly, SameSite=Strict cookie', JSON.stringify(cookie));
    const leaked = await page.evaluate((v) => document.cookie.includes(v) || JSON.stringify({ ...localStorage, ...sessionStorage }).includes(v) || localStorage.length + sessionStorage.length > 0, cookie?.value ?? '-');
    check(!leaked, 'auth: no session token in document.cookie or web storage');

    // gating: bob may act on his own experiment, not on alice's in a workspace where he is a viewer
    const own = page.locator(`${row(2)} [data-testid="action-pause"]`);
    const other = page.locator(`${row(1)} [data-testid="action-pause"]`);
    check((await own.getAttribute('aria-disabled')) === null, "auth: the owner's actions are enabled");
    const why = (await other.getAttribute('title')) ?? '';
    check((await other.getAttribute('aria-disabled')) === 'true' && /belongs to alice in workspace nlp, where you are a viewer/.test(why), "auth: another user's actions are disabled with the reason as tooltip", why);
    await other.click({ force: true });
    check((await page.locator('[data-testid="confirm-dialog"]').count()) === 0, 'auth: a disabled action opens no dialog');
    await own.click();
    await page.click('[data-testid="confirm-button"]');
    await page.waitForSelector(`${row(2)}[data-state="EXPERIMENT_STATE_PAUSED"]`, { timeout: 10000 }).then(() => check(true, 'auth: the owner pauses the experiment (POST with the cookie and X-Requested-With)'), () => check(false, 'auth: the owner pauses the experiment'));
    await page.click('[data-testid="user-menu-button"]');
    await page.screenshot({ path: join(ART, 'user-menu-1280.png') });

    // tokens: create (shown once), revoke
    await page.click('[data-testid="user-menu-tokens"]');
    await page.waitForSelector('[data-testid="tokens-table"], [data-testid="empty-state"]', { timeout: 10000 });
    await page.fill('[data-testid="token-name"]', 'ci');
    await page.selectOption('[data-testid="token-expiry"]', { label: 'Never' });
    await page.click('[data-testid="token-create"]');
    await page.waitForSelector('[data-testid="token-created"]', { timeout: 10000 });
    const secret = await page.inputValue('[data-testid="token-secret"]');
    check(secret === auth.tokens[0]?.secret && secret.startsWith('sft_'), 'auth: a new token is shown with its secret');
    check((await page.locator('[data-testid="session-row"]').count()) === 1 && (await page.locator('[data-testid="token-row"]').count()) === 1, "auth: the login session is listed apart from the API tokens");
    check(/you will not see it again/.test(await page.innerText('[data-testid="token-created"]')), 'auth: ... with "you will not see it again"');
    await page.screenshot({ path: join(ART, 'token-created-1280.png'), fullPage: true });
    await page.click('[data-testid="token-done"]');
    await page.reload();
    await page.waitForSelector('[data-testid="token-row"]', { timeout: 10000 });
    check(!(await page.content()).includes(secret), 'auth: the secret is gone after Done and a reload');
    await page.click('[data-testid="token-revoke"]');
    await page.click('[data-testid="confirm-button"]');
    await page.waitForSelector('[data-testid="token-row"][data-state="revoked"]', { timeout: 10000 }).then(() => check(auth.tokens[0].revoked, 'auth: revoke after confirmation'), () => check(false, 'auth: revoke after confirmation'));

    // the session expires mid-way: the next poll gets 401, login brings the page back
    await page.goto(`${base}/#/experiments?dir=asc`);
    await page.waitForSelector(row(2), { timeout: 10000 });
    auth.sessions.clear();
    const back = await loginPage.waitFor({ timeout: 15000 }).then(() => true, () => false);
    check(back && /session has ended/.test(await page.innerText('[data-testid="login-reason"]').catch(() => '')), 'auth: an expired session shows the login page, saying so');
    await submitLogin('bob', 'bob-pw');
    check(await page.waitForSelector(row(2), { timeout: 15000 }).then(() => page.url().endsWith('/#/experiments?dir=asc'), () => false), 'auth: logging in again resumes the same page', page.url());

    // logout, then a second login as a viewer
    await page.click('[data-testid="user-menu-button"]');
    await page.click('[data-testid="logout"]');
    check(await loginPage.waitFor({ timeout: 10000 }).then(() => true, () => false), 'auth: logout returns to the login page');
    check((await page.evaluate(() => fetch('/api/v1/auth/me', { headers: { 'X-Requested-With': 'steadfast' } }).then((r) => r.status))) === 401, 'auth: after logout the master no longer knows the session');
    await submitLogin('vic', 'vic-pw');
    await page.waitForSelector(row(2), { timeout: 15000 });
    const denied = await page.locator('[data-testid^="action-"][aria-disabled="true"]').count();
    const all = await page.locator('[data-testid^="action-"]').count();
    check(all > 0 && denied === all, 'auth: a viewer sees every action disabled', `${denied} of ${all}`);
    check(/viewer/.test((await page.locator('[data-testid^="action-"]').first().getAttribute('title')) ?? ''), 'auth: ... saying the role is viewer');
    await page.setViewportSize({ width: 375, height: 800 });
    await page.click('[data-testid="user-menu-button"]');
    await page.screenshot({ path: join(ART, 'user-menu-375.png') });
    await page.click('[data-testid="logout"]');
    await loginPage.waitFor({ timeout: 10000 });
    await page.screenshot({ path: join(ART, 'login-375.png'), fullPage: true });
    check(auth.state.missingHeader.length === 0, 'auth: every API request carried X-Requested-With: steadfast', auth.state.missingHeader.join(', '));
    check(errors.length === 0, 'auth: no uncaught page errors', errors.join(' | '));
  } catch (e) {
    check(false, 'auth: the login flow ran to the end', e.message);
    await page.screenshot({ path: join(ART, 'login-failure.png'), fullPage: true }).catch(() => {});
  } finally {
    await ctx.close();
    authServer.close();
  }
}
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
