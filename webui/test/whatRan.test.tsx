// What ran (issue 49, item 1): the experiment page's "What ran" card for the native trainer (arch,
// precision, data) and for user code (entrypoint; the context's files, sizes, links, archive size
// and digest, and its download), the "unmanaged" badge on the page and in the list, and the trial
// page's own arch and precision, or entrypoint, with no native-only panel for a Core API trial.
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiClient } from '../src/api/client';
import { parseExperimentConfig } from '../src/lib/experimentConfig';
import { contextArchiveBlob, contextFileLabel, decodeBase64, shortDigest, shownFiles } from '../src/lib/experimentContext';
import { parseHash, useRoute } from '../src/lib/router';
import { ExperimentPage } from '../src/pages/ExperimentPage';
import { ExperimentsList } from '../src/pages/ExperimentsList';
import { TrialPage } from '../src/pages/TrialPage';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const NATIVE_YAML = [
  'name: lstm-vs-tiny',
  'precision: bf16',
  'data:',
  '  train: {src: /data/wmt/train.de, tgt: /data/wmt/train.en}',
  '  valid: {src: /data/wmt/valid.de, tgt: /data/wmt/valid.en}',
  'hyperparameters:',
  '  arch: {type: categorical, vals: [lstm_small, transformer_tiny]}',
  'searcher: {name: grid, metric: bleu, smaller_is_better: false}',
  '',
].join('\n');
const USER_CODE_YAML = 'name: pt\nentrypoint: [python3, train.py, --epochs, "3"]\nhyperparameters:\n  d_model: 128\nsearcher: {name: single, metric: accuracy}\n';
const SHA = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';
// 1,000 bytes 0..255 repeating: the "archive" the download must save as it is
const ARCHIVE = Uint8Array.from({ length: 1000 }, (_, i) => i % 256);
const ARCHIVE_B64 = btoa(String.fromCharCode(...ARCHIVE));
const CONTEXT = {
  files: [
    { path: 'train.py', size: '1234' },
    { path: 'model/net.py', size: '20480' },
    { path: 'data', linkTarget: '/mnt/shared/data' },
  ],
  fileBytes: '21714',
  archiveBytes: '1000',
  sha256: SHA,
};

const EXPERIMENTS: Record<string, Record<string, unknown>> = {
  '7': { id: '7', name: 'lstm-vs-tiny', state: 'EXPERIMENT_STATE_COMPLETED', metric: 'bleu', configYaml: NATIVE_YAML },
  '8': { id: '8', name: 'pt', state: 'EXPERIMENT_STATE_COMPLETED', metric: 'accuracy', configYaml: USER_CODE_YAML },
  '9': { id: '9', name: 'by-hand', state: 'EXPERIMENT_STATE_ACTIVE', metric: 'accuracy', unmanaged: true, configYaml: 'name: by-hand\nentrypoint: python3 run.py\nsearcher: {name: single, metric: accuracy}\n' },
  '10': { id: '10', name: 'long', state: 'EXPERIMENT_STATE_COMPLETED', metric: 'accuracy', configYaml: 'name: long\nentrypoint: ./run.sh\nsearcher: {name: single, metric: accuracy}\n' },
};
// 8 has the context above, 10 a long one; 9 (unmanaged) none: the master's 404
const CONTEXTS: Record<string, unknown> = {
  '8': CONTEXT,
  '10': { files: Array.from({ length: 250 }, (_, i) => ({ path: `f${String(i).padStart(3, '0')}.txt`, size: '10' })), fileBytes: '2500', archiveBytes: '900', sha256: SHA },
};
const TRIALS: Record<string, Record<string, unknown>> = {
  '71': { id: '71', experimentId: '7', state: 'TRIAL_STATE_COMPLETED', hparams: { arch: 'lstm_small' }, totalBatches: '100' },
  '81': { id: '81', experimentId: '8', state: 'TRIAL_STATE_COMPLETED', hparams: {}, totalBatches: '20' },
};

