// The experiment list's arch column and filter (the rows asked with fields=config), and the
// experiment page's comparison of a sweep's archs (ArchComparison.tsx).
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseHash, useRoute } from '../src/lib/router';
import { ExperimentPage } from '../src/pages/ExperimentPage';
import { ExperimentsList } from '../src/pages/ExperimentsList';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const SWEEP_YAML = 'name: arch-sweep\nhyperparameters:\n  arch: {type: categorical, vals: [lstm_small, transformer_tiny]}\n  lr: 0.001\nsearcher: {name: grid, metric: bleu, smaller_is_better: false}\n';
const EXPERIMENTS = [
  { id: '5', name: 'arch-sweep', state: 'EXPERIMENT_STATE_COMPLETED', configYaml: SWEEP_YAML },
  { id: '4', name: 'lstm-only', state: 'EXPERIMENT_STATE_COMPLETED', configYaml: 'name: lstm-only\nhyperparameters:\n  arch: lstm_small\n' },
  { id: '3', name: 'pt-transformer', state: 'EXPERIMENT_STATE_ACTIVE', configYaml: 'name: pt\nentrypoint: /usr/bin/python3 train.py\nhyperparameters:\n  d_model: 128\n' },
  { id: '2', name: 'quick', state: 'EXPERIMENT_STATE_COMPLETED', configYaml: 'name: quick\nhyperparameters:\n  dropout: 0.1\n' },
];

function List() {
  return <ExperimentsList route={useRoute()} />;
}

describe('experiment list: arch', () => {
  it('asks for the configs and shows what each experiment trains', async () => {
    const urls: string[] = [];
    vi.stubGlobal('fetch', async (url: string) => (urls.push(url), json({ experiments: EXPERIMENTS, pagination: { total: 4 } })));
    window.location.hash = '#/experiments';
    render(<List />);
    await screen.findAllByTestId('experiment-row');
    expect(new URL(urls[0], 'http://x').searchParams.getAll('fields')).toEqual(['config']);
    const cells = screen.getAllByTestId('experiment-arch');
    expect(cells.map((c) => c.textContent)).toEqual(['lstm_small, transformer_tiny', 'lstm_small', 'user code', 'default']);
    expect(cells[2].getAttribute('title')).toBe('user code: /usr/bin/python3 train.py');
    expect(screen.getByRole('columnheader', { name: /Arch/ })).toBeTruthy();
  });

  it('filters the page by arch, a sweep matching each of its archs, and keeps the choice in the URL', async () => {
    vi.stubGlobal('fetch', async () => json({ experiments: EXPERIMENTS, pagination: { total: 4 } }));
    window.location.hash = '#/experiments';
    render(<List />);
    await screen.findAllByTestId('experiment-row');
    const select = screen.getByTestId('filter-arch') as HTMLSelectElement;
    expect([...select.options].map((o) => o.value)).toEqual(['', 'lstm_small', 'transformer_tiny', 'default', 'user code']);
    const ids = () => screen.queryAllByTestId('experiment-row').map((r) => r.getAttribute('data-id'));

    act(() => void fireEvent.change(select, { target: { value: 'lstm_small' } }));
    await waitFor(() => expect(ids()).toEqual(['5', '4']));
    expect(window.location.hash).toContain('arch=lstm_small');
    expect(screen.getByTestId('arch-filter-note').textContent).toBe('2 of the 4 experiments on this page train lstm_small (the arch filter narrows each page).');

    act(() => void fireEvent.change(select, { target: { value: 'transformer_tiny' } }));
    await waitFor(() => expect(ids()).toEqual(['5']));
    act(() => void fireEvent.change(select, { target: { value: 'user code' } }));
    await waitFor(() => expect(ids()).toEqual(['3']));
    expect(screen.getByTestId('arch-filter-note').textContent).toContain('1 of the 4 experiments on this page run user code');
    act(() => void fireEvent.change(select, { target: { value: '' } }));
    await waitFor(() => expect(ids()).toEqual(['5', '4', '3', '2']));
    expect(window.location.hash).not.toContain('arch=');
    expect(screen.queryByTestId('arch-filter-note')).toBeNull();
  });

  it('says when no experiment on the page trains the arch of the URL', async () => {
    vi.stubGlobal('fetch', async () => json({ experiments: EXPERIMENTS.slice(1), pagination: { total: 3 } }));
    window.location.hash = '#/experiments?arch=fconv_small';
    render(<List />);
    expect((await screen.findByTestId('empty-state')).textContent).toBe('No experiment on this page trains fconv_small: the arch filter narrows the page the master answered.');
    expect((screen.getByTestId('filter-arch') as HTMLSelectElement).value).toBe('fconv_small');
  });
});

