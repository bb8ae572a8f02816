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
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/netns.h"
#include "trainer/run/checkpoint.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

enum class Fault { kKillMaster, kKillAgent, kKillTrainer, kRestartPostgres, kCutAgent };

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kKillMaster: return "kill -9 the master, start it again";
    case Fault::kKillAgent: return "kill -9 an agent, start it again";
    case Fault::kKillTrainer: return "kill -9 a trainer";
    case Fault::kRestartPostgres: return "stop PostgreSQL (immediate), start it again";
    case Fault::kCutAgent: return "cut an agent off the network, restore it";
  }
  return "?";
}

uint64_t Seed() {
  if (const char* s = std::getenv("SF_CHAOS_SEED"); s && *s) return std::strtoull(s, nullptr, 10);
  return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

// One experiment the run expects to complete: `trials` grid trials of `length` batches,
// training metrics every `unit` batches.
struct Planned {
  int64_t id = 0;
  int trials = 0;
  int64_t length = 0, unit = 0;
};

std::string ChaosExperiment(const std::string& name, int trials, int64_t length, int64_t unit) {
  std::string yaml = TinyExperiment(trials, length, unit, name);
  // Faults cost restarts (a killed trainer; an agent killed while its trainer exits); allow
  // plenty, so the run shows what is lost, not how many restarts a schedule happened to need.
  return yaml.replace(yaml.find("max_restarts: 2"), 15, "max_restarts: 40");
}

std::vector<int64_t> Column(const std::string& db, const std::string& sql) {
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  std::vector<int64_t> out;
  for (const auto& row : tx.exec(sql)) out.push_back(row[0].as<int64_t>());
  return out;
}

std::string Show(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

TEST(Chaos, ExperimentsCompleteWithEveryMetricOnceWhilePartsDie) {
  const uint64_t seed = Seed();
  std::printf("[chaos] seed %llu (replay: SF_CHAOS_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);
  auto uniform_ms = [&](int lo, int hi) {
    return std::chrono::milliseconds(std::uniform_int_distribution<int>(lo, hi)(rng));
  };

  std::unique_ptr<TestNetwork> net;
  if (geteuid() == 0 && fs::exists("/usr/sbin/ip")) {
    net = std::make_unique<TestNetwork>(2);
    if (!net->ok()) {
      std::printf("[chaos] no network namespaces (%s): link cuts skipped\n", net->why().c_str());
      net.reset();
    }
  } else {
    std::printf("[chaos] not root or no iproute2: link cuts skipped\n");
  }
  ClusterLayout layout;
  if (net) {
    layout.master_host = net->bridge_address();
    layout.agent_netns = net->namespaces();
  }
  pid_t master_pid = 0;
  std::vector<pid_t> agent_pids;
  std::vector<std::string> trainer_env;
  {
    Cluster cluster(2, 2, layout);
    ASSERT_FALSE(::testing::Test::HasFailure());
    trainer_env = {"SF_MASTER_ADDRESS=" + cluster.grpc_address()};
    LocalPostgres& postgres = PostgresServer::Get()->postgres();

    // About three minutes of training on this 2-core machine without faults: longer than the
    // fault schedule below, so every fault lands while trainers run.
    std::vector<Planned> plan = {{0, 2, 3000, 40}, {0, 2, 2500, 50}, {0, 1, 3500, 70}};
    for (size_t i = 0; i < plan.size(); ++i) {
      plan[i].id = cluster.Submit(
          ChaosExperiment("chaos-" + std::to_string(i), plan[i].trials, plan[i].length, plan[i].unit));
      ASSERT_GT(plan[i].id, 0);
    }

    // Every fault three times (link cuts only with a network), in a seeded order.
    std::vector<Fault> schedule;
    for (int round = 0; round < 3; ++round) {
      for (Fault f : {Fault::kKillMaster, Fault::kKillAgent, Fault::kKillTrainer, Fault::kRestartPostgres,
                      Fault::kCutAgent}) {
        if (f != Fault::kCutAgent || net) schedule.push_back(f);
      }
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
      std::this_thread::sleep_for(uniform_ms(2000, 7000));
      if (all_done()) {
        std::printf("[chaos] every experiment finished after %d faults; %zu not injected\n", injected,
                    schedule.size() - n);
        break;
      }
      const Fault f = schedule[n];
      const int agent = std::uniform_int_distribution<int>(0, 1)(rng);
      const auto outage = f == Fault::kCutAgent          ? uniform_ms(3000, 20000)
                          : f == Fault::kRestartPostgres ? uniform_ms(1000, 6000)
                                                         : uniform_ms(300, 3000);
      std::string what = FaultName(f);
      switch (f) {
        case Fault::kKillMaster:
          cluster.StopMaster(SIGKILL);
          std::this_thread::sleep_for(outage);
          cluster.StartMaster();
          break;
        case Fault::kKillAgent:
          what += " (agent " + std::to_string(agent) + ")";
          cluster.StopAgent(agent, SIGKILL);
          std::this_thread::sleep_for(outage);
          cluster.StartAgent(agent);
          break;
        case Fault::kKillTrainer: {
          std::vector<pid_t> pids = cluster.TrainerPids();
          std::sort(pids.begin(), pids.end());
          if (pids.empty()) {
            what += ": none running";
            break;
          }
          pid_t victim = pids[std::uniform_int_distribution<size_t>(0, pids.size() - 1)(rng)];
          what += " (pid " + std::to_string(victim) + ")";
          kill(victim, SIGKILL);
          break;
        }
        case Fault::kRestartPostgres: {
          Status down = postgres.Stop(LocalPostgres::StopMode::kImmediate);
          ASSERT_TRUE(down.ok()) << down.message();
          std::this_thread::sleep_for(outage);
          Status up = postgres.Start();
          ASSERT_TRUE(up.ok()) << up.message();
          break;
        }
        case Fault::kCutAgent:
          what += " (agent " + std::to_string(agent) + ")";
          ASSERT_TRUE(net->SetConnected(agent, false)) << net->why();
          std::this_thread::sleep_for(outage);
          ASSERT_TRUE(net->SetConnected(agent, true)) << net->why();
          break;
      }
      ++injected;
      std::printf("[chaos] %7.1fs fault %d: %s, outage %.1fs\n", elapsed(), injected, what.c_str(),
                  f == Fault::kKillTrainer ? 0.0 : std::chrono::duration<double>(outage).count());
      std::fflush(stdout);
    }

    bool finished = cluster.WaitFor(all_done, std::chrono::seconds(600));
    std::printf("[chaos] %7.1fs %s\n", elapsed(), finished ? "every experiment completed" : "NOT finished");
    for (const Planned& p : plan) {
      ASSERT_EQ(cluster.ExperimentState(p.id), kCompleted) << "experiment " << p.id;
    }

    // Exactly the expected metric rows, and verified checkpoints, for every trial.
    for (const Planned& p : plan) {
      Value trials = cluster.Trials(p.id);
      ASSERT_EQ(trials.as_list().size(), static_cast<size_t>(p.trials));
      std::vector<int64_t> training;
      for (int64_t b = p.unit; b <= p.length; b += p.unit) training.push_back(b);
      for (const Value& t : trials.as_list()) {
        const std::string tid = std::to_string(Id(t));
        EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED") << "trial " << tid;
        const Value* error = t.Find("error");
        std::printf("[chaos] experiment %lld trial %s: %lld restarts%s%s\n", static_cast<long long>(p.id),
                    tid.c_str(), static_cast<long long>(t.Find("restarts")->as_int()),
                    error && error->is_string() && !error->as_string().empty() ? "; last failure: " : "",
                    error && error->is_string() ? error->as_string().c_str() : "");
        EXPECT_EQ(Show(Column(cluster.db(), "SELECT batches FROM metrics WHERE kind = 'training' AND trial_id = " +
                                                tid + " ORDER BY batches")),
                  Show(training))
            << "training metrics of trial " << tid;
        EXPECT_EQ(Show(Column(cluster.db(), "SELECT batches FROM metrics WHERE kind = 'validation' AND trial_id = " +
                                                tid + " ORDER BY batches")),
                  Show({p.length}))
            << "validation metrics of trial " << tid;
        pqxx::connection conn(cluster.db());
        pqxx::work tx(conn);
        pqxx::result checkpoints = tx.exec("SELECT path, batches FROM checkpoints WHERE trial_id = " + tid +
                                           " AND state = 'ACTIVE' ORDER BY batches");
        ASSERT_FALSE(checkpoints.empty()) << "trial " << tid << " has no checkpoint";
        for (const auto& row : checkpoints) {
          const std::string path = row[0].as<std::string>();
          Result<CheckpointContents> read = ReadCheckpoint(path);
          EXPECT_TRUE(read.ok()) << "checkpoint " << path << " of trial " << tid << ": "
                                 << read.status().message();
        }
        EXPECT_EQ(checkpoints[checkpoints.size() - 1][1].as<int64_t>(), p.length) << "trial " << tid;
      }
    }

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
