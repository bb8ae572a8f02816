// Part of the offline browser test (offline.e2e.mjs runs it): issue 49 item 1, what ran, against
// fixture answers of the master's routes at 1280 px and 375 px. A native sweep's page shows its
// archs, precision and data files and never asks for a context; a user-code experiment's page shows
// its entrypoint and its context (dev/context-fixtures.mjs: three entries, one a link) with sizes,
// the archive's size and digest, and Download context saves the archive's exact bytes as
// experiment-8-context.tar.gz; one whose context answers 404 says "No context uploaded"; a long
// context lists 200 files until "Show all"; an unmanaged experiment has its badge in the list and
// on its page; a native trial shows its arch and precision, a Core API trial its entrypoint and no
// throughput or loss-scale panel.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { contextHandlers, fixedContext } from '../dev/context-fixtures.mjs';
import { atEveryWidth } from './flow.mjs';
import { contextFiles, fitsWidth, listBadges, nativePanels } from './views.checks.mjs';

const NATIVE_YAML = 'name: lstm-vs-tiny\nprecision: bf16\ndata:\n  train: {src: /data/wmt/train.de, tgt: /data/wmt/train.en}\n  valid: {src: /data/wmt/valid.de, tgt: /data/wmt/valid.en}\nhyperparameters:\n  arch: {type: categorical, vals: [lstm_small, transformer_tiny]}\nsearcher: {name: grid, metric: bleu, smaller_is_better: false}\n';
const userCode = (name, entry) => `name: ${name}\nentrypoint: ${entry}\nsearcher: {name: single, metric: accuracy}\n`;
const EXPERIMENTS = [
  { id: '10', name: 'long-context', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'single', metric: 'accuracy', configYaml: userCode('long-context', './run.sh') },
  { id: '9', name: 'by-hand', state: 'EXPERIMENT_STATE_ACTIVE', owner: 'ada', searcher: 'single', metric: 'accuracy', unmanaged: true, configYaml: userCode('by-hand', 'python3 run.py') },
  { id: '8', name: 'core-api', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'single', metric: 'accuracy', configYaml: userCode('core-api', '[python3, train.py, --epochs, "3"]') },
  { id: '7', name: 'lstm-vs-tiny', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'grid', metric: 'bleu', configYaml: NATIVE_YAML },
];
const TRIALS = [
  { id: '71', experimentId: '7', state: 'TRIAL_STATE_COMPLETED', hparams: { arch: 'lstm_small', lr: 0.001 }, totalBatches: '100' },
  { id: '81', experimentId: '8', state: 'TRIAL_STATE_COMPLETED', hparams: { lr: 0.001 }, totalBatches: '20' },
];
const CONTEXTS = new Map([['8', fixedContext()], ['10', fixedContext(247)]]);

function fixtureApi(requests) {
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const err = (res, status, code, message) => send(res, status, { code, message, details: [] });
  const context = contextHandlers(CONTEXTS, { send, err, exists: (id) => EXPERIMENTS.some((e) => e.id === id) })['GET /api/v1/experiments/{id}/context'];
  return async (req, res, url) => {
    requests.push(url.pathname + url.search);
    const p = url.pathname.replace(/^\/api\/v1/, '');
    if (p === '/experiments') return send(res, 200, { experiments: EXPERIMENTS, pagination: { total: EXPERIMENTS.length } });
    let m = p.match(/^\/experiments\/(\d+)$/);
    if (m && EXPERIMENTS.some((e) => e.id === m[1])) return send(res, 200, { experiment: EXPERIMENTS.find((e) => e.id === m[1]) });
    m = p.match(/^\/experiments\/(\d+)\/context$/);
    if (m) return context(req, res, url, { id: m[1] });
    m = p.match(/^\/experiments\/(\d+)\/trials$/);
    if (m) {
      const trials = TRIALS.filter((t) => t.experimentId === m[1]);
      return send(res, 200, { trials, pagination: { total: trials.length } });
    }
    if (/^\/experiments\/\d+\/checkpoints$/.test(p)) return send(res, 200, { checkpoints: [] });
    m = p.match(/^\/trials\/(\d+)$/);
    if (m && TRIALS.some((t) => t.id === m[1])) return send(res, 200, { trial: TRIALS.find((t) => t.id === m[1]), metricGroups: ['training'] });
    m = p.match(/^\/trials\/(\d+)\/metrics$/);
    if (m) {
      // the native trial reports the trainer's throughput and loss scale, the Core API one its loss only
      const values = (i) => (m[1] === '71' ? { loss: 3 - i, tokens_per_second: 5000, loss_scale: 128 } : { loss: 3 - i });
      const rows = url.searchParams.get('kind') === 'training' ? [1, 2].map((i) => ({ trialId: m[1], kind: 'training', batches: String(10 * i), values: values(i) })) : [];
      return send(res, 200, { metrics: rows });
    }
    if (/^\/trials\/\d+\/logs$/.test(p)) return send(res, 200, { logs: [] });
    if (p === '/resource-pools') return send(res, 200, { resourcePools: [] });
    return err(res, 404, 5, `no route ${req.method} ${url.pathname}`); // /auth/me too: no login
  };
}

