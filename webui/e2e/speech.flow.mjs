// Part of the offline browser test (offline.e2e.mjs runs it): issue 49's speech view, against
// fixture answers of the master's routes at 1280 px and 375 px. A speech trial (its validations
// carry wer and cer, and the metric group validation_transcripts the native trainer reports with
// each: trainer/run/validation_transcripts.h) shows a "Validation transcripts" card with the latest
// validation's step and utterances, reference beside hypothesis (stacked on a phone), the words
// that differ marked, asked for with maxPoints=1; the group gets no chart section; WER and CER
// are among the validation chart's metrics. A translation trial has no such card and never asks
// for the group.
import { join } from 'node:path';
import { atEveryWidth } from './flow.mjs';
import { transcriptLayout, transcriptRows } from './views.checks.mjs';

const SPEECH_YAML = 'name: speech-grid\ndata:\n  train: {manifest: /data/speech/train.tsv}\n  valid: {manifest: /data/speech/valid.tsv}\nhyperparameters:\n  arch: speech_transformer_ctc_small\n  lr: 0.001\nsearcher: {name: single, metric: wer, max_length: {batches: 16}}\n';
const TEXT_YAML = 'name: wmt-tiny\ndata:\n  train: {src: /data/wmt/train.de, tgt: /data/wmt/train.en}\nhyperparameters:\n  arch: transformer_tiny\nsearcher: {name: single, metric: bleu, smaller_is_better: false}\n';
const EXPERIMENTS = [
  { id: '12', name: 'speech-grid', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'single', metric: 'wer', smallerIsBetter: true, numTrials: 1, configYaml: SPEECH_YAML },
  { id: '13', name: 'wmt-tiny', state: 'EXPERIMENT_STATE_COMPLETED', owner: 'ada', searcher: 'single', metric: 'bleu', numTrials: 1, configYaml: TEXT_YAML },
];
const TRIALS = [
  { trial: { id: '121', experimentId: '12', state: 'TRIAL_STATE_COMPLETED', hparams: { arch: 'speech_transformer_ctc_small', lr: 0.001 }, totalBatches: '16', bestValidationMetric: 62.5, latestValidationMetric: 62.5 }, metricGroups: ['training', 'validation', 'validation_transcripts'] },
  { trial: { id: '131', experimentId: '13', state: 'TRIAL_STATE_COMPLETED', hparams: { arch: 'transformer_tiny', lr: 0.001 }, totalBatches: '16' }, metricGroups: ['training', 'validation'] },
];
// The speech trial's two validations: the same three utterances, the later transcripts better.
const utterances = (late) => [
  { id: 'valid-000001', reference: 'A man and a woman are sitting on the floor.', hypothesis: late ? 'a man and a woman are siting on the floor' : 'a man an a wman', word_errors: late ? 1 : 7, words: 10 },
  { id: 'valid-000002', reference: 'A child is about to bite into a mushroom.', hypothesis: late ? 'a child is about to bite into a mushroom' : '', word_errors: late ? 0 : 9, words: 9 },
  { id: 'valid-000003', reference: 'Two dogs play in the snow.', hypothesis: late ? 'two dog play in the the snow' : 'to', word_errors: late ? 2 : 6, words: 6 },
];
const ROWS = {
  '121': {
    training: [8, 16].map((b) => ({ trialId: '121', kind: 'training', batches: String(b), values: { loss: 3 - b / 10, tokens_per_second: 900 } })),
    validation: [8, 16].map((b) => ({ trialId: '121', kind: 'validation', batches: String(b), values: { validation_loss: 2.5 - b / 20, wer: b === 8 ? 100 : 62.5, cer: b === 8 ? 71 : 30.2 } })),
    validation_transcripts: [8, 16].map((b) => ({ trialId: '121', kind: 'validation_transcripts', batches: String(b), time: '2026-11-02T10:0' + (b === 8 ? '4' : '8') + ':00Z', values: { utterances: utterances(b === 16) } })),
  },
  '131': {
    training: [8, 16].map((b) => ({ trialId: '131', kind: 'training', batches: String(b), values: { loss: 4 - b / 10, tokens_per_second: 5000 } })),
    validation: [{ trialId: '131', kind: 'validation', batches: '16', values: { validation_loss: 3.1, bleu: 4.2 } }],
  },
};

