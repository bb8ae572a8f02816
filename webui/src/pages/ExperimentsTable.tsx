// The experiments table (also rendered by the render bench with 1,000 rows). Above
// VIRTUAL_MIN_ROWS it renders only the rows near the viewport (fixed row height, spacer rows above
// and below), so a long list costs the same as a short one.
import { useLayoutEffect, useMemo, useRef, useState } from 'react';
import type { Experiment } from '../api/types';
import { ExperimentActions } from '../components/actions';
import { ProgressBar, SortHeader, StateBadge } from '../components/common';
import { archLabel, experimentArch } from '../lib/arch';
import { durationBetween, formatDateTime, formatDuration, formatMetric } from '../lib/format';
import { sortRows, type SortDir } from '../lib/sort';

export const EXPERIMENT_COLUMNS: { key: string; label: string; server?: string }[] = [
  { key: 'id', label: 'ID', server: 'id' },
  { key: 'name', label: 'Name', server: 'name' },
  { key: 'arch', label: 'Arch' },
  { key: 'state', label: 'State', server: 'state' },
  { key: 'progress', label: 'Progress' },
  { key: 'best', label: 'Best metric', server: 'best_metric' },
  { key: 'owner', label: 'Owner' },
  { key: 'start', label: 'Started', server: 'start_time' },
  { key: 'duration', label: 'Duration' },
];

export function experimentSortKey(col: string, now: number): (e: Experiment) => unknown {
  switch (col) {
    case 'name':
      return (e) => e.name;
    case 'state':
      return (e) => e.state;
    case 'arch':
      return (e) => archLabel(experimentArch(e.configYaml));
    case 'progress':
      return (e) => (e.numTrials > 0 ? e.numCompletedTrials / e.numTrials : undefined);
    case 'best':
      return (e) => e.bestValidationMetric;
    case 'owner':
      return (e) => e.owner;
    case 'start':
      return (e) => (e.startTime ? Date.parse(e.startTime) : undefined);
    case 'duration':
      return (e) => {
        const d = durationBetween(e.startTime, e.endTime, now);
        return Number.isFinite(d) ? d : undefined;
      };
    default:
      return (e) => e.id;
  }
}

/** Client-side order of one page; for server-sortable columns the server already ordered it,
 *  for the others the rows of the page are ordered here. */
export function orderPage(rows: Experiment[], col: string, dir: SortDir, now: number): Experiment[] {
  return sortRows(rows, experimentSortKey(col, now), dir);
}

export const VIRTUAL_MIN_ROWS = 150;
export const ROW_HEIGHT = 48;
const OVERSCAN = 12;

/** Rows [start, end) of a list of `count` rows of fixed height that are within the viewport
 *  (plus some overscan), given the top of the list relative to the viewport. */
export function visibleRange(count: number, listTop: number, viewport: number, rowHeight = ROW_HEIGHT, overscan = OVERSCAN): [number, number] {
  const start = Math.max(0, Math.floor(-listTop / rowHeight) - overscan);
  const end = Math.min(count, Math.max(start, Math.ceil((viewport - listTop) / rowHeight) + overscan));
  return [Math.min(start, count), end];
}

