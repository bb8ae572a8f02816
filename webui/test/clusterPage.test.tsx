// The cluster page's "Busy slots" chart comes from the master's recorded history, so it is full as
// soon as the page loads (no sampling in the browser), and it asks for the last 24 hours.
// The queue shows why each trial waits (the scheduler's pendingReason). A slot is busy when an
// allocation holds it: a trial's rank, or a task of its own such as a server (trialId 0).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import type { Agent as WireAgent } from '../src/api/generated/wire';
import { normAgent } from '../src/api/normalise';
import { ClusterPage, slotHolder, utilization } from '../src/pages/ClusterPage';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

const json = (body: unknown) => new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });

function stubMaster(points: unknown[]) {
  const urls: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url);
    if (url.startsWith('/api/v1/cluster/utilization')) return json({ points });
    if (url.startsWith('/api/v1/agents')) {
      return json({ agents: [{ id: 'a1', resourcePool: 'default', connected: true, slots: [{ id: 'cpu0', enabled: true, trialId: '7' }, { id: 'cpu1', enabled: true }] }] });
    }
    if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: [] });
    if (url.startsWith('/api/v1/servings')) return json({ servings: [] });
    if (url.startsWith('/api/v1/tasks')) return json({ tasks: [] });
    if (url.startsWith('/api/v1/experiments')) return json({ experiments: [], pagination: { total: 0 } });
    return new Response('{}', { status: 404 });
  });
  return urls;
}

describe('ClusterPage utilisation chart', () => {
  it('draws the recorded history right after loading', async () => {
    const minutes = Array.from({ length: 30 }, (_, i) => new Date(Date.UTC(2026, 10, 24, 15, i)).toISOString());
    const urls = stubMaster(minutes.map((time, i) => ({ pool: 'default', time, slotsTotal: 2, slotsBusy: i % 3, slotsBusyMax: 2, samples: 6 })));
    const before = Date.now() / 1000;
    render(<ClusterPage />);
    const chart = await screen.findByTestId('chart-utilization');
    // two series (mean and peak) of 30 minutes each
    await waitFor(() => expect(chart.getAttribute('data-points')).toBe('60'));
    const asked = urls.find((u) => u.startsWith('/api/v1/cluster/utilization'))!;
    const since = Number(new URL(asked, 'http://x').searchParams.get('since'));
    expect(Math.abs(since - (before - 24 * 3600))).toBeLessThan(60);
  });

  it('says so when nothing has been recorded yet', async () => {
    stubMaster([]);
    render(<ClusterPage />);
    expect(await screen.findByText(/No samples recorded yet/)).toBeTruthy();
    expect(screen.queryByTestId('chart-utilization')).toBeNull();
  });
});

describe('ClusterPage queue', () => {
  it('shows why each queued trial waits, as the master computed it', async () => {
    vi.stubGlobal('fetch', async (url: string) => {
      if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
      if (url.startsWith('/api/v1/agents')) return json({ agents: [] });
      if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: [] });
      if (url.startsWith('/api/v1/servings')) return json({ servings: [] });
      if (url.startsWith('/api/v1/tasks')) return json({ tasks: [] });
      if (url.startsWith('/api/v1/experiments/4/trials')) {
        return json({
          trials: [
            { id: '11', experimentId: '4', state: 'TRIAL_STATE_QUEUED', pendingReason: 'preempted by trial 42; resumes when slots free' },
            { id: '12', experimentId: '4', state: 'TRIAL_STATE_QUEUED' },
            { id: '13', experimentId: '4', state: 'TRIAL_STATE_RUNNING' },
          ],
        });
      }
      if (url.startsWith('/api/v1/experiments')) {
        return json({ experiments: [{ id: '4', name: 'sweep', state: 'EXPERIMENT_STATE_ACTIVE', priority: 80 }], pagination: { total: 1 } });
      }
      return new Response('{}', { status: 404 });
    });
    render(<ClusterPage />);
    const table = await screen.findByTestId('queue-table');
    const reasons = await waitFor(() => {
      const cells = [...table.querySelectorAll('[data-testid="pending-reason"]')].map((c) => c.textContent);
      expect(cells.length).toBe(2); // the running trial is not in the queue
      return cells;
    });
    expect(reasons).toEqual(['preempted by trial 42; resumes when slots free', '–']);
  });
});

