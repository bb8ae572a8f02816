// Scheduler: which running allocations to stop for a waiting one — by priority, or to bring a
// pool back to its fair shares (Preempt() in scheduler.h). The rest is in scheduler.cc.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace sf::master {

std::vector<Preemption> Scheduler::Preempt(double now) {
  std::set<std::string> pools;
  const std::string* last = nullptr;  // runs of one pool are common: one set insert per run
  for (const auto& [key, r] : queue_) {
    if (last && *last == r.resource_pool) continue;
    pools.insert(r.resource_pool);
    last = &r.resource_pool;
  }
  std::vector<Preemption> out;
  for (const std::string& pool : pools) {
    auto more = PoolMode(pool) == SchedulingMode::kFairShare ? PreemptForFairShare(pool, now)
                                                               : PreemptForPriority(pool, now);
    out.insert(out.end(), more.begin(), more.end());
  }
  for (const Preemption& p : out) {
    Running& run = running_[p.allocation_id];
    run.stopping = true;
    run.stopping_for = p.for_allocation_id;
    preempted_by_[p.trial_id] = p.for_trial_id;
  }
  if (!out.empty()) explained_ = false;
  return out;
}

bool Scheduler::Preempting(const std::string& allocation_id) const {
  auto it = running_.find(allocation_id);
  return it != running_.end() && it->second.stopping;
}

std::vector<Preemption> Scheduler::PreemptForPriority(const std::string& pool, double now) {
  std::vector<Preemption> out;
  std::set<std::string> chosen;
  int avail = FreeInPool(pool) + Incoming()[pool];  // counting slots already asked back
  const int total = TotalInPool(pool);
  // The allocations that may be asked to stop, once per pass: lowest priority first, then newest
  // first. A waiting request may take those of lower priority than its own — a prefix of this
  // list — so one that outranks none of them costs nothing (thousands of equal-priority trials
  // queued behind a full pool).
  std::vector<const Running*> candidates;
  for (const auto& [id, run] : running_) {
    if (run.request.resource_pool == pool && !run.stopping && now - run.started >= min_run_seconds_) {
      candidates.push_back(&run);
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Running* a, const Running* b) {
    return std::tie(b->request.priority, b->request.submit_order) <
           std::tie(a->request.priority, a->request.submit_order);
  });
  for (const auto& [key, r] : queue_) {
    if (r.resource_pool != pool || AtMaxSlots(r)) continue;
    if (r.slots <= avail) {
      avail -= r.slots;  // it starts once they are free; keep its room
      continue;
    }
    if (r.slots > total) continue;  // can never fit
    if (candidates.empty() || candidates.front()->request.priority <= r.priority) continue;  // outranks none
    std::vector<const Running*> take;
    int gained = 0;
    for (const Running* run : candidates) {
      if (avail + gained >= r.slots || run->request.priority <= r.priority) break;
      if (chosen.count(run->request.allocation_id)) continue;
      take.push_back(run);
      gained += static_cast<int>(run->slots.size());
    }
    if (avail + gained < r.slots) continue;  // stopping everything below it is not enough
    for (const Running* run : take) {
      chosen.insert(run->request.allocation_id);
      out.push_back(Preemption{run->request.allocation_id, run->request.trial_id, r.allocation_id, r.trial_id});
    }
    avail = avail + gained - r.slots;
  }
  return out;
}

std::vector<Preemption> Scheduler::PreemptForFairShare(const std::string& pool, double now) {
  std::vector<Preemption> out;
  const std::map<int64_t, double> share = SharesInPool(pool);
  std::map<int64_t, int> used;  // slots each experiment keeps (not counting those asked back)
  for (const auto& [id, run] : running_) {
    if (run.request.resource_pool == pool && !run.stopping) {
      used[run.request.experiment_id] += static_cast<int>(run.slots.size());
    }
  }
  auto share_of = [&](int64_t e) {
    auto s = share.find(e);
    return s == share.end() ? 0.0 : s->second;
  };
  int avail = FreeInPool(pool) + Incoming()[pool];
  // Each experiment's waiting requests, in queue order.
  std::map<int64_t, std::vector<const AllocationRequest*>> waiting;
  for (const auto& [key, r] : queue_) {
    if (r.resource_pool == pool && !AtMaxSlots(r)) waiting[r.experiment_id].push_back(&r);
  }
  std::map<int64_t, size_t> next;  // per experiment: its next request to consider
  std::set<std::string> chosen;
  while (true) {
    // The experiment furthest below its share that still has a request to consider.
    const AllocationRequest* request = nullptr;
    double lowest = 0;
    for (const auto& [e, list] : waiting) {
      const double s = share_of(e);
      if (next[e] >= list.size() || s <= 0 || used[e] >= s) continue;
      if (!request || used[e] / s < lowest) {
        request = list[next[e]];
        lowest = used[e] / s;
      }
    }
    if (!request) break;
    next[request->experiment_id]++;
    const AllocationRequest& r = *request;
    if (r.slots <= avail) {
      avail -= r.slots;
      used[r.experiment_id] += r.slots;
      continue;
    }
    // Take from the experiment furthest above its share, newest first: allocations whose
    // experiment stays at or above its share without them, or — when this experiment is short
    // of its share by a whole gang or more — of any experiment above its share (which then
    // ends less than one of its own gangs below it).
    const bool starved = used[r.experiment_id] + r.slots <= share_of(r.experiment_id);
    std::vector<Preemption> picked;
    std::map<int64_t, int> after = used;
    int gained = 0;
    while (avail + gained < r.slots) {
      const Running* victim = nullptr;
      double victim_excess = 0;
      for (const auto& [id, run] : running_) {
        const int64_t e = run.request.experiment_id;
        const int g = static_cast<int>(run.slots.size());
        if (run.request.resource_pool != pool || e == r.experiment_id || run.stopping ||
            chosen.count(id) || now - run.started < min_run_seconds_ ||
            (after[e] - g < share_of(e) && !(starved && after[e] > share_of(e)))) {
          continue;
        }
        const double excess = after[e] - share_of(e);
        if (!victim || excess > victim_excess ||
            (excess == victim_excess && run.request.submit_order > victim->request.submit_order)) {
          victim = &run;
          victim_excess = excess;
        }
      }
      if (!victim) break;
      after[victim->request.experiment_id] -= static_cast<int>(victim->slots.size());
      gained += static_cast<int>(victim->slots.size());
      chosen.insert(victim->request.allocation_id);
      picked.push_back(Preemption{victim->request.allocation_id, victim->request.trial_id,
                                  r.allocation_id, r.trial_id});
    }
    if (avail + gained < r.slots) {
      for (const Preemption& p : picked) chosen.erase(p.allocation_id);
      continue;
    }
    used = after;
    used[r.experiment_id] += r.slots;
    avail = avail + gained - r.slots;
    out.insert(out.end(), picked.begin(), picked.end());
  }
  return out;
}

}  // namespace sf::master
