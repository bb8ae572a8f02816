// The model registry end to end (docs/registry.md), with a real trainer and the `sf` CLI: a
// trial's checkpoint registered as a model version survives the retention pass that deletes
// every other checkpoint, `sf checkpoint delete` and `sf experiment delete` refuse it naming the
// model and version, and `sf model ...` creates, lists, describes, archives and deletes.
#include <filesystem>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/cli/run_sf.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One trial of `batches`, a checkpoint every 10 batches and a validation every 20, into the
// cluster's checkpoint root, keeping no checkpoint once the trial has finished.
std::string KeepNothingExperiment(const Cluster& c, int64_t batches) {
  std::string yaml = TinyExperiment(1, batches, 10, "registry");
  const std::string period = "min_checkpoint_period: {batches: 20}";
  yaml.replace(yaml.find(period), period.size(), "min_checkpoint_period: {batches: 10}");
  yaml += "min_validation_period: {batches: 20}\n";
  yaml += "checkpoint_storage: {type: shared_fs, host_path: " + c.checkpoint_root() +
          ", save_trial_latest: 0, save_trial_best: 0, save_experiment_best: 0}\n";
  return yaml;
}

// uuid -> (state, path) of the experiment's checkpoints.
std::map<std::string, std::pair<std::string, std::string>> Checkpoints(const Cluster& c, int64_t experiment) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  for (const auto& r : tx.exec_params("SELECT c.uuid, c.state, c.path FROM checkpoints c JOIN trials t "
                                      "ON t.id = c.trial_id WHERE t.experiment_id = $1",
                                      experiment)) {
    out[r[0].as<std::string>()] = {r[1].as<std::string>(), r[2].as<std::string>()};
  }
  return out;
}

std::set<std::string> Active(const std::map<std::string, std::pair<std::string, std::string>>& cks) {
  std::set<std::string> out;
  for (const auto& [uuid, row] : cks) {
    if (row.first == "ACTIVE") out.insert(uuid);
  }
  return out;
}

