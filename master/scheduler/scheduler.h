// The scheduler: which allocation (a trial's gang of slots) runs on which agent slots, which
// running allocations must yield theirs, and why each waiting request waits.
//
// Agents bring slots into resource pools; allocation requests wait in a queue until Schedule()
// finds them room. The scheduler is pure bookkeeping — no I/O, no threads, and no clock of its
// own (the caller passes `now`, in seconds on any monotonic clock) — so the master's coordinator
// owns it, feeds it agent and allocation events, and acts on what it returns. Not thread-safe:
// one owner calls it from one thread. docs/scheduling.md describes the policy for users.
//
// Promises:
//   * No slot is ever in two allocations.
//   * Gang allocation: a request gets all of its `slots` at once, or waits.
//   * An experiment never holds more than its request's `max_slots` (when > 0) across its
//     running allocations: a request that would pass it waits.
//   * Each pool runs one mode (SetPoolMode), priority by default:
//     - priority: requests are considered by priority (1..99, lower first), then submit_order.
//       Backfilling: a request that does not fit now does not block requests behind it; a
//       smaller or lower-priority request that fits is started — except into slots that a
//       higher-priority request is waiting to get back from allocations Preempt() asked to stop
//       (those are held for it).
//     - fair_share: the pool's slots are divided between the experiments that want them in
//       proportion to their `weight` (FairShares(): no experiment's share exceeds what it asks
//       for or its max_slots; what it leaves is divided between the others). An experiment below
//       its share starts a request that fits; one at or above its share starts one only while no
//       other experiment of the pool waits. Among experiments, the one furthest below its share
//       goes first.
//   * After Schedule(), a queued request that fits in the free slots of its pool is held back by
//     max_slots, its fair share or slots held for a higher-priority request.
//   * Packing: a request goes on one agent when any agent has enough free slots (the one with
//     the fewest free slots that suffices: best fit); otherwise on as few agents as possible
//     (largest free first, the last agent chosen by best fit for the remainder).
//   * A request larger than its pool's total stays queued (a bigger agent may join later).
//   * Preemption (Preempt()) never picks an allocation that has run less than min_run_seconds,
//     and asks each allocation to stop at most once per run.
//   * Every queued request has a pending reason (PendingReason()), as of the last Schedule() or
//     Preempt(), in words a user can act on. The reasons are worked out when first asked for
//     after a pass, not by every pass: a pass after each of thousands of starts costs no string
//     per queued request.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace sf::master {

// Why a trial preempted for trial `by` waits: the scheduler's pending reason for it, and the
// coordinator's until its request reaches the scheduler again.
inline std::string PreemptedReason(int64_t by) {
  return "preempted by trial " + std::to_string(by) + "; resumes when slots free";
}

struct SlotRef {
  std::string agent_id;
  std::string slot_id;
  friend bool operator==(const SlotRef& a, const SlotRef& b) {
    return a.agent_id == b.agent_id && a.slot_id == b.slot_id;
  }
  friend bool operator<(const SlotRef& a, const SlotRef& b) {
    return std::tie(a.agent_id, a.slot_id) < std::tie(b.agent_id, b.slot_id);
  }
};

struct AllocationRequest {
  std::string allocation_id;  // unique among queued and running allocations
  int64_t experiment_id = 0;
  int64_t trial_id = 0;
  std::string resource_pool = "default";
  int slots = 1;             // >= 1
  int priority = 42;         // 1..99, lower runs first
  int64_t submit_order = 0;  // monotonic, from the caller (e.g. a database sequence)
  // Of the experiment, the same on each of its requests: the most slots its running
  // allocations may hold together (0: no limit), and its weight for fair share (> 0).
  int max_slots = 0;
  double weight = 1.0;
  // The trial whose request preempted this one's last run (0: none), so it waits saying so
  // ("preempted by trial N") even when the preemption happened before a master restart.
  int64_t preempted_by = 0;
};

enum class SchedulingMode { kPriority, kFairShare };
// "priority" / "fair_share" (the master config's words); nullopt for anything else.
std::optional<SchedulingMode> SchedulingModeFromName(const std::string& name);
const char* SchedulingModeName(SchedulingMode mode);