/** A master with EXPERIMENTS, CONTEXTS and TRIALS; returns the URLs asked. */
function stubMaster() {
  const urls: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url);
    const u = new URL(url, 'http://master');
    const p = u.pathname.replace(/^\/api\/v1/, '');
    if (p === '/experiments') return json({ experiments: Object.values(EXPERIMENTS).reverse(), pagination: { total: 4 } });
    let m = p.match(/^\/experiments\/(\d+)$/);
    if (m) return json({ experiment: EXPERIMENTS[m[1]] });
    m = p.match(/^\/experiments\/(\d+)\/context$/);
    if (m) {
      const c = CONTEXTS[m[1]];
      if (!c) return json({ code: 5, message: `experiment ${m[1]} has no context`, details: [] }, 404);
      return json(u.searchParams.get('includeArchive') === 'true' ? { ...c, archive: ARCHIVE_B64 } : c);
    }
    if (/^\/experiments\/\d+\/(trials|checkpoints)$/.test(p)) return json({ trials: [], checkpoints: [], pagination: { total: 0 } });
    m = p.match(/^\/trials\/(\d+)$/);
    if (m) return json({ trial: TRIALS[m[1]], metricGroups: ['training'] });
    m = p.match(/^\/trials\/(\d+)\/metrics$/);
    // the native trial's reports carry the model's parameter count, as sf-trainer's do
    const size = m?.[1] === '71' ? { parameters: 1234567 } : {};
    if (m) return json({ metrics: u.searchParams.get('kind') === 'training' ? [1, 2].map((i) => ({ trialId: m![1], kind: 'training', batches: String(10 * i), values: { loss: 3 - i, ...size } })) : [] });
    if (/^\/trials\/\d+\/logs$/.test(p)) return json({ logs: [] });
    if (p === '/resource-pools') return json({ resourcePools: [] });
    return json({ code: 5, message: `no route ${p}` }, 404);
  });
  return urls;
}

function experimentPage(id: number) {
  window.location.hash = `#/experiments/${id}`;
  return render(<ExperimentPage id={id} route={parseHash(`#/experiments/${id}`)} />);
}

describe('config and context helpers', () => {
  it('reads precision (fp32 when absent) and the data splits as docs/config.md names them', () => {
    const c = parseExperimentConfig(NATIVE_YAML)!;
    expect([c.precision, c.precisionSet]).toEqual(['bf16', true]);
    expect(c.data).toEqual([
      { split: 'train', files: [{ role: 'src', path: '/data/wmt/train.de' }, { role: 'tgt', path: '/data/wmt/train.en' }] },
      { split: 'valid', files: [{ role: 'src', path: '/data/wmt/valid.de' }, { role: 'tgt', path: '/data/wmt/valid.en' }] },
    ]);
    const lm = parseExperimentConfig('name: lm\ndata:\n  train: {text: corpus.txt}\n  test: {manifest: test.tsv}\n')!;
    expect([lm.precision, lm.precisionSet]).toEqual(['fp32', false]);
    expect(lm.data.map((d) => `${d.split}:${d.files.map((f) => `${f.role}=${f.path}`).join(',')}`)).toEqual(['train:text=corpus.txt', 'test:manifest=test.tsv']);
  });

  it('labels links, cuts the digest, lists the first 200 files and decodes the archive', () => {
    expect(contextFileLabel({ path: 'data', size: 0, linkTarget: '/mnt/shared/data' })).toBe('data → /mnt/shared/data');
    expect(contextFileLabel({ path: 'train.py', size: 5, linkTarget: '' })).toBe('train.py');
    expect(shortDigest(SHA)).toBe('9f86d081884c…');
    const many = Array.from({ length: 250 }, (_, i) => ({ path: String(i), size: 1, linkTarget: '' }));
    expect([shownFiles(many, false).length, shownFiles(many, true).length]).toEqual([200, 250]);
    expect([...decodeBase64(ARCHIVE_B64)]).toEqual([...ARCHIVE]);
    const blob = contextArchiveBlob(ARCHIVE_B64);
    expect([blob.size, blob.type]).toEqual([1000, 'application/gzip']);
  });

  it('asks the context route with includeArchive only when told to, and normalises the answer', async () => {
    const urls: string[] = [];
    const client = new ApiClient({ fetch: async (url) => (urls.push(url), json({ ...CONTEXT, archive: ARCHIVE_B64 })) });
    const c = await client.getExperimentContext(8);
    await client.getExperimentContext(8, true);
    expect(urls).toEqual(['/api/v1/experiments/8/context', '/api/v1/experiments/8/context?includeArchive=true']);
    expect(c.files).toEqual([
      { path: 'train.py', size: 1234, linkTarget: '' },
      { path: 'model/net.py', size: 20480, linkTarget: '' },
      { path: 'data', size: 0, linkTarget: '/mnt/shared/data' },
    ]);
    expect([c.fileBytes, c.archiveBytes, c.sha256]).toEqual([21714, 1000, SHA]);
  });
});