export async function whatRanFlow(browser, { dist, check, ART }) {
  const requests = [];
  const archive = CONTEXTS.get('8');
  await atEveryWidth(browser, { dist, check, ART }, { label: 'what ran', flow: 'the what-ran flow', shot: 'what-ran', api: fixtureApi(requests), pageOptions: { acceptDownloads: true } }, async ({ page, base, w, what }) => {
    const text = (sel) => page.locator(sel).first().innerText();
    const fits = (sel) => fitsWidth(page, sel, w);
    await page.goto(`${base}/#/experiments`);
    await page.waitForSelector('[data-testid="experiment-row"]', { timeout: 15000 });
    const badged = await listBadges(page);
    check(badged.join() === '9:col-name:unmanaged', what("the list badges the unmanaged experiment in its name cell"), badged.join());
    check(await page.locator('[data-testid="unmanaged-badge"]').isVisible(), what('the badge is on screen'));
    await page.screenshot({ path: join(ART, `what-ran-list-${w}.png`), fullPage: true });

    requests.length = 0;
    await page.goto(`${base}/#/experiments/7`);
    await page.waitForSelector('[data-testid="what-ran"][data-kind="native"]', { timeout: 15000 });
    check((await text('[data-testid="what-ran-arch"]')) === 'lstm_small, transformer_tiny', what("a native sweep's archs"), await text('[data-testid="what-ran-arch"]'));
    check((await text('[data-testid="what-ran-precision"]')) === 'bf16', what('its precision'));
    const splits = await page.locator('[data-testid="data-split"]').allInnerTexts();
    check(splits.join(' | ') === 'train: src /data/wmt/train.de, tgt /data/wmt/train.en | valid: src /data/wmt/valid.de, tgt /data/wmt/valid.en', what('its data files'), splits.join(' | '));
    check(await fits('[data-testid="what-ran"]'), what('the native card fits the viewport'));
    await page.waitForSelector('[data-testid="config-yaml"]');
    check(!requests.some((r) => r.includes('/context')) && (await page.locator('[data-testid="unmanaged-badge"]').count()) === 0, what('no context asked for a native experiment, no badge'), requests.join(' '));
    await page.locator('[data-testid="what-ran"]').screenshot({ path: join(ART, `what-ran-native-${w}.png`) });

    await page.goto(`${base}/#/experiments/8`);
    await page.waitForSelector('[data-testid="context-file"]', { timeout: 15000 });
    check((await text('[data-testid="what-ran-entrypoint"]')) === 'python3 train.py --epochs 3', what("user code's entrypoint as a command line"));
    const files = (await contextFiles(page)).map((f) => f.text);
    check(files.join(' | ') === 'train.py 1.2 KiB | model/net.py 20 KiB | data → /mnt/shared/data link', what('the context files with sizes and the link'), files.join(' | '));
    check((await text('[data-testid="context-file-bytes"]')) === '3 files, 21 KiB', what('the total file bytes'), await text('[data-testid="context-file-bytes"]'));
    check((await text('[data-testid="context-archive-bytes"]')) === `${archive.archiveBytes} B (.tar.gz)`, what('the archive size'), await text('[data-testid="context-archive-bytes"]'));
    const sha = page.locator('[data-testid="context-sha256"]');
    check((await sha.innerText()) === `${archive.sha256.slice(0, 12)}…` && (await sha.getAttribute('title')) === archive.sha256, what('the SHA-256, shortened, the full value as its tooltip'));
    check((await fits('[data-testid="what-ran"]')) && (await page.locator('[data-testid="context-file"]').last().isVisible()), what('the context card fits the viewport, the file list shown'));
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10000 }), page.click('[data-testid="context-download"]')]);
    const saved = join(ART, `what-ran-download-${w}.tar.gz`);
    await download.saveAs(saved);
    const bytes = await readFile(saved);
    check(download.suggestedFilename() === 'experiment-8-context.tar.gz', what('Download context saves experiment-8-context.tar.gz'), download.suggestedFilename());
    check(bytes.length === Number(archive.archiveBytes) && createHash('sha256').update(bytes).digest('hex') === archive.sha256, what("the saved file is the archive's bytes (size and SHA-256)"), `${bytes.length} bytes`);
    check(requests.includes('/api/v1/experiments/8/context?includeArchive=true'), what('the download asked includeArchive=true'));
    await page.screenshot({ path: join(ART, `what-ran-user-code-${w}.png`), fullPage: true });

    await page.goto(`${base}/#/experiments/9`);
    await page.waitForSelector('[data-testid="context-none"]', { timeout: 15000 });
    check((await text('[data-testid="context-none"]')) === 'No context uploaded.', what('a user-code experiment whose context answers 404 says so'));
    check((await page.locator('[data-testid="error-banner"]').count()) === 0, what('and shows no error banner for it'));
    const badge = page.locator('.page-head [data-testid="unmanaged-badge"]');
    check((await badge.count()) === 1 && (await badge.innerText()) === 'unmanaged' && (await badge.isVisible()), what('the unmanaged badge in the page header'));
    await page.screenshot({ path: join(ART, `what-ran-unmanaged-${w}.png`), fullPage: true });

    await page.goto(`${base}/#/experiments/10`);
    await page.waitForSelector('[data-testid="context-show-all"]', { timeout: 15000 });
    const count = () => page.locator('[data-testid="context-file"]').count();
    check((await count()) === 200 && (await text('[data-testid="context-show-all"]')) === 'Show all 250', what('a long context lists 200 files and offers all 250'));
    await page.click('[data-testid="context-show-all"]');
    check((await count()) === 250, what('Show all lists 250'));

    await page.goto(`${base}/#/trials/71`);
    await page.waitForSelector('[data-testid="trial-arch"]', { timeout: 15000 });
    check((await text('[data-testid="trial-arch"]')) === 'lstm_small' && (await text('[data-testid="trial-precision"]')) === 'bf16', what("a native trial's own arch and precision"));
    await page.waitForSelector('[data-testid="chart-throughput"]', { timeout: 10000 });
    check(true, what('the native trial has its throughput panel'));
    await page.goto(`${base}/#/trials/81`);
    await page.waitForSelector('[data-testid="trial-entrypoint"]', { timeout: 15000 });
    check((await text('[data-testid="trial-entrypoint"]')) === 'python3 train.py --epochs 3', what("a Core API trial's entrypoint"));
    await page.waitForSelector('[data-testid="chart-training"][data-points="2"]', { timeout: 10000 });
    const native = await nativePanels(page);
    check(native.count === 0 && !native.lossScaleText, what('and no native-only panel'), `${native.count} native element(s)`);
    await page.screenshot({ path: join(ART, `what-ran-core-trial-${w}.png`), fullPage: true });
  });
}