describe('ClusterPage resource pools', () => {
  it('shows each pool with its slots in use and its queue', async () => {
    vi.stubGlobal('fetch', async (url: string) => {
      if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
      if (url.startsWith('/api/v1/agents')) return json({ agents: [] });
      if (url.startsWith('/api/v1/servings')) return json({ servings: [] });
      if (url.startsWith('/api/v1/tasks')) return json({ tasks: [] });
      if (url.startsWith('/api/v1/resource-pools')) {
        return json({
          resourcePools: [
            { name: 'default', scheduler: 'priority', agents: 2, totalSlots: 4, usedSlots: 3, runningTrials: 2, queuedTrials: 0, queuedSlots: 0 },
            { name: 'gpu', scheduler: 'fair_share', agents: 1, totalSlots: 8, usedSlots: 8, runningTrials: 2, queuedTrials: 3, queuedSlots: 12 },
            { name: 'tiny', agents: 1, totalSlots: 1, queuedTrials: 1, queuedSlots: 1 },
            { name: 'hpc', scheduler: 'slurm', nodes: 2, totalSlots: 2, usedSlots: 1, runningTrials: 1 },
          ],
        });
      }
      if (url.startsWith('/api/v1/experiments')) return json({ experiments: [], pagination: { total: 0 } });
      return new Response('{}', { status: 404 });
    });
    render(<ClusterPage />);
    const table = await screen.findByTestId('pools-table');
    const rows = [...table.querySelectorAll('[data-testid="pool-row"]')];
    expect(rows.map((r) => r.querySelector('td')!.textContent)).toEqual(['default', 'gpu', 'tiny', 'hpc']);
    expect(rows.map((r) => r.querySelector('[data-testid="pool-slots"]')!.textContent)).toEqual(['3/4', '8/8', '0/1', '1/2']);
    expect(rows.map((r) => r.querySelector('[data-testid="pool-queue"]')!.textContent)).toEqual(['empty', '3 trials (12 slots)', '1 trial (1 slot)', 'empty']);
    // A pool of agents counts its agents; a Slurm partition its nodes (from sinfo).
    expect(rows.map((r) => r.querySelector('[data-testid="pool-hosts"]')!.textContent)).toEqual(['2', '1', '1', '2 nodes']);
    expect(rows[1].textContent).toContain('fair share');
    // Fields the master left out (proto3 defaults) read as 0 and the default scheduler.
    expect(rows[2].textContent).toContain('priority');
  });

  it('says how to get a pool when there is none', async () => {
    stubMaster([]);
    render(<ClusterPage />);
    expect(await screen.findByText(/No resource pool yet/)).toBeTruthy();
  });
});

