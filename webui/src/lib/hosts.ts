// Where a trial's latest run ran (Trial.hosts, proto/steadfast/v1/common.proto): each place once,
// agent ids in rank order for a trial on the master's agents, or for a job of another resource
// manager its node list as that manager writes it (for scontrol and sacct), prefixed by the
// manager ("slurm:node[1-2]"). Empty before the first run starts; kept after the run ends.

/** The prefix the master puts before a Slurm job's node list. */
export const SLURM_PREFIX = 'slurm:';

/** Whether an entry of Trial.hosts is a Slurm job's node list (an agent whose id starts with
 *  "slurm:" would read as one too). */
export const isSlurmHost = (host: string): boolean => host.startsWith(SLURM_PREFIX) && host.length > SLURM_PREFIX.length;

/** A place's name on its manager: a Slurm node list without the prefix ("node[1-2]"), an agent
 *  id as it is. */
export const placeName = (host: string): string => (isSlurmHost(host) ? host.slice(SLURM_PREFIX.length) : host);

/** One line for a table cell or a summary: agents as they are ("agent-0, agent-1"), a Slurm node
 *  list without its prefix and marked as Slurm's ("node[1-2] (Slurm)"); '' before the first run. */
export function hostsLabel(hosts: readonly string[]): string {
  return hosts.map((h) => (isSlurmHost(h) ? `${placeName(h)} (Slurm)` : h)).join(', ');
}
