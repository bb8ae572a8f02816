// The soak (issue 45; ctest label `soak`, one command: bench/soak.sh): SF_SOAK_MINUTES of short
// experiments arriving continuously on a real local cluster (PostgreSQL, a master, two agents
// of two slots, real trainers) while the chaos suite's faults come on a seeded schedule (kill -9
// of the master, an agent, a trainer; PostgreSQL stopped in immediate mode; an agent cut off
// the network, as root). Each experiment, once COMPLETED, is checked as the chaos suite checks
// (exactly its metric rows, every checkpoint verified) and deleted, as the users of a long-lived
// cluster clean up. Every SF_SOAK_SAMPLE_SECONDS (30) it samples the master's and the agents'
// resident memory, open files and threads, and every table's row count. At the end: every
// experiment checked, no trainer left running, nothing of the cluster left once it is torn
// down, and, for runs of 30 minutes or more, no growth: each figure's second half no higher than
// its first half allows (memory: median +20% + 16 MB; threads +8; open files +16; a table's rows
// +30% + 100, except audit_log, the history of every action, which keeps growing by design).
// The figures are printed either way; with SF_SOAK_SERIES_FILE every sample is also written there
// as CSV (`seconds,series,value`; bench/soak.sh sets it and bench/soak_plot.py draws it).
// Skipped unless SF_SOAK_MINUTES is set. SF_CHAOS_SEED replays a schedule.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "tests/e2e/chaos_parts.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double EnvNumber(const char* name, double fallback) {
  const char* s = std::getenv(name);
  return s && *s ? std::atof(s) : fallback;
}

// VmRSS (MB) and Threads of /proc/PID/status, and the entries of /proc/PID/fd; -1 when gone.
struct ProcessFigures {
  double rss_mb = -1;
  int threads = -1, fds = -1;
};
ProcessFigures Figures(pid_t pid) {
  ProcessFigures f;
  if (pid <= 0) return f;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") status >> f.rss_mb, f.rss_mb /= 1024.0;
    if (key == "Threads:") status >> f.threads;
    status.ignore(1 << 20, '\n');
  }
  std::error_code ec;
  int n = 0;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  if (!ec) f.fds = n;
  return f;
}

// Every series sampled, by name ("master rss_mb", "agent0 threads", "table metrics").
using Series = std::map<std::string, std::vector<double>>;

