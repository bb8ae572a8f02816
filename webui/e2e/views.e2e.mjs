#!/usr/bin/env node
// Issue 49's views in Debian's Chromium against a real cluster: what the offline flows check
// against stubs (what-ran, hyperparameter labels, slurm-arch, speech), here with the data a real
// master sends about experiments its agents (or Slurm) really ran. tests/e2e/dashboard_views_test.cc
// and tests/e2e/slurm_test.cc run the experiments, then this script with their ids:
//
//   SF_MASTER_URL=http://127.0.0.1:8080 SF_E2E_USERNAME=admin SF_E2E_PASSWORD=... \
//     node e2e/views.e2e.mjs core-api=3 unmanaged=4 hparams=5 arch=6 speech=7 slurm=8
//
// Each argument VIEW=EXPERIMENT_ID is one view's checks (any subset, in any order):
//  core-api   a Core API experiment (entrypoint:) and its trial: the entrypoint, the context's files
//             with their sizes and digest as GET .../context gives them, no unmanaged badge, and
//             on the trial page no native-only panel (throughput, loss scale, arch, precision)
//  unmanaged  an unmanaged experiment: its badge in the list (and no other experiment's) and in
//             the page header
//  hparams    a sweep: every varying hyperparameter an axis of the parallel-coordinates chart, the
//             constants hidden until asked for, no two axis labels' boxes intersecting, at 1280 px
//             and 375 px; a long string value cut with its full text as the title
//  arch       a sweep over `arch`: the Architectures card, one row per arch, best first by the
//             searcher's metric, each with its trials, best trial, tokens/s and the parameter
//             count its trials reported (`parameters`); the best trial's page shows that count
//  speech     a speech experiment's trial: the Validation transcripts card from the latest
//             validation, each utterance's reference (as the manifest wrote it) beside its hypothesis
//  slurm      a trial that ran as a Slurm job: its Slurm card's job id and nodes as the master
//             reports them (Trial.jobId, Trial.hosts)
// Env as dashboard.e2e.mjs: SF_MASTER_URL, SF_ARTIFACTS_DIR (screenshots), SF_E2E_USERNAME and
// SF_E2E_PASSWORD (unset: no login). Prints "N passed, M failed"; exit 0 (all passed), 1 (a check
// failed), 2 (bad arguments or no master).
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { launch } from './browser.mjs';
import { checks, pageLogin, restClient } from './live.mjs';
import { archRows, contextFiles, fitsWidth, labelBoxes, listBadges, nativePanels, overlaps, statesCount, trialParametersShown, transcriptLayout, transcriptRows } from './views.checks.mjs';

