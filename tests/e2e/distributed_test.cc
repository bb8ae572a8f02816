// End to end, distributed: trials with slots_per_trial: 2 on two agents of one slot each, so
// the two ranks are separate trainer processes under separate agents that meet through the
// master and allreduce through Open MPI. Real PostgreSQL, master, agents and trainers.
#include <signal.h>

#include <filesystem>
#include <pqxx/pqxx>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/netns.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

std::string TwoRankExperiment(int64_t batches, const std::string& name) {
  return TinyExperiment(1, batches, 10, name) + "resources: {slots_per_trial: 2}\n";
}

TEST(DistributedEndToEnd, TwoRankTrialOnTwoAgentsCompletesWithMetricsCheckpointsAndBothRanksLogs) {
  Cluster cluster(2, 1);
  // Through the CLI, as a user would: create and follow to the end.
  TempDir tmp;
  const std::string file = tmp.WriteFile("dist.yaml", TwoRankExperiment(60, "dist-e2e"));
  CommandOptions follow;
  follow.timeout = std::chrono::seconds(300);
  auto run = RunCommand({Cluster::Binary("sf"), "experiment", "create", file, "--follow", "--master", cluster.url()},
                        follow);
  ASSERT_TRUE(run.ok());
  if (run->exit_code != 0) cluster.DumpLogs();
  ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_NE(run->output.find(": COMPLETED"), std::string::npos) << run->output;
  const size_t at = run->output.find("created experiment ");
  ASSERT_NE(at, std::string::npos) << run->output;
  const int64_t id = std::stoll(run->output.substr(at + 19));
  ASSERT_EQ(cluster.ExperimentState(id), kCompleted);
  Value t = cluster.Trials(id).as_list()[0];
  const std::string tid = std::to_string(Id(t));
  EXPECT_EQ(t.Find("totalBatches")->as_string(), "60");
  EXPECT_EQ(t.Find("restarts")->as_int(), 0);
  // One report per scheduling unit, from rank 0 for the trial, with the allreduce figures.
  EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id=" + tid), 6);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='validation' AND trial_id=" + tid), 1);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id=" + tid +
                                    " AND (vals->>'world_size')::float = 2 AND (vals->>'allreduce_bytes')::float > 0"),
            6)
      << Text(cluster.db(), "SELECT vals::text FROM metrics WHERE kind='training' AND trial_id=" + tid + " LIMIT 1");
  // The gang really spanned both agents, and both ranks' output is stored, tagged by rank.
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT rank) FROM task_logs WHERE trial_id=" + tid), 2);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT agent_id) FROM task_logs WHERE trial_id=" + tid), 2);
  EXPECT_GE(Count(cluster.db(), "SELECT count(*) FROM task_logs WHERE rank=1 AND trial_id=" + tid +
                                    " AND message LIKE '%data_parallel%'"),
            1);
  // Checkpoints: written once (by rank 0), verified on disk.
  auto [code, cks] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(code, 200);
  ASSERT_GE(cks.Find("checkpoints")->as_list().size(), 1u);
  for (const Value& c : cks.Find("checkpoints")->as_list()) {
    if (c.Find("state")->as_string() != "ACTIVE") continue;  // deleted by retention
    EXPECT_TRUE(fs::exists(c.Find("path")->as_string() + "/model.safetensors"));
  }
  // No trainer, ompi-server or MPI helper daemon is left behind.
  EXPECT_TRUE(cluster.TrainerPids().empty());
}

TEST(DistributedEndToEnd, KilledRankRestartsTheGangFromItsCheckpoint) {
  Cluster cluster(2, 1);
  int64_t id = cluster.Submit(TwoRankExperiment(160, "dist-sigkill-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor([&] { return Count(cluster.db(), "SELECT count(*) FROM checkpoints") >= 1; },
                              std::chrono::seconds(300)));
  int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  auto rank1 = TrainerPids({"SF_MASTER_ADDRESS=" + cluster.grpc_address(), "SF_TRIAL_ID=" + std::to_string(tid),
                            "SF_RANK=1"});
  ASSERT_EQ(rank1.size(), 1u);
  kill(rank1[0], SIGKILL);
  bool done = cluster.WaitForState(id, kCompleted, std::chrono::seconds(600));
  if (!done) cluster.DumpLogs();
  ASSERT_TRUE(done) << cluster.ExperimentState(id);
  Value t = cluster.Trials(id).as_list()[0];
  EXPECT_EQ(t.Find("restarts")->as_int(), 1);
  EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
  // The failure that caused the restart names the rank and its agent.
  const std::string why = Text(cluster.db(), "SELECT error FROM trials WHERE id=" + std::to_string(tid));
  EXPECT_NE(why.find("rank 1 on e2e-agent-"), std::string::npos) << why;
  EXPECT_NE(why.find("killed by signal 9"), std::string::npos) << why;
  // Every training report exists exactly once (10..160): the new gang resumed from the checkpoint.
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id=" +
                                    std::to_string(tid)),
            16);
  EXPECT_TRUE(cluster.TrainerPids().empty());
}

