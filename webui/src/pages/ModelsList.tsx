// Model registry, list (read-only): name, description, labels, versions, owner, workspace; filter
// by name (substring, on the master) and label, archived models on request, pagination. Models are
// created and versions registered with `sf model` (docs/registry.md).
import { useEffect, useState } from 'react';
import { api } from '../api/client';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { formatDateTime } from '../lib/format';
import { useDebounced, usePolling } from '../lib/hooks';
import { useQueryState, type Route } from '../lib/router';

const POLL_MS = 10000;

export function ModelLabels({ labels }: { labels: string[] }) {
  if (labels.length === 0) return <span className="muted">–</span>;
  return (
    <span className="labels" data-testid="model-labels">
      {labels.map((l) => (
        <span key={l} className="label">
          {l}
        </span>
      ))}
    </span>
  );
}

export function ModelsList({ route }: { route: Route }) {
  const [q, setQ] = useQueryState(route);
  const nameParam = q.get('name') ?? '';
  const label = q.get('label') ?? '';
  const archived = q.get('archived') === '1';
  const limit = Number(q.get('limit') ?? 25) || 25;
  const page = Math.max(1, Number(q.get('page') ?? 1) || 1);
  const [nameInput, setNameInput] = useState(nameParam);
  const name = useDebounced(nameInput, 300);
  useEffect(() => {
    if (name !== nameParam) setQ({ name, page: undefined });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [name]);

  const res = usePolling(
    (signal) =>
      api.getModels(
        { name: nameParam || undefined, label: label || undefined, includeArchived: archived || undefined, sortBy: 'name', offset: (page - 1) * limit, limit },
        signal,
      ),
    [nameParam, label, archived, page, limit],
    POLL_MS,
  );
  const rows = res.data?.models ?? [];
  const total = res.data?.pagination.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / limit));

  return (
    <section aria-labelledby="models-h">
      <div className="page-head">
        <h1 id="models-h">Models</h1>
      </div>
      <form className="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          Name
          <input type="search" value={nameInput} placeholder="filter by name" onChange={(e) => setNameInput(e.target.value)} data-testid="model-filter-name" />
        </label>
        {label && (
          <span className="muted small" data-testid="model-filter-label">
            Label <span className="label">{label}</span>{' '}
            <button type="button" className="btn btn-small" onClick={() => setQ({ label: undefined, page: undefined })}>
              Clear label
            </button>
          </span>
        )}
        <label className="check">
          <input type="checkbox" checked={archived} onChange={(e) => setQ({ archived: e.target.checked ? '1' : undefined, page: undefined })} data-testid="model-filter-archived" />
          Show archived
        </label>
      </form>
      <ErrorBanner error={res.error} onRetry={res.reload} />
      {res.loading && !res.data ? (
        <Skeleton rows={6} />
      ) : res.data && rows.length === 0 ? (
        <Empty>
          {nameParam || label ? (
            <>No model matches these filters.</>
          ) : (
            <>
              No models yet. Register a checkpoint with <code>sf model create NAME</code> and <code>sf model register NAME --checkpoint UUID</code>.
            </>
          )}
        </Empty>
      ) : res.data ? (
        <>
          <div className="table-wrap">
            <table className="table" data-testid="models-table">
              <caption className="sr-only">Models</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col" className="col-desc">Description</th>
                  <th scope="col">Labels</th>
                  <th scope="col" className="num">Versions</th>
                  <th scope="col" className="col-owner">Owner</th>
                  <th scope="col" className="col-workspace">Workspace</th>
                  <th scope="col" className="col-updated">Updated</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((m) => (
                  <tr key={m.id || m.name} data-testid="model-row" data-name={m.name} data-archived={m.archived ? 'true' : undefined}>
                    <td className="col-name">
                      <a href={`#/models/${encodeURIComponent(m.name)}`} className="strong">
                        {m.name}
                      </a>
                      {m.archived && <span className="tag">archived</span>}
                    </td>
                    <td className="col-desc">{m.description || <span className="muted">–</span>}</td>
                    <td>
                      <ModelLabels labels={m.labels} />
                    </td>
                    <td className="num" data-testid="model-versions">
                      {m.numVersions}
                    </td>
                    <td className="col-owner">{m.owner || '–'}</td>
                    <td className="col-workspace">{m.workspace || '–'}</td>
                    <td className="col-updated">{formatDateTime(m.updatedAt ?? m.createdAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <nav className="pager" aria-label="Pagination">
            <button type="button" className="btn btn-small" disabled={page <= 1} onClick={() => setQ({ page: page - 1 > 1 ? page - 1 : undefined })}>
              ‹ Previous
            </button>
            <span>
              Page {page} of {pages} · {total} model{total === 1 ? '' : 's'}
            </span>
            <button type="button" className="btn btn-small" disabled={page >= pages} onClick={() => setQ({ page: page + 1 })}>
              Next ›
            </button>
          </nav>
        </>
      ) : null}
    </section>
  );
}
