// Checkpoints on object storage end to end: a native trial whose experiment says
// `checkpoint_storage: {type: s3, ...}` stores every checkpoint in the real S3 server that
// tests/storage/s3_test.sh brings up (Ceph's RADOS Gateway; its endpoint and keys are in this
// process's environment, so in the master's and the agent's too), none on the local disk;
// retention deletes the objects of the checkpoints it drops; paused, the trial resumes from its
// checkpoint in S3 with no restart; deleting the experiment removes its objects; and storage that
// cannot be used is refused at submission, naming why, storing nothing.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <signal.h>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/storage/checkpoint_storage.h"
#include "common/storage/s3_client.h"
#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/serve/serve_process.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct Row {
  std::string uuid, path, state;
  int64_t batches = 0;
};

std::vector<Row> Checkpoints(const Cluster& c, int64_t experiment) {
  std::vector<Row> out;
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  for (const auto& r :
       tx.exec("SELECT c.uuid, c.path, c.state, c.batches FROM checkpoints c JOIN trials t ON "
               "t.id = c.trial_id WHERE t.experiment_id = " +
               std::to_string(experiment) + " ORDER BY c.batches")) {
    out.push_back({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(),
                   r[3].as<int64_t>()});
  }
  return out;
}

// A trial's training losses by step (its `loss` metric).
std::map<int64_t, double> Losses(const Cluster& c, int64_t trial) {
  std::map<int64_t, double> out;
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  for (const auto& row : tx.exec("SELECT batches, (vals->>'loss')::float8 FROM metrics WHERE kind = 'training' AND "
                                 "trial_id = " +
                                 std::to_string(trial) + " ORDER BY batches")) {
    out[row[0].as<int64_t>()] = row[1].as<double>();
  }
  return out;
}

