// Reading Slurm pools and Slurm trials out of the API's fields (lib/slurm.ts), and where a trial ran
// (Trial.hosts, lib/hosts.ts).
import { describe, expect, it } from 'vitest';
import { normResourcePool, normTrial } from '../src/api/client';
import { hostsLabel, isSlurmHost, placeName } from '../src/lib/hosts';
import { configPool, configSlotsPerTrial, isAgentPool, isSlurmPool, managerLabel, nodeCapacity, parseSlurmReason, slotsPerNode } from '../src/lib/slurm';

const hpc = normResourcePool({ name: 'hpc', scheduler: 'slurm', nodes: 2, totalSlots: 8, usedSlots: 4 });
const agents = normResourcePool({ name: 'default', scheduler: 'priority', agents: 2, totalSlots: 4 });

describe('Slurm pools', () => {
  it('are told by their scheduler, with slots per node from sinfo', () => {
    expect([isSlurmPool(hpc), isAgentPool(hpc), isSlurmPool(agents), isAgentPool(agents)]).toEqual([true, false, false, true]);
    expect(isAgentPool(normResourcePool({ name: 'x', scheduler: 'fair_share' }))).toBe(true);
    expect(managerLabel(hpc)).toBe('Slurm');
    expect(managerLabel(normResourcePool({ scheduler: 'fair_share' }))).toBe('fair share');
    expect(slotsPerNode(hpc)).toBe(4);
    expect(nodeCapacity(hpc)).toBe('2 nodes × 4 slots');
    expect(nodeCapacity(normResourcePool({ scheduler: 'slurm', nodes: 1, totalSlots: 1 }))).toBe('1 node × 1 slot');
    // sinfo found no node that takes jobs, or slots that do not divide: the nodes only
    expect(slotsPerNode(normResourcePool({ scheduler: 'slurm' }))).toBeUndefined();
    expect(nodeCapacity(normResourcePool({ scheduler: 'slurm', nodes: 3, totalSlots: 4 }))).toBe('3 nodes');
    expect(slotsPerNode(agents)).toBeUndefined();
  });
});

describe('parseSlurmReason', () => {
  it('reads the reason and job id of a pending job and the detail of a held one', () => {
    expect(parseSlurmReason('Slurm: Priority (job 812)')).toEqual({ reason: 'Priority', jobId: '812', detail: '' });
    expect(parseSlurmReason('Slurm: submitted, not yet scheduled (job 13)')).toEqual({ reason: 'submitted, not yet scheduled', jobId: '13', detail: '' });
    expect(parseSlurmReason('Slurm: SUSPENDED (job 812): Slurm suspended it (scontrol suspend or gang scheduling); it holds its nodes')).toEqual({
      reason: 'SUSPENDED',
      jobId: '812',
      detail: 'Slurm suspended it (scontrol suspend or gang scheduling); it holds its nodes',
    });
    expect(parseSlurmReason('Slurm: ReqNodeNotAvail, UnavailableNodes:node3 (job 9)')).toEqual({ reason: 'ReqNodeNotAvail, UnavailableNodes:node3', jobId: '9', detail: '' });
    expect(parseSlurmReason('Slurm: something new')).toEqual({ reason: 'something new', jobId: '', detail: '' });
    expect(parseSlurmReason('needs 4 slots in pool gpu; largest free gang is 3 across 2 agents')).toBeUndefined();
    expect(parseSlurmReason('')).toBeUndefined();
  });
});

describe('the config\'s resources', () => {
  it('name the pool (default when absent) and the slots per trial', () => {
    expect(configPool('resources:\n  resource_pool: hpc\n  slots_per_trial: 2\n')).toBe('hpc');
    expect(configPool('resources: {slots_per_trial: 1}\n')).toBe('default');
    expect(configPool('name: x\n')).toBe('default');
    expect(configSlotsPerTrial('resources: {resource_pool: hpc, slots_per_trial: 4}\n')).toBe(4);
    expect(configSlotsPerTrial('name: x\n')).toBeUndefined();
    expect(configSlotsPerTrial('resources: {slots_per_trial: 0}\n')).toBeUndefined();
  });

  it('are unknown for a config that does not parse', () => {
    expect(configPool('resources: {resource_pool: hpc\n')).toBeUndefined();
    expect(configSlotsPerTrial('resources: {resource_pool: hpc\n')).toBeUndefined();
  });
});

describe('trial hosts', () => {
  it('are read from the wire in rank order, empty when the master leaves them out', () => {
    expect(normTrial({ id: '1', hosts: ['e2e-agent-1', 'e2e-agent-0'] }).hosts).toEqual(['e2e-agent-1', 'e2e-agent-0']);
    expect(normTrial({ id: '1', hosts: ['slurm:node[1-2]'] }).hosts).toEqual(['slurm:node[1-2]']);
    expect(normTrial({ id: '1' }).hosts).toEqual([]);
  });

  it('tell a Slurm node list from an agent id and label both', () => {
    expect([isSlurmHost('slurm:node[1-2]'), isSlurmHost('e2e-agent-0'), isSlurmHost('slurm:')]).toEqual([true, false, false]);
    expect(placeName('slurm:node[1-2]')).toBe('node[1-2]');
    expect(placeName('e2e-agent-0')).toBe('e2e-agent-0');
    expect(hostsLabel(['e2e-agent-0', 'e2e-agent-1'])).toBe('e2e-agent-0, e2e-agent-1');
    expect(hostsLabel(['slurm:node[1-2]'])).toBe('node[1-2] (Slurm)');
    expect(hostsLabel(['slurm:node1,node3'])).toBe('node1,node3 (Slurm)');
    expect(hostsLabel([])).toBe('');
  });
});