TEST(DistributedEndToEnd, PauseAndActivateOfATwoRankTrialContinueTheStepCount) {
  Cluster cluster(2, 1);
  int64_t id = cluster.Submit(TwoRankExperiment(120, "dist-pause-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor([&] { return TotalBatches(cluster, id) >= 30; }, std::chrono::seconds(300)));
  int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 200);
  ASSERT_TRUE(cluster.WaitFor(
      [&] { return cluster.Trials(id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; },
      std::chrono::seconds(90)));
  EXPECT_TRUE(cluster.TrainerPids(tid).empty());
  const int64_t paused_at = TotalBatches(cluster, id);
  ASSERT_LT(paused_at, 120);
  EXPECT_EQ(Count(cluster.db(), "SELECT max(batches) FROM checkpoints WHERE trial_id=" + std::to_string(tid)), paused_at);
  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  bool done = cluster.WaitForState(id, kCompleted, std::chrono::seconds(600));
  if (!done) cluster.DumpLogs();
  ASSERT_TRUE(done);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id=" +
                                    std::to_string(tid)),
            12);
  EXPECT_EQ(cluster.Trials(id).as_list()[0].Find("restarts")->as_int(), 0);
}

// Rank 1's "trainer" never reaches the rendezvous (it hangs before it): rank 0 gives up after
// SF_RENDEZVOUS_TIMEOUT_S with a reason naming the missing rank, the gang is torn down, and
// after max_restarts the trial ends in ERROR with that reason instead of hanging.
TEST(DistributedEndToEnd, RendezvousThatNeverCompletesFailsTheTrialWithAReason) {
  TempDir tmp;
  const std::string hang = tmp.WriteFile("hanging-trainer.sh", "#!/bin/sh\nexec sleep 600\n");
  fs::permissions(hang, fs::perms::owner_all);
  setenv("SF_RENDEZVOUS_TIMEOUT_S", "3", 1);  // inherited by the agents and their trainers
  ClusterLayout layout;
  layout.agent_trainer = {"", hang};
  Cluster cluster(2, 1, layout);
  unsetenv("SF_RENDEZVOUS_TIMEOUT_S");
  std::string yaml = TwoRankExperiment(20, "dist-rendezvous-e2e");
  yaml.replace(yaml.find("max_restarts: 2"), 15, "max_restarts: 1");
  int64_t id = cluster.Submit(yaml);
  ASSERT_GT(id, 0);
  bool done = cluster.WaitForState(id, "EXPERIMENT_STATE_ERROR", std::chrono::seconds(300));
  if (!done) cluster.DumpLogs();
  ASSERT_TRUE(done) << cluster.ExperimentState(id);
  const int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  const std::string why = Text(cluster.db(), "SELECT error FROM trials WHERE id=" + std::to_string(tid));
  std::printf("failure reason: %s\n", why.c_str());
  EXPECT_NE(why.find("rank 0 on e2e-agent-0"), std::string::npos) << why;
  EXPECT_NE(why.find("rendezvous \"members\" timed out after 3 s"), std::string::npos) << why;
  EXPECT_NE(why.find("missing: rank 1 on e2e-agent-1"), std::string::npos) << why;
  EXPECT_EQ(cluster.Trials(id).as_list()[0].Find("restarts")->as_int(), 1);
}

TEST(DistributedEndToEnd, GangLargerThanTheClusterIsRefusedAtSubmit) {
  Cluster cluster(2, 1);
  const int64_t before = Count(cluster.db(), "SELECT count(*) FROM experiments");
  auto yaml = TinyExperiment(1, 10, 10, "too-big") + "resources: {slots_per_trial: 3}\n";
  auto [code, v] = cluster.Post("/api/v1/experiments", Value(Value::Map{{"configYaml", yaml}}).ToJson());
  EXPECT_EQ(code, 400);
  const std::string body = v.ToJson();
  EXPECT_NE(body.find("resources.slots_per_trial"), std::string::npos) << body;
  EXPECT_NE(body.find("largest gang this cluster can place: 2 slots"), std::string::npos) << body;
  EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM experiments"), before);
}

}  // namespace
}  // namespace sf::testing

namespace sf::testing {
namespace {

// The two ranks run under agents in separate network namespaces: they share no loopback and
// reach each other (and the master) only across a bridge, as on two machines.
TEST(DistributedAcrossMachines, TwoRankTrialAcrossNetworkNamespacesCompletes) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  TestNetwork net(2);
  ASSERT_TRUE(net.ok()) << net.why();
  ClusterLayout layout;
  layout.master_host = net.bridge_address();
  layout.agent_netns = net.namespaces();
  Cluster cluster(2, 1, layout);
  const int64_t sent_before = net.SentBytes(1);
  int64_t id = cluster.Submit(TwoRankExperiment(40, "dist-netns-e2e"));
  ASSERT_GT(id, 0);
  bool done = cluster.WaitForState(id, kCompleted, std::chrono::seconds(600));
  if (!done) cluster.DumpLogs();
  ASSERT_TRUE(done) << cluster.ExperimentState(id);
  const std::string tid = std::to_string(Id(cluster.Trials(id).as_list()[0]));
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT agent_id) FROM task_logs WHERE trial_id=" + tid), 2);
  // Rank 1 (namespace 1) pushed its gradients over the bridge: at least half of what the
  // allreduce moved per rank went out of its namespace.
  const int64_t reduced = Count(cluster.db(), "SELECT COALESCE(sum((vals->>'allreduce_bytes')::float), 0)::bigint "
                                              "FROM metrics WHERE kind='training' AND trial_id=" + tid);
  const int64_t sent = net.SentBytes(1) - sent_before;
  std::printf("allreduce payload %lld bytes; rank 1's namespace sent %lld bytes over the bridge\n",
              static_cast<long long>(reduced), static_cast<long long>(sent));
  EXPECT_GT(reduced, 0);
  EXPECT_GE(sent, reduced / 2);
}

}  // namespace
}  // namespace sf::testing
