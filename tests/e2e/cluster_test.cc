// End to end: real PostgreSQL, sf-master, sf-agent and sf-trainer processes on loopback.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <pqxx/pqxx>
#include <thread>

#include "common/subprocess.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/support/config_cases.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

TEST(ClusterEndToEnd, GridExperimentCompletesWithMetricsCheckpointsAndLogs) {
  Cluster cluster(2, 1);
  int64_t id = cluster.Submit(TinyExperiment(4, 40, 10, "grid-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitForState(id, kCompleted, std::chrono::seconds(300))) << cluster.ExperimentState(id);

  Value trials = cluster.Trials(id);
  ASSERT_EQ(trials.as_list().size(), 4u);
  for (const Value& t : trials.as_list()) {
    int64_t tid = Id(t);
    EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
    EXPECT_EQ(t.Find("totalBatches")->as_string(), "40");
    // Training metrics every 10 batches, exactly once each; one validation at the end.
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind = 'training' AND trial_id = " +
                                      std::to_string(tid)),
              4);
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind = 'validation' AND trial_id = " +
                                      std::to_string(tid)),
              1);
    auto [code, m] = cluster.Get("/api/v1/trials/" + std::to_string(tid) + "/metrics?kind=training");
    ASSERT_EQ(code, 200);
    ASSERT_EQ(m.Find("metrics")->as_list().size(), 4u);
    EXPECT_TRUE(m.Find("metrics")->as_list()[0].Find("values")->Find("loss")->is_number());
  }
  // Checkpoints: in the database, and on disk with a manifest unless retention deleted them
  // (the default keeps each trial's latest and best; docs/cluster.md, "Checkpoint retention").
  auto [code, cks] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(code, 200);
  ASSERT_GE(cks.Find("checkpoints")->as_list().size(), 4u);
  for (const Value& c : cks.Find("checkpoints")->as_list()) {
    std::string path = c.Find("path")->as_string();
    EXPECT_EQ(path.rfind(cluster.checkpoint_root(), 0), 0u) << path;
    if (c.Find("state")->as_string() != "ACTIVE") continue;
    EXPECT_TRUE(fs::exists(path + "/manifest.json")) << path;
    EXPECT_TRUE(fs::exists(path + "/model.safetensors")) << path;
  }
  // Logs: `sf trial logs` shows the trainer's output.
  int64_t first = Id(trials.as_list()[0]);
  auto logs = RunCommand({Cluster::Binary("sf"), "trial", "logs", std::to_string(first), "--master", cluster.url()});
  ASSERT_TRUE(logs.ok());
  EXPECT_EQ(logs->exit_code, 0);
  EXPECT_NE(logs->output.find("step 10 loss"), std::string::npos) << logs->output;
  EXPECT_NE(logs->output.find("validation at step 40"), std::string::npos) << logs->output;

  // REST and gRPC give the same answers.
  auto channel = grpc::CreateChannel(cluster.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = steadfast::v1::Api::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + cluster.admin_token());
  steadfast::v1::GetExperimentRequest req;
  req.set_experiment_id(id);
  steadfast::v1::GetExperimentResponse resp;
  ASSERT_TRUE(stub->GetExperiment(&ctx, req, &resp).ok());
  auto [rcode, rest] = cluster.Get("/api/v1/experiments/" + std::to_string(id));
  ASSERT_EQ(rcode, 200);
  const Value& e = *rest.Find("experiment");
  EXPECT_EQ(e.Find("name")->as_string(), resp.experiment().name());
  EXPECT_EQ(e.Find("state")->as_string(), steadfast::v1::ExperimentState_Name(resp.experiment().state()));
  EXPECT_EQ(e.Find("numTrials")->as_int(), resp.experiment().num_trials());
  grpc::ClientContext ctx2;
  ctx2.AddMetadata("authorization", "Bearer " + cluster.admin_token());
  steadfast::v1::GetExperimentTrialsRequest treq;
  treq.set_experiment_id(id);
  steadfast::v1::GetExperimentTrialsResponse tresp;
  ASSERT_TRUE(stub->GetExperimentTrials(&ctx2, treq, &tresp).ok());
  ASSERT_EQ(tresp.trials_size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tresp.trials(i).id(), Id(trials.as_list()[i]));
  // The CLI follows to the end with exit code 0.
  auto follow = RunCommand({Cluster::Binary("sf"), "experiment", "describe", std::to_string(id), "--master", cluster.url()});
  ASSERT_TRUE(follow.ok());
  EXPECT_EQ(follow->exit_code, 0);
  EXPECT_NE(follow->output.find("COMPLETED"), std::string::npos);
}