class CheckpointsOnS3 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Env("SF_S3_ENDPOINT").empty())
      GTEST_SKIP() << "no S3 server: run through tests/storage/s3_test.sh";
    storage::S3Config raw;
    raw.endpoint_url = Env("SF_S3_ENDPOINT");
    raw.bucket = Env("SF_S3_BUCKET");
    auto client = storage::S3Client::Create(raw);
    ASSERT_TRUE(client.ok()) << client.status().message();
    client_ = std::make_unique<storage::S3Client>(*client);
    prefix_ = "e2e-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }
  std::string Storage(const std::string& extra = "") const {
    return "checkpoint_storage: {type: s3, bucket: " + Env("SF_S3_BUCKET") +
           ", prefix: " + prefix_ + ", endpoint_url: '" + Env("SF_S3_ENDPOINT") + "'" + extra +
           "}\n";
  }
  // Objects under an s3:// URL of the test bucket.
  size_t Objects(const std::string& url) {
    const std::string key = url.substr(("s3://" + Env("SF_S3_BUCKET") + "/").size());
    auto listed = client_->List(key + "/");
    EXPECT_TRUE(listed.ok()) << listed.status().message();
    return listed.ok() ? listed->size() : 0;
  }
  bool HasManifest(const std::string& url) {
    const std::string key = url.substr(("s3://" + Env("SF_S3_BUCKET") + "/").size());
    return client_->Get(key + "/" + storage::kObjectManifest).ok();
  }
  std::unique_ptr<storage::S3Client> client_;
  std::string prefix_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(CheckpointsOnS3,
       ANativeTrialStoresInS3ResumesFromThereAndRetentionAndDeletionRemoveObjects) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  std::string yaml = TinyExperiment(1, 1500, 10, "s3");  // long enough to pause mid-way
  const std::string period = "min_checkpoint_period: {batches: 20}";
  yaml.replace(yaml.find(period), period.size(), "min_checkpoint_period: {batches: 50}");
  yaml += "reproducibility: {experiment_seed: 11}\n";
  yaml += Storage(", save_trial_latest: 1, save_trial_best: 0, save_experiment_best: 0");
  const int64_t id = c.Submit(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return Checkpoints(c, id).size() >= 3; }, 300s)) << "no checkpoints";
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 200);
  const int64_t trial = Id(c.Trials(id).as_list()[0]);
  ASSERT_TRUE(c.WaitFor(
      [&] { return c.Trials(id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; },
      120s));

  // Every checkpoint went to S3 under the experiment's prefix, and none to the local disk.
  const std::string root = "s3://" + Env("SF_S3_BUCKET") + "/" + prefix_ + "/experiment-" +
                           std::to_string(id) + "/trial-" + std::to_string(trial) + "/";
  std::vector<Row> rows = Checkpoints(c, id);
  for (const Row& r : rows) EXPECT_EQ(r.path, root + r.uuid);
  EXPECT_FALSE(fs::exists(c.checkpoint_root() + "/experiment-" + std::to_string(id)));
  // Retention keeps only the newest (the paused trial resumes from it); the others' objects go.
  // The pass after the last checkpoint settles a second and may queue behind earlier ones, and
  // retention commits a mark before it removes the objects (its documented order): wait for every
  // older one to be marked and for its objects to go.
  ASSERT_TRUE(c.WaitFor(
      [&] {
        rows = Checkpoints(c, id);
        if (rows.size() < 3 || rows.back().state != "ACTIVE") return false;
        for (size_t i = 0; i + 1 < rows.size(); ++i) {
          if (rows[i].state != "DELETED" || Objects(rows[i].path) != 0) return false;
        }
        return true;
      },
      120s))
      << "retention did not leave only the newest checkpoint";
  const Row newest = rows.back();
  for (const Row& r : rows) {
    if (r.uuid == newest.uuid) continue;
    EXPECT_EQ(r.state, "DELETED") << r.uuid;
    EXPECT_EQ(Objects(r.path), 0u) << r.path;
  }
  EXPECT_TRUE(HasManifest(newest.path)) << newest.path;
  EXPECT_GE(Objects(newest.path), 5u) << "weights, optimizer, state, config, tokenizer, manifests";

  // Activated, it resumes from that checkpoint in S3 (no restart, the step count goes on).
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 600s));
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id = " + std::to_string(trial)), 0);
  EXPECT_EQ(
      Count(c.db(), "SELECT max(batches) FROM metrics WHERE kind = 'training' AND trial_id = " +
                        std::to_string(trial)),
      1500);
  std::ifstream log(c.dir() + "/master-0.log");
  const std::string master_log((std::istreambuf_iterator<char>(log)),
                               std::istreambuf_iterator<char>());
  const std::string started = "allocation=t" + std::to_string(trial) + "-r0-a2 ";
  const size_t at = master_log.find(started);
  ASSERT_NE(at, std::string::npos) << "trial " << trial << " did not start a second allocation";
  const std::string line = master_log.substr(at, master_log.find('\n', at) - at);
  EXPECT_NE(line.find("restore=" + newest.path), std::string::npos) << line;
  // The checkpoints of the second run are in S3 too, each with its manifest.
  rows = Checkpoints(c, id);
  ASSERT_GT(rows.back().batches, newest.batches);
  ASSERT_TRUE(c.WaitFor(
      [&] { return Checkpoints(c, id).back().state == "ACTIVE" && HasManifest(rows.back().path); },
      60s));

  // Bit-exact: the same experiment run without a pause has the same loss at every step.
  const int64_t again = c.Submit(yaml);
  ASSERT_GT(again, 0);
  ASSERT_TRUE(c.WaitForState(again, "EXPERIMENT_STATE_COMPLETED", 600s));
  const std::map<int64_t, double> paused_losses = Losses(c, trial),
                                   straight_losses = Losses(c, Id(c.Trials(again).as_list()[0]));
  EXPECT_EQ(paused_losses.size(), 150u);
  EXPECT_EQ(paused_losses, straight_losses) << "resumed from S3, the trial trains as if never paused";

  // `sf checkpoint download`: the newest checkpoint's files, verified against the master's
  // record; a deleted one and an unknown uuid are refused.
  const Row last = Checkpoints(c, id).back();
  const std::string into = c.dir() + "/downloaded";
  auto got = sf::RunCommand({Cluster::Binary("sf"), "checkpoint", "download", last.uuid, into, "--master", c.url()});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->exit_code, 0) << got->output;
  EXPECT_NE(got->output.find("(verified)"), std::string::npos) << got->output;
  EXPECT_TRUE(fs::exists(into + "/manifest.json"));
  EXPECT_TRUE(fs::exists(into + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(into + "/" + storage::kObjectManifest));
  auto gone = sf::RunCommand(
      {Cluster::Binary("sf"), "checkpoint", "download", rows[0].uuid, c.dir() + "/gone", "--master", c.url()});
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->exit_code, 1) << gone->output;
  EXPECT_NE(gone->output.find("DELETED"), std::string::npos) << gone->output;
  EXPECT_FALSE(fs::exists(c.dir() + "/gone"));
  auto unknown = sf::RunCommand(
      {Cluster::Binary("sf"), "checkpoint", "download", "no-such-uuid", c.dir() + "/x", "--master", c.url()});
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->exit_code, 2) << unknown->output;

  // Deleting the experiment removes every object under its prefix.
  auto deleted = sf::RunCommand(
      {Cluster::Binary("sf"), "experiment", "delete", std::to_string(id), "--master", c.url()});
  ASSERT_TRUE(deleted.ok());
  ASSERT_EQ(deleted->exit_code, 0) << deleted->output;
  const std::string experiment_root =
      "s3://" + Env("SF_S3_BUCKET") + "/" + prefix_ + "/experiment-" + std::to_string(id);
  EXPECT_TRUE(c.WaitFor([&] { return Objects(experiment_root) == 0; }, 60s))
      << Objects(experiment_root) << " objects left";
  EXPECT_GT(Objects("s3://" + Env("SF_S3_BUCKET") + "/" + prefix_ + "/experiment-" + std::to_string(again)), 0u)
      << "the other experiment's checkpoints stay";
}