describe('experiment page: what ran', () => {
  it('shows a native sweep\'s archs, precision and data files, and asks for no context', async () => {
    const urls = stubMaster();
    experimentPage(7);
    const card = await screen.findByTestId('what-ran');
    expect(card.getAttribute('data-kind')).toBe('native');
    expect(within(card).getByTestId('what-ran-arch').textContent).toBe('lstm_small, transformer_tiny');
    expect(within(card).getByText('Archs (a sweep over 2)')).toBeTruthy();
    expect(within(card).getByTestId('what-ran-precision').textContent).toBe('bf16');
    expect(within(card).getAllByTestId('data-split').map((li) => li.textContent)).toEqual([
      'train: src /data/wmt/train.de, tgt /data/wmt/train.en',
      'valid: src /data/wmt/valid.de, tgt /data/wmt/valid.en',
    ]);
    expect(within(card).queryByTestId('context-files')).toBeNull();
    expect(screen.queryByTestId('unmanaged-badge')).toBeNull();
    await screen.findByTestId('config-yaml');
    expect(urls.filter((u) => u.includes('/context'))).toEqual([]);
  });

  it('says the default arch and precision of a native config that names neither', async () => {
    stubMaster();
    EXPERIMENTS['7'] = { ...EXPERIMENTS['7'], configYaml: 'name: quick\nsearcher: {name: single, metric: bleu}\n' };
    try {
      experimentPage(7);
      const card = await screen.findByTestId('what-ran');
      expect(within(card).getByTestId('what-ran-arch').textContent).toBe('transformer (default)');
      expect(within(card).getByTestId('what-ran-precision').textContent).toBe('fp32 (default)');
      expect(within(card).getByTestId('what-ran-data').textContent).toBe('none named');
    } finally {
      EXPERIMENTS['7'] = { ...EXPERIMENTS['7'], configYaml: NATIVE_YAML };
    }
  });

  it('shows user code\'s entrypoint and its context: files, sizes, a link, total bytes, archive size and digest', async () => {
    const urls = stubMaster();
    experimentPage(8);
    const card = await screen.findByTestId('what-ran');
    expect(card.getAttribute('data-kind')).toBe('user-code');
    expect(within(card).getByTestId('what-ran-entrypoint').textContent).toBe('python3 train.py --epochs 3');
    const table = await within(card).findByTestId('context-files');
    const rows = within(table).getAllByTestId('context-file').map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent).join(' | '));
    expect(rows).toEqual(['train.py | 1.2 KiB', 'model/net.py | 20 KiB', 'data → /mnt/shared/data | link']);
    expect(within(card).getByTestId('context-file-bytes').textContent).toBe('3 files, 21 KiB');
    expect(within(card).getByTestId('context-archive-bytes').textContent).toBe('1000 B (.tar.gz)');
    const sha = within(card).getByTestId('context-sha256');
    expect([sha.textContent, sha.getAttribute('title')]).toEqual(['9f86d081884c…', SHA]);
    expect(within(card).queryByTestId('context-show-all')).toBeNull();
    expect(urls.filter((u) => u.includes('/context'))).toEqual(['/api/v1/experiments/8/context']);
  });

  it('downloads the archive: the decoded bytes as a gzip Blob named experiment-8-context.tar.gz', async () => {
    const urls = stubMaster();
    const blobs: Blob[] = [];
    const createObjectURL = vi.fn((b: Blob) => (blobs.push(b), 'blob:context'));
    // jsdom has no object URLs: the test's own, removed again below
    Object.assign(URL, { createObjectURL, revokeObjectURL: vi.fn() });
    const saved: { name: string; href: string }[] = [];
    vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      saved.push({ name: this.download, href: this.getAttribute('href') ?? '' });
    });
    experimentPage(8);
    const button = await screen.findByTestId('context-download', {}, { timeout: 5000 });
    expect(button.textContent).toBe('Download context');
    await act(async () => void fireEvent.click(button));
    await waitFor(() => expect(screen.getByTestId('context-download-status').textContent).toBe('Saved experiment-8-context.tar.gz (1000 B)'));
    expect(urls).toContain('/api/v1/experiments/8/context?includeArchive=true');
    expect(saved).toEqual([{ name: 'experiment-8-context.tar.gz', href: 'blob:context' }]);
    expect(blobs).toHaveLength(1);
    expect([blobs[0].size, blobs[0].type]).toEqual([1000, 'application/gzip']);
    expect([...new Uint8Array(await blobs[0].arrayBuffer())]).toEqual([...ARCHIVE]);
    delete (URL as { createObjectURL?: unknown }).createObjectURL;
    delete (URL as { revokeObjectURL?: unknown }).revokeObjectURL;
  });

  it('says "No context uploaded" for user code whose context answers 404, and badges an unmanaged experiment', async () => {
    stubMaster();
    experimentPage(9);
    const card = await screen.findByTestId('what-ran');
    expect(within(card).getByTestId('what-ran-entrypoint').textContent).toBe('python3 run.py');
    expect((await within(card).findByTestId('context-none')).textContent).toBe('No context uploaded.');
    expect(within(card).queryByTestId('context-download')).toBeNull();
    expect(screen.queryByTestId('error-banner')).toBeNull();
    const head = screen.getByRole('heading', { level: 1 }).parentElement!;
    expect(within(head).getByTestId('unmanaged-badge').textContent).toBe('unmanaged');
  });

  it('lists the first 200 of a long context with a toggle for all of them', async () => {
    stubMaster();
    experimentPage(10);
    const table = await screen.findByTestId('context-files');
    expect(within(table).getAllByTestId('context-file')).toHaveLength(200);
    const toggle = screen.getByTestId('context-show-all');
    expect(toggle.textContent).toBe('Show all 250');
    act(() => void fireEvent.click(toggle));
    expect(within(screen.getByTestId('context-files')).getAllByTestId('context-file')).toHaveLength(250);
    expect(toggle.textContent).toBe('Show the first 200');
  });
});

