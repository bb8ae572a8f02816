// Part of the offline browser test (offline.e2e.mjs runs it): issue 49's Slurm and arch views
// against fixture answers of the master's routes, at 1280 px and 375 px. The experiment list asks
// for the configs (fields=config), shows each experiment's arch and filters the page by it; an arch
// sweep's page compares its archs (best trial, time, tokens/s, parameters) and its trials table says where each
// ran; a queued Slurm trial's page shows its pool's capacity, job id and Slurm's reason, a finished
// one the nodes its job ran on (Trial.hosts), or the sacct command for them when the master did not
// say; a trial on agents says in its Summary which agent it ran on; the cluster page shows the Slurm
// pool's nodes × slots per node and the queued trial's job id.
import { join } from 'node:path';
import { atEveryWidth } from './flow.mjs';
import { archRows, trialParametersShown } from './views.checks.mjs';

const SWEEP_YAML = 'name: arch-sweep\nhyperparameters:\n  arch: {type: categorical, vals: [lstm_small, transformer_tiny]}\n  lr: 0.001\nsearcher: {name: grid, metric: bleu, smaller_is_better: false}\nresources:\n  resource_pool: hpc\n  slots_per_trial: 2\n';
const EXPERIMENTS = [
  { id: '5', name: 'arch-sweep', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'grid', metric: 'bleu', numTrials: 4, numCompletedTrials: 4, configYaml: SWEEP_YAML },
  { id: '4', name: 'lstm-on-slurm', state: 'EXPERIMENT_STATE_ACTIVE', owner: 'ada', searcher: 'single', metric: 'bleu', numTrials: 1, priority: 42, configYaml: 'name: lstm-on-slurm\nhyperparameters:\n  arch: lstm_small\nresources: {resource_pool: hpc, slots_per_trial: 2}\n' },
  { id: '3', name: 'pytorch-transformer', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'single', metric: 'bleu', numTrials: 1, configYaml: 'name: pt\nentrypoint: /usr/bin/python3 train.py\nhyperparameters:\n  d_model: 128\n' },
];
const at = (min) => new Date(Date.parse('2026-11-02T10:00:00Z') + min * 60000).toISOString();
// `parameters`: the model's size, as sf-trainer reports it in every training report.
const PARAMETERS = { lstm_small: 2345678, transformer_tiny: 803712 };
const sweepTrial = (id, arch, best, minutes, tps, hosts) => ({ trial: { id: String(id), experimentId: '5', state: 'TRIAL_STATE_COMPLETED', hparams: { arch, lr: 0.001 }, bestValidationMetric: best, startTime: at(0), endTime: at(minutes), totalBatches: '200', jobId: String(800 + id), hosts }, tps, parameters: PARAMETERS[arch] });
// Trial 14's job ran before the master reported nodes (no hosts): its page falls back to sacct.
const SWEEP = [sweepTrial(11, 'lstm_small', 21.5, 5, 2000, ['slurm:node1']), sweepTrial(12, 'transformer_tiny', 27.25, 12.5, 5000, ['slurm:node[1-2]']), sweepTrial(13, 'lstm_small', 23, 7, 4000, ['slurm:node2']), sweepTrial(14, 'transformer_tiny', 26, 10, 5000)];
const QUEUED = { id: '21', experimentId: '4', state: 'TRIAL_STATE_QUEUED', hparams: { arch: 'lstm_small' }, jobId: '813', pendingReason: 'Slurm: Resources (job 813)' };
const ON_AGENT = { id: '31', experimentId: '3', state: 'TRIAL_STATE_COMPLETED', hparams: { d_model: 128 }, startTime: at(0), endTime: at(3), totalBatches: '100', hosts: ['e2e-agent-0'] };
const TRIALS = [...SWEEP.map((t) => t.trial), QUEUED, ON_AGENT];
const POOLS = [
  { name: 'default', scheduler: 'priority', agents: 1, totalSlots: 2 },
  { name: 'hpc', scheduler: 'slurm', nodes: 2, totalSlots: 4, usedSlots: 2, runningTrials: 1, queuedTrials: 1, queuedSlots: 2 },
];

