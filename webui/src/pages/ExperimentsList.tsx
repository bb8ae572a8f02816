// Experiments list: filter by state, name and arch, sort by any column, pagination, polling. The
// rows are asked with their configs (fields=config), which say what each one trains (lib/arch.ts);
// the master has no arch filter, so the arch filter narrows the page it answered.
import { useEffect, useMemo, useState } from 'react';
import { api } from '../api/client';
import { EXPERIMENT_STATES } from '../api/types';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { stateLabel, formatRelative } from '../lib/format';
import { useDebounced, usePolling } from '../lib/hooks';
import { archFilterOptions, archKeys, DEFAULT_ARCH, experimentArch, USER_CODE } from '../lib/arch';
import { canCreate } from '../lib/permissions';
import { useQueryState, type Route } from '../lib/router';
import { useSession } from '../lib/session';
import { nextSort, type SortDir } from '../lib/sort';
import { EXPERIMENT_COLUMNS, ExperimentsTable, orderPage } from './ExperimentsTable';

const POLL_MS = 3000;

/** "trains lstm_small", "runs user code", "trains the default arch" (`plural`: "train ..."). */
function trains(arch: string, plural = false): string {
  const verb = arch === USER_CODE ? (plural ? 'run' : 'runs') : plural ? 'train' : 'trains';
  return `${verb} ${arch === DEFAULT_ARCH ? 'the default arch' : arch}`;
}

export function ExperimentsList({ route }: { route: Route }) {
  const [q, setQ] = useQueryState(route);
  const { me } = useSession();
  const state = q.get('state') ?? '';
  const nameParam = q.get('name') ?? '';
  const sortKey = q.get('sort') ?? 'id';
  const dir: SortDir = q.get('dir') === 'asc' ? 'asc' : 'desc';
  const limit = Number(q.get('limit') ?? 25) || 25;
  const page = Math.max(1, Number(q.get('page') ?? 1) || 1);
  const archived = q.get('archived') === '1';
  const arch = q.get('arch') ?? '';
  const [nameInput, setNameInput] = useState(nameParam);
  const name = useDebounced(nameInput, 300);
  useEffect(() => {
    if (name !== nameParam) setQ({ name, page: undefined });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [name]);

  const serverSort = EXPERIMENT_COLUMNS.find((c) => c.key === sortKey)?.server;
  const res = usePolling(
    (signal) =>
      api.getExperiments(
        {
          states: state ? state.split(',') : undefined,
          name: nameParam || undefined,
          sortBy: serverSort ?? 'id',
          descending: serverSort ? dir === 'desc' : true,
          offset: (page - 1) * limit,
          limit,
          includeArchived: archived || undefined,
          fields: ['config'],
        },
        signal,
      ),
    [state, nameParam, serverSort, dir, page, limit, archived],
    POLL_MS,
  );
  const now = res.updatedAt || Date.now();
  const page0 = res.data?.experiments;
  const archs = useMemo(() => (page0 ?? []).map((e) => experimentArch(e.configYaml)), [page0]);
  const archOptions = useMemo(() => archFilterOptions(archs, arch), [archs, arch]);
  const matching = useMemo(() => (page0 ?? []).filter((_, i) => !arch || archKeys(archs[i]).includes(arch)), [page0, archs, arch]);
  const rows = res.data ? (serverSort ? matching : orderPage(matching, sortKey, dir, now)) : [];
  const total = res.data?.pagination.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / limit));

  return (
    <section aria-labelledby="exp-h">
      <div className="page-head">
        <h1 id="exp-h">Experiments</h1>
        <span className="muted small" aria-live="polite">
          {res.updatedAt ? `updated ${formatRelative(new Date(res.updatedAt).toISOString())}` : ''}
        </span>
      </div>
      <form className="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select value={state} onChange={(e) => setQ({ state: e.target.value, page: undefined })} data-testid="filter-state">
            <option value="">All states</option>
            {EXPERIMENT_STATES.map((s) => (
              <option key={s} value={s}>
                {stateLabel(s)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Name
          <input type="search" value={nameInput} placeholder="filter by name" onChange={(e) => setNameInput(e.target.value)} data-testid="filter-name" />
        </label>
        <label>
          Arch
          <select value={arch} onChange={(e) => setQ({ arch: e.target.value || undefined })} data-testid="filter-arch">
            <option value="">All archs</option>
            {archOptions.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
          </select>
        </label>
        <label className="check">
          <input type="checkbox" checked={archived} onChange={(e) => setQ({ archived: e.target.checked ? '1' : undefined, page: undefined })} />
          Show archived
        </label>
        <label>
          Per page
          <select value={limit} onChange={(e) => setQ({ limit: e.target.value, page: undefined })}>
            {[10, 25, 50, 100].map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
      </form>
      <ErrorBanner error={res.error} onRetry={res.reload} />
      {res.loading && !res.data ? (
        <Skeleton rows={8} />
      ) : res.data && rows.length === 0 ? (
        <Empty>
          {arch && res.data.experiments.length > 0 ? (
            <>No experiment on this page {trains(arch)}: the arch filter narrows the page the master answered.</>
          ) : state || nameParam ? (
            <>No experiment matches these filters.</>
          ) : !canCreate(me).ok ? (
            <>No experiments yet. Your role is viewer: they will show here once someone submits one.</>
          ) : (
            <>
              No experiments yet. Submit one with <code>sf experiment create experiments/quickstart.yaml</code> or <code>POST /api/v1/experiments</code>.
            </>
          )}
        </Empty>
      ) : res.data ? (
        <>
          <ExperimentsTable
            rows={rows}
            sort={{ key: sortKey, dir }}
            onSort={(col) => {
              const n = nextSort({ key: sortKey, dir }, col);
              setQ({ sort: n.key, dir: n.dir });
            }}
            onChanged={res.reload}
            now={now}
          />
          <nav className="pager" aria-label="Pagination">
            <button type="button" className="btn btn-small" disabled={page <= 1} onClick={() => setQ({ page: page - 1 > 1 ? page - 1 : undefined })}>
              ‹ Previous
            </button>
            <span>
              Page {page} of {pages} · {total} experiment{total === 1 ? '' : 's'}
            </span>
            <button type="button" className="btn btn-small" disabled={page >= pages} onClick={() => setQ({ page: page + 1 })}>
              Next ›
            </button>
          </nav>
          {arch && (
            <p className="muted small" data-testid="arch-filter-note">
              {rows.length} of the {res.data.experiments.length} experiments on this page {trains(arch, true)} (the arch filter narrows each page).
            </p>
          )}
          {!serverSort && <p className="muted small">Sorted within this page ({EXPERIMENT_COLUMNS.find((c) => c.key === sortKey)?.label} is not a server-side sort key).</p>}
        </>
      ) : null}
    </section>
  );
}
