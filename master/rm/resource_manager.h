// The resource-manager seam (docs/slurm.md "How it maps"): who places a trial's gang, starts
// its ranks, stops them and says why it waits. Everything above it — experiments, searchers,
// metrics, checkpoints, logs, auth — is the same whoever places the gang. The allocation service
// (master/allocation/allocation_service.h) talks to every pool's manager through this interface
// only, and hears from it only through AllocationEvents, which it records before the owner of
// the allocation (the coordinator, master/core/cluster.h) hears of them.
//
// Two managers:
// - agents (master/rm/agents/agent_manager.h; every pool not configured otherwise): the
//   master's own scheduler (master/scheduler) places the gang on agents' slots and each rank
//   gets a StartTask over AgentLink, whose connections end in that manager.
// - slurm (master/rm/slurm/slurm_manager.h): the gang is one Slurm job; Slurm schedules it,
//   `srun` starts one `sf-task` per rank, and the manager reports what the job does.
//
// The contract:
// - Submit(launch): the gang, fully described (one StartTask per rank, with its task token,
//   and how the master's own scheduler would weigh it). Never blocks the caller. A gang the
//   manager can never run is an Exited event whose reason says why (`refused` set), never a
//   silent queue.
// - Adopt(gang, external id): after a master restart, an allocation that was live before it
//   (its ranks not listed) is watched again: Slurm's by its stored job id, the agents' by the
//   ranks their agents report when they re-register. One that does not come back ends with an
//   Exited event saying so.
// - Kill(allocation): stop it now (its ranks get SIGTERM, then SIGKILL); an Exited event
//   follows. Killing an allocation not placed yet withdraws it (no event needed). Unknown ids
//   are ignored.
// - Events, in order per allocation: Submitted (its external id, once; Slurm), Pending
//   (whenever the reason it waits changes), Running (once, where it runs), Preempt (the
//   manager wants its resources back: the trainer checkpoints and stops; the coordinator kills
//   it after its grace period), Exited (once, last). An allocation that exits is forgotten.
// - Threads and delivery, the same for every manager: a manager keeps its own lock and has a
//   thread of its own (started by Start, joined by Stop). Events are delivered in the order they
//   were made, one at a time, never with the manager's lock held; the sink (the allocation
//   service, then the coordinator) takes the coordinator's lock. Calls to a manager (Submit,
//   Adopt, Kill and the queries) never deliver and never wait for a delivery, so the coordinator
//   may make them, through the service, with its own lock held.
// - Queries (Agents, Pools, Size, Capacity, PoolNames) answer from what the manager keeps (no call
//   to the outside), under its own lock only.
// - Start() is called after Recover() has adopted every allocation still live: the manager may
//   then cancel the jobs it finds of its own that nobody adopted (their trials are gone).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "steadfast/v1/agent_link.pb.h"
#include "steadfast/v1/api.pb.h"

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
  int world_size = 0;
  // How the master's own scheduler weighs it (the experiment's resources section); a manager
  // that schedules nothing itself ignores them.
  int priority = 42;
  double weight = 1.0;
  int max_slots = 0;
  int64_t submit_order = 0;  // among the pool's requests; a preempted trial keeps its own
  int64_t preempted_by = 0;  // the trial that preempted its last run (0: none), for its reason
  // One per rank, rank order: everything an agent would get (no slot ids), the task token
  // included (a manager keeps tokens out of argv and files). Empty for Adopt.
  std::vector<steadfast::v1::StartTask> ranks;
  JobRequests requests;
};

// Where one rank runs (kRunning): its host (an agent id, "slurm:node1") and its slot there.
struct RankPlace {
  std::string host, slot;
};

struct AllocationEvent {
  enum class Kind { kSubmitted, kPending, kRunning, kPreempt, kExited };
  Kind kind = Kind::kPending;
  std::string allocation_id;
  std::string external_id;  // kSubmitted: the job id
  // kPending: why it waits ("Slurm: Resources"); kPreempt: for whom ("trial 12", and
  // for_trial_id when it is a trial of this master);
  // kExited: what ended it, in one line ("trainer exited with rank 0=1", "NODE_FAIL").
  std::string reason;
  int64_t for_trial_id = 0;        // kPreempt: the trial it makes room for (0: not one of ours)
  std::vector<std::string> hosts;  // kRunning: the nodes it runs on (Slurm's node list)
  std::vector<RankPlace> ranks;    // kRunning: where each rank runs, when the manager knows
  // kExited: each rank's exit status (-1: lost or killed without one).
  std::map<int, int> exit_codes;
  // kExited: the first rank that failed on its own, as the manager heard it ("rank 1 on
  // agent-2: ValueError: bad shape"); empty when no rank said why.
  std::string first_failure;
  bool refused = false;    // kExited: the manager would never run it (bad request): no restart
  bool preempted = false;  // kExited: the resource manager preempted it: it resumes, not a restart
  bool cancelled = false;  // kExited: cancelled, by Kill or from outside
};

using EventSink = std::function<void(const AllocationEvent&)>;

// What a manager places on, as it last looked (Size()): Slurm's responding nodes of the
// partition and their slots; the agent manager's connected agents, their slots, and the slots
// its placed ranks use. `known` is false until the manager has looked.
struct PoolSize {
  bool known = false;
  int nodes = 0;
  int slots = 0;
  int used_slots = 0;
};

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
  virtual void Adopt(const GangLaunch& gang, const std::string& external_id) = 0;
  virtual void Kill(const std::string& allocation_id) = 0;
  // How much it places on, as the manager last saw it.
  virtual PoolSize Size() const = 0;
  // The most a gang in `pool` could ever get here: the machines the manager knows in it
  // (registered, connected or not) and their slots; `known` false for a pool it has never seen.
  virtual PoolSize Capacity(const std::string& pool) const = 0;
  // The pools it knows, sorted.
  virtual std::vector<std::string> PoolNames() const = 0;
  // Its pools as it sees them now: name, scheduler, machines, slots and used slots, and the
  // gangs queued with it (running_trials, and the queue of a manager that keeps none of its
  // own, are the coordinator's to add).
  virtual std::vector<steadfast::v1::ResourcePool> Pools() const = 0;
  // The machines of its own it places on, each busy slot with its trial (the agents'); none
  // for a manager whose nodes are not Steadfast's (Slurm).
  virtual std::vector<steadfast::v1::Agent> Agents() const = 0;
};

}  // namespace sf::master::rm