// A Core API trial (tests/e2e/core_api/regress.py, the user's PyTorch script) stores its
// checkpoints in S3 through the Python library, is paused and resumed from there with no
// restart, and trains exactly as a run that was never paused.
TEST_F(CheckpointsOnS3, ACoreApiTrialStoresInS3AndResumesFromThereAsIfNeverPaused) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  const fs::path context = fs::path(c.dir()) / "core-api-s3";
  fs::create_directories(context);
  fs::copy_file(fs::path(SourceDir()) / "tests/e2e/core_api/regress.py", context / "regress.py");
  std::ofstream(context / "exp.yaml")
      << "name: core-api-s3\n"
         "entrypoint: /usr/bin/python3 regress.py\n"
         "hyperparameters: {lr: 0.05, sleep: 0.15, checkpoint_every: 5}\n"
         "searcher: {name: single, metric: validation_loss, max_length: {batches: 60}}\n"
      << Storage();
  sf::CommandOptions o;
  o.env = {{"SF_MASTER", c.url()}, {"SF_TOKEN", c.admin_token()}};
  o.timeout = 2min;
  auto create = [&]() -> int64_t {
    auto run = sf::RunCommand({Cluster::Binary("sf"), "experiment", "create", (context / "exp.yaml").string()}, o);
    EXPECT_TRUE(run.ok() && run->exit_code == 0) << (run.ok() ? run->output : run.status().message());
    const std::string prefix = "created experiment ";
    const size_t at = run.ok() ? run->output.find(prefix) : std::string::npos;
    return at == std::string::npos ? 0 : std::stoll(run->output.substr(at + prefix.size()));
  };
  const int64_t id = create();
  ASSERT_GT(id, 0);
  const int64_t trial = Id(c.Trials(id).as_list()[0]);
  const std::string t = std::to_string(trial);
  ASSERT_TRUE(c.WaitFor(
      [&] { return Count(c.db(), "SELECT count(*) FROM checkpoints WHERE trial_id = " + t) >= 2; }, 120s));
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 200);
  ASSERT_TRUE(c.WaitFor(
      [&] { return c.Trials(id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; }, 60s));
  const std::vector<Row> stored = Checkpoints(c, id);
  ASSERT_FALSE(stored.empty());
  for (const Row& r : stored) {
    EXPECT_EQ(r.path.rfind("s3://" + Env("SF_S3_BUCKET") + "/" + prefix_ + "/experiment-" + std::to_string(id) +
                               "/trial-" + t + "/",
                           0),
              0u)
        << r.path;
    if (r.state == "ACTIVE") {
      EXPECT_TRUE(HasManifest(r.path)) << r.path;
    }
  }
  const int64_t paused_at = stored.back().batches;
  ASSERT_LT(paused_at, 60);
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 300s));
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id = " + t), 0) << "a pause is not a restart";
  EXPECT_GE(Count(c.db(), "SELECT count(*) FROM task_logs WHERE trial_id = " + t + " AND message LIKE " +
                              "'%starting at step " + std::to_string(paused_at) + "%'"),
            1)
      << "it resumed from the checkpoint it stored in S3";

  // The same script, never paused: the same loss at every one of the 60 steps.
  const int64_t again = create();
  ASSERT_GT(again, 0);
  ASSERT_TRUE(c.WaitForState(again, "EXPERIMENT_STATE_COMPLETED", 300s));
  const std::map<int64_t, double> resumed = Losses(c, trial), straight = Losses(c, Id(c.Trials(again).as_list()[0]));
  EXPECT_EQ(resumed.size(), 60u);
  EXPECT_EQ(resumed, straight);
}

