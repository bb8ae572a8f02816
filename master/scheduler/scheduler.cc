#include "master/scheduler/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace sf::master {

int Scheduler::Agent::FreeSlots() const {
  int n = 0;
  for (const Slot& s : slots) n += s.enabled && s.allocation.empty();
  return n;
}

Scheduler::Slot* Scheduler::FindSlot(const SlotRef& ref) {
  auto it = agents_.find(ref.agent_id);
  if (it == agents_.end()) return nullptr;
  for (Slot& s : it->second.slots) {
    if (s.id == ref.slot_id) return &s;
  }
  return nullptr;
}

void Scheduler::Evict(const std::string& allocation_id) {
  auto it = running_.find(allocation_id);
  if (it == running_.end()) return;
  for (const SlotRef& ref : it->second.slots) {
    Slot* s = FindSlot(ref);
    if (s && s->allocation == allocation_id) s->allocation.clear();
  }
  running_.erase(it);
}

std::vector<std::string> Scheduler::AddAgent(const std::string& agent_id, const std::string& pool,
                                             const std::vector<std::string>& slot_ids) {
  Agent next;
  next.pool = pool;
  std::set<std::string> seen;
  for (const std::string& id : slot_ids) {
    if (seen.insert(id).second) next.slots.push_back(Slot{id, true, ""});
  }
  std::set<std::string> lost;
  auto it = agents_.find(agent_id);
  if (it != agents_.end()) {
    for (const Slot& old : it->second.slots) {
      auto kept = std::find_if(next.slots.begin(), next.slots.end(),
                               [&](const Slot& s) { return s.id == old.id; });
      if (kept != next.slots.end()) kept->enabled = old.enabled;
      if (old.allocation.empty()) continue;
      if (kept == next.slots.end() || it->second.pool != pool) {
        lost.insert(old.allocation);
      } else {
        kept->allocation = old.allocation;
      }
    }
  }
  agents_[agent_id] = std::move(next);
  for (const std::string& id : lost) Evict(id);
  return {lost.begin(), lost.end()};
}

std::vector<std::string> Scheduler::RemoveAgent(const std::string& agent_id) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return {};
  std::set<std::string> lost;
  for (const Slot& s : it->second.slots) {
    if (!s.allocation.empty()) lost.insert(s.allocation);
  }
  agents_.erase(it);
  for (const std::string& id : lost) Evict(id);
  return {lost.begin(), lost.end()};
}

Status Scheduler::SetSlotEnabled(const std::string& agent_id, const std::string& slot_id,
                                 bool enabled) {
  Slot* s = FindSlot(SlotRef{agent_id, slot_id});
  if (!s) return NotFound("slot " + agent_id + "/" + slot_id + " is not registered");
  s->enabled = enabled;
  return Status::Ok();
}

Status Scheduler::Submit(const AllocationRequest& r) {
  if (r.allocation_id.empty()) return InvalidArgument("allocation request without an id");
  if (r.slots < 1) {
    return InvalidArgument("allocation " + r.allocation_id + ": slots " + std::to_string(r.slots) +
                           " must be >= 1");
  }
  if (r.priority < 1 || r.priority > 99) {
    return InvalidArgument("allocation " + r.allocation_id + ": priority " +
                           std::to_string(r.priority) + " must be in 1..99");
  }
  if (queued_ids_.count(r.allocation_id) || running_.count(r.allocation_id)) {
    return Status(StatusCode::kAlreadyExists, "allocation " + r.allocation_id + " already exists");
  }
  queue_[KeyOf(r)] = r;
  queued_ids_[r.allocation_id] = KeyOf(r);
  if (r.preempted_by > 0) preempted_by_[r.trial_id] = r.preempted_by;
  return Status::Ok();
}

bool Scheduler::Release(const std::string& allocation_id) {
  auto q = queued_ids_.find(allocation_id);
  if (q != queued_ids_.end()) {
    preempted_by_.erase(queue_.at(q->second).trial_id);  // dropped, not waiting any more
    pending_.erase(allocation_id);
    queue_.erase(q->second);
    queued_ids_.erase(q);
    return true;
  }
  if (!running_.count(allocation_id)) return false;
  Evict(allocation_id);
  return true;
}

