// Reading a pool or a trial placed by Slurm (docs/slurm.md) out of what the API gives: a pool's
// `scheduler` names its manager ("slurm"; "priority" or "fair_share" for the master's own agents),
// its `nodes` and `totalSlots` come from sinfo (nodes × slots_per_node); a trial's `jobId` is its
// latest run's Slurm job, and its `pendingReason` reads "Slurm: <squeue reason> (job N)" while
// queued, or "Slurm: SUSPENDED (job N): <detail>" while Slurm holds it.
import type { ResourcePool } from '../api/types';
import { experimentConfig } from './experimentConfig';

/** A pool of the master's own agents (scheduled by its priority or fair-share scheduler). */
export const isAgentPool = (p: ResourcePool): boolean => p.scheduler === 'priority' || p.scheduler === 'fair_share';
export const isSlurmPool = (p: ResourcePool): boolean => p.scheduler === 'slurm';

/** The name a pool's manager goes by on the page. */
export function managerLabel(p: ResourcePool): string {
  if (p.scheduler === 'fair_share') return 'fair share';
  if (isSlurmPool(p)) return 'Slurm';
  return p.scheduler;
}

/** Slots per node of a pool another manager places: its slots over its nodes, when they divide
 *  (every node of a Slurm pool brings the pool's slots_per_node); undefined otherwise. */
export function slotsPerNode(p: ResourcePool): number | undefined {
  if (isAgentPool(p) || p.nodes <= 0 || p.totalSlots % p.nodes !== 0) return undefined;
  return p.totalSlots / p.nodes;
}

/** "2 nodes × 2 slots", "1 node × 8 slots", "3 nodes" (slots that do not divide). */
export function nodeCapacity(p: ResourcePool): string {
  const per = slotsPerNode(p);
  const nodes = `${p.nodes} node${p.nodes === 1 ? '' : 's'}`;
  return per === undefined ? nodes : `${nodes} × ${per} slot${per === 1 ? '' : 's'}`;
}

export interface SlurmReason {
  /** squeue's reason (Priority, Resources, ...) or the job state that holds it (SUSPENDED). */
  reason: string;
  jobId: string;
  /** What follows the job id for a held job; '' otherwise. */
  detail: string;
}

/** The parts of a Slurm pending reason; undefined for any other reason (the agents' scheduler's). */
export function parseSlurmReason(pendingReason: string): SlurmReason | undefined {
  const m = pendingReason.match(/^Slurm: (.*?) \(job ([^)\s]+)\)(?::\s*(.*))?$/s);
  if (!m) return pendingReason.startsWith('Slurm: ') ? { reason: pendingReason.slice(7), jobId: '', detail: '' } : undefined;
  return { reason: m[1], jobId: m[2], detail: m[3] ?? '' };
}

/** The pool an experiment's config asks for (`resources.resource_pool`; absent: the default
 *  pool, which the API names "default"); undefined when the config does not parse. */
export function configPool(configYaml: string): string | undefined {
  return experimentConfig(configYaml)?.resourcePool;
}

/** `resources.slots_per_trial` as the config gives it; undefined when absent, not a positive
 *  integer, or the config does not parse. */
export function configSlotsPerTrial(configYaml: string): number | undefined {
  return experimentConfig(configYaml)?.slotsPerTrial;
}