class ModelRegistryEndToEnd : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(ModelRegistryEndToEnd, ARegisteredCheckpointOutlivesRetentionAndRefusesDeletion) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  TempDir scratch;
  auto sf = [&](const std::vector<std::string>& args) {
    SfRun run = RunSf(args, scratch, {{"SF_MASTER", c.url()}});
    return std::make_tuple(run.exit_code, run.out, run.err);
  };

  // Train until a few checkpoints exist, then pause: the trial's newest stays (it resumes from it).
  const int64_t id = c.Submit(KeepNothingExperiment(c, 200));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return Checkpoints(c, id).size() >= 2; }, 300s)) << "no checkpoints";
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 200);
  ASSERT_TRUE(c.WaitFor([&] { return c.Trials(id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; },
                        120s));
  ASSERT_TRUE(c.WaitFor([&] { return Active(Checkpoints(c, id)).size() == 1; }, 120s));
  const std::string uuid = *Active(Checkpoints(c, id)).begin();
  const std::string path = Checkpoints(c, id).at(uuid).second;

  // Register it.
  auto [code, out, err] = sf({"model", "create", "wmt-de-en", "--description", "German to English", "--label", "nlp"});
  ASSERT_EQ(code, 0) << out << err;
  EXPECT_EQ(out, "model wmt-de-en created\n");
  std::tie(code, out, err) = sf({"model", "register", "wmt-de-en", "--checkpoint", uuid, "--notes", "paused at"});
  ASSERT_EQ(code, 0) << out << err;
  EXPECT_EQ(out, "1\n");

  // The trial finishes; retention keeps nothing else, but keeps the version's checkpoint.
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 600s));
  EXPECT_TRUE(c.WaitFor([&] { return Active(Checkpoints(c, id)) == std::set<std::string>{uuid}; }, 120s))
      << Checkpoints(c, id).size() << " checkpoints, " << Active(Checkpoints(c, id)).size() << " active";
  EXPECT_TRUE(fs::exists(path + "/manifest.json")) << path;
  for (const auto& [other, row] : Checkpoints(c, id)) {
    if (other != uuid) {
      EXPECT_EQ(row.first, "DELETED") << other;
    }
  }

  // Explicit deletion and experiment deletion refuse it, naming the model and the version.
  const std::string why = "checkpoint " + uuid + " is version 1 of model \"wmt-de-en\"; delete that version first";
  std::tie(code, out, err) = sf({"checkpoint", "delete", uuid});
  EXPECT_EQ(code, 1) << out << err;
  EXPECT_NE(err.find(why), std::string::npos) << err;
  auto client = api::MasterClient::Create(c.url());
  client->set_token(c.admin_token());
  auto deleted = client->Delete("/api/v1/checkpoints/" + uuid);
  ASSERT_TRUE(deleted.ok());
  EXPECT_NE(deleted->status, 200);
  EXPECT_NE(deleted->body.find("version 1 of model"), std::string::npos) << deleted->body;
  std::tie(code, out, err) = sf({"experiment", "delete", std::to_string(id)});
  EXPECT_EQ(code, 1) << out << err;
  EXPECT_NE(err.find("version 1 of model \"wmt-de-en\""), std::string::npos) << err;
  EXPECT_EQ(Checkpoints(c, id).at(uuid).first, "ACTIVE");
  EXPECT_TRUE(fs::exists(path + "/manifest.json"));

  // The CLI shows it.
  std::tie(code, out, err) = sf({"model", "list"});
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(out.find("wmt-de-en"), std::string::npos) << out;
  std::tie(code, out, err) = sf({"model", "describe", "wmt-de-en"});
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(out.find("description: German to English"), std::string::npos) << out;
  EXPECT_NE(out.find(uuid), std::string::npos) << out;
  EXPECT_NE(out.find("paused at"), std::string::npos) << out;
  std::tie(code, out, err) = sf({"model", "version", "describe", "wmt-de-en", "1", "--json"});
  EXPECT_EQ(code, 0) << err;
  auto json = Value::FromJson(out);
  ASSERT_TRUE(json.ok()) << out;
  EXPECT_EQ(json->Find("checkpoint")->Find("uuid")->as_string(), uuid);
  EXPECT_EQ(json->Find("version")->Find("experimentId")->as_string(), std::to_string(id));
  EXPECT_EQ(json->Find("metric")->as_string(), "validation_loss");
  EXPECT_NE(json->Find("bestValidationMetric"), nullptr) << out;

  // Bad input: exit 2 with the field or the thing named; a taken name: exit 1 (409).
  std::tie(code, out, err) = sf({"model", "create", "bad name"});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_NE(err.find("name: \"bad name\""), std::string::npos) << err;
  std::tie(code, out, err) = sf({"model", "create", "wmt-de-en"});
  EXPECT_EQ(code, 1) << out << err;
  EXPECT_NE(err.find("already exists"), std::string::npos) << err;
  std::tie(code, out, err) = sf({"model", "describe", "nope"});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_NE(err.find("model \"nope\" does not exist"), std::string::npos) << err;
  std::tie(code, out, err) = sf({"model", "register", "wmt-de-en", "--checkpoint", "no-such-uuid"});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_NE(err.find("checkpoint no-such-uuid does not exist"), std::string::npos) << err;

  // Archive hides it from the list; delete is refused while it has a version.
  std::tie(code, out, err) = sf({"model", "archive", "wmt-de-en"});
  EXPECT_EQ(code, 0) << err;
  std::tie(code, out, err) = sf({"model", "list"});
  EXPECT_EQ(out.find("wmt-de-en"), std::string::npos) << out;
  std::tie(code, out, err) = sf({"model", "unarchive", "wmt-de-en"});
  EXPECT_EQ(code, 0) << err;
  std::tie(code, out, err) = sf({"model", "delete", "wmt-de-en"});
  EXPECT_EQ(code, 1) << out << err;
  EXPECT_NE(err.find("has 1 version"), std::string::npos) << err;

  // With its version gone the checkpoint is an ordinary one again: it can be deleted.
  std::tie(code, out, err) = sf({"model", "version", "delete", "wmt-de-en", "1"});
  EXPECT_EQ(code, 0) << out << err;
  std::tie(code, out, err) = sf({"checkpoint", "delete", uuid});
  EXPECT_EQ(code, 0) << out << err;
  EXPECT_FALSE(fs::exists(path));
  std::tie(code, out, err) = sf({"model", "delete", "wmt-de-en"});
  EXPECT_EQ(code, 0) << out << err;
  std::tie(code, out, err) = sf({"experiment", "delete", std::to_string(id)});
  EXPECT_EQ(code, 0) << out << err;
}

}  // namespace
}  // namespace sf::testing
