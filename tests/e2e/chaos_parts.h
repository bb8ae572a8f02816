// What the chaos suite (chaos_test.cc) and the soak (soak_test.cc) share: the faults and their
// seeded injection into a real local cluster, the experiments they run, and the check that an
// experiment's trials kept exactly their metric rows and verified checkpoints.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/netns.h"
#include "trainer/run/checkpoint.h"

namespace sf::testing {

inline constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

enum class Fault { kKillMaster, kKillAgent, kKillTrainer, kRestartPostgres, kCutAgent };

inline const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kKillMaster:
      return "kill -9 the master, start it again";
    case Fault::kKillAgent:
      return "kill -9 an agent, start it again";
    case Fault::kKillTrainer:
      return "kill -9 a trainer";
    case Fault::kRestartPostgres:
      return "stop PostgreSQL (immediate), start it again";
    case Fault::kCutAgent:
      return "cut an agent off the network, restore it";
  }
  return "?";
}

// $SF_CHAOS_SEED, else a random one (printed by the caller, so a run can be replayed).
inline uint64_t ChaosSeed() {
  if (const char* s = std::getenv("SF_CHAOS_SEED"); s && *s) return std::strtoull(s, nullptr, 10);
  return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

// One experiment a run expects to complete: `trials` grid trials of `length` batches, training
// metrics every `unit` batches.
struct Planned {
  int64_t id = 0;
  int trials = 0;
  int64_t length = 0, unit = 0;
};

inline std::string ChaosExperiment(const std::string& name, int trials, int64_t length,
                                   int64_t unit) {
  std::string yaml = TinyExperiment(trials, length, unit, name);
  // Faults cost restarts (a killed trainer; an agent killed while its trainer exits); allow
  // plenty, so the run shows what is lost, not how many restarts a schedule happened to need.
  return yaml.replace(yaml.find("max_restarts: 2"), 15, "max_restarts: 40");
}

inline std::vector<int64_t> Column(const std::string& db, const std::string& sql) {
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  std::vector<int64_t> out;
  for (const auto& row : tx.exec(sql)) out.push_back(row[0].as<int64_t>());
  return out;
}

inline std::string Show(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// Two network namespaces for the agents (so a fault can cut one off), or null without root or
// iproute2, which the run then says (`label` prefixes the line). Place() puts a cluster in them.
inline std::unique_ptr<TestNetwork> ChaosNetwork(const char* label) {
  if (geteuid() != 0 || !std::filesystem::exists("/usr/sbin/ip")) {
    std::printf("[%s] not root or no iproute2: link cuts skipped\n", label);
    return nullptr;
  }
  auto net = std::make_unique<TestNetwork>(2);
  if (!net->ok()) {
    std::printf("[%s] no network namespaces (%s): link cuts skipped\n", label, net->why().c_str());
    return nullptr;
  }
  return net;
}
inline void Place(ClusterLayout& layout, const TestNetwork* net) {
  if (!net) return;
  layout.master_host = net->bridge_address();
  layout.agent_netns = net->namespaces();
}

// Injects faults into `cluster` with outages drawn from `rng` (link cuts only with `net`).
class FaultInjector {
 public:
  FaultInjector(Cluster& cluster, TestNetwork* net, std::mt19937_64& rng)
      : cluster_(cluster), net_(net), rng_(rng) {}

  std::chrono::milliseconds UniformMs(int lo, int hi) {
    return std::chrono::milliseconds(std::uniform_int_distribution<int>(lo, hi)(rng_));
  }
  // Every fault kind this cluster can take, once each.
  std::vector<Fault> Kinds() const {
    std::vector<Fault> out = {Fault::kKillMaster, Fault::kKillAgent, Fault::kKillTrainer,
                              Fault::kRestartPostgres};
    if (net_) out.push_back(Fault::kCutAgent);
    return out;
  }
  // Injects `f` and returns what was done ("kill -9 an agent, start it again (agent 1), outage
  // 2.1s"); a failure to restore a part fails the test.
  std::string Inject(Fault f) {
    const int agent = std::uniform_int_distribution<int>(0, 1)(rng_);
    const auto outage = f == Fault::kCutAgent          ? UniformMs(3000, 20000)
                        : f == Fault::kRestartPostgres ? UniformMs(1000, 6000)
                                                       : UniformMs(300, 3000);
    std::string what = FaultName(f);
    switch (f) {
      case Fault::kKillMaster:
        cluster_.StopMaster(SIGKILL);
        std::this_thread::sleep_for(outage);
        cluster_.StartMaster();
        break;
      case Fault::kKillAgent:
        what += " (agent " + std::to_string(agent) + ")";
        cluster_.StopAgent(agent, SIGKILL);
        std::this_thread::sleep_for(outage);
        cluster_.StartAgent(agent);
        break;
      case Fault::kKillTrainer: {
        std::vector<pid_t> pids = cluster_.TrainerPids();
        std::sort(pids.begin(), pids.end());
        if (pids.empty()) return what + ": none running";
        pid_t victim = pids[std::uniform_int_distribution<size_t>(0, pids.size() - 1)(rng_)];
        kill(victim, SIGKILL);
        return what + " (pid " + std::to_string(victim) + ")";
      }
      case Fault::kRestartPostgres: {
        LocalPostgres& postgres = PostgresServer::Get()->postgres();
        Status down = postgres.Stop(LocalPostgres::StopMode::kImmediate);
        EXPECT_TRUE(down.ok()) << down.message();
        std::this_thread::sleep_for(outage);
        Status up = postgres.Start();
        EXPECT_TRUE(up.ok()) << up.message();
        break;
      }
      case Fault::kCutAgent:
        what += " (agent " + std::to_string(agent) + ")";
        EXPECT_TRUE(net_->SetConnected(agent, false)) << net_->why();
        std::this_thread::sleep_for(outage);
        EXPECT_TRUE(net_->SetConnected(agent, true)) << net_->why();
        break;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, ", outage %.1fs", std::chrono::duration<double>(outage).count());
    return what + buf;
  }

 private:
  Cluster& cluster_;
  TestNetwork* net_;
  std::mt19937_64& rng_;
};

// Every trial of `p` COMPLETED, with training metric rows exactly {unit, 2·unit, ..., length}
// and validation rows exactly {length}, and every ACTIVE checkpoint on disk and verified (sizes
// and SHA-256 of its manifest; one that retention deletes while it is read is not counted),
// the newest at the trial's length. `label` prefixes the lines it
// prints (each trial's restarts and last failure).
inline void ExpectExactlyOnce(Cluster& cluster, const Planned& p, const char* label) {
  Value trials = cluster.Trials(p.id);
  ASSERT_EQ(trials.as_list().size(), static_cast<size_t>(p.trials)) << "experiment " << p.id;
  std::vector<int64_t> training;
  for (int64_t b = p.unit; b <= p.length; b += p.unit) training.push_back(b);
  for (const Value& t : trials.as_list()) {
    const std::string tid = std::to_string(Id(t));
    EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED") << "trial " << tid;
    const Value* error = t.Find("error");
    std::printf(
        "[%s] experiment %lld trial %s: %lld restarts%s%s\n", label, static_cast<long long>(p.id),
        tid.c_str(), static_cast<long long>(t.Find("restarts")->as_int()),
        error && error->is_string() && !error->as_string().empty() ? "; last failure: " : "",
        error && error->is_string() ? error->as_string().c_str() : "");
    EXPECT_EQ(Show(Column(cluster.db(),
                          "SELECT batches FROM metrics WHERE kind = 'training' AND trial_id = " +
                              tid + " ORDER BY batches")),
              Show(training))
        << "training metrics of trial " << tid;
    EXPECT_EQ(Show(Column(cluster.db(),
                          "SELECT batches FROM metrics WHERE kind = 'validation' AND trial_id = " +
                              tid + " ORDER BY batches")),
              Show({p.length}))
        << "validation metrics of trial " << tid;
    pqxx::connection conn(cluster.db());
    pqxx::work tx(conn);
    pqxx::result checkpoints =
        tx.exec("SELECT path, batches FROM checkpoints WHERE trial_id = " + tid +
                " AND state = 'ACTIVE' ORDER BY batches");
    ASSERT_FALSE(checkpoints.empty()) << "trial " << tid << " has no checkpoint";
    for (const auto& row : checkpoints) {
      const std::string path = row[0].as<std::string>();
      Result<CheckpointContents> read = ReadCheckpoint(path);
      if (!read.ok()) {
        // Retention's pass after the trial's end may have marked it DELETED and be removing its
        // files while this reads them: a failure counts only for a checkpoint still ACTIVE.
        // (READ COMMITTED: the statement sees what committed since the list was read.)
        const std::string state =
            tx.exec_params1("SELECT state FROM checkpoints WHERE path = $1", path)[0].as<std::string>();
        if (state != "ACTIVE") continue;
      }
      EXPECT_TRUE(read.ok()) << "checkpoint " << path << " of trial " << tid << ": "
                             << read.status().message();
    }
    EXPECT_EQ(checkpoints[checkpoints.size() - 1][1].as<int64_t>(), p.length) << "trial " << tid;
  }
}

}  // namespace sf::testing
