// End to end, with real processes: agent events survive a master killed mid-stream (at-least-once
// delivery, applied once: docs/cluster.md "Message delivery"), and a failed trial's error names
// the rank, the agent and why (docs/cluster.md "Failure reasons").
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kError[] = "EXPERIMENT_STATE_ERROR";

std::string WriteExecutable(const std::string& path, const std::string& body) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << "#!/bin/sh\n" << body;
  }
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

// One trial, one slot, `max_restarts` restarts; the agent's trainer is a test program.
std::string OneTrialExperiment(const std::string& name, int max_restarts) {
  std::string yaml = TinyExperiment(1, 20, 10, name);
  return yaml.replace(yaml.find("max_restarts: 2"), 15,
                      "max_restarts: " + std::to_string(max_restarts));
}

std::string TrialError(Cluster& cluster, int64_t experiment_id) {
  Value trials = cluster.Trials(experiment_id);
  if (trials.as_list().empty()) {
    return "";
  }
  const Value* error = trials.as_list()[0].Find("error");
  return error ? error->as_string() : "";
}

// Runs a one-trial experiment `name` (no restarts) on one agent whose trainer is `trainer` until
// it is in error, and sets `why` to the trial's error.
void RunUntilTheTrialFails(const std::string& trainer, const std::string& name, std::string* why) {
  ClusterLayout layout;
  layout.agent_trainer = {trainer};
  Cluster cluster(1, 1, layout);
  int64_t id = cluster.Submit(OneTrialExperiment(name, 0));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitForState(id, kError, std::chrono::seconds(120)))
      << cluster.ExperimentState(id);
  *why = TrialError(cluster, id);
  std::printf("failure reason: %s\n", why->c_str());
  if (why->find("lost") != std::string::npos) cluster.DumpLogs();
}

// The master is frozen (SIGSTOP) while a trainer writes 3000 numbered lines and exits 3, then
// SIGKILLed and started again; the trainer's restart does the same with the master up. Every line
// of both runs is stored exactly once, and both exits are applied once each: two allocations, one
// restart, the error naming exit status 3 (not a lost agent).
TEST(ClusterEndToEnd, MasterRestartMidStreamLosesNoLogLineAndNoExitStatus) {
  TempDir scripts;
  const std::string trainer = WriteExecutable(scripts.path() + "/chatty-trainer",
                                              "i=1\n"
                                              "while [ $i -le 3000 ]; do\n"
                                              "  echo \"r${SF_RESTART} line $i\"\n"
                                              "  if [ $((i % 100)) -eq 0 ]; then sleep 0.05; fi\n"
                                              "  i=$((i+1))\n"
                                              "done\n"
                                              "echo \"r${SF_RESTART} error: giving up\" >&2\n"
                                              "touch \"" +
                                                  scripts.path() +
                                                  "/done-r${SF_RESTART}\"\n"
                                                  "exit 3\n");
  ClusterLayout layout;
  layout.agent_trainer = {trainer};
  Cluster cluster(1, 1, layout);
  int64_t id = cluster.Submit(OneTrialExperiment("delivery-e2e", 1));
  ASSERT_GT(id, 0);
  // Mid-stream: some of the first run's lines are stored, most are still to come.
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        return Count(cluster.db(),
                     "SELECT count(*) FROM task_logs WHERE message LIKE 'r0 line %'") >= 200;
      },
      std::chrono::seconds(120)));
  // Frozen first, so that the agent's next batches and the EXITED are written into the socket
  // and never read: without acknowledgements they would be lost with the master for certain.
  ASSERT_EQ(kill(cluster.master_pid(), SIGSTOP), 0);
  ASSERT_TRUE(cluster.WaitFor([&] { return fs::exists(scripts.path() + "/done-r0"); },
                              std::chrono::seconds(60)));
  std::this_thread::sleep_for(
      std::chrono::milliseconds(800));  // it exits; the agent sends all it has
  cluster.StopMaster(SIGKILL);
  cluster.StartMaster();
  ASSERT_TRUE(cluster.WaitForAgents(1));
  bool done = cluster.WaitForState(id, kError, std::chrono::seconds(180));
  if (!done) {
    cluster.DumpLogs();
  }
  ASSERT_TRUE(done) << cluster.ExperimentState(id);
  const int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  const std::string of_trial = " AND trial_id = " + std::to_string(tid);
  for (const std::string run : {"r0", "r1"}) {
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM task_logs WHERE message LIKE '" + run +
                                      " line %'" + of_trial),
              3000)
        << run;
    EXPECT_EQ(
        Count(cluster.db(), "SELECT count(DISTINCT message) FROM task_logs WHERE message LIKE '" +
                                run + " line %'" + of_trial),
        3000)
        << run;
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM task_logs WHERE message = '" + run +
                                      " error: giving up'" + of_trial),
              1)
        << run;
  }
  // In order: ids follow the lines of each run.
  EXPECT_EQ(Count(cluster.db(),
                  "SELECT count(*) FROM (SELECT message, lag(message) OVER (ORDER BY id) AS prev "
                  "FROM task_logs "
                  "WHERE message LIKE 'r0 line %'" +
                      of_trial +
                      ") s WHERE prev IS NOT NULL AND "
                      "split_part(message, ' ', 3)::int <> split_part(prev, ' ', 3)::int + 1"),
            0);
  EXPECT_EQ(cluster.Trials(id).as_list()[0].Find("restarts")->as_int(), 1);
  EXPECT_EQ(Count(cluster.db(),
                  "SELECT count(*) FROM allocations WHERE trial_id = " + std::to_string(tid)),
            2);
  const std::string why = TrialError(cluster, id);
  EXPECT_NE(why.find("rank 0 on e2e-agent-0: exit status 3: r1 error: giving up"),
            std::string::npos)
      << why;
  // The master recorded how far it applied the agent's events.
  EXPECT_GT(Count(cluster.db(),
                  "SELECT applied_through FROM agent_deliveries WHERE agent_id = 'e2e-agent-0'"),
            0);
}

