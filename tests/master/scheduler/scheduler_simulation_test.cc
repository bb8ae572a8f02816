// The scheduler driven as the master drives it, without processes: seeded random arrivals of
// experiments (priorities, weights, gang sizes, max_slots) in a priority pool and a fair-share
// pool on agents of unequal sizes; trials that train for a while and complete, and that
// checkpoint and stop some seconds after Preempt() asks them to, then queue again. Time is
// simulated (1 s ticks). Checked after every tick, against the test's own model:
//   * no slot is in two allocations, and every gang has exactly its slots, in its pool;
//   * no experiment holds more than its max_slots;
//   * Preempt() names only running allocations not already asked, that have run at least
//     min_run_seconds, and in priority pools only ones of lower priority than the trial they
//     make room for;
//   * every queued request has a pending reason.
// At the end every trial has run to completion, and no trial was preempted more often than its
// work allows (each preempted run lasted at least min_run_seconds). A second test lets a
// fair-share pool settle (50 seeds) and checks every experiment is within one gang of its share:
// never short by more than one gang; above by more only on slots that no experiment below its
// share could be given (its gang is larger than all that preemption could reclaim).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>

#include "master/scheduler/scheduler.h"

namespace sf::master {
namespace {

constexpr double kMinRun = 30;

struct SimExperiment {
  int64_t id = 0;
  std::string pool;
  int gang = 1;
  int priority = 42;
  double weight = 1;
  int max_slots = 0;
};

struct SimTrial {
  int64_t id = 0;
  int64_t experiment = 0;
  double work_left = 0;      // seconds of training until it completes
  double total_work = 0;
  std::string allocation;    // current allocation (queued or running)
  int allocations = 0;
  int64_t submit_order = 0;
  bool running = false;
  bool stopping = false;
  double stop_at = 0;        // when a preempted trial has checkpointed and exits
  double started = 0;
  int preemptions = 0;
  bool done = false;
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed, bool fair_pool_only = false)
      : rng_(seed), fair_only_(fair_pool_only) {
    sched_.SetMinRunSeconds(kMinRun);
    sched_.SetPoolMode("fair", SchedulingMode::kFairShare);
    // Unequal agents: 10 slots in the priority pool, 12 in the fair-share pool.
    AddAgent("p-big", "prio", 4);
    AddAgent("p-mid", "prio", 3);
    AddAgent("p-small", "prio", 2);
    AddAgent("p-tiny", "prio", 1);
    AddAgent("f-big", "fair", 5);
    AddAgent("f-mid", "fair", 3);
    AddAgent("f-small-1", "fair", 2);
    AddAgent("f-small-2", "fair", 2);
  }

  int Rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // One experiment with 1..4 trials of `work` seconds each (random when 0).
  void Arrive(double work = 0) {
    SimExperiment e;
    e.id = ++next_experiment_;
    e.pool = fair_only_ || Rand(0, 1) ? "fair" : "prio";
    e.gang = Rand(1, 4);
    e.priority = Rand(1, 99);
    e.weight = Rand(1, 3);
    if (Rand(0, 1)) e.max_slots = e.gang * Rand(1, 3);
    experiments_[e.id] = e;
    const int trials = Rand(1, 4);
    for (int i = 0; i < trials; ++i) {
      SimTrial t;
      t.id = ++next_trial_;
      t.experiment = e.id;
      t.total_work = t.work_left = work > 0 ? work : Rand(20, 200);
      t.submit_order = ++next_order_;
      trials_[t.id] = t;
      Submit(trials_[t.id]);
    }
  }

  // One second: training progresses, trials complete or exit after a preemption, then the
  // scheduler places and preempts.
  void Tick() {
    now_ += 1;
    for (auto& [id, t] : trials_) {
      if (!t.running) continue;
      if (t.stopping && now_ >= t.stop_at) {
        // Checkpointed and stopped: back to the queue with its progress.
        Release(t);
        t.preemptions++;
        ++preemptions_;
        Submit(t);
        continue;
      }
      t.work_left -= 1;
      if (t.work_left <= 0 && !t.stopping) {
        Release(t);
        t.done = true;
      }
    }
    for (const Assignment& a : sched_.Schedule(now_)) Started(a);
    for (const Preemption& p : sched_.Preempt(now_)) Preempted(p);
    CheckQueue();
  }

  bool AllDone() const {
    for (const auto& [id, t] : trials_) {
      if (!t.done) return false;
    }
    return true;
  }
  bool AnyStopping() const {
    for (const auto& [id, t] : trials_) {
      if (t.stopping) return true;
    }
    return false;
  }