TEST(ClusterEndToEnd, KillStopsTrainersWithinTheGracePeriod) {
  Cluster cluster(1, 1);
  int64_t id = cluster.Submit(TinyExperiment(1, 1000000, 10, "kill-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor([&] { return !cluster.TrainerPids().empty() && cluster.Trials(id).as_list().size() == 1 &&
                                            cluster.Trials(id).as_list()[0].Find("totalBatches")->as_string() != "0"; },
                              std::chrono::seconds(120)));
  int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  ASSERT_FALSE(cluster.TrainerPids(tid).empty());
  auto [code, v] = cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/kill", "");
  ASSERT_EQ(code, 200) << v.ToJson();
  EXPECT_TRUE(cluster.WaitFor([&] { return cluster.TrainerPids(tid).empty(); }, std::chrono::seconds(15)));
  EXPECT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_CANCELED", std::chrono::seconds(30)));
  EXPECT_EQ(cluster.Trials(id).as_list()[0].Find("state")->as_string(), "TRIAL_STATE_CANCELED");
  // Archive works on a finished experiment; pause does not (409).
  EXPECT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/archive", "").first, 200);
  EXPECT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 409);
}

TEST(ClusterEndToEnd, PauseThenActivateResumesFromTheCheckpoint) {
  Cluster cluster(1, 1);
  int64_t id = cluster.Submit(TinyExperiment(1, 300, 10, "pause-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        auto t = cluster.Trials(id);
        return t.as_list().size() == 1 && std::stoll(t.as_list()[0].Find("totalBatches")->as_string()) >= 30;
      },
      std::chrono::seconds(120)));
  int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 200);
  ASSERT_TRUE(cluster.WaitFor([&] { return cluster.Trials(id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; },
                              std::chrono::seconds(60)));
  EXPECT_TRUE(cluster.TrainerPids(tid).empty());
  int64_t paused_at = std::stoll(cluster.Trials(id).as_list()[0].Find("totalBatches")->as_string());
  ASSERT_LT(paused_at, 300);
  // The pause wrote a checkpoint at exactly that step.
  EXPECT_EQ(Count(cluster.db(), "SELECT max(batches) FROM checkpoints WHERE trial_id = " + std::to_string(tid)),
            paused_at);
  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  ASSERT_TRUE(cluster.WaitForState(id, kCompleted, std::chrono::seconds(240)));
  // The step count continued: every training report exists exactly once (10, 20, ..., 300),
  // and the reports after the pause came from the resumed run (restart 0, steps > paused_at).
  EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id = " + std::to_string(tid)), 30);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id = " +
                                    std::to_string(tid)),
            30);
  EXPECT_EQ(cluster.Trials(id).as_list()[0].Find("restarts")->as_int(), 0);
  // A native experiment has no context to show.
  auto [context_code, context] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/context");
  EXPECT_EQ(context_code, 404);
  EXPECT_NE(context.ToJson().find("experiment " + std::to_string(id) + " has no context"), std::string::npos)
      << context.ToJson();
  // Where it ran stays on the trial after it ended: the one agent (REST `hosts`).
  const Value trial = cluster.Trials(id).as_list()[0];
  const Value* hosts = trial.Find("hosts");
  ASSERT_NE(hosts, nullptr);
  ASSERT_EQ(hosts->as_list().size(), 1u) << trial.ToJson();
  EXPECT_EQ(hosts->as_list()[0].as_string(),
            Text(cluster.db(), "SELECT DISTINCT agent_id FROM task_logs WHERE trial_id = " + std::to_string(tid)));
}