// One sample of every series at `seconds` into the run; also written to `csv` when it is open.
void Sample(Cluster& cluster, Series& series, double seconds, std::ofstream& csv) {
  auto put = [&](const std::string& name, double value) {
    series[name].push_back(value);
    if (csv.is_open()) csv << seconds << ',' << name << ',' << value << '\n' << std::flush;
  };
  auto add = [&](const std::string& who, const ProcessFigures& f) {
    if (f.rss_mb < 0) return;  // restarting just now: not a sample
    put(who + " rss_mb", f.rss_mb);
    put(who + " threads", f.threads);
    if (f.fds >= 0) put(who + " fds", f.fds);
  };
  add("master", Figures(cluster.master_pid()));
  const std::vector<pid_t> agents = cluster.agent_pids();
  for (size_t i = 0; i < agents.size(); ++i) add("agent" + std::to_string(i), Figures(agents[i]));
  try {
    pqxx::connection conn(cluster.db());
    pqxx::work tx(conn);
    for (const auto& row : tx.exec("SELECT relname FROM pg_stat_user_tables ORDER BY relname")) {
      const std::string table = row[0].as<std::string>();
      put("table " + table, tx.exec1("SELECT count(*) FROM " + tx.quote_name(table))[0].as<double>());
    }
  } catch (const std::exception&) {
    // PostgreSQL restarting (a fault): this sample has no tables
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(Soak, ShortExperimentsUnderChaosLoseNothingLeaveNothingAndGrowNothing) {
  const double minutes = EnvNumber("SF_SOAK_MINUTES", 0);
  if (minutes <= 0) GTEST_SKIP() << "set SF_SOAK_MINUTES (bench/soak.sh runs 120)";
  const auto sample_every =
      std::chrono::seconds(static_cast<int>(EnvNumber("SF_SOAK_SAMPLE_SECONDS", 30)));
  const uint64_t seed = ChaosSeed();
  std::printf("[soak] %.0f minutes, seed %llu (replay: SF_CHAOS_SEED=%llu)\n", minutes,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);

  std::unique_ptr<TestNetwork> net = ChaosNetwork("soak");
  ClusterLayout layout;
  // Retention at its shortest, so a long soak reaches the steady state of every table.
  layout.master_flags = {"--utilization-retention-hours", "1", "--bookkeeping-retention-hours",
                         "1"};
  Place(layout, net.get());
  pid_t master_pid = 0;
  std::vector<pid_t> agent_pids;
  std::vector<std::string> trainer_env;
  Series series;
  std::ofstream csv;
  if (const char* path = std::getenv("SF_SOAK_SERIES_FILE"); path && *path) {
    csv.open(path);
    EXPECT_TRUE(csv.is_open()) << "SF_SOAK_SERIES_FILE " << path << " cannot be written";
    csv << "seconds,series,value\n";
  }
  int submitted = 0, checked = 0, injected = 0;
  {
    Cluster cluster(2, 2, layout);
    ASSERT_FALSE(::testing::Test::HasFailure());
    trainer_env = {"SF_MASTER_ADDRESS=" + cluster.grpc_address()};
    FaultInjector faults(cluster, net.get(), rng);
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(minutes * 60));
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    std::vector<Planned> running;
    // Checks and deletes the experiments that completed; true when none is left.
    auto settle = [&] {
      for (auto it = running.begin(); it != running.end();) {
        if (cluster.ExperimentState(it->id) != kCompleted) {
          ++it;
          continue;
        }
        ExpectExactlyOnce(cluster, *it, "soak");
        auto [code, body] = cluster.Delete("/api/v1/experiments/" + std::to_string(it->id));
        EXPECT_EQ(code, 200) << "delete experiment " << it->id << ": " << body.ToJson();
        ++checked;
        it = running.erase(it);
      }
      return running.empty();
    };
    auto next_arrival = Clock::now(), next_fault = Clock::now() + std::chrono::seconds(60),
         next_sample = Clock::now();
    while (Clock::now() < end && !::testing::Test::HasFatalFailure()) {
      const auto now = Clock::now();
      if (now >= next_arrival) {  // short experiments, one to two trials, arriving all the time
        Planned p;
        p.trials = std::uniform_int_distribution<int>(1, 2)(rng);
        p.unit = 20;
        p.length = 20 * std::uniform_int_distribution<int>(5, 15)(rng);
        p.id = cluster.Submit(
            ChaosExperiment("soak-" + std::to_string(++submitted), p.trials, p.length, p.unit));
        if (p.id > 0) running.push_back(p);
        next_arrival = now + faults.UniformMs(10000, 25000);
      }
      if (now >= next_fault) {
        const std::vector<Fault> kinds = faults.Kinds();
        const std::string what =
            faults.Inject(kinds[std::uniform_int_distribution<size_t>(0, kinds.size() - 1)(rng)]);
        std::printf("[soak] %7.1fs fault %d: %s\n", elapsed(), ++injected, what.c_str());
        std::fflush(stdout);
        next_fault = Clock::now() + faults.UniformMs(30000, 90000);
      }
      if (now >= next_sample) {
        Sample(cluster, series, elapsed(), csv);
        next_sample = now + sample_every;
      }
      settle();
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    std::printf("[soak] %7.1fs arrivals and faults stop; %zu experiments still running\n",
                elapsed(), running.size());
    EXPECT_TRUE(cluster.WaitFor(settle, std::chrono::seconds(900)))
        << running.size() << " experiments unfinished";
    Sample(cluster, series, elapsed(), csv);
    std::printf("[soak] %7.1fs %d experiments submitted, %d checked and deleted, %d faults\n",
                elapsed(), submitted, checked, injected);
    EXPECT_TRUE(
        cluster.WaitFor([&] { return cluster.TrainerPids().empty(); }, std::chrono::seconds(60)))
        << "trainers still running: " << cluster.TrainerPids().size();
    master_pid = cluster.master_pid();
    agent_pids = cluster.agent_pids();
  }
  EXPECT_TRUE(master_pid == 0 || kill(master_pid, 0) != 0)
      << "master " << master_pid << " still running";
  for (pid_t p : agent_pids)
    EXPECT_TRUE(p == 0 || kill(p, 0) != 0) << "agent " << p << " still running";
  EXPECT_TRUE(TrainerPids(trainer_env).empty());

  // Growth: each series' first half against its second.
  const bool judge = minutes >= 30;
  std::printf("[soak] %-40s %8s %10s %10s %10s %10s%s\n", "series", "samples", "1st med", "1st max",
              "2nd med", "2nd max", judge ? "" : "   (under 30 minutes: not judged)");
  for (const auto& [name, v] : series) {
    if (v.size() < 4) continue;
    const std::vector<double> first(v.begin(), v.begin() + v.size() / 2),
        second(v.begin() + v.size() / 2, v.end());
    const double m1 = Median(first), m2 = Median(second);
    const double x1 = *std::max_element(first.begin(), first.end()),
                 x2 = *std::max_element(second.begin(), second.end());
    std::printf("[soak] %-40s %8zu %10.1f %10.1f %10.1f %10.1f\n", name.c_str(), v.size(), m1, x1,
                m2, x2);
    if (!judge) continue;
    if (name.find(" rss_mb") != std::string::npos) {
      EXPECT_LE(m2, m1 * 1.2 + 16) << name << " grew";
    } else if (name.find(" threads") != std::string::npos) {
      EXPECT_LE(x2, x1 + 8) << name << " grew";
    } else if (name.find(" fds") != std::string::npos) {
      EXPECT_LE(x2, x1 + 16) << name << " grew";
    } else if (name != "table audit_log") {
      EXPECT_LE(x2, x1 * 1.3 + 100) << name << " grew";
    }
  }
}

}  // namespace
}  // namespace sf::testing
