// The allocation service (docs/cluster.md, "Allocations and tasks"): the layer between the
// coordinator (experiments, searchers, trials: master/core/cluster.h) and the resource managers
// (master/rm/resource_manager.h). It owns every live allocation — a gang of ranks with its pool,
// its manager, where each rank runs, its external id, why it waits, its rendezvous, the failure
// a rank reported and how it ended — and talks to every manager only through the
// ResourceManager interface. What an allocation runs is a task of some kind (TaskKind); the
// owner of that kind hears what happened to it as AllocationUpdates, after the service has
// recorded it.
//
// Contract:
// - Managers are fixed at construction: the default one (every pool not named otherwise) and
//   the external pools' (Slurm). The service is each one's event sink; Start() and Stop() start
//   and stop them (Stop also wakes every rendezvous waiter).
// - Submit(request): the allocation's row is written (allocations), the allocation is held, and
//   its gang goes to its pool's manager. An external manager's ranks may call in before the
//   manager reports them running, so their rendezvous opens at submission (each rank's place
//   "<kind> job"); the agents' opens when they run, with each rank's agent.
// - Adopt(request, external id, running): after a master restart, an allocation live before it
//   is held again and its manager watches it (resource_manager.h, Adopt). An external one's
//   rendezvous opens at once.
// - Kill(id): its manager stops it; an Exited update follows. Withdraw(id): stop one the owner
//   no longer wants before it ran: its manager takes it back, its row is TERMINATED, its
//   rendezvous closed, and it is forgotten (no update follows). Release(id): the owner is done
//   with it (the same without a call to its manager). Unknown ids are ignored.
// - Events: a manager's event for an allocation the service holds updates the record and the
//   row (Submitted: the external id; Running: each rank's place, RUNNING, the agents'
//   rendezvous; Exited: TERMINATED, the rendezvous closed, forgotten) and then goes to the
//   owner of its kind, in the manager's order, on the manager's delivery thread, never with the
//   service's lock held. An event for an allocation the service does not hold (withdrawn or
//   released meanwhile) goes nowhere; a Running one is killed, since nothing may run it.
// - MarkRunning(id): the owner learnt first that it runs (an external job's rank called in
//   before the manager's poll saw the job): the row says RUNNING. True the first time.
// - RecordRankFailure(id, rank, host, reason): a rank said how its program failed (sf-task's
//   ReportExit); the first one is kept and handed to the owner with the Exited update.
// - Queries answer from the records and the managers' own queries, never from the owner.
// - Threads: one mutex of its own, held for the record and its row's statement (so a row's
//   states are written in order). The owner may call in with its own lock held: the owner's
//   lock is taken before the service's, never after, and updates are delivered without it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "master/db/store.h"
#include "master/rendezvous/rendezvous_board.h"
#include "master/rm/resource_manager.h"
#include "steadfast/v1/api.pb.h"

namespace sf::master {

// What an allocation runs: a trial's ranks (master/core/cluster.h), or a task of its own (a
// server: master/tasks/task_coordinator.h; commands and notebooks next).
enum class TaskKind { kTrial, kServer };

struct TaskLaunch {
  TaskKind kind = TaskKind::kTrial;
  int64_t owner = 0;  // the task's id within its kind (a trial id, a task id)
  int restart = 0;    // the owner's restart count, stored with the row
  rm::GangLaunch gang;  // gang.allocation_id names it; gang.pool picks its manager
};

// What the owner hears, after the service has recorded it.
struct AllocationUpdate {
  TaskKind kind = TaskKind::kTrial;
  int64_t owner = 0;
  rm::AllocationEvent event;  // as the manager made it
  std::string manager;        // the manager's Kind() ("agents", "slurm")
  bool external = false;      // placed by a manager other than the default
  std::string external_id;    // its job id there, once known
  // Running: the nodes it runs on, as "<manager>:<host>,<host>" (a manager that names no
  // rank's place); empty otherwise.
  std::string where;
  // Where each rank runs, as far as known (Running, Exited).
  std::map<int, std::string> rank_hosts;
  // Exited: the first failure a rank reported itself (RecordRankFailure); "" when none.
  std::string reported_failure;
};

using AllocationOwner = std::function<void(const AllocationUpdate&)>;

class AllocationService {
 public:
  // `external`: pool name -> its manager. None owned; all outlive the service.
  AllocationService(Store* store, rm::ResourceManager* default_manager,
                    std::map<std::string, rm::ResourceManager*> external);
  AllocationService(const AllocationService&) = delete;
  AllocationService& operator=(const AllocationService&) = delete;