describe('ClusterPage GPUs', () => {
  // As the master lists them: int64 as strings, usage absent where it has no sample.
  const gpuAgents = [
    {
      id: 'gpu-agent', resourcePool: 'gpu', connected: true,
      slots: [
        { id: 'cuda0', type: 'SLOT_TYPE_CUDA', device: 'NVIDIA H100 80GB HBM3', enabled: true, trialId: '9', uuid: 'GPU-aaaa', memoryTotalBytes: '85899345920',
          usage: { utilizationPercent: 40, memoryUsedBytes: '1073741824', sampleTime: '2026-11-24T15:00:00Z' } },
        { id: 'cuda1', type: 'SLOT_TYPE_CUDA', device: 'NVIDIA H100 80GB HBM3', enabled: true, uuid: 'GPU-bbbb', memoryTotalBytes: '85899345920' },
      ],
    },
    { id: 'cpu-agent', resourcePool: 'default', connected: true, slots: [{ id: 'cpu0', type: 'SLOT_TYPE_CPU', device: 'CPU', enabled: true }] },
  ];

  function stubAgents(agents: unknown[]) {
    vi.stubGlobal('fetch', async (url: string) => {
      if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
      if (url.startsWith('/api/v1/agents')) return json({ agents });
      if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: [] });
      if (url.startsWith('/api/v1/servings')) return json({ servings: [] });
      if (url.startsWith('/api/v1/tasks')) return json({ tasks: [] });
      if (url.startsWith('/api/v1/experiments')) return json({ experiments: [], pagination: { total: 0 } });
      return new Response('{}', { status: 404 });
    });
  }

  it('shows each GPU with its memory in use and utilisation, and says when there is no sample', async () => {
    stubAgents(gpuAgents);
    render(<ClusterPage />);
    const table = await screen.findByTestId('gpus-table');
    const rows = [...table.querySelectorAll('[data-testid="gpu-row"]')];
    expect(rows.map((r) => `${r.getAttribute('data-agent')}/${r.getAttribute('data-slot')}`)).toEqual(['gpu-agent/cuda0', 'gpu-agent/cuda1']);
    const cell = (r: Element, id: string) => r.querySelector(`[data-testid="${id}"]`)!.textContent;
    expect(cell(rows[0], 'gpu-name')).toBe('NVIDIA H100 80GB HBM3');
    expect(rows[0].textContent).toContain('GPU-aaaa');
    expect(cell(rows[0], 'gpu-memory')).toBe('1.0 GiB / 80 GiB');
    expect(cell(rows[0], 'gpu-util')).toBe('40%');
    expect(rows[0].querySelector('[aria-label="Utilization of cuda0"]')!.getAttribute('aria-valuenow')).toBe('40');
    expect(rows[0].textContent).toContain('trial 9');
    // No sample for cuda1 (an NVML error on the agent): no figures, its size still shown.
    expect(cell(rows[1], 'gpu-memory')).toBe('– / 80 GiB');
    expect(cell(rows[1], 'gpu-util')).toBe('–');
    expect(rows[1].textContent).toContain('free');
  });

  it('has no GPU table when no agent has a GPU', async () => {
    stubAgents([gpuAgents[1]]);
    render(<ClusterPage />);
    await screen.findByTestId('agents-table');
    expect(screen.queryByTestId('gpus-table')).toBeNull();
  });
});

