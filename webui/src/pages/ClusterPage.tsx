// Cluster: resource pools (slots, usage and queue length, GET /api/v1/resource-pools), agents and
// their slots (busy or free; held by a trial, or by a server, a task of its own whose slots have
// trialId 0 and allocationId "task7-r0-a1"), each GPU slot with its memory in use and utilisation (the
// NVML sample of the agent's last heartbeat, in the same listing), utilization over time as the master records it
// (GET /api/v1/cluster/utilization, so the chart is full right after a reload), and the queue of
// waiting (QUEUED) trials of active experiments; the servers the master schedules
// (`sf serve start`, GET /api/v1/servings; Servers.tsx), with their logs and Stop. `servers=all` in the URL also
// lists the stopped and failed ones; and every task, commands (`sf cmd run`), servers, notebooks,
// shells and experiments' trials alike, live and the latest ended (GET /api/v1/tasks; Tasks.tsx),
// with their logs and Kill (a trial's pause and kill are its experiment's page's). A
// pool Slurm places (docs/slurm.md) shows its nodes and slots per node from sinfo, and its queued
// trials their Slurm job ids.
import { useMemo } from 'react';
import type uPlot from 'uplot';
import { api } from '../api/client';
import type { Agent, ResourcePool, Slot, TaskKind, Trial } from '../api/types';
import { Empty, ErrorBanner, ProgressBar, Skeleton } from '../components/common';
import { UPlotChart } from '../components/UPlotChart';
import { utilizationSeries } from '../lib/chartData';
import { formatBytes, formatDateTime, formatRelative, stateLabel } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { parseHash, useQueryState, type Route } from '../lib/router';
import { isAgentPool, isSlurmPool, managerLabel, nodeCapacity, slotsPerNode } from '../lib/slurm';
import { revealServer, ServersSection, servingsUnsupported } from './Servers';
import { taskNoun } from './TaskLogs';
import { revealTask, TasksSection, tasksUnsupported } from './Tasks';

const POLL_MS = 3000;
const HISTORY_WINDOW_S = 24 * 3600; // what the chart shows
const HISTORY_POLL_MS = 15000; // the master writes one row per pool and minute

/** What holds a slot, from the master's listing: a trial's rank (trialId, with allocationId
 *  "t12-r0-a1"), a task of its own such as command or server 7 (allocationId "task7-r0-a1",
 *  trialId 0), an allocation of a kind this dashboard does not know (shown by its id), or nothing. */
export type SlotHolder = { kind: 'trial'; id: number } | { kind: 'task'; id: number } | { kind: 'other'; allocationId: string } | undefined;

export function slotHolder(s: Pick<Slot, 'trialId' | 'allocationId'>): SlotHolder {
  if (s.trialId) return { kind: 'trial', id: s.trialId };
  const task = /^task(\d+)-/.exec(s.allocationId);
  if (task) return { kind: 'task', id: Number(task[1]) };
  return s.allocationId ? { kind: 'other', allocationId: s.allocationId } : undefined;
}

/** The kind of each task the page knows of, by id: from the task list, and (for a master that
 *  lists servers but not tasks) from the server list. Not the list's trials: a trial's id is no
 *  task's (trial 7 and command 7 are different things). */
export type TaskKinds = ReadonlyMap<number, TaskKind>;

/** The slot's holder as the slots and GPU tables show it: a trial links to its page; a server to
 *  its row in the Servers card above, a command (or a task of unknown kind) to its row in Tasks. */
function SlotHolderLabel({ holder, kinds }: { holder: NonNullable<SlotHolder>; kinds: TaskKinds }) {
  switch (holder.kind) {
    case 'trial':
      return <a href={`#/trials/${holder.id}`}>trial {holder.id}</a>;
    case 'task': {
      const kind = kinds.get(holder.id);
      const server = kind === 'SERVER';
      const noun = taskNoun(kind);
      return (
        <a
          href="#/cluster"
          data-testid="slot-task"
          data-kind={kind ?? ''}
          title={`${noun.charAt(0).toUpperCase()}${noun.slice(1)} ${holder.id}, in ${server ? 'Servers' : 'Tasks'} above`}
          onClick={(e) => {
            // the hash holds the route (already the cluster page): scroll instead of navigating
            e.preventDefault();
            (server ? revealServer : revealTask)(holder.id);
          }}
        >
          {noun} {holder.id}
        </a>
      );
    }
    case 'other':
      return <span className="mono">{holder.allocationId}</span>;
  }
}