// A running allocation the scheduler wants back: the caller asks its trial to checkpoint and
// stop, then Release()s it when it has exited (or kills it after a grace period).
struct Preemption {
  std::string allocation_id;
  int64_t trial_id = 0;
  std::string for_allocation_id;  // the waiting request it makes room for
  int64_t for_trial_id = 0;       // ... and its trial
};

// One experiment's claim on a fair-share pool.
struct ShareClaim {
  int64_t experiment_id = 0;
  double weight = 1.0;  // > 0
  int demand = 0;       // slots it could use now (running + queued, capped by max_slots)
};
// Divides `total` slots between claims in proportion to weight, no claim getting more than
// its demand; what capped claims leave over is divided between the rest the same way (water
// filling). Returns experiment id -> share (fractional slots; the shares add up to
// min(total, sum of demands)).
std::map<int64_t, double> FairShares(int total, const std::vector<ShareClaim>& claims);

// Where an allocation runs. Slot i is rank i; the slots of one agent are contiguous.
struct Assignment {
  std::string allocation_id;
  std::vector<SlotRef> slots;
};

class Scheduler {
 public:
  Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  Scheduler(Scheduler&&) = default;
  Scheduler& operator=(Scheduler&&) = default;

  // Registers an agent with its slots (in rank order) in `pool`. Re-adding an agent replaces its
  // slot list and pool: allocations keep the slots that still exist (same id, same pool); those
  // that lose any slot are removed whole, and their ids are returned, sorted, for the caller to
  // fail or restart (as with RemoveAgent). New slots start enabled; slots that stay keep their
  // enabled flag (an agent reconnecting does not undo an administrator's SetSlotEnabled).
  std::vector<std::string> AddAgent(const std::string& agent_id, const std::string& pool,
                                    const std::vector<std::string>& slot_ids);
  // Forgets an agent. Every allocation that had a slot on it is removed whole (its slots on
  // other agents are freed); their ids are returned, sorted. Unknown agents: nothing happens.
  std::vector<std::string> RemoveAgent(const std::string& agent_id);
  // A disabled slot gets no new allocations; an allocation already on it keeps it.
  // NotFound for an unknown agent or slot.
  Status SetSlotEnabled(const std::string& agent_id, const std::string& slot_id, bool enabled);

  // Queues a request. InvalidArgument for slots < 1, a priority outside 1..99 or an empty id;
  // AlreadyExists when the id is queued or running.
  Status Submit(const AllocationRequest& request);
  // Frees a running allocation's slots or drops a queued request. Returns false for unknown ids.
  bool Release(const std::string& allocation_id);
  // After a master restart: records an allocation already running on `slots` (as the agents
  // report). All or nothing: every slot must exist on a registered agent of the request's pool,
  // be free and be named once, and there must be exactly request.slots of them; otherwise an
  // error (NotFound for unknown agents/slots — retry once the agent has registered —,
  // FailedPrecondition for taken slots, InvalidArgument for the rest) and nothing changes.
  Status Adopt(const AllocationRequest& request, const std::vector<SlotRef>& slots);

  // The pool's mode; pools never named get the default mode (priority unless set).
  void SetPoolMode(const std::string& pool, SchedulingMode mode);
  void SetDefaultPoolMode(SchedulingMode mode) { default_mode_ = mode; }
  SchedulingMode PoolMode(const std::string& pool) const;
  // Allocations that have run less than this are never preempted (default 0).
  void SetMinRunSeconds(double seconds) { min_run_seconds_ = seconds; }

  // Starts every queued request the pool's mode lets start (see the promises above), in the
  // order that mode considers them, and returns the new assignments in that order. `now` is the
  // start time recorded for min_run_seconds.
  std::vector<Assignment> Schedule(double now = 0);

  // Running allocations that must yield their slots, each named once per run (an allocation
  // already asked stays asked until Release()):
  //   * priority pools: for each queued request in order that does not fit even with the slots
  //     of allocations already asked to stop, the lowest-priority (then most recently
  //     submitted) running allocations of strictly lower priority, when stopping them frees
  //     enough slots (otherwise none);
  //   * fair-share pools: for each experiment below its share with a request that does not fit,
  //     allocations of experiments that stay at or above their share without them (furthest
  //     above first, newest first) — or, for an experiment short of its share by a whole gang
  //     or more, of any experiment above its share — when that frees enough slots. Once settled,
  //     every experiment is within one gang of its share, or above it only on slots that no
  //     experiment below its share could be given.
  // Allocations younger than min_run_seconds at `now` are passed over. Slots of allocations
  // asked to stop are held for the requests they were asked for (Schedule() does not backfill
  // them), and the trials they belong to wait, once re-submitted, with "preempted by trial N".
  std::vector<Preemption> Preempt(double now);
  // Whether Preempt() has asked this running allocation to stop.
  bool Preempting(const std::string& allocation_id) const;

