// Random event sequences against the scheduler, with its state checked against an independent
// model after every step: no slot is ever double-booked, every assignment has exactly its
// request's number of slots on live agents of its pool, no queued request fits after Schedule(),
// Schedule() starts requests in (priority, submit_order) order, and the stats add up.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>

#include "master/scheduler/scheduler.h"

namespace sf::master {
namespace {

struct ModelAgent {
  std::string pool;
  std::vector<std::string> slots;
  std::set<std::string> disabled;
};

class Checker {
 public:
  explicit Checker(uint64_t seed) : rng_(seed) {}

  void RunSteps(int steps) {
    for (int i = 0; i < steps && !::testing::Test::HasFailure(); ++i) {
      Step();
      CheckInvariants();
    }
  }

 private:
  int Rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::string Pool() { return Rand(0, 3) == 0 ? "gpu" : "default"; }

  void Forget(const std::vector<std::string>& lost) {
    for (const auto& id : lost) {
      EXPECT_TRUE(running_.count(id)) << "lost allocation " << id << " was not running";
      ++lost_;
      running_.erase(id);
    }
  }

  void Step() {
    const int op = Rand(0, 99);
    if (op < 12) {  // add or re-add an agent
      const std::string id = "agent" + std::to_string(Rand(0, 5));
      ModelAgent a;
      a.pool = agents_.count(id) && Rand(0, 3) ? agents_[id].pool : Pool();
      const int n = Rand(0, 4);
      for (int k = 0; k < n; ++k) a.slots.push_back("s" + std::to_string(Rand(0, 5)));
      std::sort(a.slots.begin(), a.slots.end());
      a.slots.erase(std::unique(a.slots.begin(), a.slots.end()), a.slots.end());
      // Which running allocations must lose slots: those on a slot that vanishes or moves pool.
      std::set<std::string> expect_lost;
      if (agents_.count(id)) {
        for (const auto& [alloc, req] : running_) {
          for (const SlotRef& s : SlotsOf(alloc)) {
            if (s.agent_id != id) continue;
            const bool kept =
                a.pool == agents_[id].pool && std::count(a.slots.begin(), a.slots.end(), s.slot_id);
            if (!kept) expect_lost.insert(alloc);
          }
        }
        // Disabled flags survive for kept slots.
        for (const auto& d : agents_[id].disabled) {
          if (std::count(a.slots.begin(), a.slots.end(), d)) a.disabled.insert(d);
        }
      }
      auto lost = sched_.AddAgent(id, a.pool, a.slots);
      EXPECT_EQ(std::set<std::string>(lost.begin(), lost.end()), expect_lost);
      Forget(lost);
      agents_[id] = a;
    } else if (op < 18) {  // remove an agent
      const std::string id = "agent" + std::to_string(Rand(0, 5));
      std::set<std::string> expect_lost;
      for (const auto& [alloc, req] : running_) {
        for (const SlotRef& s : SlotsOf(alloc)) {
          if (s.agent_id == id) expect_lost.insert(alloc);
        }
      }
      auto lost = sched_.RemoveAgent(id);
      EXPECT_EQ(std::set<std::string>(lost.begin(), lost.end()), expect_lost);
      Forget(lost);
      agents_.erase(id);
    } else if (op < 45) {  // submit
      AllocationRequest r;
      r.allocation_id = "alloc" + std::to_string(next_id_++);
      r.slots = Rand(1, 6);
      r.priority = Rand(1, 4) * 20;
      r.submit_order = next_order_++;
      r.resource_pool = Pool();
      ASSERT_TRUE(sched_.Submit(r).ok());
      queued_[r.allocation_id] = r;
    } else if (op < 62) {  // release something (running, queued or unknown)
      std::vector<std::string> ids;
      for (const auto& [id, r] : running_) ids.push_back(id);
      for (const auto& [id, r] : queued_) ids.push_back(id);
      ids.push_back("unknown");
      const std::string id = ids[static_cast<size_t>(Rand(0, static_cast<int>(ids.size()) - 1))];
      const bool known = running_.count(id) || queued_.count(id);
      EXPECT_EQ(sched_.Release(id), known);
      running_.erase(id);
      queued_.erase(id);
    } else if (op < 67) {  // toggle a slot
      if (agents_.empty()) return;
      auto it = agents_.begin();
      std::advance(it, Rand(0, static_cast<int>(agents_.size()) - 1));
      if (it->second.slots.empty()) return;
      const std::string& slot =
          it->second
              .slots[static_cast<size_t>(Rand(0, static_cast<int>(it->second.slots.size()) - 1))];
      const bool enable = Rand(0, 1);
      ASSERT_TRUE(sched_.SetSlotEnabled(it->first, slot, enable).ok());
      if (enable)
        it->second.disabled.erase(slot);
      else
        it->second.disabled.insert(slot);
    } else if (op < 72) {  // adopt onto free slots (valid), or onto a taken slot (refused)
      std::vector<SlotRef> free_slots, taken;
      std::string pool;
      std::set<SlotRef> used = UsedSlots();
      for (const auto& [id, a] : agents_) {
        for (const auto& s : a.slots) {
          SlotRef ref{id, s};
          if (used.count(ref)) {
            taken.push_back(ref);
          } else if (pool.empty() || a.pool == pool) {
            pool = a.pool;
            free_slots.push_back(ref);
          }
        }
      }
      AllocationRequest r;
      r.allocation_id = "adopted" + std::to_string(next_id_++);
      r.submit_order = next_order_++;
      if (!taken.empty() && Rand(0, 1)) {
        r.slots = 1;
        r.resource_pool = agents_[taken[0].agent_id].pool;
        EXPECT_EQ(sched_.Adopt(r, {taken[0]}).code(), StatusCode::kFailedPrecondition);
      } else if (!free_slots.empty()) {
        free_slots.resize(static_cast<size_t>(Rand(1, static_cast<int>(free_slots.size()))));
        r.slots = static_cast<int>(free_slots.size());
        r.resource_pool = pool;
        ASSERT_TRUE(sched_.Adopt(r, free_slots).ok());
        running_[r.allocation_id] = r;
      }
    } else {  // schedule
      std::map<std::string, int> free_before = FreeByPool();
      std::map<std::string, int> agent_free = FreeByAgent();
      auto assignments = sched_.Schedule();
      assigned_ += static_cast<int64_t>(assignments.size());
      std::tuple<int, int64_t> last{0, -1};
      for (const Assignment& a : assignments) {
        ASSERT_TRUE(queued_.count(a.allocation_id)) << a.allocation_id << " was not queued";
        const AllocationRequest r = queued_[a.allocation_id];  // a copy: erased below
        // Started in scheduling order.
        std::tuple<int, int64_t> key{r.priority, r.submit_order};
        EXPECT_LT(last, key);
        last = key;
        // Fewest agents: as many as the largest free agents of the pool need to hold it.
        std::set<std::string> agents;
        for (const SlotRef& s : a.slots) agents.insert(s.agent_id);
        std::vector<int> frees;
        for (const auto& [agent, free] : agent_free) {
          if (agents_[agent].pool == r.resource_pool) frees.push_back(free);
        }
        std::sort(frees.rbegin(), frees.rend());
        int fewest = 0;
        for (int sum = 0; sum < r.slots && fewest < static_cast<int>(frees.size()); ++fewest) {
          sum += frees[static_cast<size_t>(fewest)];
        }
        EXPECT_EQ(static_cast<int>(agents.size()), fewest) << a.allocation_id;
        multi_agent_ += agents.size() > 1;
        for (const SlotRef& s : a.slots) --agent_free[s.agent_id];
        running_[a.allocation_id] = r;
        queued_.erase(a.allocation_id);
        free_before[r.resource_pool] -= r.slots;
      }
      for (const auto& [pool, free] : free_before) EXPECT_GE(free, 0) << pool;
      // Nothing queued fits any more.
      std::map<std::string, int> free_after = FreeByPool();
      for (const auto& [id, r] : queued_) {
        EXPECT_GT(r.slots, free_after[r.resource_pool])
            << id << " fits in pool " << r.resource_pool << " but stayed queued";
      }
    }
  }