  // Before Start: who hears about allocations of `kind`.
  void SetOwner(TaskKind kind, AllocationOwner owner);
  void Start();
  void Stop();

  // The next submit order (rm::GangLaunch::submit_order): one sequence for every owner, so a
  // pool's requests of equal priority are served in the order they were made, whatever their kind.
  int64_t NextSubmitOrder() { return ++submit_order_; }

  void Submit(TaskLaunch request);
  void Adopt(TaskLaunch request, const std::string& external_id, bool running);
  void Kill(const std::string& allocation_id);
  void Withdraw(const std::string& allocation_id);
  void Release(const std::string& allocation_id);
  bool MarkRunning(const std::string& allocation_id);
  void RecordRankFailure(const std::string& allocation_id, int rank, const std::string& host,
                         const std::string& reason);

  // Where the ranks of allocations meet (TrialLink Rendezvous); the service opens and closes
  // each allocation's entry, and keeps its rounds in the store's database so that a restarted
  // master continues a gang's bootstrap (rendezvous_journal.h).
  RendezvousBoard& rendezvous() { return rendezvous_; }

  // ---- Queries
  // Why a gang of `world_size` ranks could never be placed in `pool`: a pool no manager has, or
  // more ranks than the pool has slots. `field` is "resource_pool" or "slots". Nullopt when it
  // could be placed, or while the agents' manager knows no agent yet (a cluster starting).
  struct Unplaceable {
    std::string field, message;
  };
  std::optional<Unplaceable> CheckPlaceable(const std::string& pool, int world_size) const;
  // Whether `pool`'s gangs go to a manager other than the default, and that manager's Kind().
  bool IsExternal(const std::string& pool) const;
  std::string ManagerKind(const std::string& pool) const;
  // Why each held allocation waits, as its manager last said (only those with a reason).
  std::map<std::string, std::string> PendingReasons() const;
  // Every manager's machines; every pool its manager knows, with its running allocations of
  // trials counted (running_trials); the default manager's size (the agents).
  std::vector<steadfast::v1::Agent> Agents() const;
  std::vector<steadfast::v1::ResourcePool> Pools() const;
  rm::PoolSize DefaultSize() const;

 private:
  struct Allocation {
    TaskKind kind = TaskKind::kTrial;
    int64_t owner = 0;
    rm::ResourceManager* manager = nullptr;
    std::string pool;
    int world_size = 0;
    bool running = false;
    std::string external_id, pending_reason, reported_failure;
    std::map<int, std::string> rank_hosts;
  };
  rm::ResourceManager& ManagerFor(const std::string& pool) const;
  // The record of a newly held allocation (Submit, Adopt). Requires mu_.
  Allocation& HoldLocked(const TaskLaunch& request, rm::ResourceManager& manager);
  std::vector<rm::ResourceManager*> Managers() const;
  // Records a manager's event; false when it goes nowhere. Fills `update`. Requires mu_.
  bool RecordLocked(rm::ResourceManager& from, const rm::AllocationEvent& event, AllocationUpdate& update);
  void ForgetLocked(const std::string& allocation_id);
  // The manager holding `allocation_id` (forgotten with `forget`); null when none is held.
  rm::ResourceManager* HeldBy(const std::string& allocation_id, bool forget);
  void OnEvent(rm::ResourceManager& from, const rm::AllocationEvent& event);

  Store* store_;
  rm::ResourceManager* default_;
  std::map<std::string, rm::ResourceManager*> external_;
  std::map<TaskKind, AllocationOwner> owners_;
  std::unique_ptr<RendezvousJournal> journal_;  // the rounds in PostgreSQL, for a restart
  RendezvousBoard rendezvous_;
  mutable std::mutex mu_;
  std::map<std::string, Allocation> held_;
  std::atomic<int64_t> submit_order_{0};
};

}  // namespace sf::master
