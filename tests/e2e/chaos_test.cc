// The chaos suite (ctest label `chaos`; docs/cluster.md, "Faults"): experiments train on a real
// local cluster (PostgreSQL, a master, two agents with two slots each, real trainers) while a
// seeded driver, at random points, SIGKILLs the master and starts it again, SIGKILLs an agent
// and starts it again, SIGKILLs a trainer, stops PostgreSQL in immediate mode (a crash) and
// starts it again, and cuts an agent off from the master (its network namespace's link down)
// and restores it. Afterwards:
//   - every experiment and every trial is COMPLETED;
//   - each trial's training metric rows are exactly {unit, 2·unit, ..., length} and its
//     validation rows exactly {length}: none lost, none duplicated;
//   - every checkpoint of every trial exists on disk and verifies (sizes and SHA-256 of its
//     manifest), and the newest is at the trial's length;
//   - no trainer of the cluster is left running once the experiments are done, and no master,
//     agent or trainer once the cluster is torn down.
//
// The seed is printed first; SF_CHAOS_SEED=N replays a run's schedule (the order of faults,
// the gaps between them, which agent or trainer, how long each outage lasts). Timing on a busy
// machine still varies, so a replay hits the same parts in the same order, not the same
// instructions. Link cuts need root and iproute2 (network namespaces); without them the run
// says so and injects the other faults.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "tests/e2e/chaos_parts.h"

namespace sf::testing {
namespace {
using Clock = std::chrono::steady_clock;

TEST(Chaos, ExperimentsCompleteWithEveryMetricOnceWhilePartsDie) {
  const uint64_t seed = ChaosSeed();
  std::printf("[chaos] seed %llu (replay: SF_CHAOS_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);

  std::unique_ptr<TestNetwork> net = ChaosNetwork("chaos");
  ClusterLayout layout;
  Place(layout, net.get());
  pid_t master_pid = 0;
  std::vector<pid_t> agent_pids;
  std::vector<std::string> trainer_env;
  {
    Cluster cluster(2, 2, layout);
    ASSERT_FALSE(::testing::Test::HasFailure());
    trainer_env = {"SF_MASTER_ADDRESS=" + cluster.grpc_address()};

    // About three minutes of training on this 2-core machine without faults: longer than the
    // fault schedule below, so every fault lands while trainers run.
    std::vector<Planned> plan = {{0, 2, 3000, 40}, {0, 2, 2500, 50}, {0, 1, 3500, 70}};
    for (size_t i = 0; i < plan.size(); ++i) {
      plan[i].id = cluster.Submit(
          ChaosExperiment("chaos-" + std::to_string(i), plan[i].trials, plan[i].length, plan[i].unit));
      ASSERT_GT(plan[i].id, 0);
    }

    // Every fault three times (link cuts only with a network), in a seeded order.
    FaultInjector faults(cluster, net.get(), rng);
    std::vector<Fault> schedule;
    for (int round = 0; round < 3; ++round) {
      for (Fault f : faults.Kinds()) schedule.push_back(f);
    }
    std::shuffle(schedule.begin(), schedule.end(), rng);

    auto all_done = [&] {
      for (const Planned& p : plan) {
        if (cluster.ExperimentState(p.id) != kCompleted) return false;
      }
      return true;
    };
    const auto start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    // Faults begin once some training happened (trainers started, metrics flowing).
    ASSERT_TRUE(cluster.WaitFor([&] { return Count(cluster.db(), "SELECT count(*) FROM metrics") >= 4; },
                                std::chrono::seconds(180)));
    int injected = 0;
    for (size_t n = 0; n < schedule.size(); ++n) {
      std::this_thread::sleep_for(faults.UniformMs(2000, 7000));
      if (all_done()) {
        std::printf("[chaos] every experiment finished after %d faults; %zu not injected\n", injected,
                    schedule.size() - n);
        break;
      }
      const std::string what = faults.Inject(schedule[n]);
      if (::testing::Test::HasFatalFailure()) return;
      ++injected;
      std::printf("[chaos] %7.1fs fault %d: %s\n", elapsed(), injected, what.c_str());
      std::fflush(stdout);
    }

    bool finished = cluster.WaitFor(all_done, std::chrono::seconds(600));
    std::printf("[chaos] %7.1fs %s\n", elapsed(), finished ? "every experiment completed" : "NOT finished");
    for (const Planned& p : plan) {
      ASSERT_EQ(cluster.ExperimentState(p.id), kCompleted) << "experiment " << p.id;
    }

    // Exactly the expected metric rows, and verified checkpoints, for every trial.
    for (const Planned& p : plan) ExpectExactlyOnce(cluster, p, "chaos");

    // Done means done: no trainer of this cluster runs on (an orphan of a cut-off agent, say).
    EXPECT_TRUE(cluster.WaitFor([&] { return cluster.TrainerPids().empty(); }, std::chrono::seconds(60)))
        << "trainers still running: " << cluster.TrainerPids().size();
    master_pid = cluster.master_pid();
    agent_pids = cluster.agent_pids();
  }
  // The cluster is torn down: nothing of it is left.
  EXPECT_NE(master_pid, 0);
  EXPECT_TRUE(master_pid == 0 || kill(master_pid, 0) != 0) << "master " << master_pid << " still running";
  for (pid_t p : agent_pids) EXPECT_TRUE(p == 0 || kill(p, 0) != 0) << "agent " << p << " still running";
  EXPECT_TRUE(TrainerPids(trainer_env).empty());
}

}  // namespace
}  // namespace sf::testing