Status Scheduler::Adopt(const AllocationRequest& r, const std::vector<SlotRef>& slots) {
  if (r.allocation_id.empty()) return InvalidArgument("allocation request without an id");
  if (running_.count(r.allocation_id)) {
    return Status(StatusCode::kAlreadyExists,
                  "allocation " + r.allocation_id + " is already running");
  }
  if (static_cast<int>(slots.size()) != r.slots) {
    return InvalidArgument("allocation " + r.allocation_id + " wants " + std::to_string(r.slots) +
                           " slots, " + std::to_string(slots.size()) + " given");
  }
  std::set<SlotRef> seen;
  for (const SlotRef& ref : slots) {
    const std::string name = ref.agent_id + "/" + ref.slot_id;
    if (!seen.insert(ref).second) return InvalidArgument("slot " + name + " is named twice");
    auto agent = agents_.find(ref.agent_id);
    if (agent == agents_.end()) return NotFound("agent " + ref.agent_id + " is not registered");
    if (agent->second.pool != r.resource_pool) {
      return InvalidArgument("slot " + name + " is in pool " + agent->second.pool + ", not " +
                             r.resource_pool);
    }
    Slot* s = FindSlot(ref);
    if (!s) return NotFound("slot " + name + " is not registered");
    if (!s->allocation.empty()) {
      return FailedPrecondition("slot " + name + " is held by allocation " + s->allocation);
    }
  }
  // All checks passed: from here nothing fails.
  Release(r.allocation_id);  // a queued copy of the same allocation is now running
  for (const SlotRef& ref : slots) FindSlot(ref)->allocation = r.allocation_id;
  // Running since before the master's restart: long enough for min_run_seconds.
  running_[r.allocation_id] = Running{r, slots, -std::numeric_limits<double>::infinity(), false, ""};
  return Status::Ok();
}

int Scheduler::FreeInPool(const std::string& pool) const {
  int n = 0;
  for (const auto& [id, a] : agents_) {
    if (a.pool == pool) n += a.FreeSlots();
  }
  return n;
}

int Scheduler::TotalInPool(const std::string& pool) const {
  int n = 0;
  for (const auto& [id, a] : agents_) {
    if (a.pool != pool) continue;
    for (const Slot& s : a.slots) n += s.enabled;
  }
  return n;
}

std::vector<SlotRef> Scheduler::Place(const std::string& pool, int want) const {
  // Candidate agents with free slots: (free, agent id).
  std::vector<std::pair<int, const std::string*>> candidates;
  int free_total = 0;
  for (const auto& [id, a] : agents_) {
    if (a.pool != pool) continue;
    const int free = a.FreeSlots();
    if (free > 0) candidates.emplace_back(free, &id);
    free_total += free;
  }
  if (free_total < want) return {};
  // Largest first (ties: agent id), so the first k agents are the fewest that can hold it.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const std::string*> chosen;
  int remaining = want;
  size_t next = 0;
  while (remaining > 0) {
    // Best fit for what is left: the smallest agent (from `next` on) that holds all of it.
    const std::string* fit = nullptr;
    int fit_free = 0;
    for (size_t i = next; i < candidates.size(); ++i) {
      if (candidates[i].first >= remaining && (!fit || candidates[i].first < fit_free)) {
        fit = candidates[i].second;  // ties: the lower agent id (stable order)
        fit_free = candidates[i].first;
      }
    }
    if (fit) {
      chosen.push_back(fit);
      break;
    }
    chosen.push_back(candidates[next].second);
    remaining -= candidates[next].first;
    ++next;
  }
  std::vector<SlotRef> out;
  for (const std::string* id : chosen) {
    for (const Slot& s : agents_.at(*id).slots) {
      if (static_cast<int>(out.size()) == want) break;
      if (s.enabled && s.allocation.empty()) out.push_back(SlotRef{*id, s.id});
    }
  }
  return out;
}

std::optional<SchedulingMode> SchedulingModeFromName(const std::string& name) {
  if (name == "priority") return SchedulingMode::kPriority;
  if (name == "fair_share") return SchedulingMode::kFairShare;
  return std::nullopt;
}

const char* SchedulingModeName(SchedulingMode mode) {
  return mode == SchedulingMode::kFairShare ? "fair_share" : "priority";
}