export function utilization(agents: Agent[]): { used: number; total: number } {
  let used = 0;
  let total = 0;
  for (const a of agents) {
    if (!a.connected) continue;
    for (const s of a.slots) {
      if (!s.enabled) continue;
      total++;
      if (slotHolder(s)) used++;
    }
  }
  return { used, total };
}

/** Every GPU slot of every agent, in the listing's order. */
export function gpuSlots(agents: Agent[]): { agent: Agent; slot: Slot }[] {
  return agents.flatMap((agent) => agent.slots.filter((slot) => slot.type === 'SLOT_TYPE_CUDA').map((slot) => ({ agent, slot })));
}

export function ClusterPage({ route }: { route?: Route }) {
  const [q, setQ] = useQueryState(route ?? parseHash(window.location.hash));
  const showStopped = q.get('servers') === 'all';
  const agents = usePolling((s) => api.getAgents(s), [], POLL_MS);
  const servers = usePolling((s) => api.getServings(showStopped, s), [showStopped], POLL_MS);
  const tasks = usePolling((s) => api.getTasks({ includeEnded: true }, s), [], POLL_MS);
  // A master without the servings (or task) routes says so in the card, not in the page's banner.
  const serversError = servingsUnsupported(servers.error) ? undefined : servers.error;
  const tasksError = tasksUnsupported(tasks.error) ? undefined : tasks.error;
  const taskKinds = useMemo<TaskKinds>(() => {
    const kinds = new Map<number, TaskKind>((servers.data ?? []).map((s) => [s.id, 'SERVER']));
    for (const t of tasks.data ?? []) if (t.kind !== 'TRIAL') kinds.set(t.id, t.kind);
    return kinds;
  }, [servers.data, tasks.data]);
  // a server stopped in one card is a task killed in the other: both lists are asked again
  const reloadTasks = () => {
    servers.reload();
    tasks.reload();
  };
  const pools = usePolling((s) => api.getResourcePools(s), [], POLL_MS);
  const queue = usePolling(
    async (s) => {
      const { experiments } = await api.getExperiments({ states: ['EXPERIMENT_STATE_ACTIVE'], limit: 50, sortBy: 'id' }, s);
      const lists = await Promise.all(experiments.map((e) => api.getExperimentTrials(e.id, s).then((ts) => ts.map((t) => ({ t, name: e.name, priority: e.priority })))));
      return lists.flat().filter((x) => x.t.state === 'TRIAL_STATE_QUEUED');
    },
    [],
    POLL_MS * 2,
  );
  const history = usePolling((s) => api.getClusterUtilization({ since: Date.now() / 1000 - HISTORY_WINDOW_S }, s), [], HISTORY_POLL_MS);
  const series = useMemo(() => utilizationSeries(history.data ?? []), [history.data]);
  const chartData = useMemo<uPlot.AlignedData>(() => [series.t, series.busy, series.busyMax], [series]);

  const u = utilization(agents.data ?? []);
  const slurmPools = (pools.data ?? []).filter(isSlurmPool);
  const slotsShown = series.total.reduce((m, v) => Math.max(m, v), u.total);
  return (
    <section aria-labelledby="cluster-h">
      <div className="page-head">
        <h1 id="cluster-h">Cluster</h1>
        {agents.data && (
          <span className="muted" data-testid="cluster-summary">
            {agents.data.filter((a) => a.connected).length} agent(s) connected · {u.used}/{u.total} slots busy
          </span>
        )}
        {slurmPools.length > 0 && (
          <span className="muted" data-testid="cluster-slurm-summary">
            · Slurm: {slurmPools.reduce((n, p) => n + p.nodes, 0)} node(s), {slurmPools.reduce((n, p) => n + p.usedSlots, 0)}/{slurmPools.reduce((n, p) => n + p.totalSlots, 0)} slots busy
          </span>
        )}
      </div>
      <ErrorBanner error={agents.error ?? pools.error ?? serversError ?? tasksError ?? queue.error ?? history.error} onRetry={() => { agents.reload(); pools.reload(); servers.reload(); tasks.reload(); queue.reload(); history.reload(); }} />
      <div className="card">
        <h2>Resource pools</h2>
        {pools.loading && !pools.data ? (
          <Skeleton rows={2} />
        ) : !pools.data ? null : pools.data.length === 0 ? (
          <Empty>No resource pool yet: agents bring their slots into one (<code>sf-agent --resource-pool NAME</code>).</Empty>
        ) : (
          <PoolsTable rows={pools.data} />
        )}
      </div>
      <ServersSection servers={servers} showStopped={showStopped} onShowStopped={(show) => setQ({ servers: show ? 'all' : undefined })} onChanged={reloadTasks} />
      <TasksSection tasks={tasks} onChanged={reloadTasks} />
      <div className="card">
        <h2>Agents and slots</h2>
        {agents.loading && !agents.data ? (
          <Skeleton rows={4} />
        ) : !agents.data ? null : agents.data.length === 0 && slurmPools.length > 0 ? (
          <Empty>
            No agents: {slurmPools.map((p) => p.name).join(', ')} run{slurmPools.length === 1 ? 's' : ''} trials as Slurm jobs on Slurm's nodes (Resource pools above).
          </Empty>
        ) : agents.data.length === 0 ? (
          <Empty>No agents have registered. Start one with <code>sf-agent --master …</code> or <code>sf deploy local up</code>.</Empty>
        ) : (
          <div className="table-wrap">
            <table className="table" data-testid="agents-table">
              <thead>
                <tr>
                  <th scope="col">Agent</th>
                  <th scope="col">Pool</th>
                  <th scope="col">Status</th>
                  <th scope="col">Slots</th>
                  <th scope="col">Last heartbeat</th>
                </tr>
              </thead>
              <tbody>
                {agents.data.map((a) => (
                  <tr key={a.id} data-testid="agent-row">
                    <td>
                      <div className="strong">{a.id}</div>
                      <div className="muted small">{a.hostname}{a.address ? ` · ${a.address}` : ''}{a.version ? ` · v${a.version}` : ''}</div>
                    </td>
                    <td data-label="Pool">{a.resourcePool || 'default'}</td>
                    <td>
                      <span className={`badge ${a.connected ? 'badge-active' : 'badge-bad'}`}>{a.connected ? 'Connected' : 'Disconnected'}</span>
                    </td>
                    <td>
                      <ul className="slots" aria-label={`Slots of ${a.id}`}>
                        {a.slots.map((s) => {
                          const holder = slotHolder(s);
                          return (
                            <li key={s.id} className={`slot ${!s.enabled ? 'slot-off' : holder ? 'slot-busy' : 'slot-free'}`} data-testid="slot" data-busy={holder ? 'true' : 'false'} title={s.device}>
                              <span className="slot-id">{s.id}</span> <span className="muted small">{stateLabel(s.type)}</span>{' '}
                              {!s.enabled ? 'disabled' : holder ? <SlotHolderLabel holder={holder} kinds={taskKinds} /> : 'free'}
                            </li>
                          );
                        })}
                        {a.slots.length === 0 && <li className="muted">no slots</li>}
                      </ul>
                    </td>
                    <td title={formatDateTime(a.lastHeartbeat)} data-label="Last heartbeat">{formatRelative(a.lastHeartbeat)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
      {agents.data && gpuSlots(agents.data).length > 0 && (
        <div className="card">
          <h2>GPUs</h2>
          <p className="muted small">Memory in use and utilisation of each GPU slot, as NVML reported them in the agent's last heartbeat (every second).</p>
          <GpuTable rows={gpuSlots(agents.data)} kinds={taskKinds} />
        </div>
      )}
      <div className="card">
        <h2>Utilization</h2>
        <p className="muted small">Busy slots per minute over the last {HISTORY_WINDOW_S / 3600} h, all pools, as the master records them (mean and peak of its samples).</p>
        {history.loading && !history.data ? (
          <Skeleton rows={3} height={30} />
        ) : !history.data ? (
          <Empty>No history: the master is not answering.</Empty>
        ) : series.t.length === 0 ? (
          <Empty>No samples recorded yet: the master records busy slots every few seconds while agents are connected.</Empty>
        ) : (
          <UPlotChart key="util" testId="chart-utilization" title="Busy slots" data={chartData} seriesLabels={['busy slots (mean)', 'busy slots (peak)']} xMode="time" height={200} stepped yRange={[0, Math.max(1, slotsShown)]} />
        )}
      </div>
      <div className="card">
        <h2>Queue</h2>
        {queue.loading && !queue.data ? (
          <Skeleton rows={3} />
        ) : !queue.data ? null : queue.data.length === 0 ? (
          <Empty>No trial is waiting for slots.</Empty>
        ) : (
          <QueueTable rows={queue.data} />
        )}
      </div>
    </section>
  );
}

function GpuTable({ rows, kinds }: { rows: { agent: Agent; slot: Slot }[]; kinds: TaskKinds }) {
  return (
    <div className="table-wrap">
      <table className="table" data-testid="gpus-table">
        <thead>
          <tr>
            <th scope="col">Agent</th>
            <th scope="col">Slot</th>
            <th scope="col">GPU</th>
            <th scope="col">Memory used</th>
            <th scope="col">Utilization</th>
            <th scope="col">Running</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ agent, slot }) => {
            const u = slot.usage;
            const holder = slotHolder(slot);
            const why = !agent.connected ? 'agent disconnected' : 'no sample: NVML gave no reading for this GPU';
            const total = slot.memoryTotalBytes > 0 ? formatBytes(slot.memoryTotalBytes) : '?';
            return (
              <tr key={`${agent.id}/${slot.id}`} data-testid="gpu-row" data-agent={agent.id} data-slot={slot.id}>
                <td>{agent.id}</td>
                <td className="strong">{slot.id}</td>
                <td data-label="GPU">
                  <div data-testid="gpu-name">{slot.device}</div>
                  {slot.uuid && <div className="muted small">{slot.uuid}</div>}
                </td>
                <td data-label="Memory used" data-testid="gpu-memory">
                  {u ? (
                    <ProgressBar done={u.memoryUsedBytes} total={slot.memoryTotalBytes} label={`Memory of ${slot.id}`} text={`${formatBytes(u.memoryUsedBytes)} / ${total}`} />
                  ) : (
                    <span className="muted" title={why}>– / {total}</span>
                  )}
                </td>
                <td data-label="Utilization" data-testid="gpu-util" title={u?.sampleTime ? `sampled ${formatDateTime(u.sampleTime)}` : why}>
                  {u ? <ProgressBar done={u.utilizationPercent} total={100} label={`Utilization of ${slot.id}`} text={`${u.utilizationPercent}%`} /> : <span className="muted">–</span>}
                </td>
                <td data-label="Running" data-testid="gpu-holder">{holder ? <SlotHolderLabel holder={holder} kinds={kinds} /> : 'free'}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function PoolsTable({ rows }: { rows: ResourcePool[] }) {
  return (
    <div className="table-wrap">
      <table className="table" data-testid="pools-table">
        <thead>
          <tr>
            <th scope="col">Pool</th>
            <th scope="col">Scheduler</th>
            <th scope="col">Agents / nodes</th>
            <th scope="col">Slots busy</th>
            <th scope="col">Running trials</th>
            <th scope="col">Queue</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((p) => (
            <tr key={p.name} data-testid="pool-row">
              <td className="strong">{p.name}</td>
              <td data-label="Scheduler" data-testid="pool-manager">
                {managerLabel(p)}
                {slotsPerNode(p) !== undefined && <div className="muted small" data-testid="pool-capacity" title="from sinfo: the nodes that take jobs, each with the pool's slots_per_node">{nodeCapacity(p)}</div>}
              </td>
              <td className="num" data-label="Agents / nodes" data-testid="pool-hosts">
                {isAgentPool(p) ? p.agents : `${p.nodes} node${p.nodes === 1 ? '' : 's'}`}
              </td>
              <td className="num" data-label="Slots busy" data-testid="pool-slots">{p.usedSlots}/{p.totalSlots}</td>
              <td className="num" data-label="Running trials">{p.runningTrials}</td>
              <td className="num" data-label="Queue" data-testid="pool-queue">
                {p.queuedTrials === 0 ? 'empty' : `${p.queuedTrials} trial${p.queuedTrials === 1 ? '' : 's'} (${p.queuedSlots} slot${p.queuedSlots === 1 ? '' : 's'})`}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function QueueTable({ rows }: { rows: { t: Trial; name: string; priority: number }[] }) {
  return (
    <div className="table-wrap">
      <table className="table" data-testid="queue-table">
        <thead>
          <tr>
            <th scope="col">Trial</th>
            <th scope="col">Experiment</th>
            <th scope="col">Priority</th>
            <th scope="col">Job</th>
            <th scope="col">Why it waits</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ t, name, priority }) => (
            <tr key={t.id}>
              <td><a href={`#/trials/${t.id}`}>trial {t.id}</a></td>
              <td><a href={`#/experiments/${t.experimentId}`}>{name || `experiment ${t.experimentId}`}</a></td>
              <td className="num">{priority}</td>
              <td className="mono" data-testid="queue-job-id" title={t.jobId ? 'its Slurm job: squeue -j, sacct -j' : 'not submitted to another manager'}>{t.jobId || '–'}</td>
              <td data-testid="pending-reason">{t.pendingReason || '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