const MASTER = (process.env.SF_MASTER_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const ART = resolve(process.env.SF_ARTIFACTS_DIR ?? join('e2e-artifacts', 'views'));
const USERNAME = process.env.SF_E2E_USERNAME ?? '';
const PASSWORD = process.env.SF_E2E_PASSWORD ?? '';
const VIEWS = ['core-api', 'unmanaged', 'hparams', 'arch', 'speech', 'slurm'];

const { log, check, tally } = checks();
const { api, login } = restClient(MASTER, log);

const asked = process.argv.slice(2).map((a) => a.split('='));
if (!asked.length || asked.some(([v, id]) => !VIEWS.includes(v) || !/^\d+$/.test(id ?? ''))) {
  console.error(`usage: views.e2e.mjs VIEW=EXPERIMENT_ID ... (VIEW one of ${VIEWS.join(', ')})`);
  process.exit(2);
}

const experiment = async (id) => (await api('GET', `/experiments/${id}`)).experiment;
const trialsOf = async (id) => (await api('GET', `/experiments/${id}/trials?limit=1000`)).trials ?? [];
const metrics = async (trial, kind) => (await api('GET', `/trials/${trial}/metrics?kind=${kind}&maxPoints=5000`)).metrics ?? [];
const text = (page, sel) => page.locator(sel).first().innerText();
const shot = (page, name) => page.screenshot({ path: join(ART, `${name}.png`), fullPage: true });

/** A Core API experiment: what ran, its context as the master stores it, no native-only panel. */
async function coreApiView(page, id) {
  const e = await experiment(id);
  const config = parseYaml(e.configYaml ?? '') ?? {};
  const entry = Array.isArray(config.entrypoint) ? config.entrypoint.join(' ') : String(config.entrypoint ?? '');
  check(entry !== '', `core-api: experiment ${id} runs user code`, e.configYaml);
  const context = await api('GET', `/experiments/${id}/context`);
  await page.goto(`${MASTER}/#/experiments/${id}`);
  await page.waitForSelector('[data-testid="what-ran"][data-kind="user-code"] [data-testid="context-file"]', { timeout: 20000 });
  check((await text(page, '[data-testid="what-ran-entrypoint"]')) === entry, 'core-api: the experiment page shows the entrypoint', await text(page, '[data-testid="what-ran-entrypoint"]'));
  const files = await contextFiles(page);
  const want = (context.files ?? []).map((f) => `${f.path}=${f.size ?? 0}`).sort();
  const got = files.map((f) => `${f.path}=${f.sizeTitle.replace(/\D/g, '')}`).sort();
  check(want.length > 0 && got.join() === want.join(), "core-api: the context's files with their sizes, as GET .../context lists them", `page ${got.join()} · master ${want.join()}`);
  check(files.every((f) => f.text.startsWith(f.path) && /\d( B| KiB| MiB)$/.test(f.text)), 'core-api: each row names its file and its size', files.map((f) => f.text).join(' | '));
  check((await page.getAttribute('[data-testid="context-sha256"]', 'title')) === context.sha256 && /^[0-9a-f]{64}$/.test(context.sha256 ?? ''), "core-api: the archive's SHA-256 as the master computed it");
  check((await page.locator('[data-testid="unmanaged-badge"]').count()) === 0, 'core-api: a managed experiment has no unmanaged badge');
  await shot(page, 'core-api-experiment');

  const [trial] = await trialsOf(id);
  const training = await metrics(trial.id, 'training');
  const nativeKeys = training.filter((m) => 'tokens_per_second' in (m.values ?? {}) || 'loss_scale' in (m.values ?? {}));
  check(training.length > 0 && nativeKeys.length === 0, `core-api: trial ${trial.id} reported training metrics, none of them the native trainer's`, `${training.length} rows, ${nativeKeys.length} native`);
  await page.goto(`${MASTER}/#/trials/${trial.id}`);
  await page.waitForSelector('[data-testid="trial-entrypoint"]', { timeout: 20000 });
  check((await text(page, '[data-testid="trial-entrypoint"]')) === entry, "core-api: the trial page shows its experiment's entrypoint");
  // The charts are drawn from the same answer the panels would be: wait for them, then look.
  const drawn = await page.waitForSelector(`[data-testid="chart-training"][data-points="${new Set(training.map((m) => String(m.batches))).size}"]`, { timeout: 20000 }).then(() => true, () => false);
  check(drawn, "core-api: the trial's training chart drew its reports");
  const native = await nativePanels(page);
  check(native.count === 0 && !native.lossScaleText, 'core-api: no native-only panel (throughput, loss scale, arch, precision) on the trial page', `${native.count} native element(s), loss_scale in text: ${native.lossScaleText}`);
  await shot(page, 'core-api-trial');
}

/** An unmanaged experiment: the badge in the list (only there) and in the page header. */
async function unmanagedView(page, id) {
  const listed = (await api('GET', '/experiments?limit=100')).experiments ?? [];
  const want = listed.filter((x) => x.unmanaged).map((x) => `${x.id}:col-name:unmanaged`).sort();
  check(want.includes(`${id}:col-name:unmanaged`), `unmanaged: the master says experiment ${id} is unmanaged`, want.join());
  await page.goto(`${MASTER}/#/experiments`);
  await page.waitForSelector(`[data-testid="experiment-row"][data-id="${id}"]`, { timeout: 20000 });
  const badges = (await listBadges(page)).sort();
  check(badges.join() === want.join(), 'unmanaged: the list badges the unmanaged experiments in their name cells, no other', `page ${badges.join()} · master ${want.join()}`);
  await shot(page, 'unmanaged-list');
  await page.goto(`${MASTER}/#/experiments/${id}`);
  const badge = page.locator('.page-head [data-testid="unmanaged-badge"]');
  const shown = await badge.waitFor({ timeout: 20000 }).then(() => true, () => false);
  check(shown && (await badge.innerText()) === 'unmanaged' && (await badge.isVisible()), 'unmanaged: the badge in the page header');
  await shot(page, 'unmanaged-experiment');
}

/** A sweep's parallel coordinates: the API's varying hyperparameters as axes, labels apart. */
async function hparamsView(browser, id, newPage) {
  const trials = await trialsOf(id);
  const values = new Map();
  for (const t of trials) for (const [k, v] of Object.entries(t.hparams ?? {})) values.set(k, (values.get(k) ?? new Set()).add(JSON.stringify(v)));
  const varying = [...values].filter(([, s]) => s.size > 1).map(([k]) => k).sort();
  const constant = [...values].filter(([, s]) => s.size === 1).map(([k]) => k).sort();
  const longest = [...values.values()].flatMap((s) => [...s].map((v) => JSON.parse(v))).filter((v) => typeof v === 'string').sort((a, b) => b.length - a.length)[0];
  // The ticks each axis should have: one per value of a string or categorical axis, one per
  // decade of a log axis (positive numbers over two decades or more); linear axes are not counted.
  const axisTicks = new Map();
  const logAxes = [];
  for (const a of varying) {
    const vals = [...values.get(a)].map((v) => JSON.parse(v));
    if (!vals.every((v) => typeof v === 'number')) axisTicks.set(a, vals.length);
    else if (Math.min(...vals) > 0 && Math.max(...vals) / Math.min(...vals) >= 100) {
      logAxes.push(a);
      axisTicks.set(a, Math.floor(Math.log10(Math.max(...vals)) + 1e-9) - Math.ceil(Math.log10(Math.min(...vals)) - 1e-9) + 1);
    }
  }
  check(varying.length >= 3, `hparams: experiment ${id}'s ${trials.length} trials vary ${varying.join(', ')}`);
  for (const [w, h] of [[1280, 900], [375, 800]]) {
    const page = await newPage(w, h);
    const what = (s) => `hparams ${w}px: ${s}`;
    await page.goto(`${MASTER}/#/experiments/${id}`);
    await page.waitForSelector(`[data-testid="chart-parallel-coordinates"][data-points="${trials.length}"] [data-testid="pc-label"]`, { timeout: 20000 });
    await page.locator('[data-testid="chart-parallel-coordinates"]').scrollIntoViewIfNeeded();
    await page.waitForTimeout(300); // the measured relayout after the first paint
    let boxes = await labelBoxes(page, '[data-testid="pc-label"]');
    const axes = [...new Set(boxes.map((b) => b.axis))].sort();
    check(varying.every((a) => axes.includes(a)) && !constant.some((a) => axes.includes(a)), what('every varying hyperparameter is an axis, no constant one'), `axes ${axes.join(',')} · varying ${varying.join(',')} · constant ${constant.join(',')}`);
    check(boxes.length > varying.length && overlaps(boxes).length === 0, what(`no two of the ${boxes.length} axis label boxes overlap`), overlaps(boxes).slice(0, 5).join('; '));
    const cut = boxes.find((b) => b.title === longest && b.text !== longest);
    check(!!cut && cut.text.includes('…'), what(`the longest string value is cut, its full text the title (${longest})`), JSON.stringify(boxes.filter((b) => b.title === longest)));
    // Each axis by its kind: a tick per value on a string or categorical axis (few values here),
    // a tick per decade on a log one (numbers over two decades or more).
    const ticks = (a) => boxes.filter((b) => b.axis === a && b.role === 'tick').length;
    const wrongTicks = varying.filter((a) => axisTicks.get(a) !== undefined && ticks(a) !== axisTicks.get(a)).map((a) => `${a}: ${ticks(a)} ticks, not ${axisTicks.get(a)}`);
    check(logAxes.length > 0 && wrongTicks.length === 0, what(`a tick per value on the string and categorical axes, per decade on the log axis (${logAxes.join(', ')})`), wrongTicks.join('; '));
    check(await fitsWidth(page, '[data-testid="chart-parallel-coordinates"]', w), what('the chart fits the viewport'));
    await shot(page, `hparams-${w}`);
    if (constant.length) {
      await page.check('[data-testid="pc-show-constant"]');
      await page.waitForTimeout(300);
      boxes = await labelBoxes(page, '[data-testid="pc-label"]');
      check(constant.every((a) => boxes.some((b) => b.axis === a)) && overlaps(boxes).length === 0, what('"show constant hyperparameters" adds the constants, still without overlaps'), overlaps(boxes).slice(0, 5).join('; '));
      await shot(page, `hparams-constant-${w}`);
    }
    await page.close();
  }
}

/** An arch sweep: the Architectures card against the trials the master lists. */
async function archView(page, id) {
  const e = await experiment(id);
  const trials = await trialsOf(id);
  const better = (a, b) => (e.smallerIsBetter ? a < b : a > b);
  const byArch = new Map();
  for (const t of trials) {
    const a = byArch.get(t.hparams?.arch) ?? { arch: t.hparams?.arch, trials: 0, completed: 0, best: undefined };
    a.trials++;
    if (t.state === 'TRIAL_STATE_COMPLETED') a.completed++;
    if (typeof t.bestValidationMetric === 'number' && (a.best === undefined || better(t.bestValidationMetric, a.best.bestValidationMetric))) a.best = t;
    byArch.set(a.arch, a);
  }
  const want = [...byArch.values()].sort((a, b) => (better(a.best.bestValidationMetric, b.best.bestValidationMetric) ? -1 : 1));
  check(want.length >= 2 && want.every((a) => a.best), `arch: experiment ${id} trained ${want.map((a) => a.arch).join(', ')}, each validated`);
  const training = await Promise.all(trials.map((t) => metrics(t.id, 'training')));
  const tps = training.flat().filter((m) => typeof m.values?.tokens_per_second === 'number');
  check(tps.length > 0, "arch: the trials reported the native trainer's tokens_per_second");
  // The model's size the trainer reported in every training report: one count per trial.
  const sizeOf = new Map(trials.map((t, i) => [t.id, [...new Set(training[i].map((m) => m.values?.parameters))]]));
  check([...sizeOf.values()].every((s) => s.length === 1 && Number.isInteger(s[0]) && s[0] > 0), "arch: every training report of each trial carries the same parameter count", JSON.stringify([...sizeOf]));
  for (const a of want) a.parameters = [...new Set(trials.filter((t) => t.hparams?.arch === a.arch).map((t) => sizeOf.get(t.id)?.[0]))];
  await page.goto(`${MASTER}/#/experiments/${id}`);
  await page.waitForSelector('[data-testid="arch-comparison"] [data-testid="arch-row"]', { timeout: 20000 });
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="arch-row"] [data-testid="arch-tps"]')].every((c) => c.textContent !== '…'), null, { timeout: 20000 }).catch(() => {});
  const rows = await archRows(page);
  const got = rows.map((r) => `${r.arch} ${r.trials} ${r.bestTrial}`).join(' | ');
  const expected = want.map((a) => `${a.arch} ${a.completed}/${a.trials} completed trial ${a.best.id}`).join(' | ');
  check(got === expected, "arch: one row per arch, best first by the searcher's metric, with its trials and best trial", `page ${got} · master ${expected}`);
  check(rows.every((r) => /^\d[\d,.]*$/.test(r.tps ?? '') && r.best !== '–' && r.time !== '–'), 'arch: each row has its best value, its time and its mean tokens/s', JSON.stringify(rows));
  const sizes = rows.map((r) => `${r.arch}=${r.parametersExact} (${r.parametersTitle})`).join(' ');
  const wantSizes = want.map((a) => `${a.arch}=${a.parameters[0]} (${a.parameters[0]?.toLocaleString('en-US')} parameters)`).join(' ');
  check(want.every((a) => a.parameters.length === 1) && sizes === wantSizes, "arch: each row's parameters are the count its trials reported", `page ${sizes} · master ${wantSizes}`);
  check(rows.every((r) => statesCount(r.parameters, r.parametersExact)), 'arch: each row shows its count rounded ("1.2 M")', rows.map((r) => `${r.arch}: ${r.parameters}`).join(', '));
  await page.locator('[data-testid="arch-comparison"]').screenshot({ path: join(ART, 'arch-comparison.png') });
  // The best trial's page shows the same count beside its arch and precision.
  const best = want[0].best;
  await page.goto(`${MASTER}/#/trials/${best.id}`);
  await page.waitForSelector('[data-testid="trial-parameters"]', { timeout: 20000 }).catch(() => {});
  const shown = await trialParametersShown(page);
  check(shown?.exact === sizeOf.get(best.id)?.[0] && statesCount(shown?.text, shown?.exact), `arch: trial ${best.id}'s Summary shows the parameter count it reported`, `page ${JSON.stringify(shown)} · master ${sizeOf.get(best.id)}`);
  await page.screenshot({ path: join(ART, 'arch-trial-parameters.png'), fullPage: true });
}

