// The model registry: the client's calls and normalisers, the models list and the model page
// (with data, empty, and when the master answers an error).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanup, render, screen, within } from '@testing-library/react';
import { ApiClient, normModel, normModelVersion, normModelVersionDetail } from '../src/api/client';
import { parseHash } from '../src/lib/router';
import { ModelPage } from '../src/pages/ModelPage';
import { ModelsList } from '../src/pages/ModelsList';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const WMT = { id: '1', name: 'wmt-de-en', description: 'German to English', labels: ['nlp', 'prod'], owner: 'ada', workspace: 'nlp', numVersions: 2, latestVersion: 3, createdAt: '2026-11-20T08:00:00Z' };
// GetModel's versions carry the source trial's results and the checkpoint's path (fields 10-14)
const VERSIONS = [
  { modelId: '1', modelName: 'wmt-de-en', version: 1, checkpointUuid: 'uuid-1', experimentId: '3', trialId: '7', notes: 'first', creator: 'ada', createdAt: '2026-11-20T10:00:00Z', metric: 'bleu', bestValidationMetric: 27.5, latestValidationMetric: 27.1, checkpointPath: '/ckpt/uuid-1' },
  { modelId: '1', modelName: 'wmt-de-en', version: 3, checkpointUuid: 'uuid-3', experimentId: '4', trialId: '12', creator: 'ada', createdAt: '2026-11-20T12:00:00Z', metric: 'bleu', bestValidationMetric: 31.25, latestValidationMetric: 30.5, checkpointPath: '/ckpt/uuid-3' },
];
/** A version as a master gives it when the source trial has no validation and the checkpoint no
 *  known path: proto3 leaves the defaults and the unset optionals out. */
const bare = ({ metric, bestValidationMetric, latestValidationMetric, checkpointPath, ...v }: (typeof VERSIONS)[number]) => v;
const detail = (v: (typeof VERSIONS)[number], best: number, latest: number) => ({
  version: v,
  checkpoint: { uuid: v.checkpointUuid, trialId: v.trialId, experimentId: v.experimentId, batches: '1000', state: 'ACTIVE' },
  metric: 'bleu',
  bestValidationMetric: best,
  latestValidationMetric: latest,
  latestValidation: { trialId: v.trialId, batches: '1000', kind: 'validation', values: { bleu: latest } },
});

describe('model normalisers', () => {
  it('fill in proto3 defaults and read int64 strings', () => {
    expect(normModel({ name: 'm' })).toEqual({ id: 0, name: 'm', description: '', labels: [], owner: '', workspace: '', archived: false, numVersions: 0, latestVersion: 0, createdAt: undefined, updatedAt: undefined });
    expect(normModel(WMT)).toMatchObject({ id: 1, labels: ['nlp', 'prod'], numVersions: 2, latestVersion: 3, workspace: 'nlp' });
    expect(normModelVersion(VERSIONS[1])).toEqual({
      modelId: 1, modelName: 'wmt-de-en', version: 3, checkpointUuid: 'uuid-3', experimentId: 4, trialId: 12, notes: '', creator: 'ada', createdAt: '2026-11-20T12:00:00Z',
      metric: 'bleu', smallerIsBetter: false, bestValidationMetric: 31.25, latestValidationMetric: 30.5, checkpointPath: '/ckpt/uuid-3',
    });
    expect(normModelVersion(bare(VERSIONS[0]))).toMatchObject({ metric: '', smallerIsBetter: false, bestValidationMetric: undefined, latestValidationMetric: undefined, checkpointPath: '' });
    expect(normModelVersion({ metric: 'loss', smallerIsBetter: true, bestValidationMetric: 'NaN' as never, latestValidationMetric: '0.5' as never })).toMatchObject({ metric: 'loss', smallerIsBetter: true, latestValidationMetric: 0.5 });
    expect(normModelVersion({ bestValidationMetric: 'NaN' as never }).bestValidationMetric).toBeNaN();
    // a malformed answer gives defaults, never a throw
    expect(normModel(null as never).labels).toEqual([]);
    expect(normModel({ labels: 'nlp' as never }).labels).toEqual([]);
  });

  it('read a version detail with its checkpoint and metrics, or without them', () => {
    const d = normModelVersionDetail(detail(VERSIONS[1], 31.25, 30.5));
    expect(d.version.version).toBe(3);
    expect(d.checkpoint).toMatchObject({ uuid: 'uuid-3', trialId: 12, experimentId: 4, batches: 1000 });
    expect(d).toMatchObject({ metric: 'bleu', smallerIsBetter: false, bestValidationMetric: 31.25, latestValidationMetric: 30.5 });
    expect(d.latestValidation?.values).toEqual({ bleu: 30.5 });
    const without = normModelVersionDetail({ version: bare(VERSIONS[0]) });
    expect(without.checkpoint).toBeUndefined();
    expect(without.latestValidation).toBeUndefined();
    expect(without.bestValidationMetric).toBeUndefined();
    expect(normModelVersionDetail({ bestValidationMetric: 'NaN' as never }).bestValidationMetric).toBeNaN();
  });
});

