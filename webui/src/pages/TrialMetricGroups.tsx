// A trial's metrics by group: how the trial page reads a group's rows (useTrialMetrics), and the
// sections of the groups its code named through the Core API (`report_metrics("inference", ...)`),
// one chart per numeric metric. Nothing here knows a group by name but those the trial page draws
// itself (the built-in two, and a speech trial's validation_transcripts: text, in its own card):
// a group the trial reports appears without a change to the dashboard.
import { api } from '../api/client';
import { BUILTIN_METRIC_GROUPS, type MetricGroup, type MetricReport } from '../api/types';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { MetricChart } from '../components/MetricChart';
import { metricKeys } from '../lib/chartData';
import { usePolling, type Loaded } from '../lib/hooks';
import { TRANSCRIPTS_GROUP } from '../lib/transcripts';

/** Points asked from the master per metric group (it downsamples evenly above this). */
export const TRIAL_MAX_POINTS = 5000;
/** How often the rows of a live trial (queued or running) are asked again. */
export const TRIAL_METRICS_POLL_MS = 5000;

/** The rows of one metric group of a trial, asked again every TRIAL_METRICS_POLL_MS while `live`
 *  (once otherwise). The last good rows are kept while a refresh fails. */
export function useTrialMetrics(trialId: number, group: MetricGroup, live: boolean): Loaded<MetricReport[]> {
  return usePolling((s) => api.getTrialMetrics(trialId, group, TRIAL_MAX_POINTS, s), [trialId, group], live ? TRIAL_METRICS_POLL_MS : 0);
}

/** The groups the trial page shows in views of their own, not as charts here. */
const OWN_VIEW_GROUPS: readonly string[] = [...BUILTIN_METRIC_GROUPS, TRANSCRIPTS_GROUP];

interface GroupsProps {
  trialId: number;
  /** The trial's groups as the master lists them; the built-in ones are skipped here. */
  groups: readonly string[];
  live: boolean;
  xMode: 'batches' | 'time';
  logY: boolean;
}

/** One section per group other than `training` and `validation`, in the master's order; nothing
 *  for a trial that reported none. */
export function TrialMetricGroups({ groups, ...rest }: GroupsProps) {
  const own = groups.filter((g) => !OWN_VIEW_GROUPS.includes(g));
  return (
    <>
      {own.map((g) => (
        <MetricGroupSection key={g} group={g} {...rest} />
      ))}
    </>
  );
}

/** A group's section (`group-NAME`), titled with its name: one chart (`chart-group-NAME-METRIC`)
 *  per numeric metric its rows carry. */
function MetricGroupSection({ trialId, group, live, xMode, logY }: Omit<GroupsProps, 'groups'> & { group: string }) {
  const rows = useTrialMetrics(trialId, group, live);
  const reports = rows.data ?? [];
  const keys = metricKeys(reports);
  const headingId = `group-${group}-title`;
  return (
    <section data-testid={`group-${group}`} aria-labelledby={headingId}>
      <h3 id={headingId} className="section-h">
        {group}
      </h3>
      <ErrorBanner error={rows.error} onRetry={rows.reload} what={`Metric group ${group}`} />
      {rows.loading && !rows.data ? (
        <Skeleton rows={3} height={30} />
      ) : keys.length === 0 ? (
        !rows.error &&
        (reports.length === 0 ? (
          <Empty>No {group} metrics reported yet.</Empty>
        ) : (
          <Empty>
            {reports.length} {group} report{reports.length === 1 ? '' : 's'}, none with a number to chart (read them with <code>sf trial metrics {trialId} --group {group}</code>).
          </Empty>
        ))
      ) : (
        <div className="grid-2">
          {keys.map((k) => (
            <MetricChart key={k} testId={`chart-group-${group}-${k}`} title={group} reports={reports} metric={k} xMode={xMode} logY={logY} />
          ))}
        </div>
      )}
    </section>
  );
}