function fixtureApi(requests) {
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  return async (req, res, url) => {
    requests.push(url.pathname + url.search);
    const p = url.pathname.replace(/^\/api\/v1/, '');
    const byId = (id) => EXPERIMENTS.find((e) => e.id === id);
    if (p === '/experiments') {
      const states = url.searchParams.getAll('states');
      const rows = EXPERIMENTS.filter((e) => !states.length || states.includes(e.state));
      const withConfig = url.searchParams.getAll('fields').includes('config');
      return send(res, 200, { experiments: rows.map((e) => (withConfig ? e : { ...e, configYaml: undefined })), pagination: { total: rows.length } });
    }
    let m = p.match(/^\/experiments\/(\d+)$/);
    if (m && byId(m[1])) return send(res, 200, { experiment: byId(m[1]) });
    m = p.match(/^\/experiments\/(\d+)\/trials$/);
    if (m) {
      const trials = TRIALS.filter((t) => t.experimentId === m[1]);
      return send(res, 200, { trials, pagination: { total: trials.length } });
    }
    if (/^\/experiments\/\d+\/checkpoints$/.test(p)) return send(res, 200, { checkpoints: [] });
    m = p.match(/^\/trials\/(\d+)$/);
    if (m && TRIALS.some((t) => t.id === m[1])) return send(res, 200, { trial: TRIALS.find((t) => t.id === m[1]) });
    m = p.match(/^\/trials\/(\d+)\/metrics$/);
    if (m) {
      const { tps, parameters } = SWEEP.find((t) => t.trial.id === m[1]) ?? {};
      const rows = url.searchParams.get('kind') === 'training' && tps ? [1, 2].map((i) => ({ trialId: m[1], kind: 'training', batches: String(100 * i), values: { loss: 3 - i, tokens_per_second: tps, parameters } })) : [];
      return send(res, 200, { metrics: rows });
    }
    if (/^\/trials\/\d+\/logs$/.test(p)) return send(res, 200, { logs: [] });
    if (p === '/resource-pools') return send(res, 200, { resourcePools: POOLS });
    if (p === '/agents') return send(res, 200, { agents: [] });
    if (p === '/servings') return send(res, 200, { servings: [] });
    if (p === '/tasks') return send(res, 200, { tasks: [] });
    if (p === '/cluster/utilization') return send(res, 200, { points: [] });
    return send(res, 404, { code: 5, message: `no route ${req.method} ${url.pathname}`, details: [] }); // /auth/me too: no login
  };
}