TEST(ClusterEndToEnd, KilledTrainerRestartsFromItsLatestCheckpoint) {
  Cluster cluster(1, 1);
  int64_t id = cluster.Submit(TinyExperiment(1, 300, 10, "sigkill-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor(
      [&] { return Count(cluster.db(), "SELECT count(*) FROM checkpoints") >= 1; }, std::chrono::seconds(120)));
  int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  auto pids = cluster.TrainerPids(tid);
  ASSERT_EQ(pids.size(), 1u);
  kill(pids[0], SIGKILL);
  ASSERT_TRUE(cluster.WaitForState(id, kCompleted, std::chrono::seconds(240)));
  Value t = cluster.Trials(id).as_list()[0];
  EXPECT_EQ(t.Find("restarts")->as_int(), 1);
  EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id = " +
                                    std::to_string(tid)),
            30);
}

// The minutes of GET /api/v1/cluster/utilization (default window: 24 h) that had busy slots,
// as "pool@time" -> samples; checks the points are ordered by time and hold what they say.
std::map<std::string, int64_t> BusyMinutes(Cluster& cluster) {
  std::map<std::string, int64_t> out;
  auto [code, v] = cluster.Get("/api/v1/cluster/utilization");
  EXPECT_EQ(code, 200) << v.ToJson();
  if (code != 200 || !v.Find("points")) return out;
  std::string last_time;
  for (const Value& p : v.Find("points")->as_list()) {
    const std::string time = p.Find("time")->as_string();
    EXPECT_LE(last_time, time) << "points are not ordered by time: " << v.ToJson();
    last_time = time;
    EXPECT_LE(p.Find("slotsBusy")->as_double(), p.Find("slotsBusyMax")->as_double()) << p.ToJson();
    EXPECT_LE(p.Find("slotsBusyMax")->as_int(), p.Find("slotsTotal")->as_int()) << p.ToJson();
    if (p.Find("slotsBusy")->as_double() > 0) out[p.Find("pool")->as_string() + "@" + time] = p.Find("samples")->as_int();
  }
  return out;
}

TEST(ClusterEndToEnd, MasterRestartKeepsTrialsRunningAndLosesNoMetric) {
  ClusterLayout layout;
  layout.master_flags = {"--utilization-sample-seconds", "1"};
  Cluster cluster(2, 1, layout);
  int64_t id = cluster.Submit(TinyExperiment(2, 400, 10, "restart-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        auto t = cluster.Trials(id);
        if (t.as_list().size() != 2) return false;
        for (const Value& x : t.as_list()) {
          if (std::stoll(x.Find("totalBatches")->as_string()) < 20) return false;
        }
        return true;
      },
      std::chrono::seconds(120)));
  // The master's utilisation history (sampled every second here) shows the trials' busy slots.
  std::map<std::string, int64_t> busy_before;
  ASSERT_TRUE(cluster.WaitFor([&] { return !(busy_before = BusyMinutes(cluster)).empty(); }, std::chrono::seconds(30)))
      << cluster.Get("/api/v1/cluster/utilization").second.ToJson();
  auto before = cluster.TrainerPids();
  ASSERT_GE(before.size(), 2u);
  cluster.StopMaster(SIGTERM);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  // The trainers kept running without the master.
  for (pid_t p : before) EXPECT_EQ(kill(p, 0), 0) << "trainer " << p << " died with the master";
  cluster.StartMaster();
  ASSERT_TRUE(cluster.WaitForAgents(2));
  // The history outlived the master: every busy minute is still there, with at least its samples.
  std::map<std::string, int64_t> busy_after = BusyMinutes(cluster);
  for (const auto& [minute, samples] : busy_before) {
    auto it = busy_after.find(minute);
    ASSERT_NE(it, busy_after.end()) << minute << " is gone after the restart";
    EXPECT_GE(it->second, samples) << minute;
  }
  ASSERT_TRUE(cluster.WaitForState(id, kCompleted, std::chrono::seconds(300))) << cluster.ExperimentState(id);
  const Value final_trials = cluster.Trials(id);  // kept alive for the loop below
  for (const Value& t : final_trials.as_list()) {
    int64_t tid = Id(t);
    EXPECT_EQ(t.Find("restarts")->as_int(), 0) << "the trial was re-adopted, not restarted";
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id = " + std::to_string(tid)), 40);
    EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id = " +
                                      std::to_string(tid)),
              40);
  }
}

