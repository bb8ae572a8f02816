// Slurm on the pages: a Slurm trial's card on the trial page (pool and capacity, job id, Slurm's
// reason, the nodes it ran on, or the sacct command for them when the master did not say), none
// for a trial on agents, whose Summary says which agents it ran on; and on the cluster page a
// Slurm pool's capacity, the Slurm summary, the queue's job ids and no "start an agent" advice.
import { act, cleanup, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseHash } from '../src/lib/router';
import { ClusterPage } from '../src/pages/ClusterPage';
import { TrialPage } from '../src/pages/TrialPage';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.location.hash = '';
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const POOLS = [
  { name: 'default', scheduler: 'priority', agents: 1, totalSlots: 2, usedSlots: 0 },
  { name: 'hpc', scheduler: 'slurm', nodes: 2, totalSlots: 4, usedSlots: 2, runningTrials: 1, queuedTrials: 1, queuedSlots: 2 },
];
const SLURM_YAML = 'name: on-slurm\nhyperparameters:\n  arch: transformer_tiny\nresources:\n  resource_pool: hpc\n  slots_per_trial: 2\n';

/** A master with trial 7 (`trial`) of experiment 3 (`yaml`), the pools above unless `pools`. */
function stubTrial(trial: Record<string, unknown>, yaml: string, pools: unknown = { resourcePools: POOLS }) {
  vi.stubGlobal('fetch', async (url: string) => {
    const u = new URL(url, 'http://master');
    switch (u.pathname) {
      case '/api/v1/trials/7':
        return json({ trial: { id: '7', experimentId: '3', ...trial } });
      case '/api/v1/experiments/3':
        return json({ experiment: { id: '3', name: 'on-slurm', metric: 'bleu', configYaml: yaml } });
      case '/api/v1/resource-pools':
        return pools ? json(pools) : json({ code: 7, message: 'denied' }, 403);
      case '/api/v1/trials/7/metrics':
      case '/api/v1/trials/7/logs':
        return json({ metrics: [], logs: [] });
      case '/api/v1/experiments/3/checkpoints':
        return json({ checkpoints: [] });
      default:
        return json({ code: 5, message: 'no route' }, 404);
    }
  });
}

const trialPage = () => render(<TrialPage id={7} route={parseHash('#/trials/7')} />);