/** A speech trial: its latest validation's transcripts, reference beside hypothesis. */
async function speechView(page, id) {
  const [trial] = await trialsOf(id);
  const rows = await metrics(trial.id, 'validation_transcripts');
  const latest = rows.at(-1);
  const utterances = latest?.values?.utterances ?? [];
  check(utterances.length > 0, `speech: trial ${trial.id} reported validation transcripts`, JSON.stringify(latest));
  await page.goto(`${MASTER}/#/trials/${trial.id}`);
  await page.waitForSelector('[data-testid="transcripts"] [data-testid="transcript"]', { timeout: 20000 });
  const card = page.locator('[data-testid="transcripts"]');
  const step = await card.locator('[data-testid="transcripts-step"]').innerText();
  check(step.startsWith(`step ${latest?.batches} · `), `speech: the card shows the latest validation, step ${latest?.batches}`, step);
  const shown = await transcriptRows(card);
  check(shown.map((r) => r.id).join() === utterances.map((u) => u.id).join(), "speech: the latest validation's utterances in the master's order", `${shown.map((r) => r.id).join()} · ${utterances.map((u) => u.id).join()}`);
  const bad = [];
  utterances.forEach((u, i) => {
    const r = shown[i];
    if (!r) return bad.push(`${u.id}: missing`);
    if (r.refTitle !== u.reference) bad.push(`${u.id}: reference tooltip ${JSON.stringify(r.refTitle)}`);
    if (r.ref.split(/\s+/).filter(Boolean).length !== u.words) bad.push(`${u.id}: ${r.ref} is not ${u.words} words`);
    const errors = u.word_errors === 0 ? 'no word errors' : `${u.word_errors} of ${u.words} words wrong`;
    if (r.errors !== errors) bad.push(`${u.id}: "${r.errors}", the master counted "${errors}"`);
    if ((u.hypothesis.trim() === '') !== (r.hyp === '(nothing)')) bad.push(`${u.id}: hypothesis ${JSON.stringify(r.hyp)} for ${JSON.stringify(u.hypothesis)}`);
  });
  check(shown.length === utterances.length && bad.length === 0, 'speech: each reference (the manifest\'s text as its tooltip) beside its hypothesis, with the word errors the trainer counted', bad.join('; '));
  const layout = await transcriptLayout(card);
  check(layout.sideBySide, 'speech: reference and hypothesis side by side', JSON.stringify(layout.boxes));
  const valMetrics = await page.locator('[data-testid="chart-validation-metric"] option').allInnerTexts();
  check(valMetrics.includes('wer') && valMetrics.includes('cer'), 'speech: WER and CER among the validation charts', valMetrics.join(','));
  await card.screenshot({ path: join(ART, 'speech-transcripts.png') });
  await shot(page, 'speech-trial');
}