/** A master with experiment 5 (`yaml`) and its `trials`; each trial's training rows report
 *  `tps[id]` tokens/s (none for an id left out) and `parameters[id]` as the model's size (none
 *  when left out). Returns the URLs asked. */
function stubExperiment(yaml: string, trials: Record<string, unknown>[], tps: Record<string, number[]>, parameters: Record<string, number> = {}) {
  const urls: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url);
    const u = new URL(url, 'http://master');
    if (u.pathname === '/api/v1/experiments/5') return json({ experiment: { id: '5', name: 'arch-sweep', state: 'EXPERIMENT_STATE_COMPLETED', metric: 'bleu', smallerIsBetter: false, numTrials: trials.length, configYaml: yaml } });
    if (u.pathname === '/api/v1/experiments/5/trials') return json({ trials, pagination: { total: trials.length } });
    const m = u.pathname.match(/^\/api\/v1\/trials\/(\d+)\/metrics$/);
    if (m && u.searchParams.get('kind') === 'training') return json({ metrics: (tps[m[1]] ?? []).map((v, i) => ({ trialId: m[1], kind: 'training', batches: String(10 * (i + 1)), values: { loss: 2, tokens_per_second: v, ...(parameters[m[1]] ? { parameters: parameters[m[1]] } : {}) } })) });
    if (m) return json({ metrics: [] });
    return json({ code: 5, message: 'no route' }, 404);
  });
  return urls;
}

const T = (id: number, arch: string, best: number | undefined, minutes: number, extra: Record<string, unknown> = {}) => ({
  id: String(id), experimentId: '5', state: 'TRIAL_STATE_COMPLETED', hparams: { arch, lr: 0.001 }, bestValidationMetric: best,
  startTime: '2026-11-02T10:00:00Z', endTime: new Date(Date.parse('2026-11-02T10:00:00Z') + minutes * 60000).toISOString(), ...extra,
});

