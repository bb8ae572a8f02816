// The trial page's metric panels: the metric groups a trial's code named through the Core API
// (GET /trials/{id} lists them in metricGroups) get a section each with one chart per metric, read
// with GET /trials/{id}/metrics?kind=NAME; the built-in groups get none of their own; the
// native trainer's throughput and loss-scale panels are shown only for a trial that reports them;
// and a speech trial's validation_transcripts are a card of their own, never charts.
import { act, cleanup, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiClient, normTrialDetail } from '../src/api/client';
import { parseHash } from '../src/lib/router';
import { TrialPage } from '../src/pages/TrialPage';

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

type Rows = Record<string, { batches: number; values: Record<string, unknown> }[]>;

/** A master with trial 7 of experiment 3: `state` and `groups` (metricGroups; undefined: left
 *  out, as for a trial that reported nothing) as GET /trials/7 answers them, and each group's rows
 *  as GET /trials/7/metrics?kind=NAME does. Both are read on every request, so a test may change
 *  them between polls. Returns the URLs asked. */
function stubMaster(master: { state?: string; groups?: string[]; rows: Rows }) {
  const urls: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url);
    const u = new URL(url, 'http://master');
    switch (u.pathname) {
      case '/api/v1/trials/7':
        return json({ trial: { id: '7', experimentId: '3', state: master.state ?? 'TRIAL_STATE_COMPLETED', totalBatches: '20' }, metricGroups: master.groups });
      case '/api/v1/trials/7/metrics': {
        const kind = u.searchParams.get('kind') ?? '';
        // the master's downsampling above maxPoints: every k-th row, and always the last
        const rows = master.rows[kind] ?? [];
        const max = Number(u.searchParams.get('maxPoints') ?? 0);
        const stride = max > 0 && rows.length > max ? Math.ceil(rows.length / max) : 1;
        const kept = rows.filter((_, i) => i % stride === 0 || i === rows.length - 1);
        return json({ metrics: kept.map((r) => ({ trialId: '7', kind, batches: String(r.batches), values: r.values })) });
      }
      case '/api/v1/trials/7/logs':
        return json({ logs: [] });
      case '/api/v1/experiments/3':
        return json({ experiment: { id: '3', name: 'core-api', metric: 'accuracy' } });
      case '/api/v1/experiments/3/checkpoints':
        return json({ checkpoints: [] });
      default:
        return json({ code: 5, message: 'no route' }, 404);
    }
  });
  return urls;
}

function trialPage() {
  window.location.hash = '#/trials/7';
  return render(<TrialPage id={7} route={parseHash('#/trials/7')} />);
}

/** The kinds of the metric requests made so far. */
const kindsAsked = (urls: string[]) => new Set(urls.filter((u) => u.startsWith('/api/v1/trials/7/metrics')).map((u) => new URL(u, 'http://master').searchParams.get('kind')));

// A Core API trial: no tokens_per_second or loss_scale among its training metrics.
const CORE_TRAINING = [
  { batches: 10, values: { loss: 0.9, accuracy: 0.6 } },
  { batches: 20, values: { loss: 0.7, accuracy: 0.7 } },
];
const NATIVE_TRAINING = [
  { batches: 10, values: { loss: 3.1, tokens_per_second: 5100, loss_scale: 128 } },
  { batches: 20, values: { loss: 2.8, tokens_per_second: 5200, loss_scale: 256 } },
];