std::map<int64_t, double> FairShares(int total, const std::vector<ShareClaim>& claims) {
  std::map<int64_t, double> share;
  std::vector<const ShareClaim*> open;
  for (const ShareClaim& c : claims) {
    share[c.experiment_id] = 0;
    if (c.demand > 0 && c.weight > 0) open.push_back(&c);
  }
  double left = total;
  // Each round gives every open claim its weighted part of what is left; claims whose demand
  // that covers are capped at their demand and leave the round, and the round is repeated for
  // the others with what the capped ones did not use. At most one round per claim.
  while (!open.empty() && left > 1e-9) {
    double weights = 0;
    for (const ShareClaim* c : open) weights += c->weight;
    std::vector<const ShareClaim*> uncapped;
    double used = 0;
    for (const ShareClaim* c : open) {
      if (c->demand <= left * c->weight / weights) {
        share[c->experiment_id] = c->demand;
        used += c->demand;
      } else {
        uncapped.push_back(c);
      }
    }
    if (uncapped.size() == open.size()) {
      for (const ShareClaim* c : open) share[c->experiment_id] = left * c->weight / weights;
      break;
    }
    left -= used;
    open = std::move(uncapped);
  }
  return share;
}

void Scheduler::SetPoolMode(const std::string& pool, SchedulingMode mode) { modes_[pool] = mode; }

SchedulingMode Scheduler::PoolMode(const std::string& pool) const {
  auto it = modes_.find(pool);
  return it == modes_.end() ? default_mode_ : it->second;
}

int Scheduler::UsedByExperiment(int64_t experiment_id) const {
  int n = 0;
  for (const auto& [id, run] : running_) {
    if (run.request.experiment_id == experiment_id) n += static_cast<int>(run.slots.size());
  }
  return n;
}

bool Scheduler::AtMaxSlots(const AllocationRequest& r) const {
  return r.max_slots > 0 && UsedByExperiment(r.experiment_id) + r.slots > r.max_slots;
}

std::map<std::string, int> Scheduler::Incoming() const {
  std::map<std::string, int> out;
  for (const auto& [id, run] : running_) {
    if (run.stopping) out[run.request.resource_pool] += static_cast<int>(run.slots.size());
  }
  return out;
}

std::map<int64_t, double> Scheduler::SharesInPool(const std::string& pool) const {
  std::map<int64_t, ShareClaim> claims;
  std::map<int64_t, int> cap;
  auto claim = [&](const AllocationRequest& r, int slots) {
    ShareClaim& c = claims[r.experiment_id];
    c.experiment_id = r.experiment_id;
    c.weight = r.weight;
    c.demand += slots;
    if (r.max_slots > 0) cap[r.experiment_id] = r.max_slots;
  };
  for (const auto& [id, run] : running_) {
    if (run.request.resource_pool == pool) claim(run.request, static_cast<int>(run.slots.size()));
  }
  for (const auto& [key, r] : queue_) {
    if (r.resource_pool == pool) claim(r, r.slots);
  }
  std::vector<ShareClaim> list;
  for (auto& [id, c] : claims) {
    if (cap.count(id)) c.demand = std::min(c.demand, cap[id]);
    list.push_back(c);
  }
  return FairShares(TotalInPool(pool), list);
}

void Scheduler::Start(const AllocationRequest& r, std::vector<SlotRef> slots, double now,
                      std::vector<Assignment>& out) {
  for (const SlotRef& ref : slots) FindSlot(ref)->allocation = r.allocation_id;
  out.push_back(Assignment{r.allocation_id, slots});
  running_[r.allocation_id] = Running{r, std::move(slots), now, false, ""};
  preempted_by_.erase(r.trial_id);
  auto q = queued_ids_.find(r.allocation_id);
  queue_.erase(q->second);  // invalidates r
  queued_ids_.erase(q);
}

std::set<std::string> Scheduler::Awaited() const {
  std::set<std::string> out;
  for (const auto& [id, run] : running_) {
    if (run.stopping) out.insert(run.stopping_for);
  }
  return out;
}

