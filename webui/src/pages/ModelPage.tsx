// One model of the registry (read-only): its description, labels, owner and workspace, and its
// versions: the checkpoint, the trial and experiment it came from (links to their pages), the
// trial's best and latest value of the experiment's searcher metric, notes, creator and time.
// The versions' metrics come from GetModelVersion, one request per version (the first
// MAX_VERSION_DETAILS, newest first); a version whose request fails shows "–" there. Serve on a
// version starts a server for it with the master's defaults (Servers.tsx); the cluster page lists
// it.
import { useState } from 'react';
import { api } from '../api/client';
import type { ModelVersion, ModelVersionDetail, Serving } from '../api/types';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { formatDateTime, formatMetric } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { ModelLabels } from './ModelsList';
import { ServeButton, ServeStarted } from './Servers';

export const MAX_VERSION_DETAILS = 50;

export function ModelPage({ name }: { name: string }) {
  const model = usePolling((s) => api.getModel(name, s), [name], 0);
  const [started, setStarted] = useState<Serving>();
  const versions = model.data?.versions ?? [];
  const newestFirst = [...versions].sort((a, b) => b.version - a.version);
  const wanted = newestFirst.slice(0, MAX_VERSION_DETAILS).map((v) => v.version);
  const details = usePolling(
    async (s) => {
      const out = new Map<number, ModelVersionDetail | undefined>();
      await Promise.all(
        wanted.map(async (v) => {
          try {
            out.set(v, await api.getModelVersion(name, v, s));
          } catch (e) {
            if ((e as { kind?: string }).kind === 'aborted') throw e;
            out.set(v, undefined);
          }
        }),
      );
      return out;
    },
    [name, wanted.join(',')],
    0,
    true,
  );

  if (model.loading && !model.data) return <Skeleton rows={8} />;
  if (!model.data) return <ErrorBanner error={model.error} onRetry={model.reload} what={`Model "${name}"`} />;
  const m = model.data.model;
  const metric = [...(details.data?.values() ?? [])].find((d) => d?.metric)?.metric ?? '';

  return (
    <section aria-labelledby="model-title">
      <nav className="crumbs" aria-label="Breadcrumb">
        <a href="#/models">Models</a> › <span>{m.name || name}</span>
      </nav>
      <div className="page-head">
        <h1 id="model-title">
          {m.name || name} {m.id ? <span className="muted">#{m.id}</span> : null}
        </h1>
        {m.archived && <span className="tag" data-testid="model-archived">archived</span>}
      </div>
      <ErrorBanner error={model.error} onRetry={model.reload} what={`Model "${name}"`} />
      <div className="card" data-testid="model-summary">
        <h2>Summary</h2>
        <dl className="kv">
          <dt>Description</dt>
          <dd data-testid="model-description">{m.description || '–'}</dd>
          <dt>Labels</dt>
          <dd>
            <ModelLabels labels={m.labels} />
          </dd>
          <dt>Owner</dt>
          <dd>{m.owner || '–'}</dd>
          {m.workspace && (
            <>
              <dt>Workspace</dt>
              <dd>{m.workspace}</dd>
            </>
          )}
          <dt>Versions</dt>
          <dd>{versions.length}</dd>
          <dt>Created</dt>
          <dd>{formatDateTime(m.createdAt)}</dd>
        </dl>
      </div>
      <h2 className="section-h">Versions</h2>
      {started && <ServeStarted s={started} onDismiss={() => setStarted(undefined)} />}
      {versions.length === 0 ? (
        <Empty>
          No versions yet. Register a checkpoint with <code>sf model register {m.name || name} --checkpoint UUID</code>.
        </Empty>
      ) : (
        <div className="table-wrap">
          <table className="table" data-testid="versions-table">
            <caption className="sr-only">Versions of {m.name || name}</caption>
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Checkpoint</th>
                <th scope="col">Source</th>
                <th scope="col" className="num">Best {metric || 'metric'}</th>
                <th scope="col" className="num">Latest {metric || 'metric'}</th>
                <th scope="col">Notes</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {newestFirst.map((v) => (
                <VersionRow key={v.version} model={m.name || name} v={v} detail={details.data?.get(v.version)} loading={!details.data?.has(v.version) && wanted.includes(v.version)} onServing={setStarted} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function VersionRow({ model, v, detail, loading, onServing }: { model: string; v: ModelVersion; detail: ModelVersionDetail | undefined; loading: boolean; onServing: (s: Serving) => void }) {
  const blank = loading ? '…' : '–';
  return (
    <tr data-testid="version-row" data-version={v.version}>
      <td className="strong">v{v.version}</td>
      <td className="mono small" data-testid="version-checkpoint" title={detail?.checkpoint?.path || undefined}>
        {v.checkpointUuid || '–'}
      </td>
      <td data-testid="version-source">
        {v.trialId ? <a href={`#/trials/${v.trialId}`}>Trial {v.trialId}</a> : '–'}
        {v.experimentId ? (
          <>
            {' · '}
            <a href={`#/experiments/${v.experimentId}`}>Experiment {v.experimentId}</a>
          </>
        ) : null}
      </td>
      <td className="num" data-testid="version-best" title={detail?.metric ? `${detail.metric} (${detail.smallerIsBetter ? 'smaller' : 'larger'} is better)` : undefined}>
        {detail ? formatMetric(detail.bestValidationMetric) : blank}
      </td>
      <td className="num" data-testid="version-latest">
        {detail ? formatMetric(detail.latestValidationMetric) : blank}
      </td>
      <td className="col-name">{v.notes || <span className="muted">–</span>}</td>
      <td>
        {formatDateTime(v.createdAt)}
        {v.creator && <div className="muted small">by {v.creator}</div>}
      </td>
      <td>
        <ServeButton model={model} version={v.version} onStarted={onServing} />
      </td>
    </tr>
  );
}