describe('ApiClient model calls', () => {
  it('call the generated routes with their query parameters, the name percent-encoded', async () => {
    const urls: string[] = [];
    const c = new ApiClient({
      fetch: async (url: string) => {
        urls.push(url);
        if (url.includes('/versions/')) return json(detail(VERSIONS[0], 1, 2));
        if (url.startsWith('/api/v1/models?')) return json({ models: [WMT], pagination: { total: 7 } });
        return json({ model: WMT, versions: VERSIONS });
      },
    });
    const l = await c.getModels({ name: 'wmt', includeArchived: true, sortBy: 'name', offset: 25, limit: 25 });
    expect(l.models[0].name).toBe('wmt-de-en');
    expect(l.pagination.total).toBe(7);
    const m = await c.getModel('a b');
    expect(m.versions.map((v) => v.version)).toEqual([1, 3]);
    await c.getModelVersion('wmt-de-en', 1);
    expect(urls).toEqual(['/api/v1/models?name=wmt&includeArchived=true&sortBy=name&offset=25&limit=25', '/api/v1/models/a%20b', '/api/v1/models/wmt-de-en/versions/1']);
  });
});

/** Stubs fetch with the model routes; returns the URLs asked for. GetModelVersion answers 500, so
 *  a page that still asked for it per version would show it. `bareVersion`: that version comes
 *  without the source trial's results and the checkpoint's path. */
function stubModels(models: unknown[] | 'error', opts: { bareVersion?: number } = {}) {
  const urls: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url);
    if (models === 'error') return json({ code: 14, message: 'database unreachable' }, 503);
    if (/^\/api\/v1\/models\/[^/?]+\/versions\//.test(url)) return json({ code: 13, message: 'GetModelVersion must not be asked' }, 500);
    const one = url.match(/^\/api\/v1\/models\/([^/?]+)$/);
    if (one) {
      const m = (models as { name: string }[]).find((x) => x.name === decodeURIComponent(one[1]));
      if (!m) return json({ code: 5, message: `model "${one[1]}" does not exist` }, 404);
      const versions = VERSIONS.map((v) => (v.version === opts.bareVersion ? bare(v) : v));
      return json({ model: m, versions: m.name === 'wmt-de-en' ? versions : [] });
    }
    if (url.startsWith('/api/v1/models')) return json({ models, pagination: { total: models.length } });
    return json({ code: 5, message: 'no route' }, 404);
  });
  return urls;
}

const listAt = (hash: string) => {
  window.location.hash = hash;
  return render(<ModelsList route={parseHash(hash)} />);
};

describe('ModelsList', () => {
  it('lists the models with labels, versions count, owner and workspace', async () => {
    const urls = stubModels([WMT, { id: '2', name: 'tiny-lm', owner: 'grace' }]);
    listAt('#/models');
    const rows = await screen.findAllByTestId('model-row');
    expect(rows.map((r) => r.getAttribute('data-name'))).toEqual(['wmt-de-en', 'tiny-lm']);
    const wmt = within(rows[0]);
    expect(wmt.getByText('German to English')).toBeTruthy();
    expect(wmt.getByTestId('model-labels').textContent).toBe('nlpprod');
    expect(wmt.getByTestId('model-versions').textContent).toBe('2');
    expect(wmt.getByText('ada')).toBeTruthy();
    expect(wmt.getByRole('link', { name: 'wmt-de-en' }).getAttribute('href')).toBe('#/models/wmt-de-en');
    expect(urls[0]).not.toContain('includeArchived');
  });

  it('asks for archived models and a name from the URL', async () => {
    const urls = stubModels([{ ...WMT, archived: true }]);
    listAt('#/models?archived=1&name=wmt');
    const row = await screen.findByTestId('model-row');
    expect(row.textContent).toContain('archived');
    expect(urls[0]).toContain('includeArchived=true');
    expect(urls[0]).toContain('name=wmt');
    expect((screen.getByTestId('model-filter-archived') as HTMLInputElement).checked).toBe(true);
  });

  it('says how to add a model when there is none, and that filters match nothing', async () => {
    stubModels([]);
    listAt('#/models');
    expect((await screen.findByTestId('empty-state')).textContent).toMatch(/No models yet.*sf model create/);
    cleanup();
    listAt('#/models?name=zzz');
    expect((await screen.findByTestId('empty-state')).textContent).toMatch(/No model matches/);
  });

  it("shows the master's error with Retry", async () => {
    stubModels('error');
    listAt('#/models');
    const banner = await screen.findByTestId('error-banner');
    expect(banner.textContent).toContain('database unreachable');
    expect(within(banner).getByRole('button', { name: 'Retry' })).toBeTruthy();
  });
});