TEST(ClusterEndToEnd, BadInputIsRejectedAndStoresNothing) {
  Cluster cluster(1, 1);
  for (const ConfigCase& c : ConfigCases()) {
    if (c.paths.empty()) continue;
    int64_t before = Count(cluster.db(), "SELECT count(*) FROM experiments");
    auto [code, v] = cluster.Post("/api/v1/experiments", Value(Value::Map{{"configYaml", c.yaml}}).ToJson());
    if (c.name == "empty_file" || c.name == "binary_garbage" || c.name == "only_comments") {
      EXPECT_EQ(code, 400) << c.name;
    } else {
      ASSERT_EQ(code, 400) << c.name << ": " << v.ToJson();
      ASSERT_TRUE(v.Find("errors") && v.Find("errors")->is_list()) << c.name;
      std::vector<std::string> paths;
      for (const Value& e : v.Find("errors")->as_list()) paths.push_back(e.Find("path")->as_string());
      EXPECT_EQ(paths, c.paths) << c.name;
    }
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM experiments"), before) << c.name;
  }
  // The CLI rejects them too, before anything reaches the master.
  TempDir dir;
  std::string bad = dir.WriteFile("bad.yaml", With({{"max_restarts", "max_restarts: -1"}}));
  auto r = RunCommand({Cluster::Binary("sf"), "experiment", "create", bad, "--master", cluster.url()});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->output.find("max_restarts: -1 must be >= 0"), std::string::npos) << r->output;
  // Data files the cluster can't read.
  std::string missing = TinyExperiment(1, 10, 10);
  missing.replace(missing.find("train.de"), 8, "nope.de");
  auto [mcode, mv] = cluster.Post("/api/v1/experiments", Value(Value::Map{{"configYaml", missing}}).ToJson());
  EXPECT_EQ(mcode, 400);
  EXPECT_NE(mv.ToJson().find("data.train.src"), std::string::npos) << mv.ToJson();
  // Malformed requests.
  EXPECT_EQ(cluster.Post("/api/v1/experiments", "{not json").first, 400);
  EXPECT_EQ(cluster.Post("/api/v1/experiments", R"({"configYaml": 5})").first, 400);
  EXPECT_EQ(cluster.Post("/api/v1/experiments", R"({"unknownField": 1})").first, 400);
  EXPECT_EQ(cluster.Get("/api/v1/no/such/route").first, 404);
  EXPECT_EQ(cluster.Post("/api/v1/agents", "{}").first, 405);
  EXPECT_EQ(cluster.Get("/api/v1/experiments/987654").first, 404);
  EXPECT_EQ(cluster.Get("/api/v1/trials/987654/metrics").first, 404);
  EXPECT_EQ(cluster.Get("/api/v1/experiments/99999999999999999999999").first, 400);
  EXPECT_EQ(cluster.Get("/api/v1/experiments?limit=abc").first, 400);
  EXPECT_EQ(cluster.Get("/api/v1/experiments?states=BOGUS").first, 400);
  EXPECT_EQ(cluster.Get("/api/v1/experiments?fields=secrets").first, 400);
  EXPECT_EQ(cluster.Post("/api/v1/experiments/987654/pause", "").first, 404);
  // Bodies over the route's limit: 8 MiB, but 140 MiB for an experiment (it may carry a user
  // trial's context, base64): 9 MiB there is read, and refused as a config over 4 MiB.
  std::string huge = R"({"uuids": [")" + std::string(9 << 20, 'x') + "\"]}";
  EXPECT_EQ(cluster.Post("/api/v1/checkpoints/delete", huge).first, 413);
  std::string big_config = R"({"configYaml": ")" + std::string(9 << 20, 'x') + "\"}";
  EXPECT_EQ(cluster.Post("/api/v1/experiments", big_config).first, 400);
  // (Over 140 MiB, an experiment gets 413 too: master/api http_server_test.)
  // The master is still up and well.
  EXPECT_EQ(cluster.Get("/health").first, 200);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM experiments"), 0);
  // The utilisation history: a `since` that is no time is a 400 naming the parameter.
  for (const char* bad : {"yesterday", "2026-13-45T99:00:00Z", "2026-11-24", "99999999999999", "1e9"}) {
    auto [ucode, uv] = cluster.Get(std::string("/api/v1/cluster/utilization?since=") + bad);
    EXPECT_EQ(ucode, 400) << bad << ": " << uv.ToJson();
    ASSERT_TRUE(uv.Find("message")) << uv.ToJson();
    EXPECT_EQ(uv.Find("message")->as_string().rfind("since: ", 0), 0u) << uv.ToJson();
  }
  for (const char* good : {"0", "1795536060", "2026-11-24T16:01:00Z", "2026-11-24T17:01:00%2B01:00",
                           "2026-11-24T17:01:00+01:00", "2026-11-24T16:01:00.5Z"}) {
    auto [ucode, uv] = cluster.Get(std::string("/api/v1/cluster/utilization?pool=default&since=") + good);
    EXPECT_EQ(ucode, 200) << good << ": " << uv.ToJson();
    EXPECT_TRUE(uv.Find("points") && uv.Find("points")->is_list()) << uv.ToJson();
  }
  EXPECT_EQ(cluster.Post("/api/v1/cluster/utilization", "{}").first, 405);
  // OpenAPI and Prometheus.
  auto [ocode, openapi] = cluster.Get("/api/v1/openapi.json");
  EXPECT_EQ(ocode, 200);
  EXPECT_TRUE(openapi.Find("paths") && openapi.Find("paths")->Find("/api/v1/experiments"));
  EXPECT_TRUE(openapi.Find("paths") && openapi.Find("paths")->Find("/api/v1/cluster/utilization"));
  auto client = api::MasterClient::Create(cluster.url());
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("steadfast_api_requests_total"), std::string::npos);
  EXPECT_NE(metrics->body.find("steadfast_slots{kind=\"total\"} 1"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("steadfast_db_query_duration_seconds"), std::string::npos);
}

}  // namespace
}  // namespace sf::testing

