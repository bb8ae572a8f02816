// The scheduler: which allocation (a trial's gang of slots) runs on which agent slots.
//
// Agents bring slots into resource pools; allocation requests wait in a queue until Schedule()
// finds them room. The scheduler is pure bookkeeping — no I/O, no clocks, no threads — so the
// master's resource manager owns it, feeds it agent and allocation events, and acts on what it
// returns. Not thread-safe: one owner calls it from one thread.
//
// Promises:
//   * No slot is ever in two allocations.
//   * Gang allocation: a request gets all of its `slots` at once, or waits.
//   * Order: requests are considered by priority (1..99, lower first), then submit_order.
//   * Backfilling: a request that does not fit now does not block requests behind it; a smaller
//     or lower-priority request that fits is started. This keeps slots busy at the price that a
//     large request can wait while small ones keep arriving; PreemptionCandidates() is the
//     remedy for higher-priority requests (the caller pauses the allocations it names).
//   * After Schedule(), no queued request fits in the free slots of its pool.
//   * Packing: a request goes on one agent when any agent has enough free slots (the one with
//     the fewest free slots that suffices: best fit); otherwise on as few agents as possible
//     (largest free first, the last agent chosen by best fit for the remainder).
//   * A request larger than its pool's total stays queued (a bigger agent may join later).
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
};

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

  // Starts every queued request that fits, in (priority, submit_order) order, and returns the
  // new assignments in that order.
  std::vector<Assignment> Schedule();

  // Running allocations to pause (checkpoint and release) so that queued requests of higher
  // priority can fit: for each queued request in order that does not fit, the lowest-priority
  // (then most recently submitted) running allocations of strictly lower priority in its pool,
  // when pausing them frees enough slots. Changes nothing; ids in the order to pause them.
  std::vector<std::string> PreemptionCandidates() const;

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

  std::map<std::string, Agent> agents_;
  std::map<QueueKey, AllocationRequest> queue_;
  std::map<std::string, QueueKey> queued_ids_;
  std::map<std::string, Running> running_;
};

}  // namespace sf::master