std::vector<Assignment> Scheduler::Schedule(double now) {
  std::vector<Assignment> out;
  held_.clear();
  const std::set<std::string> awaited = Awaited();
  std::set<std::string> fair_pools;
  // Each pool's free slots, counted once per pass and kept current as requests start (a pass
  // over thousands of queued requests must not count every agent's slots for each).
  std::map<std::string, int> free_in_pool;
  auto free_of = [&](const std::string& pool) -> int& {
    auto it = free_in_pool.find(pool);
    if (it == free_in_pool.end()) it = free_in_pool.emplace(pool, FreeInPool(pool)).first;
    return it->second;
  };
  // In queue order, without a copy of the queue: Start() erases only the request it starts.
  for (auto it = queue_.begin(); it != queue_.end();) {
    const AllocationRequest& r = it->second;
    const auto next = std::next(it);
    const std::string& pool = r.resource_pool;
    if (PoolMode(pool) == SchedulingMode::kFairShare) {
      fair_pools.insert(pool);
      it = next;
      continue;
    }
    if (AtMaxSlots(r)) {
      it = next;
      continue;
    }
    const int free = free_of(pool) - held_[pool];
    if (r.slots <= free) {
      free_of(pool) -= r.slots;
      Start(r, Place(pool, r.slots), now, out);  // invalidates r
    } else if (awaited.count(r.allocation_id)) {
      held_[pool] += std::max(0, free);  // the slots it waits for are not backfilled
    }
    // Otherwise it doesn't fit now and stays queued; later requests may still fit (backfilling).
    it = next;
  }
  for (const std::string& pool : fair_pools) {
    for (Assignment& a : ScheduleFairShare(pool, now)) out.push_back(std::move(a));
  }
  explained_ = false;
  return out;
}

std::vector<Assignment> Scheduler::ScheduleFairShare(const std::string& pool, double now) {
  std::vector<Assignment> out;
  const std::map<int64_t, double> share = SharesInPool(pool);
  const std::set<std::string> awaited = Awaited();
  // Requests that preempted allocations make room for go first, and hold the free slots.
  std::vector<AllocationRequest> waiting;
  for (const auto& [key, r] : queue_) {
    if (r.resource_pool == pool && awaited.count(r.allocation_id)) waiting.push_back(r);
  }
  for (const AllocationRequest& r : waiting) {
    const int free = FreeInPool(pool) - held_[pool];
    if (r.slots <= free && !AtMaxSlots(r)) {
      Start(r, Place(pool, r.slots), now, out);
    } else {
      held_[pool] += std::max(0, free);
    }
  }
  // Then, one at a time, the request that fits of the experiment furthest below its share.
  while (true) {
    const int free = FreeInPool(pool) - held_[pool];
    const AllocationRequest* best = nullptr;
    double best_ratio = 0;
    std::map<int64_t, int> used;
    for (const auto& [key, r] : queue_) {
      if (r.resource_pool != pool || r.slots > free || AtMaxSlots(r) ||
          awaited.count(r.allocation_id)) {
        continue;
      }
      if (!used.count(r.experiment_id)) used[r.experiment_id] = UsedByExperiment(r.experiment_id);
      auto s = share.find(r.experiment_id);
      const double ratio = s == share.end() || s->second <= 0
                               ? std::numeric_limits<double>::infinity()
                               : used[r.experiment_id] / s->second;
      if (!best || ratio < best_ratio) {  // ties: queue order (priority, then submission)
        best = &r;
        best_ratio = ratio;
      }
    }
    if (!best) break;
    AllocationRequest r = *best;
    Start(r, Place(pool, r.slots), now, out);
  }
  return out;
}

