// Slurm on the pages: a Slurm trial's card on the trial page (pool and capacity, job id, Slurm's
// reason, the sacct command for its nodes), none for a trial on agents; and on the cluster page a
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
  it('shows a queued Slurm trial\'s pool with its capacity, job id, slots, Slurm\'s reason and where to find its nodes', async () => {
    stubTrial({ state: 'TRIAL_STATE_QUEUED', jobId: '812', pendingReason: 'Slurm: Priority (job 812)' }, SLURM_YAML);
    trialPage();
    const card = await screen.findByTestId('trial-slurm');
    await waitFor(() => expect(within(card).getByTestId('trial-pool-capacity').textContent).toBe('2 nodes × 2 slots, 2/4 slots busy'));
    expect(within(card).getByTestId('trial-pool').textContent).toContain('hpc');
    expect(within(card).getByTestId('trial-job-id').textContent).toBe('812');
    expect(within(card).getByTestId('trial-slots').textContent).toBe('2 (2 ranks, one per slot)');
    expect(within(card).getByText('Pending')).toBeTruthy();
    expect(within(card).getByTestId('slurm-reason').textContent).toBe('Priority');
    expect(within(card).getByTestId('trial-nodes').querySelector('code')!.textContent).toBe('sacct -j 812 -X -o NodeList');
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