describe('experiment page: archs side by side', () => {
  it('shows one row per arch, the best first, with its best trial, time, mean tokens/s and parameters', async () => {
    const urls = stubExperiment(SWEEP_YAML, [T(11, 'lstm_small', 21.5, 5), T(12, 'transformer_tiny', 27.25, 12.5), T(13, 'lstm_small', 23, 7), T(14, 'transformer_tiny', 26, 10)], { 11: [1000, 3000], 12: [5200], 13: [4000], 14: [4800] }, { 11: 2345678, 12: 803712, 13: 2345678, 14: 803712 });
    window.location.hash = '#/experiments/5';
    render(<ExperimentPage id={5} route={parseHash('#/experiments/5')} />);
    const card = await screen.findByTestId('arch-comparison');
    const rows = () => within(card).getAllByTestId('arch-row');
    await waitFor(() => expect(within(rows()[0]).getByTestId('arch-tps').textContent).toBe('5,000'));
    expect(rows().map((r) => r.getAttribute('data-arch'))).toEqual(['transformer_tiny', 'lstm_small']);
    const cell = (r: HTMLElement, id: string) => within(r).getByTestId(id).textContent;
    const [tiny, lstm] = rows();
    expect([cell(tiny, 'arch-trials'), cell(tiny, 'arch-best'), cell(tiny, 'arch-best-trial'), cell(tiny, 'arch-time')]).toEqual(['2/2 completed', '27.25', 'trial 12', '12m 30s']);
    expect(within(tiny).getByRole('link', { name: 'trial 12' }).getAttribute('href')).toBe('#/trials/12');
    // lstm_small: trial 11 averages 2,000 tokens/s, trial 13 4,000: the arch 3,000
    expect([cell(lstm, 'arch-best'), cell(lstm, 'arch-best-trial'), cell(lstm, 'arch-time'), cell(lstm, 'arch-tps')]).toEqual(['23', 'trial 13', '7m 00s', '3,000']);
    // each arch's model size, the exact count as the tooltip and data-parameters
    const size = (r: HTMLElement) => within(r).getByTestId('arch-parameters');
    expect([size(tiny).textContent, size(tiny).getAttribute('title'), size(tiny).getAttribute('data-parameters')]).toEqual(['804 K', '803,712 parameters', '803712']);
    expect([size(lstm).textContent, size(lstm).getAttribute('title'), size(lstm).getAttribute('data-parameters')]).toEqual(['2.3 M', '2,345,678 parameters', '2345678']);
    expect(within(card).getByRole('columnheader', { name: 'Parameters' })).toBeTruthy();
    expect(within(card).getByRole('columnheader', { name: 'Best bleu' })).toBeTruthy();
    expect(urls).toContain('/api/v1/trials/11/metrics?kind=training&maxPoints=200');
    // the arch is a varying hyperparameter: a column of the trials table too
    const trialsTable = screen.getByTestId('trials-table');
    expect(within(trialsTable).getByRole('columnheader', { name: /arch/ })).toBeTruthy();
  });

  it('shows the range of an arch whose trials differ in size, and a dash for one that reported none', async () => {
    stubExperiment(SWEEP_YAML, [T(11, 'lstm_small', 21.5, 5), T(12, 'transformer_tiny', 27.25, 12.5), T(13, 'lstm_small', 23, 7)], { 11: [1000], 12: [5000], 13: [3000] }, { 11: 1200000, 13: 48213 });
    render(<ExperimentPage id={5} route={parseHash('#/experiments/5')} />);
    const card = await screen.findByTestId('arch-comparison');
    await waitFor(() => expect(within(card).getAllByTestId('arch-parameters')[1].textContent).toBe('48 K – 1.2 M'));
    const [tiny, lstm] = within(card).getAllByTestId('arch-parameters');
    expect(lstm.getAttribute('title')).toBe('48,213 to 1,200,000 parameters (its trials differ in size)');
    expect(lstm.getAttribute('data-parameters')).toBeNull();
    expect([tiny.textContent, tiny.getAttribute('title')]).toEqual(['–', 'no trial of this arch reported parameters']);
  });

  it('is not shown when the trials train one arch, and reads no throughput then', async () => {
    const urls = stubExperiment('name: lstm\nhyperparameters:\n  arch: lstm_small\n  lr: {type: categorical, vals: [0.001, 0.002]}\n', [T(11, 'lstm_small', 21.5, 5), T(13, 'lstm_small', 23, 7)], {});
    render(<ExperimentPage id={5} route={parseHash('#/experiments/5')} />);
    await screen.findByTestId('trials-table');
    await waitFor(() => expect(urls.some((u) => u.includes('kind=validation'))).toBe(true));
    expect(screen.queryByTestId('arch-comparison')).toBeNull();
    expect(urls.filter((u) => u.includes('kind=training'))).toEqual([]);
  });

  it('shows a Slurm trial\'s job id under its state, and where each trial ran, in the trials table', async () => {
    stubExperiment(SWEEP_YAML, [
      T(11, 'lstm_small', 21.5, 5, { jobId: '812', hosts: ['slurm:node[1-2]'] }),
      T(12, 'transformer_tiny', undefined, 0, { state: 'TRIAL_STATE_QUEUED', endTime: undefined, pendingReason: 'Slurm: Priority (job 813)', jobId: '813' }),
      T(13, 'lstm_small', 20, 3, { hosts: ['e2e-agent-1', 'e2e-agent-0'] }),
    ], {});
    window.location.hash = '#/experiments/5';
    const Page = () => <ExperimentPage id={5} route={useRoute()} />; // follows the sort in the URL
    render(<Page />);
    const table = await screen.findByTestId('trials-table');
    const row = (id: string) => table.querySelector(`[data-testid="trial-row"][data-id="${id}"]`) as HTMLElement;
    expect(within(row('11')).getByTestId('trial-job-id').textContent).toBe('job 812');
    expect(within(row('12')).getByTestId('trial-job-id').textContent).toBe('job 813');
    expect(within(row('12')).getByTestId('pending-reason').textContent).toBe('Slurm: Priority (job 813)');
    expect(within(row('11')).getByTestId('trial-hosts').textContent).toBe('node[1-2] (Slurm)');
    expect(within(row('12')).getByTestId('trial-hosts').textContent).toBe('–'); // not started yet
    expect(within(row('13')).getByTestId('trial-hosts').textContent).toBe('e2e-agent-1, e2e-agent-0'); // rank order kept
    // sorted by where they ran: agents before Slurm nodes by name, the trial that has not run last
    fireEvent.click(within(table).getByRole('button', { name: /Ran on/ }));
    await waitFor(() => expect(window.location.hash).toContain('tsort=hosts'));
    await waitFor(() => expect([...screen.getByTestId('trials-table').querySelectorAll('[data-testid="trial-row"]')].map((r) => r.getAttribute('data-id'))).toEqual(['13', '11', '12']));
  });
});