// The gateway frozen while a checkpoint uploads, then killed and started again: that upload
// fails (the trial restarts from its last stored checkpoint, or the retried upload succeeds);
// either way no checkpoint is ever recorded without all its objects and manifest, and the
// checkpoints after the kill are stored and verify.
TEST_F(CheckpointsOnS3, KillingTheGatewayMidUploadLosesNoStoredCheckpointAndTheNextOnesSucceed) {
  const std::string s3_dir = Env("SF_S3_DIR");
  if (s3_dir.empty()) GTEST_SKIP() << "SF_S3_DIR is not set (s3_test.sh sets it)";
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  std::string yaml = TinyExperiment(1, 1500, 10, "s3kill");
  const std::string period = "min_checkpoint_period: {batches: 20}";
  yaml.replace(yaml.find(period), period.size(), "min_checkpoint_period: {batches: 50}");
  yaml.replace(yaml.find("max_restarts: 2"), 15, "max_restarts: 20");
  yaml += Storage(", save_trial_latest: 1000");
  const int64_t id = c.Submit(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return Checkpoints(c, id).size() >= 2; }, 300s)) << "no checkpoints";
  const int64_t trial = Id(c.Trials(id).as_list()[0]);

  // Freeze the gateway; wait for the trainer to stage a checkpoint (its upload now hangs).
  std::ifstream pid_in(s3_dir + "/run/client.rgw.local.pid");
  pid_t gateway = 0;
  pid_in >> gateway;
  ASSERT_GT(gateway, 0);
  ASSERT_EQ(kill(gateway, SIGSTOP), 0);
  std::string stuck;
  const std::string staging_prefix = "sf-checkpoints-" + std::to_string(trial) + "-";
  const bool staged = c.WaitFor(
      [&] {
        std::error_code ec;
        for (const auto& d : fs::directory_iterator(fs::temp_directory_path(), ec)) {
          if (d.path().filename().string().rfind(staging_prefix, 0) != 0) continue;
          for (const auto& ck : fs::directory_iterator(d.path(), ec)) {
            const std::string name = ck.path().filename().string();
            if (name.rfind(".tmp-", 0) != 0 && name.rfind("restore-", 0) != 0) stuck = name;
          }
        }
        return !stuck.empty();
      },
      120s);
  const int64_t batches_before = Checkpoints(c, id).back().batches;
  kill(gateway, SIGKILL);
  kill(gateway, SIGCONT);
  ASSERT_TRUE(staged) << "no checkpoint was staged while the gateway was frozen";
  ASSERT_TRUE(c.WaitFor([&] { return kill(gateway, 0) != 0; }, 30s));
  auto restarted = sf::RunCommand({"bash", SourceDir() + "/deploy/local-s3.sh", "gateway", s3_dir});
  ASSERT_TRUE(restarted.ok());
  ASSERT_EQ(restarted->exit_code, 0) << restarted->output;

  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 600s));
  EXPECT_EQ(Count(c.db(), "SELECT max(batches) FROM metrics WHERE kind = 'training' AND trial_id = " +
                              std::to_string(trial)),
            1500);
  // Every recorded checkpoint is whole and verifies; the ones after the kill exist.
  const std::vector<Row> rows = Checkpoints(c, id);
  ASSERT_GT(rows.back().batches, batches_before);
  auto store = storage::CheckpointStorage::ForPath(rows.back().path, std::nullopt);
  ASSERT_TRUE(store.ok());
  int verified = 0;
  for (const Row& r : rows) {
    if (r.state != "ACTIVE") continue;
    auto fetched = (*store)->Fetch(r.path, c.dir() + "/verify-" + r.uuid);
    EXPECT_TRUE(fetched.ok()) << r.path << ": " << fetched.status().message();
    ++verified;
  }
  EXPECT_GE(verified, 2);
  // The interrupted one was recorded only if its (retried) upload completed whole.
  const int64_t recorded = Count(c.db(), "SELECT count(*) FROM checkpoints WHERE uuid = '" + stuck + "'");
  const std::string url = "s3://" + Env("SF_S3_BUCKET") + "/" + prefix_ + "/experiment-" + std::to_string(id) +
                          "/trial-" + std::to_string(trial) + "/" + stuck;
  EXPECT_EQ(recorded == 1, HasManifest(url)) << stuck << " recorded " << recorded;
  std::cout << "interrupted checkpoint " << stuck << ": " << (recorded ? "stored by a retry" : "failed")
            << "; trial restarts " << Count(c.db(), "SELECT restarts FROM trials WHERE id = " + std::to_string(trial))
            << std::endl;
  if (recorded == 0) {
    EXPECT_GE(Count(c.db(), "SELECT restarts FROM trials WHERE id = " + std::to_string(trial)), 1);
    EXPECT_GE(Count(c.db(), "SELECT count(*) FROM task_logs WHERE trial_id = " + std::to_string(trial) +
                                " AND message LIKE '%storing checkpoint " + stuck + "%'"),
              1)
        << "the trial's logs name the failed upload";
  }
}

