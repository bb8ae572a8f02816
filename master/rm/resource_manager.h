// The resource-manager seam (docs/slurm.md "How it maps"): who places a trial's gang, starts
// its ranks, stops them and says why it waits. Everything above it — experiments, searchers,
// metrics, checkpoints, logs, auth — is the same whoever places the gang.
//
// Two managers:
// - agents (the default for every pool not configured otherwise): the master's own scheduler
//   (master/scheduler) places the gang on agents' slots and the coordinator sends each rank a
//   StartTask over AgentLink (master/core/cluster_allocation.cc). Its events are AgentLink's.
// - slurm (master/rm/slurm/slurm_manager.h): the gang is one Slurm job; Slurm schedules it,
//   `srun` starts one `sf-task` per rank, and the manager reports what the job does.
//
// The contract for a manager that is not the agents' (an "external" manager), which the
// coordinator (master/core/cluster_external.cc) drives:
// - Submit(launch): the gang, fully described (one StartTask per rank, with its task token).
//   Never blocks the caller (the coordinator's lock is held): the manager submits on its own
//   thread and answers with events. A gang it can never run is an Exited event whose reason
//   says why (`refused` set), never a silent queue.
// - Adopt(allocation, external id, world size): after a master restart, an allocation whose
//   job was submitted before (its id stored with the allocation) is watched again.
// - Kill(allocation): stop it now (its ranks get SIGTERM, then SIGKILL); an Exited event
//   follows. Killing an allocation not submitted yet withdraws it. Unknown ids are ignored.
// - Events are delivered on the manager's thread, never with the manager's own lock held, in
//   order per allocation: Submitted (its external id, once), Pending (whenever the reason
//   changes), Running (once), Exited (once, last). An allocation that exits is forgotten.
// - Start() is called after Recover() has adopted every allocation still live: the manager may
//   then cancel the jobs it finds of its own that nobody adopted (their trials are gone).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "steadfast/v1/agent_link.pb.h"

namespace sf::master::rm {

// The experiment's own requests to the manager (the experiment config's `slurm:` section).
struct JobRequests {
  std::string time;                      // wall-clock limit as Slurm takes it ("90", "1:30:00")
  std::string account, qos;              // override the pool's
  std::vector<std::string> sbatch_args;  // added to sbatch's arguments, after the manager's
};

struct GangLaunch {
  std::string allocation_id;
  int64_t trial_id = 0, experiment_id = 0;
  std::string pool;
  // One per rank, rank order: everything an agent would get (no slot ids), the task token
  // included (a manager keeps tokens out of argv and files).
  std::vector<steadfast::v1::StartTask> ranks;
  JobRequests requests;
};

struct AllocationEvent {
  enum class Kind { kSubmitted, kPending, kRunning, kExited };
  Kind kind = Kind::kPending;
  std::string allocation_id;
  std::string external_id;  // kSubmitted: the job id
  std::string reason;       // kPending: why it waits ("Slurm: Resources"); kExited: what ended it
  std::vector<std::string> hosts;  // kRunning: where it runs
  // kExited: each rank's exit status (-1: lost or killed without one).
  std::map<int, int> exit_codes;
  bool refused = false;    // kExited: the manager would never run it (bad request): no restart
  bool preempted = false;  // kExited: the resource manager preempted it: it resumes, not a restart
  bool cancelled = false;  // kExited: cancelled, by Kill or from outside
};

using EventSink = std::function<void(const AllocationEvent&)>;

class ResourceManager {
 public:
  virtual ~ResourceManager() = default;
  virtual std::string Kind() const = 0;  // "slurm"
  // Checks what the manager needs (its tools, its partition) once, before the master serves;
  // an error names what is missing.
  virtual Status Check() = 0;
  virtual void SetEventSink(EventSink sink) = 0;
  virtual void Start() = 0;
  virtual void Stop() = 0;
  virtual void Submit(GangLaunch launch) = 0;
  virtual void Adopt(const std::string& allocation_id, const std::string& external_id, int world_size) = 0;
  virtual void Kill(const std::string& allocation_id) = 0;
};

}  // namespace sf::master::rm