describe('trial metric groups', () => {
  it('are read from GetTrial as metricGroups, empty when the master leaves them out', async () => {
    expect(normTrialDetail({ trial: { id: '7', experimentId: '3' }, metricGroups: ['inference', 'training', 'validation'] })).toMatchObject({ id: 7, experimentId: 3, metricGroups: ['inference', 'training', 'validation'] });
    expect(normTrialDetail({ trial: { id: '7' } }).metricGroups).toEqual([]);
    expect(normTrialDetail({ metricGroups: 'inference' as never }).metricGroups).toEqual([]);
    const calls: string[] = [];
    const client = new ApiClient({ fetch: async (url) => (calls.push(url), json({ trial: { id: '7', state: 'TRIAL_STATE_RUNNING' }, metricGroups: ['inference', 'training'] })) });
    expect(await client.getTrial(7)).toMatchObject({ id: 7, state: 'TRIAL_STATE_RUNNING', metricGroups: ['inference', 'training'] });
    expect(calls).toEqual(['/api/v1/trials/7']);
  });

  it('give each group of its own a section with one chart per metric, asked with kind=NAME', async () => {
    const urls = stubMaster({
      groups: ['inference', 'training', 'validation'],
      rows: {
        training: CORE_TRAINING,
        validation: [{ batches: 20, values: { accuracy: 0.68 } }],
        inference: [
          { batches: 10, values: { examples: 12, latency_ms: 3.5 } },
          { batches: 20, values: { examples: 12, latency_ms: 3.1, model: 'int8' } },
          { batches: 30, values: { latency_ms: 2.9 } },
        ],
      },
    });
    trialPage();
    const section = await screen.findByTestId('group-inference');
    expect(within(section).getByRole('heading', { name: 'inference' })).toBeTruthy();
    await waitFor(() => expect(section.querySelectorAll('[data-testid^="chart-group-inference-"]').length).toBe(2));
    // one chart per numeric metric (not the string `model`), each with the rows that carry it
    expect(within(section).getByTestId('chart-group-inference-examples').getAttribute('data-points')).toBe('2');
    expect(within(section).getByTestId('chart-group-inference-latency_ms').getAttribute('data-points')).toBe('3');
    expect(urls).toContain('/api/v1/trials/7/metrics?kind=inference&maxPoints=5000');
    // training and validation keep their own charts, and get no group section
    expect(screen.getByTestId('chart-training')).toBeTruthy();
    expect(screen.queryByTestId('group-training')).toBeNull();
    expect(screen.queryByTestId('group-validation')).toBeNull();
  });

  it('show no section for a trial without groups of its own, and one as soon as it reports one', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const master = { state: 'TRIAL_STATE_RUNNING', groups: undefined as string[] | undefined, rows: { training: CORE_TRAINING } as Rows };
    const urls = stubMaster(master);
    trialPage();
    await screen.findByTestId('chart-training');
    master.groups = ['training', 'validation'];
    await act(() => vi.advanceTimersByTimeAsync(3000)); // the next poll of the trial
    expect(document.querySelector('[data-testid^="group-"]')).toBeNull();
    expect(kindsAsked(urls)).toEqual(new Set(['training', 'validation']));
    // the trial's code reports a group: the next poll lists it, and the page draws it unchanged
    master.groups = ['eval_cache', 'training', 'validation'];
    master.rows.eval_cache = [{ batches: 20, values: { hit_rate: 0.8 } }];
    await act(() => vi.advanceTimersByTimeAsync(3000));
    const chart = await screen.findByTestId('chart-group-eval_cache-hit_rate');
    expect(chart.getAttribute('data-points')).toBe('1');
    expect(within(screen.getByTestId('group-eval_cache')).getByRole('heading', { name: 'eval_cache' })).toBeTruthy();
    expect(kindsAsked(urls)).toContain('eval_cache');
    // and its rows are asked again while the trial is live, as training's are
    master.rows.eval_cache.push({ batches: 30, values: { hit_rate: 0.85 } });
    await act(() => vi.advanceTimersByTimeAsync(5000));
    await waitFor(() => expect(screen.getByTestId('chart-group-eval_cache-hit_rate').getAttribute('data-points')).toBe('2'));
  });
});

describe('native-trainer panels', () => {
  it('are not shown for a trial that never reported loss_scale or tokens_per_second', async () => {
    stubMaster({ groups: ['training', 'validation'], rows: { training: CORE_TRAINING } });
    trialPage();
    const training = await screen.findByTestId('chart-training');
    expect(training.getAttribute('data-points')).toBe('2');
    expect(screen.queryByTestId('chart-loss-scale')).toBeNull();
    expect(screen.queryByTestId('chart-throughput')).toBeNull();
    expect(screen.queryByText(/No loss_scale reported yet/)).toBeNull();
  });

  it('are shown once the trial reports those metrics, with their rows', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const master = { state: 'TRIAL_STATE_RUNNING', groups: ['training'], rows: { training: [{ batches: 0, values: { loss: 3.5 } }] } as Rows };
    stubMaster(master);
    trialPage();
    await screen.findByTestId('chart-training');
    expect(screen.queryByTestId('chart-loss-scale')).toBeNull();
    master.rows.training = NATIVE_TRAINING;
    await act(() => vi.advanceTimersByTimeAsync(5000)); // the next poll of a live trial's rows
    const lossScale = await screen.findByTestId('chart-loss-scale');
    expect(lossScale.getAttribute('data-points')).toBe('2');
    expect(screen.getByTestId('chart-throughput').getAttribute('data-points')).toBe('2');
  });
});