// A model version whose checkpoint is in S3 is served by name, by sf-serve started by hand and
// by the cluster (`sf serve start`), with the translations `sf-trainer translate` gives from the
// same checkpoint downloaded by `sf checkpoint download`.
TEST_F(CheckpointsOnS3, ARegisteredVersionStoredInS3IsServedByNameAsTheCommandLineTranslates) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  const int64_t id = c.Submit(TinyExperiment(1, 60, 30, "s3serve") + Storage());
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 300s));
  std::string uuid;
  for (const Row& r : Checkpoints(c, id)) {
    if (r.state == "ACTIVE") uuid = r.uuid;
  }
  ASSERT_FALSE(uuid.empty());
  ASSERT_EQ(c.Post("/api/v1/models", "{\"name\": \"s3-de-en\"}").first, 200);
  ASSERT_EQ(c.Post("/api/v1/models/s3-de-en/versions", "{\"checkpoint_uuid\": \"" + uuid + "\"}").first, 200);

  // The reference: the command line's translations from the downloaded checkpoint.
  const std::string local = c.dir() + "/s3serve-checkpoint";
  auto got = sf::RunCommand({Cluster::Binary("sf"), "checkpoint", "download", uuid, local, "--master", c.url()});
  ASSERT_TRUE(got.ok() && got->exit_code == 0) << (got.ok() ? got->output : got.status().message());
  std::ifstream test_in(DataCopy("multi30k-de-en-tiny") + "/test.de");
  std::vector<std::string> sentences;
  for (std::string line; sentences.size() < 4 && std::getline(test_in, line);) sentences.push_back(line);
  std::string input;
  Value::List texts;
  for (const std::string& line : sentences) {
    input += line + "\n";
    texts.emplace_back(line);
  }
  sf::CommandOptions o;
  o.working_dir = c.dir();
  o.stdin_data = input;
  o.timeout = 2min;
  auto translated = sf::RunCommand({"/bin/sh", "-c",
                                    "'" + BinaryDir() + "/trainer/sf-trainer' translate --checkpoint '" + local +
                                        "' --threads 1 > s3serve-ref.txt"},
                                   o);
  ASSERT_TRUE(translated.ok() && translated->exit_code == 0) << (translated.ok() ? translated->output : "");
  std::vector<std::string> reference;
  std::ifstream ref_in(c.dir() + "/s3serve-ref.txt");
  for (std::string line; std::getline(ref_in, line);) reference.push_back(line);
  ASSERT_EQ(reference.size(), sentences.size());
  auto expect_reference = [&](const serve::serve_testing::HttpReply& reply, const std::string& who) {
    ASSERT_EQ(reply.status, 200) << who << ": " << reply.error << reply.body;
    auto parsed = Value::FromJson(reply.body);
    ASSERT_TRUE(parsed.ok() && parsed->Find("translations")) << reply.body;
    const Value::List& out = parsed->Find("translations")->as_list();
    ASSERT_EQ(out.size(), reference.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].Find("text")->as_string(), reference[i]) << who;
  };

  // sf-serve --model by hand: the registry names an s3:// checkpoint, fetched and verified.
  ASSERT_EQ(setenv("SF_SERVE_TEST_TOKEN", c.admin_token().c_str(), 1), 0);
  {
    serve::serve_testing::ServeProcess server(
        c.dir(), "s3serve",
        {"--model", "s3-de-en", "--port", "0", "--threads", "1", "--master", c.url(), "--token-env",
         "SF_SERVE_TEST_TOKEN"});
    ASSERT_TRUE(server.WaitReady()) << server.log();
    expect_reference(serve::serve_testing::Call(server.port(), boost::beast::http::verb::post, "/v1/translate",
                                                "{\"text\": " + Value(texts).ToJson() + "}"),
                     "sf-serve --model");
    const std::string metrics =
        serve::serve_testing::Call(server.port(), boost::beast::http::verb::get, "/metrics").body;
    EXPECT_NE(metrics.find("sf_serve_model_info{checkpoint=\"s3://"), std::string::npos)
        << "the metrics name where the checkpoint is: " << metrics;
    EXPECT_EQ(server.Stop(), 0) << server.log();
  }

  // Scheduled by the cluster: the agent's sf-serve fetches it the same way.
  sf::CommandOptions cli;
  cli.timeout = 2min;
  auto started = sf::RunCommand({Cluster::Binary("sf"), "serve", "start", "--model", "s3-de-en", "--threads", "1",
                                 "--wait", "--wait-seconds", "90", "--master", c.url()},
                                cli);
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->exit_code, 0) << started->output;
  auto [listed_code, listed] = c.Get("/api/v1/servings");
  ASSERT_EQ(listed_code, 200);
  ASSERT_EQ(listed.Find("servings")->as_list().size(), 1u) << listed.ToJson();
  const int64_t serving = Id(listed.Find("servings")->as_list()[0]);
  auto [described_code, described] = c.Get("/api/v1/servings/" + std::to_string(serving));
  ASSERT_EQ(described_code, 200);
  const std::string url = described.Find("serving")->Find("url")->as_string();
  const std::string token = described.Find("serving")->Find("token")->as_string();
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  expect_reference(serve::serve_testing::Call(port, boost::beast::http::verb::post, "/v1/translate",
                                              "{\"text\": " + Value(texts).ToJson() + "}", token),
                   "sf serve start");
  EXPECT_EQ(c.Post("/api/v1/servings/" + std::to_string(serving) + "/stop", "").first, 200);
}