describe('trial page: Slurm', () => {
  it('shows a queued Slurm trial\'s pool with its capacity, job id, slots and Slurm\'s reason, and no nodes yet', async () => {
    stubTrial({ state: 'TRIAL_STATE_QUEUED', jobId: '812', pendingReason: 'Slurm: Priority (job 812)' }, SLURM_YAML);
    trialPage();
    const card = await screen.findByTestId('trial-slurm');
    await waitFor(() => expect(within(card).getByTestId('trial-pool-capacity').textContent).toBe('2 nodes × 2 slots, 2/4 slots busy'));
    expect(within(card).getByTestId('trial-pool').textContent).toContain('hpc');
    expect(within(card).getByTestId('trial-job-id').textContent).toBe('812');
    expect(within(card).getByTestId('trial-slots').textContent).toBe('2 (2 ranks, one per slot)');
    expect(within(card).getByText('Pending')).toBeTruthy();
    expect(within(card).getByTestId('slurm-reason').textContent).toBe('Priority');
    expect(within(card).getByTestId('trial-nodes').textContent).toBe('none yet'); // a pending job has none
    expect(screen.queryByTestId('trial-hosts')).toBeNull(); // the Slurm card says where, not the Summary
    // the page's own "Waiting" line stays
    expect(screen.getByTestId('pending-reason').textContent).toBe('Waiting: Slurm: Priority (job 812)');
  });

  it('says why Slurm holds a running trial, and has no reason once it runs free', async () => {
    const held = 'Slurm: SUSPENDED (job 812): Slurm suspended it (scontrol suspend or gang scheduling); it holds its nodes and continues when Slurm resumes it';
    stubTrial({ state: 'TRIAL_STATE_RUNNING', jobId: '812', pendingReason: held }, SLURM_YAML);
    const { unmount } = trialPage();
    const reason = await screen.findByTestId('slurm-reason');
    expect(within(reason).getByText('SUSPENDED')).toBeTruthy();
    expect(reason.textContent).toContain('it holds its nodes and continues when Slurm resumes it');
    expect(screen.getByText('Held')).toBeTruthy();
    unmount();
    stubTrial({ state: 'TRIAL_STATE_COMPLETED', jobId: '812' }, SLURM_YAML);
    trialPage();
    const card = await screen.findByTestId('trial-slurm');
    expect(within(card).getByTestId('trial-job-id').textContent).toBe('812');
    expect(within(card).queryByTestId('slurm-reason')).toBeNull();
  });

  it('is Slurm\'s by its job id when the pools cannot be read, and not yet submitted by its pool', async () => {
    stubTrial({ state: 'TRIAL_STATE_COMPLETED', jobId: '77' }, SLURM_YAML, null);
    const { unmount } = trialPage();
    const card = await screen.findByTestId('trial-slurm');
    await waitFor(() => expect(within(card).getByTestId('trial-pool').textContent).toBe('hpc')); // from the config
    expect(within(card).getByTestId('trial-job-id').textContent).toBe('77');
    unmount();
    stubTrial({ state: 'TRIAL_STATE_QUEUED' }, SLURM_YAML);
    trialPage();
    const queued = await screen.findByTestId('trial-slurm'); // once the config and pools are read
    expect(within(queued).getByTestId('trial-job-id').textContent).toBe('not submitted yet');
    expect(within(queued).getByTestId('trial-nodes').textContent).toBe('none yet');
  });

  it('names the nodes its job ran on, kept after it ends, and the sacct command only when the master did not say', async () => {
    stubTrial({ state: 'TRIAL_STATE_RUNNING', jobId: '812', hosts: ['slurm:node[1-2]'] }, SLURM_YAML);
    const { unmount } = trialPage();
    const nodes = await screen.findByTestId('trial-nodes');
    expect(nodes.textContent).toBe('node[1-2]');
    expect(nodes.querySelector('code')).toBeNull();
    expect(screen.queryByTestId('trial-hosts')).toBeNull();
    unmount();
    // completed, and Slurm's pool unknown to the page (the pools cannot be read): Slurm's by its hosts
    stubTrial({ state: 'TRIAL_STATE_COMPLETED', hosts: ['slurm:node3'] }, 'name: x\n', null);
    const second = trialPage();
    await waitFor(() => expect(screen.getByTestId('trial-nodes').textContent).toBe('node3'));
    second.unmount();
    // an older master, which reports no hosts: sacct lists the nodes of a job that ran
    stubTrial({ state: 'TRIAL_STATE_COMPLETED', jobId: '812' }, SLURM_YAML);
    trialPage();
    const fallback = await screen.findByTestId('trial-nodes');
    expect(fallback.querySelector('code')!.textContent).toBe('sacct -j 812 -X -o NodeList');
    expect(fallback.textContent).toBe("sacct -j 812 -X -o NodeList (the master did not report its nodes)");
  });

  it('says which agents a trial on agents ran on, in rank order, in its Summary', async () => {
    stubTrial({ state: 'TRIAL_STATE_COMPLETED', hosts: ['e2e-agent-1', 'e2e-agent-0'] }, 'name: agents\nresources: {slots_per_trial: 2}\n');
    const { unmount } = trialPage();
    await screen.findByRole('link', { name: 'on-slurm #3' });
    await act(() => new Promise((r) => setTimeout(r, 50))); // and the pools
    const hosts = screen.getByTestId('trial-hosts');
    expect(hosts.previousElementSibling!.textContent).toBe('Ran on');
    expect(hosts.textContent).toBe('e2e-agent-1, e2e-agent-0');
    expect(screen.queryByTestId('trial-slurm')).toBeNull();
    unmount();
    stubTrial({ state: 'TRIAL_STATE_RUNNING', hosts: ['e2e-agent-0'] }, 'name: agents\n');
    const running = trialPage();
    await waitFor(() => expect(screen.getByTestId('trial-hosts').textContent).toBe('e2e-agent-0'));
    expect(screen.getByTestId('trial-hosts').previousElementSibling!.textContent).toBe('Runs on');
    running.unmount();
    stubTrial({ state: 'TRIAL_STATE_QUEUED' }, 'name: agents\n');
    trialPage();
    await waitFor(() => expect(screen.getByTestId('trial-hosts').textContent).toBe('not yet'));
  });

  it('has no Slurm card for a trial on agents', async () => {
    stubTrial({ state: 'TRIAL_STATE_QUEUED', pendingReason: 'needs 4 slots in pool default; largest free gang is 2 across 1 agents' }, 'name: agents\nresources: {slots_per_trial: 4}\n');
    trialPage();
    await screen.findByTestId('pending-reason');
    await screen.findByRole('link', { name: 'on-slurm #3' }); // the experiment (its config) was read
    await act(() => new Promise((r) => setTimeout(r, 50))); // and the pools
    expect(screen.queryByTestId('trial-slurm')).toBeNull();
  });
});

