// Model registry fixtures and handlers for the in-memory stand-ins of the master: the dev stub
// (dev/stub-master.mjs, models over its seeded checkpoints) and the offline browser test
// (e2e/offline.e2e.mjs, fixed data). The routes are spelled as the API description spells them, so
// createRouter (dev/api-routes.mjs) refuses them if the description drops one. Read-only: the
// dashboard does not create or change models.

/** A store: { models: [wire Model], versions: [wire ModelVersion], source(version) → {checkpoint,
 *  metric, smallerIsBetter, bestValidationMetric, latestValidationMetric, latestValidation} }. */
export function fixedModelStore() {
  const t = (h) => new Date(Date.UTC(2026, 10, 20, h)).toISOString();
  const models = [
    { id: '1', name: 'wmt-de-en', description: 'German to English', labels: ['nlp', 'prod'], owner: 'ada', workspace: 'nlp', numVersions: 2, latestVersion: 3, createdAt: t(8), updatedAt: t(12) },
    { id: '2', name: 'tiny-lm', description: '', labels: [], owner: 'grace', workspace: 'Uncategorized', numVersions: 0, latestVersion: 0, createdAt: t(9), updatedAt: t(9) },
    { id: '3', name: 'old-baseline', description: 'Retired', labels: ['nlp'], owner: 'alan', workspace: 'Uncategorized', archived: true, numVersions: 0, createdAt: t(1), updatedAt: t(2) },
  ];
  const uuid = (n) => `1f3c0000-0000-4000-8000-00000000000${n}`;
  const versions = [
    { modelId: '1', modelName: 'wmt-de-en', version: 1, checkpointUuid: uuid(1), experimentId: '3', trialId: '7', notes: 'first good run', creator: 'ada', createdAt: t(10) },
    { modelId: '1', modelName: 'wmt-de-en', version: 3, checkpointUuid: uuid(3), experimentId: '4', trialId: '12', notes: '', creator: 'ada', createdAt: t(12) },
  ];
  const results = { 1: [27.5, 27.1], 3: [31.25, 30.5] };
  return {
    models,
    versions,
    source: (v) => ({
      checkpoint: { uuid: v.checkpointUuid, trialId: v.trialId, experimentId: v.experimentId, batches: '1000', path: `/var/lib/steadfast/checkpoints/${v.checkpointUuid}`, size: '123456789', state: 'ACTIVE', time: v.createdAt },
      metric: 'bleu',
      smallerIsBetter: false,
      bestValidationMetric: results[v.version]?.[0],
      latestValidationMetric: results[v.version]?.[1],
      latestValidation: { trialId: v.trialId, batches: '1000', kind: 'validation', values: { bleu: results[v.version]?.[1] }, time: v.createdAt },
    }),
  };
}

/** A version as GetModel lists it: the wire ModelVersion with the source trial's results and the
 *  checkpoint's path (ModelVersion fields 10-14), defaults and unset optionals left out as proto3
 *  JSON does. */
export function listedVersion(store, v) {
  const src = store.source(v) ?? {};
  const out = { ...v };
  if (src.metric) out.metric = src.metric;
  if (src.smallerIsBetter) out.smallerIsBetter = true;
  if (typeof src.bestValidationMetric === 'number') out.bestValidationMetric = src.bestValidationMetric;
  if (typeof src.latestValidationMetric === 'number') out.latestValidationMetric = src.latestValidationMetric;
  if (src.checkpoint?.path) out.checkpointPath = src.checkpoint.path;
  return out;
}

/** The GET model routes over `store`; `send(res, status, body)` and `err(res, status, code, msg)`
 *  as the stub writes answers. A model is named by its name or its id, as on the master. */
export function modelHandlers(store, { send, err }) {
  const find = (name) => store.models.find((m) => m.name === name || m.id === name);
  const withModel = (fn) => (req, res, url, params) => {
    const m = find(params.name);
    if (!m) return err(res, 404, 5, `model "${params.name}" does not exist`);
    return fn(req, res, url, m, params);
  };
  return {
    'GET /api/v1/models': (req, res, url) => {
      const q = url.searchParams;
      let list = [...store.models];
      const name = q.get('name') ?? '';
      const label = q.get('label') ?? '';
      const workspace = q.get('workspace') ?? '';
      if (name) list = list.filter((m) => m.name.includes(name));
      if (label) list = list.filter((m) => (m.labels ?? []).includes(label));
      if (workspace) list = list.filter((m) => m.workspace === workspace);
      if ((q.get('includeArchived') ?? q.get('include_archived')) !== 'true') list = list.filter((m) => !m.archived);
      const sortBy = q.get('sortBy') ?? q.get('sort_by') ?? 'id';
      const key = { id: (m) => Number(m.id), name: (m) => m.name, created_at: (m) => m.createdAt ?? '', updated_at: (m) => m.updatedAt ?? '' }[sortBy || 'id'];
      if (!key) return err(res, 400, 3, `sort_by: unknown sort key "${sortBy}"`);
      list.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      if (q.get('descending') === 'true') list.reverse();
      const offset = Number(q.get('offset') ?? 0), limit = Number(q.get('limit') ?? 0) || 100;
      return send(res, 200, { models: list.slice(offset, offset + limit), pagination: { offset, limit, total: list.length, startIndex: offset, endIndex: Math.min(list.length, offset + limit) } });
    },
    'GET /api/v1/models/{name}': withModel((req, res, url, m) =>
      send(res, 200, { model: m, versions: store.versions.filter((v) => v.modelId === m.id).sort((a, b) => a.version - b.version).map((v) => listedVersion(store, v)) }),
    ),
    'GET /api/v1/models/{name}/versions/{version}': withModel((req, res, url, m, params) => {
      const v = store.versions.find((x) => x.modelId === m.id && String(x.version) === params.version);
      if (!v) return err(res, 404, 5, `model "${m.name}" has no version ${params.version}`);
      return send(res, 200, { version: v, ...store.source(v) });
    }),
  };
}