// A speech trial's validation transcripts at steps 8 and 16: the same two utterances, improving.
const TRANSCRIPT_ROWS = [8, 16].map((batches) => ({
  batches,
  values: {
    utterances: [
      { id: 'valid-000001', reference: 'A man rides a horse.', hypothesis: batches === 8 ? 'a men rise horse' : 'a man rides a horse', word_errors: batches === 8 ? 3 : 0, words: 5 },
      { id: 'valid-000002', reference: 'Two dogs play.', hypothesis: batches === 8 ? '' : 'two dog play in', word_errors: batches === 8 ? 3 : 2, words: 3 },
    ],
  },
}));

describe('validation transcripts', () => {
  it("show the latest validation's utterances, reference beside hypothesis, differing words marked, and no chart", async () => {
    const urls = stubMaster({
      groups: ['training', 'validation', 'validation_transcripts'],
      rows: { training: NATIVE_TRAINING, validation: [{ batches: 16, values: { wer: 40, cer: 12 } }], validation_transcripts: TRANSCRIPT_ROWS },
    });
    trialPage();
    const card = await screen.findByTestId('transcripts');
    expect(within(card).getByRole('heading', { name: 'Validation transcripts' })).toBeTruthy();
    await waitFor(() => expect(within(card).getAllByTestId('transcript')).toHaveLength(2));
    // only the latest row's texts are asked for (the master keeps the first and the last)
    expect(urls).toContain('/api/v1/trials/7/metrics?kind=validation_transcripts&maxPoints=1');
    expect(within(card).getByTestId('transcripts-step').textContent).toMatch(/^step 16 · the first 2 utterances/);
    const [first, second] = within(card).getAllByTestId('transcript');
    expect(first.getAttribute('data-id')).toBe('valid-000001');
    expect(within(first).getByTestId('transcript-reference').textContent).toBe('a man rides a horse');
    expect(within(first).getByTestId('transcript-hypothesis').textContent).toBe('a man rides a horse');
    expect(first.querySelectorAll('mark')).toHaveLength(0);
    expect(within(first).getByTestId('transcript-errors').textContent).toBe('no word errors');
    // "two dogs play" against "two dog play in": dogs/dog substituted, "in" inserted
    const marks = [...second.querySelectorAll('mark')].map((m) => `${m.getAttribute('data-mark')}:${m.textContent}`);
    expect(marks).toEqual(['substituted:dogs', 'substituted:dog', 'inserted:in']);
    expect(within(second).getByTestId('transcript-errors').textContent).toBe('2 of 3 words wrong');
    expect(within(second).getByTestId('transcript-reference').getAttribute('title')).toBe('Two dogs play.');
    // the group is text: no section of charts for it, and WER/CER stay in the validation chart
    expect(screen.queryByTestId('group-validation_transcripts')).toBeNull();
    expect(document.querySelector('[data-testid^="chart-group-validation_transcripts"]')).toBeNull();
    expect(screen.getByTestId('chart-validation')).toBeTruthy();
  });

  it('are not shown, nor asked for, for a trial that did not report them', async () => {
    const urls = stubMaster({ groups: ['training', 'validation'], rows: { training: NATIVE_TRAINING } });
    trialPage();
    await screen.findByTestId('chart-training');
    await waitFor(() => expect(kindsAsked(urls)).toEqual(new Set(['training', 'validation'])));
    expect(screen.queryByTestId('transcripts')).toBeNull();
  });
});

describe('a group of its own without numbers', () => {
  it('says its reports have nothing to chart instead of that none were reported', async () => {
    stubMaster({ groups: ['notes', 'training'], rows: { training: CORE_TRAINING, notes: [{ batches: 10, values: { text: 'warmup done' } }] } });
    trialPage();
    const section = await screen.findByTestId('group-notes');
    await waitFor(() => expect(within(section).getByTestId('empty-state').textContent).toBe('1 notes report, none with a number to chart (read them with sf trial metrics 7 --group notes).'));
  });
});