function fixtureApi(requests) {
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  return async (req, res, url) => {
    requests.push(url.pathname + url.search);
    const p = url.pathname.replace(/^\/api\/v1/, '');
    let m = p.match(/^\/experiments\/(\d+)$/);
    if (m && EXPERIMENTS.some((e) => e.id === m[1])) return send(res, 200, { experiment: EXPERIMENTS.find((e) => e.id === m[1]) });
    if (/^\/experiments\/\d+\/checkpoints$/.test(p)) return send(res, 200, { checkpoints: [] });
    m = p.match(/^\/trials\/(\d+)$/);
    if (m && TRIALS.some((t) => t.trial.id === m[1])) return send(res, 200, TRIALS.find((t) => t.trial.id === m[1]));
    m = p.match(/^\/trials\/(\d+)\/metrics$/);
    if (m) {
      // the master's downsampling above maxPoints: every k-th row, and always the last
      const rows = ROWS[m[1]]?.[url.searchParams.get('kind') ?? 'training'] ?? [];
      const max = Number(url.searchParams.get('maxPoints') ?? 0);
      const stride = max > 0 && rows.length > max ? Math.ceil(rows.length / max) : 1;
      return send(res, 200, { metrics: rows.filter((_, i) => i % stride === 0 || i === rows.length - 1) });
    }
    if (/^\/trials\/\d+\/logs$/.test(p)) return send(res, 200, { logs: [] });
    if (p === '/resource-pools') return send(res, 200, { resourcePools: [{ name: 'default', scheduler: 'priority', agents: 1, totalSlots: 2 }] });
    return send(res, 404, { code: 5, message: `no route ${req.method} ${url.pathname}`, details: [] }); // /auth/me too: no login
  };
}

export async function speechFlow(browser, { dist, check, ART }) {
  const requests = [];
  await atEveryWidth(browser, { dist, check, ART }, { label: 'speech', flow: 'the speech flow', shot: 'speech', api: fixtureApi(requests) }, async ({ page, base, w, what }) => {
    requests.length = 0;
    await page.goto(`${base}/#/trials/121`);
    await page.waitForSelector('[data-testid="transcript"]', { timeout: 15000 });
    const card = page.locator('[data-testid="transcripts"]');
    check((await card.locator('h2').innerText()) === 'Validation transcripts', what('a speech trial has a Validation transcripts card'));
    check((await card.locator('[data-testid="transcripts-step"]').innerText()).startsWith('step 16 · '), what('from the latest validation, step 16'), await card.locator('[data-testid="transcripts-step"]').innerText());
    const asked = requests.filter((r) => r.includes('kind=validation_transcripts'));
    check(asked.length > 0 && asked.every((r) => new URLSearchParams(r.split('?')[1]).get('maxPoints') === '1'), what('asked with maxPoints=1 (the latest row, not every one)'), asked.join(' '));
    const rows = await transcriptRows(card);
    check(rows.map((r) => r.id).join(',') === 'valid-000001,valid-000002,valid-000003', what('the three utterances in manifest order'), JSON.stringify(rows));
    check(rows[0]?.ref === 'a man and a woman are sitting on the floor' && rows[0]?.hyp === 'a man and a woman are siting on the floor', what('reference and hypothesis of the latest validation, as WER scores them'), JSON.stringify(rows[0]));
    check(JSON.stringify(rows[0]?.marks) === JSON.stringify(['substituted:sitting', 'substituted:siting']) && rows[0]?.errors === '1 of 10 words wrong', what('the differing word marked on both sides, and the count'), JSON.stringify(rows[0]));
    check(rows[1]?.marks.length === 0 && rows[1]?.errors === 'no word errors', what('an exact transcript has nothing marked'), JSON.stringify(rows[1]));
    check(JSON.stringify(rows[2]?.marks) === JSON.stringify(['substituted:dogs', 'substituted:dog', 'inserted:the']), what('a substituted and an inserted word'), JSON.stringify(rows[2]));
    // side by side on a wide screen, stacked on a phone; the card fits the viewport either way
    const { sideBySide, stacked, boxes } = await transcriptLayout(card);
    check(w === 1280 ? sideBySide : stacked, what(w === 1280 ? 'reference and hypothesis side by side' : 'reference above hypothesis'), JSON.stringify(boxes));
    const cardBox = await card.boundingBox();
    check(!!cardBox && cardBox.x >= 0 && cardBox.x + cardBox.width <= w + 1, what('the card fits the viewport'), JSON.stringify(cardBox));
    check((await page.locator('[data-testid="group-validation_transcripts"]').count()) === 0, what('the transcripts group gets no chart section'));
    const valMetrics = await page.locator('[data-testid="chart-validation-metric"] option').allInnerTexts();
    check(valMetrics.includes('wer') && valMetrics.includes('cer'), what('WER and CER are among the validation charts'), valMetrics.join(','));
    await card.screenshot({ path: join(ART, `speech-transcripts-${w}.png`) });
    await page.screenshot({ path: join(ART, `speech-trial-${w}.png`), fullPage: true });

    requests.length = 0;
    await page.goto(`${base}/#/trials/131`);
    await page.waitForSelector('[data-testid="chart-training"]', { timeout: 15000 });
    await page.waitForTimeout(300); // the trial and its groups were read: still no card
    check((await page.locator('[data-testid="transcripts"]').count()) === 0, what('a translation trial has no transcripts card'));
    check(!requests.some((r) => r.includes('validation_transcripts')), what('and never asks for them'), requests.join(' '));
  });
}