  // Slots each experiment holds now (from the model).
  std::map<int64_t, int> Used() const {
    std::map<int64_t, int> used;
    for (const auto& [slot, allocation] : slot_owner_) used[trial_of_.at(allocation)->experiment]++;
    return used;
  }
  // The shares of the fair-share pool, from the model's own demand.
  std::map<int64_t, double> FairPoolShares() const {
    std::map<int64_t, int> demand;
    for (const auto& [id, t] : trials_) {
      const SimExperiment& e = experiments_.at(t.experiment);
      if (e.pool == "fair" && !t.done) demand[e.id] += e.gang;
    }
    std::vector<ShareClaim> claims;
    for (auto& [id, d] : demand) {
      const SimExperiment& e = experiments_.at(id);
      claims.push_back({id, e.weight, e.max_slots > 0 ? std::min(d, e.max_slots) : d});
    }
    return FairShares(12, claims);
  }

  const std::map<int64_t, SimExperiment>& experiments() const { return experiments_; }
  const std::map<int64_t, SimTrial>& trials() const { return trials_; }
  int64_t preemptions() const { return preemptions_; }
  int64_t starts() const { return starts_; }
  double now() const { return now_; }

 private:
  void AddAgent(const std::string& id, const std::string& pool, int slots) {
    std::vector<std::string> ids;
    for (int i = 0; i < slots; ++i) ids.push_back("s" + std::to_string(i));
    sched_.AddAgent(id, pool, ids);
    for (const std::string& s : ids) pool_of_slot_[id + "/" + s] = pool;
  }

  void Submit(SimTrial& t) {
    const SimExperiment& e = experiments_.at(t.experiment);
    t.allocation = "t" + std::to_string(t.id) + "-a" + std::to_string(++t.allocations);
    AllocationRequest r;
    r.allocation_id = t.allocation;
    r.experiment_id = e.id;
    r.trial_id = t.id;
    r.resource_pool = e.pool;
    r.slots = e.gang;
    r.priority = e.priority;
    r.submit_order = t.submit_order;  // a preempted trial keeps its place, as the master does
    r.max_slots = e.max_slots;
    r.weight = e.weight;
    ASSERT_TRUE(sched_.Submit(r).ok());
    trial_of_[t.allocation] = &t;
  }

  void Release(SimTrial& t) {
    for (auto it = slot_owner_.begin(); it != slot_owner_.end();) {
      it = it->second == t.allocation ? slot_owner_.erase(it) : std::next(it);
    }
    EXPECT_TRUE(sched_.Release(t.allocation));
    t.running = t.stopping = false;
  }

  void Started(const Assignment& a) {
    ASSERT_TRUE(trial_of_.count(a.allocation_id)) << a.allocation_id;
    SimTrial& t = *trial_of_[a.allocation_id];
    const SimExperiment& e = experiments_.at(t.experiment);
    ASSERT_FALSE(t.running) << a.allocation_id << " started twice";
    // The whole gang, in its pool, on slots nobody holds.
    ASSERT_EQ(static_cast<int>(a.slots.size()), e.gang) << a.allocation_id;
    for (const SlotRef& s : a.slots) {
      const std::string slot = s.agent_id + "/" + s.slot_id;
      ASSERT_EQ(pool_of_slot_.at(slot), e.pool) << a.allocation_id;
      ASSERT_FALSE(slot_owner_.count(slot)) << slot << " double-booked: " << slot_owner_[slot] << " and "
                                            << a.allocation_id;
      slot_owner_[slot] = a.allocation_id;
    }
    t.running = true;
    t.started = now_;
    ++starts_;
    // max_slots holds across the experiment's trials.
    if (e.max_slots > 0) {
      ASSERT_LE(Used()[e.id], e.max_slots) << "experiment " << e.id;
    }
  }

  void Preempted(const Preemption& p) {
    ASSERT_TRUE(trial_of_.count(p.allocation_id)) << p.allocation_id;
    SimTrial& t = *trial_of_[p.allocation_id];
    ASSERT_TRUE(t.running && t.allocation == p.allocation_id) << p.allocation_id << " is not running";
    ASSERT_FALSE(t.stopping) << p.allocation_id << " was asked to stop twice";
    ASSERT_GE(now_ - t.started, kMinRun) << p.allocation_id << " preempted before min_run_seconds";
    const SimExperiment& e = experiments_.at(t.experiment);
    if (e.pool == "prio") {
      const SimExperiment& for_e = experiments_.at(trials_.at(p.for_trial_id).experiment);
      ASSERT_GT(e.priority, for_e.priority) << p.allocation_id << " preempted for trial " << p.for_trial_id;
    }
    t.stopping = true;
    t.stop_at = now_ + Rand(0, 5);  // the trainer reaches its next stop check
  }

  void CheckQueue() {
    for (const auto& [id, t] : trials_) {
      if (t.done || t.running) continue;
      ASSERT_FALSE(sched_.PendingReason(t.allocation).empty()) << t.allocation << " waits without a reason";
    }
  }

