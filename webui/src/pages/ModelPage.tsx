// One model of the registry (read-only): its description, labels, owner and workspace, and its
// versions: the checkpoint, the trial and experiment it came from (links to their pages), the
// trial's best and latest value of the experiment's searcher metric, notes, creator and time.
// Everything comes from the one GetModel request: each of its versions carries its
// metric, direction, best and latest values and checkpoint path, so the page asks nothing per
// version; a version without them shows "–" there. Serve on a version starts a server for it with
// the master's defaults (Servers.tsx); the cluster page lists it.
import { useState } from 'react';
import { api } from '../api/client';
import type { ModelVersion, Serving } from '../api/types';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { formatDateTime, formatMetric } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { ModelLabels } from './ModelsList';
import { ServeButton, ServeStarted } from './Servers';

export function ModelPage({ name }: { name: string }) {
  const model = usePolling((s) => api.getModel(name, s), [name], 0);
  const [started, setStarted] = useState<Serving>();
  const versions = model.data?.versions ?? [];
  const newestFirst = [...versions].sort((a, b) => b.version - a.version);

  if (model.loading && !model.data) return <Skeleton rows={8} />;
  if (!model.data) return <ErrorBanner error={model.error} onRetry={model.reload} what={`Model "${name}"`} />;
  const m = model.data.model;
  const metric = newestFirst.find((v) => v.metric)?.metric ?? '';

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
                <VersionRow key={v.version} model={m.name || name} v={v} onServing={setStarted} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function VersionRow({ model, v, onServing }: { model: string; v: ModelVersion; onServing: (s: Serving) => void }) {
  return (
    <tr data-testid="version-row" data-version={v.version}>
      <td className="strong">v{v.version}</td>
      <td className="mono small" data-testid="version-checkpoint" title={v.checkpointPath || undefined}>
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
      <td className="num" data-testid="version-best" title={v.metric ? `${v.metric} (${v.smallerIsBetter ? 'smaller' : 'larger'} is better)` : undefined}>
        {formatMetric(v.bestValidationMetric)}
      </td>
      <td className="num" data-testid="version-latest">
        {formatMetric(v.latestValidationMetric)}
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
