// How the cluster simulator measures fair share (issue 45): for each fair_share pool of the
// scenario, the slot-seconds each of its experiments held while all of them were contending —
// every experiment of the pool submitted, each with a trial it had not started yet (so each
// wanted more slots than it had) — against the share its weight entitles it to.
//
// The trainers report starts and exits (TaskStarted/TaskExited, one per rank: a rank holds a
// slot); the simulator registers each experiment it submitted to a fair-share pool (Expect) and
// calls Sample() at a steady interval. A pool's window opens once every experiment the scenario
// sends it was submitted and each has run a task, plus `warmup_seconds` (the first to arrive
// took every slot; the scheduler evens that out as trials end), and closes for good at the first
// sample where one of them has started all of its trials. Thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace sf::sim {

class ShareMeter {
 public:
  // `experiments_per_pool`: how many experiments the scenario sends to each fair-share pool.
  ShareMeter(std::map<std::string, int> experiments_per_pool, double warmup_seconds)
      : warmup_(warmup_seconds) {
    for (auto& [pool, n] : experiments_per_pool) pools_[pool].expected = n;
  }

  // Experiment `id` was submitted to fair-share `pool` with `weight` and `trials` trials.
  void Expect(int64_t id, const std::string& pool, double weight, int trials) {
    std::lock_guard<std::mutex> lock(mu_);
    auto p = pools_.find(pool);
    if (p == pools_.end()) return;
    p->second.members.push_back(id);
    Member& m = members_[id];
    m.weight = weight;
    m.trials = trials;
  }

  // A task of `trial` of `experiment` started (exited) holding `slots` slots.
  void TaskStarted(int64_t experiment, int64_t trial, int slots) {
    std::lock_guard<std::mutex> lock(mu_);
    Member& m = members_[experiment];  // Expect may come after its first task
    m.running += slots;
    m.ran = true;
    m.started.insert(trial);
  }
  void TaskExited(int64_t experiment, int slots) {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = members_.find(experiment);
    if (m != members_.end()) m->second.running = std::max(0, m->second.running - slots);
  }

  // Adds `dt` seconds of each member's running slots to its total, in the pools whose window is
  // open.
  void Sample(double dt) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, pool] : pools_) {
      if (pool.closed || static_cast<int>(pool.members.size()) < pool.expected) continue;
      bool all_ran = true, all_want = true;
      for (int64_t id : pool.members) {
        const Member& m = members_[id];
        all_ran = all_ran && m.ran;
        all_want = all_want && static_cast<int>(m.started.size()) < m.trials;
      }
      if (!all_ran) continue;
      if (!all_want) {
        pool.closed = true;
        continue;
      }
      pool.since_open += dt;
      if (pool.since_open <= warmup_) continue;
      pool.seconds += dt;
      for (int64_t id : pool.members) members_[id].slot_seconds += members_[id].running * dt;
    }
  }

  struct Line {
    int64_t experiment;
    double weight_share, slot_share;  // of the pool's members' weights; of their slot-seconds
  };
  struct PoolResult {
    double seconds = 0;      // how long the window was open (after the warm-up)
    double worst_error = 0;  // max |slot_share / weight_share - 1| over the members
    std::vector<Line> lines;
  };
  std::map<std::string, PoolResult> Results() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, PoolResult> out;
    for (const auto& [name, pool] : pools_) {
      PoolResult r;
      r.seconds = pool.seconds;
      double weights = 0, slot_seconds = 0;
      for (int64_t id : pool.members) {
        weights += members_.at(id).weight;
        slot_seconds += members_.at(id).slot_seconds;
      }
      for (int64_t id : pool.members) {
        const Member& m = members_.at(id);
        Line l{id, weights > 0 ? m.weight / weights : 0,
               slot_seconds > 0 ? m.slot_seconds / slot_seconds : 0};
        r.worst_error = std::max(
            r.worst_error, l.weight_share > 0 ? std::abs(l.slot_share / l.weight_share - 1) : 1);
        r.lines.push_back(l);
      }
      out[name] = r;
    }
    return out;
  }

 private:
  struct Member {
    double weight = 1;
    int trials = 0;
    int running = 0;
    bool ran = false;
    std::set<int64_t> started;  // trial ids
    double slot_seconds = 0;
  };
  struct Pool {
    int expected = 0;
    std::vector<int64_t> members;
    bool closed = false;
    double since_open = 0, seconds = 0;
  };
  const double warmup_;
  mutable std::mutex mu_;
  std::map<std::string, Pool> pools_;
  std::map<int64_t, Member> members_;
};

}  // namespace sf::sim
