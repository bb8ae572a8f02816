// The trial page's Slurm card, for a trial of a pool Slurm places (docs/slurm.md): its pool and the
// pool's capacity from sinfo, its job id, the slots it asks for, while it waits or is held Slurm's
// reason, and the nodes its latest job ran on (Trial.hosts; for a job that started without them
// reported, as with an older master, the sacct command that lists them). A trial on agents has
// no such card: the page's Summary says which agents it ran on.
import type { ResourcePool, Trial } from '../api/types';
import { isSlurmHost, placeName } from '../lib/hosts';
import { configPool, configSlotsPerTrial, isSlurmPool, nodeCapacity, parseSlurmReason } from '../lib/slurm';

/** Whether the trial is Slurm's: its pool is a Slurm pool, or it has a job id, a Slurm reason or
 *  a Slurm node list among its hosts. */
export function isSlurmTrial(t: Trial, pool: ResourcePool | undefined): boolean {
  return (pool !== undefined && isSlurmPool(pool)) || t.jobId !== '' || parseSlurmReason(t.pendingReason) !== undefined || t.hosts.some(isSlurmHost);
}

/** The pool a trial's experiment asks for, as GET /resource-pools lists it (undefined: not listed,
 *  or a config that does not parse). */
export function trialPool(configYaml: string | undefined, pools: readonly ResourcePool[] | undefined): ResourcePool | undefined {
  if (configYaml === undefined) return undefined;
  const name = configPool(configYaml);
  return name === undefined ? undefined : pools?.find((p) => p.name === name);
}

export function TrialSlurmCard({ trial, configYaml, pools }: { trial: Trial; configYaml?: string; pools?: ResourcePool[] }) {
  const pool = trialPool(configYaml, pools);
  if (!isSlurmTrial(trial, pool)) return null;
  const reason = parseSlurmReason(trial.pendingReason);
  const jobId = trial.jobId || reason?.jobId || '';
  const slots = configYaml === undefined ? undefined : configSlotsPerTrial(configYaml);
  const waiting = trial.state === 'TRIAL_STATE_QUEUED' || trial.state === 'TRIAL_STATE_RUNNING';
  return (
    <div className="card" data-testid="trial-slurm">
      <h2>Slurm</h2>
      <dl className="kv">
        <dt>Pool</dt>
        <dd data-testid="trial-pool">
          {pool ? (
            <>
              {pool.name} <span className="muted">· </span>
              <span data-testid="trial-pool-capacity">
                {nodeCapacity(pool)}, {pool.usedSlots}/{pool.totalSlots} slots busy
              </span>
            </>
          ) : configYaml !== undefined ? (
            configPool(configYaml) ?? 'unknown'
          ) : (
            '–'
          )}
        </dd>
        <dt>Job id</dt>
        <dd className="mono" data-testid="trial-job-id">
          {jobId || <span className="muted">not submitted yet</span>}
        </dd>
        {slots !== undefined && (
          <>
            <dt>Slots</dt>
            <dd data-testid="trial-slots">
              {slots} ({slots === 1 ? 'one rank' : `${slots} ranks, one per slot`})
            </dd>
          </>
        )}
        {waiting && reason && (
          <>
            <dt>{trial.state === 'TRIAL_STATE_QUEUED' ? 'Pending' : 'Held'}</dt>
            <dd data-testid="slurm-reason">
              <span className="strong">{reason.reason}</span>
              {reason.detail && <div className="muted small">{reason.detail}</div>}
            </dd>
          </>
        )}
        <dt>Nodes</dt>
        <dd data-testid="trial-nodes">
          {trial.hosts.length ? (
            <span className="mono">{trial.hosts.map(placeName).join(', ')}</span>
          ) : jobId && trial.state !== 'TRIAL_STATE_QUEUED' ? (
            // A job that started without its nodes reported (an older master): sacct knows them.
            <>
              <code>sacct -j {jobId} -X -o NodeList</code> <span className="muted small">(the master did not report its nodes)</span>
            </>
          ) : (
            <span className="muted">none yet</span>
          )}
        </dd>
      </dl>
    </div>
  );
}