describe('cluster page: Slurm', () => {
  function stubCluster(agents: unknown[]) {
    vi.stubGlobal('fetch', async (url: string) => {
      if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
      if (url.startsWith('/api/v1/agents')) return json({ agents });
      if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: POOLS });
      if (url.startsWith('/api/v1/servings')) return json({ servings: [] });
      if (url.startsWith('/api/v1/tasks')) return json({ tasks: [] });
      if (url.startsWith('/api/v1/experiments/4/trials')) {
        return json({
          trials: [
            { id: '21', experimentId: '4', state: 'TRIAL_STATE_QUEUED', jobId: '813', pendingReason: 'Slurm: Resources (job 813)' },
            { id: '22', experimentId: '4', state: 'TRIAL_STATE_QUEUED', pendingReason: 'experiment at max_slots 2' },
          ],
        });
      }
      if (url.startsWith('/api/v1/experiments')) return json({ experiments: [{ id: '4', name: 'sweep', state: 'EXPERIMENT_STATE_ACTIVE', priority: 42 }], pagination: { total: 1 } });
      return json({}, 404);
    });
  }

  it('shows a Slurm pool\'s nodes and slots per node, the Slurm summary and the queue\'s job ids', async () => {
    stubCluster([{ id: 'a1', resourcePool: 'default', connected: true, slots: [{ id: 'cpu0', enabled: true }, { id: 'cpu1', enabled: true }] }]);
    render(<ClusterPage />);
    const table = await screen.findByTestId('pools-table');
    const hpc = [...table.querySelectorAll('[data-testid="pool-row"]')].find((r) => r.querySelector('td')!.textContent === 'hpc')!;
    expect(hpc.querySelector('[data-testid="pool-manager"]')!.firstChild!.textContent).toBe('Slurm');
    expect(hpc.querySelector('[data-testid="pool-capacity"]')!.textContent).toBe('2 nodes × 2 slots');
    expect(hpc.querySelector('[data-testid="pool-hosts"]')!.textContent).toBe('2 nodes');
    expect(hpc.querySelector('[data-testid="pool-slots"]')!.textContent).toBe('2/4');
    expect(table.querySelectorAll('[data-testid="pool-capacity"]').length).toBe(1); // not for the agents' pool
    expect((await screen.findByTestId('cluster-slurm-summary')).textContent).toBe('· Slurm: 2 node(s), 2/4 slots busy');
    const queue = await screen.findByTestId('queue-table');
    await waitFor(() => expect([...queue.querySelectorAll('[data-testid="queue-job-id"]')].map((c) => c.textContent)).toEqual(['813', '–']));
  });

  it('says the Slurm pools need no agents when none has registered', async () => {
    stubCluster([]);
    render(<ClusterPage />);
    expect((await screen.findByText(/No agents: hpc runs trials as Slurm jobs/)).textContent).toBe("No agents: hpc runs trials as Slurm jobs on Slurm's nodes (Resource pools above).");
    expect(screen.queryByText(/No agents have registered/)).toBeNull();
  });
});