  std::mt19937_64 rng_;
  bool fair_only_;
  Scheduler sched_;
  double now_ = 0;
  int64_t next_experiment_ = 0, next_trial_ = 0, next_order_ = 0;
  int64_t preemptions_ = 0, starts_ = 0;
  std::map<int64_t, SimExperiment> experiments_;
  std::map<int64_t, SimTrial> trials_;  // node-based: pointers stay valid
  std::map<std::string, SimTrial*> trial_of_;
  std::map<std::string, std::string> pool_of_slot_;
  std::map<std::string, std::string> slot_owner_;  // "agent/slot" -> allocation
};

TEST(SchedulerSimulationTest, RandomArrivalsAllRunWithoutDoubleBookingOrThrashing) {
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation sim(seed);
    // Arrivals for 2000 s (one every 25 s on average), then until everything has completed.
    for (int tick = 0; tick < 2000 && !::testing::Test::HasFatalFailure(); ++tick) {
      if (sim.Rand(0, 24) == 0) sim.Arrive();
      sim.Tick();
    }
    for (int tick = 0; tick < 200000 && !sim.AllDone() && !::testing::Test::HasFatalFailure(); ++tick) sim.Tick();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    EXPECT_TRUE(sim.AllDone()) << "some trial never completed";
    int most = 0;
    for (const auto& [id, t] : sim.trials()) {
      // Each preempted run lasted at least min_run_seconds of its work.
      EXPECT_LE(t.preemptions, std::floor(t.total_work / kMinRun)) << "trial " << t.id;
      most = std::max(most, t.preemptions);
    }
    EXPECT_GT(sim.preemptions(), 0) << "the arrivals never needed a preemption: the test proves little";
    std::cout << "seed " << seed << ": " << sim.experiments().size() << " experiments, " << sim.trials().size()
              << " trials, " << sim.starts() << " starts, " << sim.preemptions() << " preemptions (at most " << most
              << " of one trial), all done at t=" << sim.now() << " s\n";
  }
}

TEST(SchedulerSimulationTest, FairShareSettlesWithinOneGangOfEachShare) {
  int over_by_more_than_a_gang = 0;
  for (uint64_t seed = 11; seed <= 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation sim(seed, /*fair_pool_only=*/true);
    // Experiments whose trials train far longer than the test: arrivals over 600 s, then the
    // pool settles (nothing stopping, no start or preemption for 3 x min_run_seconds).
    for (int tick = 0; tick < 600 && !::testing::Test::HasFatalFailure(); ++tick) {
      if (sim.Rand(0, 59) == 0) sim.Arrive(/*work=*/1e9);
      sim.Tick();
    }
    int64_t last_starts = -1, last_preemptions = -1;
    int quiet = 0;
    for (int tick = 0; tick < 20000 && quiet < 3 * kMinRun && !::testing::Test::HasFatalFailure(); ++tick) {
      sim.Tick();
      const bool same = sim.starts() == last_starts && sim.preemptions() == last_preemptions && !sim.AnyStopping();
      quiet = same ? quiet + 1 : 0;
      last_starts = sim.starts();
      last_preemptions = sim.preemptions();
    }
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_GE(quiet, 3 * kMinRun) << "the pool never settled";
    const auto shares = sim.FairPoolShares();
    const auto used = sim.Used();
    auto holds = [&](int64_t id) { return used.count(id) ? used.at(id) : 0; };
    // What preempting every experiment down to (not below) its share would free, with the free
    // slots: the most any waiting experiment could be given without pushing another below.
    int free = 12, reclaimable = 0;
    for (const auto& [id, share] : shares) {
      const int gang = sim.experiments().at(id).gang;
      free -= holds(id);
      if (holds(id) > share) reclaimable += static_cast<int>(std::floor((holds(id) - share) / gang)) * gang;
    }
    reclaimable += free;
    for (const auto& [id, share] : shares) {
      const SimExperiment& e = sim.experiments().at(id);
      const std::string what = "experiment " + std::to_string(id) + " (gang " + std::to_string(e.gang) + ", weight " +
                               std::to_string(e.weight) + ", max_slots " + std::to_string(e.max_slots) + ") holds " +
                               std::to_string(holds(id)) + " slots; its share is " + std::to_string(share);
      // Never short of its share by more than one gang...
      EXPECT_GE(holds(id), share - e.gang - 1e-9) << what;
      // ... and above it by more than one gang only with slots no experiment below its share
      // could be given (its gang is larger than all that could be reclaimed): work-conserving.
      if (holds(id) > share + e.gang + 1e-9) {
        for (const auto& [other, other_share] : shares) {
          if (holds(other) < other_share - 1e-9) {
            EXPECT_GT(sim.experiments().at(other).gang, reclaimable)
                << what << ", while experiment " << other << " (gang " << sim.experiments().at(other).gang
                << ") holds " << holds(other) << " of its share " << other_share << " and " << reclaimable
                << " slots could be reclaimed";
          }
        }
        ++over_by_more_than_a_gang;
      }
    }
    std::cout << "seed " << seed << ": " << shares.size() << " experiments settled with " << sim.preemptions()
              << " preemptions\n";
  }
  std::cout << over_by_more_than_a_gang << " experiment(s) settled more than a gang above their share, on slots "
            << "no experiment below its share could use\n";
}

}  // namespace
}  // namespace sf::master