namespace sf::testing {
namespace {

// The dashboard in Debian's Chromium against this real cluster (webui/e2e/dashboard.e2e.mjs):
// submit a grid experiment, watch it complete without a reload, charts drawn with as many
// points as the API has rows, logs followed, pause/activate/kill from the UI.
TEST(ClusterEndToEnd, DashboardInChromium) {
  namespace fs = std::filesystem;
  ASSERT_TRUE(fs::exists(SourceDir() + "/webui/dist/index.html"))
      << "the web UI is not built: run tests/webui/run.sh (deploy/test.sh does)";
  ASSERT_TRUE(fs::exists(SourceDir() + "/webui/node_modules/playwright-core")) << "run npm ci in webui/";
  // The scenario takes seconds here: sample the utilisation history often enough to see it. A
  // second agent has two fake GPUs (tests/agent/fake_nvml.cc) in a pool of its own, which no
  // experiment of the scenario asks for, so the cluster page's GPU table has rows to check.
  ClusterLayout layout;
  layout.master_flags = {"--utilization-sample-seconds", "1"};
  layout.agent_slots = {"", "auto"};
  layout.agent_flags = {{}, {"--nvml-library", SF_FAKE_NVML_PATH, "--resource-pool", "gpu"}};
  Cluster cluster(2, 2, layout);
  CommandOptions o;
  o.working_dir = SourceDir() + "/webui";
  o.env["SF_MASTER_URL"] = cluster.url();
  o.env["SF_ARTIFACTS_DIR"] = BinaryDir() + "/webui-e2e-artifacts";
  // Logged in, through the login page (docs/webui.md).
  o.env["SF_E2E_USERNAME"] = "admin";
  o.env["SF_E2E_PASSWORD"] = cluster.admin_password();
  o.env["SF_E2E_EXPECT_GPUS"] = "2";
  o.timeout = std::chrono::minutes(9);
  auto r = RunCommand({"node", "e2e/dashboard.e2e.mjs"}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find(" 0 failed"), std::string::npos) << r->output;
}

}  // namespace
}  // namespace sf::testing
