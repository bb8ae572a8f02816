// What the Slurm resource manager says to Slurm and reads back (docs/slurm.md "How it maps"),
// as pure functions: sbatch's arguments and job script for a gang, and squeue's, sacct's and
// sbatch's output parsed into job states and allocation events. SlurmManager runs the tools.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/rm/pool_config.h"
#include "master/rm/resource_manager.h"

namespace sf::master::rm::slurm {

// The fields the manager asks squeue for: `squeue -h -t all -o <kSqueueFormat>`.
inline constexpr const char* kSqueueFormat = "%i|%T|%r|%N|%k";
// And sacct (`sacct -n -X -P -o <kSacctFields>`, with -c where there is no slurmdbd).
inline constexpr const char* kSacctFields = "jobid,state,exitcode,nodelist";

struct JobStatus {
  std::string id;
  std::string state;      // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, NODE_FAIL, ...
  std::string reason;     // squeue's %r (None, Resources, Priority, NonZeroExitCode, ...)
  std::string nodes;      // node list ("node[1-2]"), empty while pending
  std::string comment;    // squeue's %k
  std::string exit_code;  // sacct's "3:0" (status:signal); empty from squeue
};

// One job per line; lines that do not have the fields are skipped. A state with a suffix
// ("CANCELLED by 0") keeps its first word.
std::vector<JobStatus> ParseSqueue(const std::string& output);
std::vector<JobStatus> ParseSacct(const std::string& output);
// sbatch --parsable prints "<id>" or "<id>;<cluster>" (warnings may come before it).
Result<std::string> ParseSbatchJobId(const std::string& output);

// The comment that tags a job as this master's allocation, and back.
std::string JobComment(const std::string& cluster_name, const std::string& allocation_id);
std::optional<std::string> AllocationOfComment(const std::string& cluster_name, const std::string& comment);

// Nodes and tasks per node for `world_size` ranks with `slots_per_node` ranks per node.
struct GangShape {
  int nodes = 1, tasks_per_node = 1;
};
GangShape ShapeOf(int world_size, int slots_per_node);

// sbatch's argv (the program first) for the gang whose files are in `job_dir`.
std::vector<std::string> SbatchArgv(const SlurmPoolConfig& pool, const GangLaunch& launch,
                                    const std::string& job_dir, const std::string& script);
// The job script: srun starts one sf-task per rank, which reads its rank's StartTask from
// `job_dir`.
std::string JobScript(const SlurmPoolConfig& pool, const GangLaunch& launch, const std::string& job_dir);

bool IsTerminalState(const std::string& state);
bool IsRunningState(const std::string& state);  // RUNNING, CONFIGURING, COMPLETING, ...

// The Exited event for a job that ended in `job.state` (with sacct's exit code when known).
// `killed`: the master cancelled it (Kill). `world_size`: ranks the codes are given for.
// `failed_nodes` (NODE_FAIL only; FailedNodes' answer): which of the job's nodes failed, named
// in the reason instead of the job's whole node list.
AllocationEvent ExitedEvent(const std::string& allocation_id, const JobStatus& job, bool killed, int world_size,
                            const std::string& failed_nodes = "");

// From `sinfo -h -N -n NODELIST -o '%N|%t|%E'`: the nodes that are down, failing or not
// responding, with Slurm's reason, "node2 (Not responding)" (comma-separated); "" when none is.
std::string FailedNodes(const std::string& sinfo_output);

// "Slurm: Resources (job 12)" for a pending job.
std::string PendingReason(const JobStatus& job);

// Why a job Slurm counts as running does not run: "Slurm: SUSPENDED (job 12): ..." for a
// suspended or stopped job; "" for one that runs.
std::string HeldReason(const JobStatus& job);

// The size of a partition from `sinfo -h -N -p PARTITION -o '%N|%t'` (a node per line, its
// compact state): nodes that are up and take jobs (idle, allocated, mixed, completing,
// reserved, planned; not down, drained or draining, failing, unknown, powered down, or not
// responding: a trailing '*'), each with `slots_per_node` slots. A node listed twice counts once.
PoolSize ParseSinfoNodes(const std::string& output, int slots_per_node);

}  // namespace sf::master::rm::slurm