  // By value: AssignmentOf returns a temporary.
  std::vector<SlotRef> SlotsOf(const std::string& id) const {
    auto a = sched_.AssignmentOf(id);
    return a ? a->slots : std::vector<SlotRef>{};
  }

  std::set<SlotRef> UsedSlots() {
    std::set<SlotRef> used;
    for (const auto& [id, r] : running_) {
      auto a = sched_.AssignmentOf(id);
      if (a) used.insert(a->slots.begin(), a->slots.end());
    }
    return used;
  }

  std::map<std::string, int> FreeByAgent() {
    std::set<SlotRef> used = UsedSlots();
    std::map<std::string, int> free;
    for (const auto& [id, a] : agents_) {
      free[id] = 0;
      for (const auto& s : a.slots) free[id] += !used.count(SlotRef{id, s}) && !a.disabled.count(s);
    }
    return free;
  }

  std::map<std::string, int> FreeByPool() {
    std::set<SlotRef> used = UsedSlots();
    std::map<std::string, int> free;
    for (const auto& [id, a] : agents_) {
      free[a.pool] += 0;
      for (const auto& s : a.slots) {
        free[a.pool] += !used.count(SlotRef{id, s}) && !a.disabled.count(s);
      }
    }
    return free;
  }

  void CheckInvariants() {
    std::set<SlotRef> seen;
    std::map<std::string, int> used_by_pool;
    for (const auto& [id, r] : running_) {
      auto a = sched_.AssignmentOf(id);
      ASSERT_TRUE(a.has_value()) << id << " should be running";
      ASSERT_EQ(static_cast<int>(a->slots.size()), r.slots) << id;
      std::vector<std::string> agent_order;
      for (const SlotRef& s : a->slots) {
        EXPECT_TRUE(seen.insert(s).second)
            << "slot " << s.agent_id << "/" << s.slot_id << " is double-booked (" << id << ")";
        auto agent = agents_.find(s.agent_id);
        ASSERT_NE(agent, agents_.end()) << id << " holds a slot on a removed agent";
        EXPECT_EQ(agent->second.pool, r.resource_pool) << id;
        EXPECT_TRUE(std::count(agent->second.slots.begin(), agent->second.slots.end(), s.slot_id))
            << id << " holds a slot the agent does not have";
        if (agent_order.empty() || agent_order.back() != s.agent_id)
          agent_order.push_back(s.agent_id);
      }
      // Slots of one agent are contiguous.
      std::set<std::string> distinct(agent_order.begin(), agent_order.end());
      EXPECT_EQ(distinct.size(), agent_order.size()) << id;
      used_by_pool[r.resource_pool] += r.slots;
      EXPECT_FALSE(queued_.count(id));
    }
    // The queue, in order.
    std::vector<std::tuple<int, int64_t, std::string>> expected;
    for (const auto& [id, r] : queued_) expected.emplace_back(r.priority, r.submit_order, id);
    std::sort(expected.begin(), expected.end());
    auto queue = sched_.Queue();
    ASSERT_EQ(queue.size(), expected.size());
    for (size_t i = 0; i < queue.size(); ++i) {
      EXPECT_EQ(queue[i].allocation_id, std::get<2>(expected[i]));
      EXPECT_FALSE(sched_.AssignmentOf(queue[i].allocation_id).has_value());
    }
    // Stats.
    std::map<std::string, Scheduler::PoolStats> stats = sched_.Stats();
    std::map<std::string, Scheduler::PoolStats> model;
    for (const auto& [id, a] : agents_) {
      auto& p = model[a.pool];
      ++p.agents;
      p.total_slots += static_cast<int>(a.slots.size() - a.disabled.size());
    }
    for (auto& [pool, p] : model) p.used_slots = used_by_pool[pool];
    ASSERT_EQ(stats.size(), model.size());
    for (const auto& [pool, p] : model) {
      EXPECT_EQ(stats[pool].agents, p.agents) << pool;
      EXPECT_EQ(stats[pool].total_slots, p.total_slots) << pool;
      EXPECT_EQ(stats[pool].used_slots, p.used_slots) << pool;
    }
    // (Preempt() changes what Schedule() may start, so it is checked by the simulation in
    // scheduler_simulation_test.cc, which models trials stopping, not here.)
  }

 public:
  int64_t assigned_ = 0;     // assignments made by Schedule()
  int64_t multi_agent_ = 0;  // of which spanning several agents
  int64_t lost_ = 0;         // allocations lost with an agent

 private:
  std::mt19937_64 rng_;
  Scheduler sched_;
  std::map<std::string, ModelAgent> agents_;
  std::map<std::string, AllocationRequest> queued_, running_;
  int next_id_ = 0;
  int64_t next_order_ = 0;
};

TEST(SchedulerPropertyTest, NoSlotIsEverDoubleBooked) {
  for (uint64_t seed : {1u, 2u, 3u, 17u, 2024u, 99991u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Checker checker(seed);
    checker.RunSteps(3000);
    // The sequence exercised what it should.
    EXPECT_GT(checker.assigned_, 200);
    EXPECT_GT(checker.multi_agent_, 10);
    EXPECT_GT(checker.lost_, 10);
  }
}

}  // namespace
}  // namespace sf::master