// A trainer that fails with an error line: the trial's error (REST) names rank, agent and line.
TEST(ClusterEndToEnd, FailureReasonNamesRankAgentAndTheFirstErrorLine) {
  TempDir scripts;
  const std::string trainer = WriteExecutable(
      scripts.path() + "/bad-data-trainer",
      "echo 'I 2026-01-01T00:00:00Z trainer event=starting'\n"
      "echo 'sf-trainer: train.de: line 3: invalid UTF-8 (byte 0xc3 at column 3)' >&2\n"
      "echo 'some later noise' >&2\n"
      "exit 1\n");
  std::string why;
  ASSERT_NO_FATAL_FAILURE(RunUntilTheTrialFails(trainer, "reason-e2e", &why));
  EXPECT_EQ(why,
            "rank 0 on e2e-agent-0: exit status 1: sf-trainer: train.de: line 3: invalid UTF-8 "
            "(byte 0xc3 at "
            "column 3)");
}

// A trainer that cannot be started says why: the program is missing.
TEST(ClusterEndToEnd, FailureReasonSaysTheTrainerIsMissing) {
  TempDir scripts;
  const std::string missing = scripts.path() + "/no-such-trainer";
  std::string why;
  ASSERT_NO_FATAL_FAILURE(RunUntilTheTrialFails(missing, "missing-e2e", &why));
  EXPECT_NE(why.find("rank 0 on e2e-agent-0: "), std::string::npos) << why;
  EXPECT_NE(why.find(missing), std::string::npos) << why;
  EXPECT_NE(why.find("No such file or directory"), std::string::npos) << why;
  EXPECT_EQ(why.find("trainer exited with"), std::string::npos) << why;
}

// ... or it is not executable.
TEST(ClusterEndToEnd, FailureReasonSaysTheTrainerIsNotExecutable) {
  TempDir scripts;
  const std::string plain = scripts.path() + "/not-executable-trainer";
  WriteExecutable(plain, "exit 0\n");
  fs::permissions(plain, fs::perms::owner_read | fs::perms::owner_write);
  std::string why;
  ASSERT_NO_FATAL_FAILURE(RunUntilTheTrialFails(plain, "noexec-e2e", &why));
  EXPECT_NE(why.find("rank 0 on e2e-agent-0: "), std::string::npos) << why;
  EXPECT_NE(why.find(plain), std::string::npos) << why;
  EXPECT_NE(why.find("Permission denied"), std::string::npos) << why;
}

}  // namespace
}  // namespace sf::testing