namespace {
std::string Plural(int n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}
std::string Slots(double n) {
  char buf[32];
  if (n == static_cast<int>(n)) {
    std::snprintf(buf, sizeof buf, "%d", static_cast<int>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", n);
  }
  return buf;
}
}  // namespace

void Scheduler::ExplainQueue() const {
  if (explained_) return;
  explained_ = true;
  pending_.clear();
  std::map<std::string, int> stopping_for;  // waiting request -> allocations asked to stop
  for (const auto& [id, run] : running_) {
    if (run.stopping) stopping_for[run.stopping_for]++;
  }
  std::map<std::string, std::map<int64_t, double>> shares;
  // Per pool, once: its agents (and those with a free slot), its slots and free slots, and the
  // priorities of its queued requests in order (how many are ahead of one: a binary search).
  struct PoolCounts {
    int agents = 0, agents_with_free = 0, total = 0, free = 0;
    std::vector<int> priorities;
  };
  std::map<std::string, PoolCounts> pools;
  for (const auto& [id, a] : agents_) {
    PoolCounts& c = pools[a.pool];
    const int free = a.FreeSlots();
    c.agents++;
    c.agents_with_free += free > 0;
    c.free += free;
    for (const Slot& slot : a.slots) c.total += slot.enabled;
  }
  for (const auto& [key, r] : queue_) pools[r.resource_pool].priorities.push_back(r.priority);
  for (auto& [pool, c] : pools) std::sort(c.priorities.begin(), c.priorities.end());
  for (const auto& [key, r] : queue_) {
    const std::string& pool = r.resource_pool;
    std::string why;
    const PoolCounts& counts = pools[pool];
    const int agents = counts.agents, agents_with_free = counts.agents_with_free;
    const int total = counts.total;
    const int free = counts.free;
    auto needs = [&] {
      std::string s = "needs " + Plural(r.slots, "slot") + " in pool " + pool + "; ";
      if (free == 0) return s + (total == 1 ? "its only slot is busy" : "all " + Plural(total, "slot") + " are busy");
      return s + "largest free gang is " + std::to_string(free) + " across " +
             Plural(agents_with_free, "agent");
    };
    if (auto p = preempted_by_.find(r.trial_id); p != preempted_by_.end()) {
      why = PreemptedReason(p->second);
    } else if (agents == 0) {
      why = "needs " + Plural(r.slots, "slot") + " in pool " + pool + ", which has no agents";
    } else if (r.slots > total) {
      why = "needs " + Plural(r.slots, "slot") + " in pool " + pool + ", which has only " +
            Plural(total, "slot") + " across " + Plural(agents, "agent");
    } else if (AtMaxSlots(r)) {
      why = "experiment at max_slots " + std::to_string(r.max_slots);
    } else if (stopping_for.count(r.allocation_id)) {
      why = "waiting for " + Plural(stopping_for[r.allocation_id], "allocation") +
            " it preempted to checkpoint and stop";
    } else if (PoolMode(pool) == SchedulingMode::kFairShare) {
      if (!shares.count(pool)) shares[pool] = SharesInPool(pool);
      const int used = UsedByExperiment(r.experiment_id);
      const double share = shares[pool][r.experiment_id];
      why = needs();
      if (used >= share) {
        why = "experiment holds " + Plural(used, "slot") + ", its fair share is " + Slots(share) +
              " of " + std::to_string(total) + "; " + why;
      }
    } else {
      const int ahead = static_cast<int>(
          std::lower_bound(counts.priorities.begin(), counts.priorities.end(), r.priority) - counts.priorities.begin());
      why = needs();
      if (r.slots <= free) why = "free slots are held for a trial of higher priority";
      if (ahead > 0) why = "behind " + Plural(ahead, "trial") + " of higher priority; " + why;
    }
    pending_[r.allocation_id] = why;
  }
}

std::string Scheduler::PendingReason(const std::string& allocation_id) const {
  ExplainQueue();
  auto it = pending_.find(allocation_id);
  return it == pending_.end() ? "" : it->second;
}

std::map<std::string, Scheduler::PoolStats> Scheduler::Stats() const {
  std::map<std::string, PoolStats> out;
  for (const auto& [id, a] : agents_) {
    PoolStats& p = out[a.pool];
    ++p.agents;
    for (const Slot& s : a.slots) {
      p.total_slots += s.enabled;
      p.used_slots += !s.allocation.empty();
    }
  }
  return out;
}

std::vector<AllocationRequest> Scheduler::Queue() const {
  std::vector<AllocationRequest> out;
  for (const auto& [key, r] : queue_) out.push_back(r);
  return out;
}

std::optional<Assignment> Scheduler::AssignmentOf(const std::string& allocation_id) const {
  auto it = running_.find(allocation_id);
  if (it == running_.end()) return std::nullopt;
  return Assignment{allocation_id, it->second.slots};
}

std::optional<AllocationRequest> Scheduler::RequestOf(const std::string& allocation_id) const {
  auto q = queued_ids_.find(allocation_id);
  if (q != queued_ids_.end()) return queue_.at(q->second);
  auto it = running_.find(allocation_id);
  if (it != running_.end()) return it->second.request;
  return std::nullopt;
}

}  // namespace sf::master