export async function slurmArchFlow(browser, { dist, check, ART }) {
  const requests = [];
  await atEveryWidth(browser, { dist, check, ART }, { label: 'slurm/arch', flow: 'the Slurm and arch flow', shot: 'slurm-arch', api: fixtureApi(requests) }, async ({ page, base, w, what }) => {
    const text = (sel) => page.locator(sel).first().innerText();
    requests.length = 0;
    await page.goto(`${base}/#/experiments`);
    await page.waitForSelector('[data-testid="experiment-arch"]', { timeout: 15000 });
    const listAsk = requests.find((r) => r.startsWith('/api/v1/experiments?'));
    check(!!listAsk && new URLSearchParams(listAsk.split('?')[1]).getAll('fields').join() === 'config', what('the list asks for the configs (fields=config)'), listAsk);
    const archs = await page.locator('[data-testid="experiment-arch"]').allInnerTexts();
    check(archs.join('|') === 'lstm_small, transformer_tiny|lstm_small|user code', what('the Arch column shows a sweep, one arch and user code'), archs.join('|'));
    check(await page.locator('[data-testid="experiment-arch"]').nth(0).isVisible(), what('the Arch column is on screen'));
    await page.selectOption('[data-testid="filter-arch"]', 'lstm_small');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="experiment-row"]').length === 2, null, { timeout: 5000 }).catch(() => {});
    const ids = await page.locator('[data-testid="experiment-row"]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-id')));
    check(ids.join(',') === '5,4' && page.url().includes('arch=lstm_small'), what('the arch filter keeps the sweep and the lstm run, in the URL'), `${ids.join(',')} ${page.url()}`);
    check((await text('[data-testid="arch-filter-note"]')).startsWith('2 of the 3 experiments on this page train lstm_small'), what('the filter says it narrows the page'));
    await page.screenshot({ path: join(ART, `arch-list-${w}.png`), fullPage: true });

    await page.goto(`${base}/#/experiments/5`);
    await page.waitForSelector('[data-testid="arch-row"]', { timeout: 15000 });
    await page.waitForFunction(() => document.querySelector('[data-testid="arch-row"] [data-testid="arch-tps"]')?.textContent === '5,000', null, { timeout: 10000 }).catch(() => {});
    const arch = await archRows(page);
    const rows = arch.map((r) => [r.arch, r.best, r.bestTrial, r.time, r.tps, r.parameters].join(' '));
    check(rows.join(' | ') === 'transformer_tiny 27.25 trial 12 12m 30s 5,000 804 K | lstm_small 23 trial 13 7m 00s 3,000 2.3 M', what('the archs side by side: best, its trial, time, mean tokens/s, parameters'), rows.join(' | '));
    const exact = arch.map((r) => `${r.arch}=${r.parametersExact} (${r.parametersTitle})`).join(' ');
    check(exact === 'transformer_tiny=803712 (803,712 parameters) lstm_small=2345678 (2,345,678 parameters)', what('each arch\'s exact parameter count as the trials reported it'), exact);
    const tableBox = await page.locator('[data-testid="arch-comparison"]').boundingBox();
    check(!!tableBox && tableBox.x >= 0 && tableBox.x + tableBox.width <= w + 1, what('the comparison card fits the viewport'), JSON.stringify(tableBox));
    await page.locator('[data-testid="arch-comparison"]').screenshot({ path: join(ART, `arch-compare-${w}.png`) });
    const hostCells = await page.locator('[data-testid="trial-row"]').evaluateAll((rs) => rs.map((r) => `${r.getAttribute('data-id')}=${r.querySelector('[data-testid="trial-hosts"]').textContent}`));
    check(hostCells.join(' ') === '11=node1 (Slurm) 12=node[1-2] (Slurm) 13=node2 (Slurm) 14=–', what("the trials table says where each Slurm trial ran"), hostCells.join(' '));

    await page.goto(`${base}/#/trials/21`);
    await page.waitForSelector('[data-testid="trial-pool-capacity"]', { timeout: 15000 });
    check((await text('[data-testid="trial-slurm"] [data-testid="trial-job-id"]')) === '813', what("a Slurm trial shows its job id"));
    check((await text('[data-testid="trial-pool-capacity"]')) === '2 nodes × 2 slots, 2/4 slots busy', what("and its pool's nodes and slots"), await text('[data-testid="trial-pool-capacity"]'));
    check((await text('[data-testid="slurm-reason"]')) === 'Resources', what("and Slurm's reason it waits"));
    check((await text('[data-testid="trial-nodes"]')) === 'none yet', what('and no nodes while its job is pending'), await text('[data-testid="trial-nodes"]'));
    await page.screenshot({ path: join(ART, `slurm-trial-${w}.png`), fullPage: true });

    // where trials ran (Trial.hosts): a Slurm job's nodes in the Slurm card, an agent in the Summary
    await page.goto(`${base}/#/trials/12`);
    await page.waitForSelector('[data-testid="trial-pool-capacity"]', { timeout: 15000 });
    check((await text('[data-testid="trial-slurm"] [data-testid="trial-nodes"]')) === 'node[1-2]', what("a finished Slurm trial's card names its job's nodes"), await text('[data-testid="trial-nodes"]'));
    check((await page.locator('[data-testid="trial-nodes"] code').count()) === 0 && (await page.locator('[data-testid="trial-hosts"]').count()) === 0, what('no sacct command and no Summary line for it'));
    check(await page.locator('[data-testid="trial-nodes"]').isVisible(), what('the nodes are on screen'));
    await page.waitForSelector('[data-testid="trial-parameters"]', { timeout: 10000 }).catch(() => {});
    const size = await trialParametersShown(page);
    check(JSON.stringify(size) === JSON.stringify({ text: '804 K', exact: 803712, title: '803,712 parameters' }), what("the trial's Summary shows its model's parameter count"), JSON.stringify(size));
    await page.screenshot({ path: join(ART, `slurm-trial-nodes-${w}.png`), fullPage: true });
    await page.goto(`${base}/#/trials/14`);
    await page.waitForSelector('[data-testid="trial-pool-capacity"]', { timeout: 15000 });
    check((await text('[data-testid="trial-nodes"] code')) === 'sacct -j 814 -X -o NodeList', what('a Slurm job that ran without its nodes reported falls back to the sacct command'));
    await page.goto(`${base}/#/trials/31`);
    await page.waitForSelector('[data-testid="trial-hosts"]', { timeout: 15000 });
    const ranOn = await page.locator('[data-testid="trial-hosts"]').evaluate((dd) => `${dd.previousElementSibling.textContent}: ${dd.textContent}`);
    check(ranOn === 'Ran on: e2e-agent-0', what("a trial on agents says which agent it ran on in its Summary"), ranOn);
    await page.waitForTimeout(300); // the pools and the config were read: still no Slurm card
    check((await page.locator('[data-testid="trial-slurm"]').count()) === 0, what('and has no Slurm card'));
    await page.screenshot({ path: join(ART, `agent-trial-hosts-${w}.png`), fullPage: true });
    await page.goto(`${base}/#/experiments/3`);
    await page.waitForSelector('[data-testid="trials-table"] [data-testid="trial-hosts"]', { timeout: 15000 });
    check((await text('[data-testid="trials-table"] [data-testid="trial-hosts"]')) === 'e2e-agent-0', what("the agent trial's row in its experiment's trials table says where it ran"));

    await page.goto(`${base}/#/cluster`);
    await page.waitForSelector('[data-testid="pool-capacity"]', { timeout: 15000 });
    check((await text('[data-testid="pool-capacity"]')) === '2 nodes × 2 slots', what("the Slurm pool's capacity on the cluster page"));
    check((await text('[data-testid="cluster-slurm-summary"]')) === '· Slurm: 2 node(s), 2/4 slots busy', what('the Slurm summary in the heading'));
    await page.waitForSelector('[data-testid="queue-job-id"]', { timeout: 15000 });
    check((await text('[data-testid="queue-job-id"]')) === '813', what("the queued Slurm trial's job id in the queue"));
    await page.screenshot({ path: join(ART, `slurm-cluster-${w}.png`), fullPage: true });
  });
}
