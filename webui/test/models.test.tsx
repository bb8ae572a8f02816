// The model registry: the client's calls and normalisers, the models list and the model page
// (with data, empty, and when the master answers an error).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanup, render, screen, waitFor, within } from '@testing-library/react';
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
const VERSIONS = [
  { modelId: '1', modelName: 'wmt-de-en', version: 1, checkpointUuid: 'uuid-1', experimentId: '3', trialId: '7', notes: 'first', creator: 'ada', createdAt: '2026-11-20T10:00:00Z' },
  { modelId: '1', modelName: 'wmt-de-en', version: 3, checkpointUuid: 'uuid-3', experimentId: '4', trialId: '12', creator: 'ada', createdAt: '2026-11-20T12:00:00Z' },
];
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
    expect(normModelVersion(VERSIONS[1])).toEqual({ modelId: 1, modelName: 'wmt-de-en', version: 3, checkpointUuid: 'uuid-3', experimentId: 4, trialId: 12, notes: '', creator: 'ada', createdAt: '2026-11-20T12:00:00Z' });
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
    const bare = normModelVersionDetail({ version: VERSIONS[0] });
    expect(bare.checkpoint).toBeUndefined();
    expect(bare.latestValidation).toBeUndefined();
    expect(bare.bestValidationMetric).toBeUndefined();
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

function stubModels(models: unknown[] | 'error', opts: { failVersion?: number } = {}) {
  const urls: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url);
    if (models === 'error') return json({ code: 14, message: 'database unreachable' }, 503);
    const v = url.match(/^\/api\/v1\/models\/([^/?]+)\/versions\/(\d+)/);
    if (v) {
      const ver = VERSIONS.find((x) => String(x.version) === v[2])!;
      if (Number(v[2]) === opts.failVersion) return json({ code: 13, message: 'boom' }, 500);
      return json(detail(ver, ver.version === 3 ? 31.25 : 27.5, ver.version === 3 ? 30.5 : 27.1));
    }
    const one = url.match(/^\/api\/v1\/models\/([^/?]+)$/);
    if (one) {
      const m = (models as { name: string }[]).find((x) => x.name === decodeURIComponent(one[1]));
      if (!m) return json({ code: 5, message: `model "${one[1]}" does not exist` }, 404);
      return json({ model: m, versions: m.name === 'wmt-de-en' ? VERSIONS : [] });
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
  it('shows the model and its versions, newest first, with source links and metrics', async () => {
    stubModels([WMT]);
    render(<ModelPage name="wmt-de-en" />);
    const rows = await screen.findAllByTestId('version-row');
    expect(rows.map((r) => r.getAttribute('data-version'))).toEqual(['3', '1']);
    expect(screen.getByTestId('model-description').textContent).toBe('German to English');
    await waitFor(() => expect(within(rows[0]).getByTestId('version-best').textContent).toBe('31.25'));
    expect(within(rows[0]).getByTestId('version-latest').textContent).toBe('30.5');
    expect(within(rows[0]).getByTestId('version-checkpoint').textContent).toBe('uuid-3');
    expect(within(rows[0]).getByRole('link', { name: 'Trial 12' }).getAttribute('href')).toBe('#/trials/12');
    expect(within(rows[0]).getByRole('link', { name: 'Experiment 4' }).getAttribute('href')).toBe('#/experiments/4');
    expect(within(rows[1]).getByText('first')).toBeTruthy();
    expect(screen.getByRole('columnheader', { name: 'Best bleu' })).toBeTruthy();
  });

  it('shows "–" for a version whose details fail, and the rest of the page', async () => {
    stubModels([WMT], { failVersion: 1 });
    render(<ModelPage name="wmt-de-en" />);
    const rows = await screen.findAllByTestId('version-row');
    await waitFor(() => expect(within(rows[0]).getByTestId('version-best').textContent).toBe('31.25'));
    await waitFor(() => expect(within(rows[1]).getByTestId('version-best').textContent).toBe('–'));
    expect(screen.queryByTestId('error-banner')).toBeNull();
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
