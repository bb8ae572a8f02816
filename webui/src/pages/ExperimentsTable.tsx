// The experiments table (also rendered by the render bench with 1,000 rows).
import type { Experiment } from '../api/types';
import { ExperimentActions } from '../components/actions';
import { ProgressBar, SortHeader, StateBadge } from '../components/common';
import { durationBetween, formatDateTime, formatDuration, formatMetric } from '../lib/format';
import { sortRows, type SortDir } from '../lib/sort';

export const EXPERIMENT_COLUMNS: { key: string; label: string; server?: string }[] = [
  { key: 'id', label: 'ID', server: 'id' },
  { key: 'name', label: 'Name', server: 'name' },
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

export function ExperimentsTable(props: {
  rows: Experiment[];
  sort: { key: string; dir: SortDir };
  onSort: (col: string) => void;
  onChanged: () => void;
  now: number;
}) {
  return (
    <div className="table-wrap">
      <table className="table" data-testid="experiments-table" data-rows={props.rows.length}>
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
        <tbody>
          {props.rows.map((e) => (
            <tr key={e.id} data-testid="experiment-row" data-id={e.id} data-state={e.state}>
              <td className="col-id num">
                <a href={`#/experiments/${e.id}`}>{e.id}</a>
              </td>
              <td className="col-name">
                <a href={`#/experiments/${e.id}`} className="strong">
                  {e.name || `experiment ${e.id}`}
                </a>
                {e.archived && <span className="tag">archived</span>}
                <div className="muted small">{e.searcher}</div>
              </td>
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
              <td className="col-owner">{e.owner || '–'}</td>
              <td className="col-start">{formatDateTime(e.startTime)}</td>
              <td className="col-duration num">{formatDuration(durationBetween(e.startTime, e.endTime, props.now))}</td>
              <td className="col-actions">
                <ExperimentActions exp={e} onDone={props.onChanged} compact />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