  // Why a queued request waits, as of the last Schedule() or Preempt() (e.g. "needs 4 slots in
  // pool gpu; largest free gang is 3 across 2 agents", "experiment at max_slots 8", "behind 3
  // trials of higher priority", "preempted by trial 42; resumes when slots free"); empty for a
  // running or unknown allocation.
  std::string PendingReason(const std::string& allocation_id) const;

  struct PoolStats {
    int total_slots = 0;  // enabled slots
    int used_slots = 0;   // slots held by allocations (disabled ones included)
    int agents = 0;
  };
  // Per pool that has at least one agent.
  std::map<std::string, PoolStats> Stats() const;
  // The waiting requests, in scheduling order.
  std::vector<AllocationRequest> Queue() const;
  std::optional<Assignment> AssignmentOf(const std::string& allocation_id) const;
  // The request of a queued or running allocation.
  std::optional<AllocationRequest> RequestOf(const std::string& allocation_id) const;

 private:
  struct Slot {
    std::string id;
    bool enabled = true;
    std::string allocation;  // empty: free
  };
  struct Agent {
    std::string pool;
    std::vector<Slot> slots;  // rank order
    int FreeSlots() const;
  };
  struct Running {
    AllocationRequest request;
    std::vector<SlotRef> slots;
    double started = 0;         // Schedule()'s `now` (Adopt: -infinity, long enough ago)
    bool stopping = false;      // asked to stop by Preempt()
    std::string stopping_for;   // ... to make room for this queued allocation
  };
  using QueueKey = std::tuple<int, int64_t, std::string>;  // priority, submit_order, id
  static QueueKey KeyOf(const AllocationRequest& r) {
    return {r.priority, r.submit_order, r.allocation_id};
  }

  Slot* FindSlot(const SlotRef& ref);
  // Frees the slots of a running allocation and forgets it.
  void Evict(const std::string& allocation_id);
  // Picks slots for `slots` in `pool`; empty when they don't fit.
  std::vector<SlotRef> Place(const std::string& pool, int slots) const;
  int FreeInPool(const std::string& pool) const;
  int TotalInPool(const std::string& pool) const;
  // Slots held by the experiment's running allocations.
  int UsedByExperiment(int64_t experiment_id) const;
  bool AtMaxSlots(const AllocationRequest& r) const;
  // Queued requests that running allocations asked to stop make room for.
  std::set<std::string> Awaited() const;
  // Slots that running allocations asked to stop will free, per pool.
  std::map<std::string, int> Incoming() const;
  // Fair shares of the experiments with running or queued allocations in `pool`.
  std::map<int64_t, double> SharesInPool(const std::string& pool) const;
  std::vector<Assignment> ScheduleFairShare(const std::string& pool, double now);
  void Start(const AllocationRequest& r, std::vector<SlotRef> slots, double now,
             std::vector<Assignment>& out);
  // Recomputes pending_ for every queued request when a pass ran since it last did.
  void ExplainQueue() const;
  std::vector<Preemption> PreemptForPriority(const std::string& pool, double now);
  std::vector<Preemption> PreemptForFairShare(const std::string& pool, double now);

  std::map<std::string, Agent> agents_;
  std::map<QueueKey, AllocationRequest> queue_;
  std::map<std::string, QueueKey> queued_ids_;
  std::map<std::string, Running> running_;
  std::map<std::string, SchedulingMode> modes_;
  SchedulingMode default_mode_ = SchedulingMode::kPriority;
  double min_run_seconds_ = 0;
  // Trials whose allocation Preempt() stopped, and for whom: until they run again.
  std::map<int64_t, int64_t> preempted_by_;
  // Pool -> queued request held free slots for (priority pools; set by Schedule()).
  std::map<std::string, int> held_;
  mutable std::map<std::string, std::string> pending_;  // allocation id -> reason
  mutable bool explained_ = true;  // pending_ is as of the last pass (ExplainQueue)
};

}  // namespace sf::master