/** A Slurm trial: its job id and nodes on its page, as the master reports them. */
async function slurmView(page, id) {
  const [trial] = await trialsOf(id);
  const nodes = (trial.hosts ?? []).map((h) => h.replace(/^slurm:/, '')).join(', ');
  check(/^\d+$/.test(trial.jobId ?? '') && (trial.hosts ?? []).every((h) => h.startsWith('slurm:')) && nodes !== '', `slurm: trial ${trial.id} ran as Slurm job ${trial.jobId} on ${nodes}`, JSON.stringify(trial));
  await page.goto(`${MASTER}/#/trials/${trial.id}`);
  await page.waitForSelector('[data-testid="trial-slurm"] [data-testid="trial-job-id"]', { timeout: 20000 });
  check((await text(page, '[data-testid="trial-slurm"] [data-testid="trial-job-id"]')) === trial.jobId, 'slurm: the Slurm card shows the job id');
  check((await text(page, '[data-testid="trial-slurm"] [data-testid="trial-nodes"]')) === nodes, 'slurm: and the nodes its job ran on', await text(page, '[data-testid="trial-nodes"]'));
  check((await page.locator('[data-testid="trial-pool-capacity"]').count()) === 1, "slurm: and its pool's capacity");
  await shot(page, 'slurm-trial');
}

