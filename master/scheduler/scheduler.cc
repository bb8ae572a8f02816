#include "master/scheduler/scheduler.h"

#include <algorithm>

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
  return Status::Ok();
}

bool Scheduler::Release(const std::string& allocation_id) {
  auto q = queued_ids_.find(allocation_id);
  if (q != queued_ids_.end()) {
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
  running_[r.allocation_id] = Running{r, slots};
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

std::vector<Assignment> Scheduler::Schedule() {
  std::vector<Assignment> out;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const AllocationRequest& r = it->second;
    std::vector<SlotRef> slots = Place(r.resource_pool, r.slots);
    if (slots.empty()) {
      ++it;  // doesn't fit now: stays queued; later requests may still fit (backfilling)
      continue;
    }
    for (const SlotRef& ref : slots) FindSlot(ref)->allocation = r.allocation_id;
    out.push_back(Assignment{r.allocation_id, slots});
    running_[r.allocation_id] = Running{r, std::move(slots)};
    queued_ids_.erase(r.allocation_id);
    it = queue_.erase(it);
  }
  return out;
}

std::vector<std::string> Scheduler::PreemptionCandidates() const {
  std::vector<std::string> victims;
  std::set<std::string> chosen;
  std::map<std::string, int> free;  // per pool, counting slots the chosen victims will free
  for (const auto& [key, r] : queue_) {
    if (!free.count(r.resource_pool)) free[r.resource_pool] = FreeInPool(r.resource_pool);
    int& pool_free = free[r.resource_pool];
    if (r.slots <= pool_free) {
      pool_free -= r.slots;  // it will start at the next Schedule(); keep its room
      continue;
    }
    if (r.slots > TotalInPool(r.resource_pool)) continue;  // can never fit
    // Lower-priority allocations in this pool: lowest priority first, then newest first.
    std::vector<const Running*> lower;
    for (const auto& [id, run] : running_) {
      if (run.request.resource_pool == r.resource_pool && run.request.priority > r.priority &&
          !chosen.count(id)) {
        lower.push_back(&run);
      }
    }
    std::sort(lower.begin(), lower.end(), [](const Running* a, const Running* b) {
      return std::tie(b->request.priority, b->request.submit_order) <
             std::tie(a->request.priority, a->request.submit_order);
    });
    int gained = 0;
    size_t take = 0;
    while (take < lower.size() && pool_free + gained < r.slots) {
      for (const SlotRef& ref : lower[take]->slots) {
        auto agent = agents_.find(ref.agent_id);
        if (agent == agents_.end()) continue;
        for (const Slot& s : agent->second.slots) gained += s.id == ref.slot_id && s.enabled;
      }
      ++take;
    }
    if (pool_free + gained < r.slots) continue;  // pausing everything below it is not enough
    for (size_t i = 0; i < take; ++i) {
      chosen.insert(lower[i]->request.allocation_id);
      victims.push_back(lower[i]->request.allocation_id);
    }
    pool_free = pool_free + gained - r.slots;
  }
  return victims;
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