describe('ClusterPage slots held by tasks', () => {
  // As the master lists them: a trial's rank has trialId and allocationId "t<trial>-r0-a1"; a task
  // of its own (a server, a command) only allocationId "task<id>-r0-a1", its trialId 0 left out.
  const agents: WireAgent[] = [
    {
      id: 'agent-1', resourcePool: 'default', connected: true,
      slots: [
        { id: 'cuda0', type: 'SLOT_TYPE_CUDA', device: 'GPU', enabled: true, allocationId: 'task52-r0-a1' },
        { id: 'cuda1', type: 'SLOT_TYPE_CUDA', device: 'GPU', enabled: true, trialId: '7', allocationId: 't7-r0-a1' },
        { id: 'cuda2', type: 'SLOT_TYPE_CUDA', device: 'GPU', enabled: true },
        { id: 'cuda3', type: 'SLOT_TYPE_CUDA', device: 'GPU', enabled: true, allocationId: 'task54-r0-a1' },
        { id: 'cuda4', type: 'SLOT_TYPE_CUDA', device: 'GPU', enabled: true, allocationId: 'task99-r0-a1' },
      ],
    },
  ];
  const server52 = { id: '52', modelName: 'wmt-de-en', modelVersion: 3, state: 'READY', url: 'http://node1:8500', slots: 1, owner: 'alice', agentId: 'agent-1', createdAt: '2026-11-26T10:00:00Z' };
  const trial54 = { id: '54', kind: 'TRIAL', state: 'RUNNING', owner: 'carol', entrypoint: ['sf-trainer'], slots: 1, agentId: 'agent-2', createdAt: '2026-11-26T12:00:00Z', allocationId: 't54-r0-a1', experimentId: '3' };
  const command54 = { id: '54', kind: 'COMMAND', state: 'RUNNING', owner: 'alice', entrypoint: ['python3', 'score.py'], slots: 1, agentId: 'agent-1', createdAt: '2026-11-26T11:00:00Z', allocationId: 'task54-r0-a1' };

  function stub() {
    vi.stubGlobal('fetch', async (url: string) => {
      if (url.startsWith('/api/v1/cluster/utilization')) return json({ points: [] });
      if (url.startsWith('/api/v1/agents')) return json({ agents });
      if (url.startsWith('/api/v1/resource-pools')) return json({ resourcePools: [] });
      if (url.startsWith('/api/v1/servings')) return json({ servings: [server52] });
      // task 99 is not listed (it ended and dropped out of the newest 100, say): a "task"; trials 52
      // and 54 share ids with the server and the command (numbered apart): they are none of them
      if (url.startsWith('/api/v1/tasks')) return json({ tasks: [{ ...server52, kind: 'SERVER', state: 'RUNNING' }, command54, trial54, { ...trial54, id: '52' }] });
      if (url.startsWith('/api/v1/experiments')) return json({ experiments: [], pagination: { total: 0 } });
      return new Response('{}', { status: 404 });
    });
  }

  it('reads allocationId from the listing, and tells a trial from a task', () => {
    const slots = normAgent(agents[0]).slots;
    expect(slots.map((s) => [s.trialId, s.allocationId])).toEqual([[0, 'task52-r0-a1'], [7, 't7-r0-a1'], [0, ''], [0, 'task54-r0-a1'], [0, 'task99-r0-a1']]);
    expect(slots.map(slotHolder)).toEqual([{ kind: 'task', id: 52 }, { kind: 'trial', id: 7 }, undefined, { kind: 'task', id: 54 }, { kind: 'task', id: 99 }]);
    // an allocation of a kind the dashboard does not know is still busy, shown by its id
    expect(slotHolder({ trialId: 0, allocationId: 'job3-r0-a1' })).toEqual({ kind: 'other', allocationId: 'job3-r0-a1' });
    expect(utilization([normAgent(agents[0])])).toEqual({ used: 4, total: 5 });
  });

  it("shows a server's slot busy as \"server N\", a command's as \"command N\" (not a trial of the same id), counted as used, each linking to its row", async () => {
    stub();
    render(<ClusterPage />);
    const list = await screen.findByRole('list', { name: 'Slots of agent-1' });
    await waitFor(() => expect(within(list).getAllByTestId('slot')[3].textContent).toContain('command 54'));
    const slots = within(list).getAllByTestId('slot');
    expect(slots.map((s) => s.getAttribute('data-busy'))).toEqual(['true', 'true', 'false', 'true', 'true']);
    expect(slots[0].className).toContain('slot-busy');
    expect(slots[0].textContent).toContain('server 52');
    expect(slots[0].querySelector('a[href^="#/trials/"]')).toBeNull();
    expect(slots[1].querySelector('a')!.getAttribute('href')).toBe('#/trials/7');
    expect(slots[2].textContent).toContain('free');
    expect(slots[4].textContent).toContain('task 99'); // a task the page does not list: by its id
    expect(screen.getByTestId('cluster-summary').textContent).toContain('4/5 slots busy');
    // the GPU table says the same
    const holders = [...screen.getByTestId('gpus-table').querySelectorAll('[data-testid="gpu-holder"]')].map((c) => c.textContent);
    expect(holders).toEqual(['server 52', 'trial 7', 'free', 'command 54', 'task 99']);
    // the links stay on the cluster page and bring the server's row in Servers, the command's in
    // Tasks, into focus
    const row = await screen.findByTestId('server-row');
    expect(row.getAttribute('data-id')).toBe('52');
    window.location.hash = '#/cluster';
    fireEvent.click(within(slots[0]).getByRole('link', { name: 'server 52' }));
    expect(window.location.hash).toBe('#/cluster');
    expect(row.contains(document.activeElement)).toBe(true);
    const taskRow = document.querySelector('[data-testid="task-row"][data-id="54"]') as HTMLElement;
    fireEvent.click(within(slots[3]).getByRole('link', { name: 'command 54' }));
    expect(window.location.hash).toBe('#/cluster');
    expect(taskRow.contains(document.activeElement)).toBe(true);
  });
});