async function main() {
  mkdirSync(ART, { recursive: true });
  log(`master ${MASTER}, artifacts ${ART}, views ${asked.map((a) => a.join('=')).join(' ')}`);
  try {
    if (USERNAME && PASSWORD) await login(USERNAME, PASSWORD);
    await api('GET', '/master');
  } catch (e) {
    console.error(`Cannot use the master at ${MASTER}: ${e.message}`);
    process.exit(2);
  }
  const browser = await launch();
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  const newPage = async (w, h) => {
    const p = await ctx.newPage();
    await p.setViewportSize({ width: w, height: h });
    p.on('pageerror', (e) => errors.push(e.message));
    return p;
  };
  try {
    const page = await newPage(1280, 900);
    if (USERNAME && PASSWORD) {
      await page.goto(`${MASTER}/#/experiments`);
      await pageLogin(page, USERNAME, PASSWORD, log);
    }
    for (const [view, id] of asked) {
      try {
        if (view === 'core-api') await coreApiView(page, id);
        else if (view === 'unmanaged') await unmanagedView(page, id);
        else if (view === 'hparams') await hparamsView(browser, id, newPage);
        else if (view === 'arch') await archView(page, id);
        else if (view === 'speech') await speechView(page, id);
        else if (view === 'slurm') await slurmView(page, id);
      } catch (e) {
        check(false, `${view}: the checks of experiment ${id} ran to the end`, e.stack ?? e.message);
        await shot(page, `${view}-failure`).catch(() => {});
      }
    }
    check(errors.length === 0, 'no uncaught page errors', errors.join(' | '));
  } finally {
    await browser.close();
  }
  console.log(`\n${tally.passed} passed, ${tally.failed} failed`);
  process.exit(tally.failed ? 1 : 0);
}

main();