export function ExperimentsTable(props: {
  rows: Experiment[];
  sort: { key: string; dir: SortDir };
  onSort: (col: string) => void;
  onChanged: () => void;
  now: number;
  virtualize?: boolean; // default true; false keeps every row in the DOM
}) {
  const virtual = props.virtualize !== false && props.rows.length > VIRTUAL_MIN_ROWS;
  const body = useRef<HTMLTableSectionElement>(null);
  // first paint: the rows that fit a viewport from the top; corrected by the layout effect
  const [range, setRange] = useState<[number, number]>(() => visibleRange(props.rows.length, 0, typeof window === 'undefined' ? 800 : window.innerHeight || 800));
  useLayoutEffect(() => {
    if (!virtual) return;
    const update = () => {
      const top = body.current?.getBoundingClientRect().top ?? 0;
      const next = visibleRange(props.rows.length, top, window.innerHeight || 800);
      setRange((prev) => (prev[0] === next[0] && prev[1] === next[1] ? prev : next));
    };
    update();
    window.addEventListener('scroll', update, { passive: true });
    window.addEventListener('resize', update);
    return () => {
      window.removeEventListener('scroll', update);
      window.removeEventListener('resize', update);
    };
  }, [virtual, props.rows.length]);
  const [start, end] = virtual ? range : [0, props.rows.length];
  const shown = virtual ? props.rows.slice(start, end) : props.rows;
  // The rows' configs are read once per list answer, not on every scroll.
  const archs = useMemo(() => new Map(props.rows.map((e) => [e.id, experimentArch(e.configYaml)])), [props.rows]);
  return (
    <div className="table-wrap">
      <table className={`table ${virtual ? 'table-virtual' : ''}`} data-testid="experiments-table" data-rows={props.rows.length} aria-rowcount={props.rows.length + 1}>
        <caption className="sr-only">Experiments</caption>
        <thead>
          <tr>
            {EXPERIMENT_COLUMNS.map((c) => (
              <SortHeader key={c.key} label={c.label} col={c.key} sort={props.sort} onSort={props.onSort} className={`col-${c.key}`} />
            ))}
            <th scope="col" className="col-actions">
              Actions
            </th>
          </tr>
        </thead>
        <tbody ref={body}>
          {virtual && start > 0 && <tr aria-hidden="true" style={{ height: start * ROW_HEIGHT }} data-testid="spacer-top" />}
          {shown.map((e, i) => (
            <tr key={e.id} data-testid="experiment-row" data-id={e.id} data-state={e.state} aria-rowindex={start + i + 2}>
              <td className="col-id num">
                <a href={`#/experiments/${e.id}`}>{e.id}</a>
              </td>
              <td className="col-name">
                <a href={`#/experiments/${e.id}`} className="strong">
                  {e.name || `experiment ${e.id}`}
                </a>
                {e.archived && <span className="tag">archived</span>}
                {e.unmanaged && (
                  <span className="tag tag-unmanaged" data-testid="unmanaged-badge" title="a script started by hand reports into it">
                    unmanaged
                  </span>
                )}
                <div className="muted small">{e.searcher}</div>
              </td>
              <ArchCell arch={archs.get(e.id)!} />
              <td className="col-state">
                <StateBadge state={e.state} />
              </td>
              <td className="col-progress">
                <ProgressBar done={e.numCompletedTrials} total={e.numTrials} label={`Trials completed for experiment ${e.id}`} />
              </td>
              <td className="col-best num" title={e.metric}>
                {formatMetric(e.bestValidationMetric)}
                {e.metric && <span className="muted small"> {e.metric}</span>}
              </td>
              <td className="col-owner">
                {e.owner || '–'}
                {e.workspace && <div className="muted small">{e.workspace}</div>}
              </td>
              <td className="col-start">{formatDateTime(e.startTime)}</td>
              <td className="col-duration num">{formatDuration(durationBetween(e.startTime, e.endTime, props.now))}</td>
              <td className="col-actions">
                <ExperimentActions exp={e} onDone={props.onChanged} compact />
              </td>
            </tr>
          ))}
          {virtual && end < props.rows.length && <tr aria-hidden="true" style={{ height: (props.rows.length - end) * ROW_HEIGHT }} data-testid="spacer-bottom" />}
        </tbody>
      </table>
    </div>
  );
}

function ArchCell({ arch }: { arch: ReturnType<typeof experimentArch> }) {
  const label = archLabel(arch);
  const title = arch.kind === 'user-code' ? `user code: ${arch.entrypoint}` : arch.kind === 'native' && !arch.archs.length ? "no hyperparameters.arch: the native trainer's default" : label;
  return (
    <td className="col-arch" data-testid="experiment-arch" title={title}>
      {arch.kind === 'user-code' ? <span className="tag">{label}</span> : label}
    </td>
  );
}