describe('experiment list: unmanaged', () => {
  it('badges only the unmanaged experiment in its name cell', async () => {
    stubMaster();
    window.location.hash = '#/experiments';
    const List = () => <ExperimentsList route={useRoute()} />;
    render(<List />);
    await screen.findAllByTestId('experiment-row');
    const badges = screen.getAllByTestId('unmanaged-badge');
    expect(badges.map((b) => [b.closest('tr')!.getAttribute('data-id'), b.textContent, b.closest('td')!.className])).toEqual([['9', 'unmanaged', 'col-name']]);
  });
});

describe('trial page: what ran', () => {
  it('shows a native trial\'s own arch, the precision and its model\'s parameter count', async () => {
    stubMaster();
    window.location.hash = '#/trials/71';
    render(<TrialPage id={71} route={parseHash('#/trials/71')} />);
    expect((await screen.findByTestId('trial-arch')).textContent).toBe('lstm_small');
    expect(screen.getByTestId('trial-precision').textContent).toBe('bf16');
    const size = await screen.findByTestId('trial-parameters');
    expect([size.textContent, size.getAttribute('title'), size.getAttribute('data-parameters')]).toEqual(['1.2 M', '1,234,567 parameters', '1234567']);
    expect(screen.queryByTestId('trial-entrypoint')).toBeNull();
  });

  it('shows a Core API trial\'s entrypoint and no native-only or empty panel', async () => {
    stubMaster();
    window.location.hash = '#/trials/81';
    render(<TrialPage id={81} route={parseHash('#/trials/81')} />);
    expect((await screen.findByTestId('trial-entrypoint')).textContent).toBe('python3 train.py --epochs 3');
    await screen.findByTestId('chart-training');
    expect(screen.queryByTestId('trial-arch')).toBeNull();
    expect(screen.queryByTestId('trial-precision')).toBeNull();
    expect(screen.queryByTestId('trial-parameters')).toBeNull();
    expect(screen.queryByTestId('chart-throughput')).toBeNull();
    expect(screen.queryByTestId('chart-loss-scale')).toBeNull();
    expect(screen.queryByText(/loss_scale|tokens_per_second/)).toBeNull();
    expect(screen.getByTestId('no-hparams').textContent).toBe('None: this trial was given no hyperparameters.');
  });
});