TEST_F(CheckpointsOnS3, StorageThatCannotBeUsedIsRefusedAtSubmissionNamingWhy) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  const std::string bucket = Env("SF_S3_BUCKET"), endpoint = Env("SF_S3_ENDPOINT");
  struct Case {
    std::string storage, says;
  };
  const std::vector<Case> cases = {
      {"checkpoint_storage: {type: s3, bucket: no-such-bucket-e2e, endpoint_url: '" + endpoint +
           "'}\n",
       "NoSuchBucket"},
      {"checkpoint_storage: {type: s3, bucket: " + bucket + ", endpoint_url: '" + endpoint +
           "', access_key: " + Env("AWS_ACCESS_KEY_ID") + ", secret_key: wrong}\n",
       "AccessDenied"},
      {"checkpoint_storage: {type: s3, bucket: " + bucket +
           ", endpoint_url: 'http://127.0.0.1:1'}\n",
       "did not answer"},
  };
  for (const Case& k : cases) {
    const int64_t before = Count(c.db(), "SELECT count(*) FROM experiments");
    auto [code, v] =
        c.Post("/api/v1/experiments",
               Value(Value::Map{{"configYaml", TinyExperiment(1, 10, 10) + k.storage}}).ToJson());
    ASSERT_EQ(code, 400) << k.storage << v.ToJson();
    const Value::List& errors = v.Find("errors")->as_list();
    ASSERT_EQ(errors.size(), 1u) << v.ToJson();
    EXPECT_EQ(errors[0].Find("path")->as_string(), "checkpoint_storage");
    const std::string message = errors[0].Find("message")->as_string();
    EXPECT_NE(message.find(k.says), std::string::npos) << message;
    EXPECT_EQ(message.rfind("checkpoint storage: ", 0), 0u) << message;
    EXPECT_NE(message.find(" s3://"), std::string::npos) << message;
    EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments"), before);
  }
  // Keys given in the config work, and no API reader sees the secret.
  const std::string secret = Env("AWS_SECRET_ACCESS_KEY");
  const int64_t id = c.Submit(TinyExperiment(1, 10, 10) + "checkpoint_storage: {type: s3, bucket: " + bucket +
                              ", endpoint_url: '" + endpoint + "', access_key: " + Env("AWS_ACCESS_KEY_ID") +
                              ", secret_key: " + secret + "}\n");
  ASSERT_GT(id, 0);
  auto [code, shown] = c.Get("/api/v1/experiments/" + std::to_string(id));
  ASSERT_EQ(code, 200);
  const std::string config = shown.Find("experiment")->Find("configYaml")->as_string();
  EXPECT_EQ(config.find(secret), std::string::npos) << config;
  EXPECT_NE(config.find(config::kRedacted), std::string::npos) << config;
  auto [list_code, listed] = c.Get("/api/v1/experiments?fields=config");
  ASSERT_EQ(list_code, 200);
  EXPECT_EQ(listed.ToJson().find(secret), std::string::npos);
  EXPECT_NE(Text(c.db(), "SELECT config_yaml FROM experiments WHERE id = " + std::to_string(id)).find(secret),
            std::string::npos)
      << "the master keeps the key its trials need";
}

}  // namespace
}  // namespace sf::testing