describe('ModelPage', () => {
  it('shows the model and its versions, newest first, with source links and metrics, from GetModel alone', async () => {
    const urls = stubModels([WMT]);
    render(<ModelPage name="wmt-de-en" />);
    const rows = await screen.findAllByTestId('version-row');
    expect(rows.map((r) => r.getAttribute('data-version'))).toEqual(['3', '1']);
    expect(screen.getByTestId('model-description').textContent).toBe('German to English');
    expect(within(rows[0]).getByTestId('version-best').textContent).toBe('31.25');
    expect(within(rows[0]).getByTestId('version-best').getAttribute('title')).toBe('bleu (larger is better)');
    expect(within(rows[0]).getByTestId('version-latest').textContent).toBe('30.5');
    expect(within(rows[1]).getByTestId('version-best').textContent).toBe('27.5');
    expect(within(rows[1]).getByTestId('version-latest').textContent).toBe('27.1');
    expect(within(rows[0]).getByTestId('version-checkpoint').textContent).toBe('uuid-3');
    expect(within(rows[0]).getByTestId('version-checkpoint').getAttribute('title')).toBe('/ckpt/uuid-3');
    expect(within(rows[0]).getByRole('link', { name: 'Trial 12' }).getAttribute('href')).toBe('#/trials/12');
    expect(within(rows[0]).getByRole('link', { name: 'Experiment 4' }).getAttribute('href')).toBe('#/experiments/4');
    expect(within(rows[1]).getByText('first')).toBeTruthy();
    expect(screen.getByRole('columnheader', { name: 'Best bleu' })).toBeTruthy();
    expect(screen.getByRole('columnheader', { name: 'Latest bleu' })).toBeTruthy();
    // one request for the whole page: no GetModelVersion per version
    await new Promise((r) => setTimeout(r, 50));
    expect(urls).toEqual(['/api/v1/models/wmt-de-en']);
    expect(screen.queryByTestId('error-banner')).toBeNull();
  });

  it('shows "–" for a version without results, and the smaller-is-better direction', async () => {
    const urls = stubModels([WMT], { bareVersion: 1 });
    render(<ModelPage name="wmt-de-en" />);
    const rows = await screen.findAllByTestId('version-row');
    expect(within(rows[0]).getByTestId('version-best').textContent).toBe('31.25');
    expect(within(rows[1]).getByTestId('version-best').textContent).toBe('–');
    expect(within(rows[1]).getByTestId('version-best').getAttribute('title')).toBeNull();
    expect(within(rows[1]).getByTestId('version-latest').textContent).toBe('–');
    expect(within(rows[1]).getByTestId('version-checkpoint').getAttribute('title')).toBeNull();
    expect(screen.queryByTestId('error-banner')).toBeNull();
    expect(urls.filter((u) => u.includes('/versions/'))).toEqual([]);
    cleanup();
    vi.unstubAllGlobals();
    vi.stubGlobal('fetch', async () => json({ model: WMT, versions: [{ ...VERSIONS[1], metric: 'loss', smallerIsBetter: true, bestValidationMetric: 1.5 }] }));
    render(<ModelPage name="wmt-de-en" />);
    const best = await screen.findByTestId('version-best');
    expect(best.textContent).toBe('1.5');
    expect(best.getAttribute('title')).toBe('loss (smaller is better)');
    expect(screen.getByRole('columnheader', { name: 'Best loss' })).toBeTruthy();
  });

  it('says how to register a version when the model has none', async () => {
    stubModels([{ id: '2', name: 'tiny-lm' }]);
    render(<ModelPage name="tiny-lm" />);
    expect((await screen.findByTestId('empty-state')).textContent).toMatch(/No versions yet.*sf model register tiny-lm/);
  });

  it('says an unknown model was not found, and shows other errors with Retry', async () => {
    stubModels([WMT]);
    render(<ModelPage name="nope" />);
    expect((await screen.findByTestId('error-banner')).textContent).toMatch(/Model "nope" was not found.*does not exist/);
    cleanup();
    stubModels('error');
    render(<ModelPage name="wmt-de-en" />);
    const banner = await screen.findByTestId('error-banner');
    expect(banner.textContent).toContain('database unreachable');
    expect(within(banner).getByRole('button', { name: 'Retry' })).toBeTruthy();
  });
});
