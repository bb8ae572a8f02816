// `sf experiment fork ID [--config KEY=VALUE]...` against a real master and PostgreSQL: the new
// experiment has the old one's config with the overrides, the old one is untouched, and bad
// overrides or ids are refused before anything is stored. `sf experiment continue ID
// --max-length N` with a real trainer: a completed single-trial experiment trains further from
// its latest checkpoint, the step count going on.
#include <fstream>
#include <pqxx/pqxx>
#include <string>
#include <tuple>
#include <vector>

#include "common/config/experiment_config.h"
#include "tests/cli/run_sf.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {

class Fork : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }
  // Runs sf with SF_MASTER set: exit code, stdout, stderr.
  std::tuple<int, std::string, std::string> Sf(const std::vector<std::string>& args) {
    SfRun run = RunSf(args, scratch_, {{"SF_MASTER", cluster_->url()}});
    return {run.exit_code, run.out, run.err};
  }
  std::string ConfigOf(int64_t id) {
    auto [code, v] = cluster_->Get("/api/v1/experiments/" + std::to_string(id));
    EXPECT_EQ(code, 200);
    return code == 200 ? v.Find("experiment")->Find("configYaml")->as_string() : "";
  }
  std::unique_ptr<Cluster> cluster_;
  TempDir scratch_;
};

TEST_F(Fork, NewExperimentHasTheOldConfigWithTheOverrides) {
  cluster_ = std::make_unique<Cluster>(0, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  const int64_t original = c.Submit(TinyExperiment(2, 40, 10, "parent"));
  ASSERT_GT(original, 0);
  const std::string before = ConfigOf(original);

  auto [code, out, err] = Sf({"experiment", "fork", std::to_string(original), "--config", "name=child", "--config",
                              "searcher.max_length.batches=80", "--config", "hyperparameters.lr=0.001", "--paused"});
  ASSERT_EQ(code, 0) << out << err;
  const std::string prefix = "created experiment ";
  ASSERT_EQ(out.rfind(prefix, 0), 0u) << out;
  const int64_t fork = std::stoll(out.substr(prefix.size()));
  EXPECT_EQ(out, prefix + std::to_string(fork) + " (fork of experiment " + std::to_string(original) + ")\n");
  EXPECT_NE(fork, original);

  // The fork: the overrides applied, everything else as the original (same data, same grid).
  auto forked = config::ParseExperimentConfig(ConfigOf(fork));
  auto parent = config::ParseExperimentConfig(before);
  ASSERT_TRUE(forked.ok()) << forked.ErrorText();
  ASSERT_TRUE(parent.ok()) << parent.ErrorText();
  EXPECT_EQ(forked.config->name, "child");
  EXPECT_EQ(forked.config->searcher.max_length.value, 80);
  EXPECT_EQ(forked.config->data.train.src, parent.config->data.train.src);
  EXPECT_EQ(Value(config::ConstantHyperparameters(forked.config->hyperparameters)).Find("lr")->as_double(), 0.001);
  EXPECT_EQ(c.ExperimentState(fork), "EXPERIMENT_STATE_PAUSED");
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM trials WHERE experiment_id = " + std::to_string(fork)), 2);
  // The original is untouched.
  EXPECT_EQ(ConfigOf(original), before);
  EXPECT_EQ(c.ExperimentState(original), "EXPERIMENT_STATE_ACTIVE");

  // A fork with no overrides is the same config, as a new experiment.
  std::tie(code, out, err) = Sf({"experiment", "fork", std::to_string(original), "--json"});
  ASSERT_EQ(code, 0) << out << err;
  auto json = Value::FromJson(out);
  ASSERT_TRUE(json.ok()) << out;
  EXPECT_EQ(ConfigOf(Id(*json->Find("experiment"))), before);

  // Bad overrides and ids: exit 2, a message naming the problem, nothing stored.
  const int64_t stored = Count(c.db(), "SELECT count(*) FROM experiments");
  std::tie(code, out, err) = Sf({"experiment", "fork", std::to_string(original), "--config", "hyperparameters.heads=3"});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_NE(err.find("experiment " + std::to_string(original)), std::string::npos) << err;
  EXPECT_NE(err.find("heads"), std::string::npos) << err;
  std::tie(code, out, err) = Sf({"experiment", "fork", std::to_string(original), "--config", "novalue"});
  EXPECT_EQ(code, 2) << out << err;
  std::tie(code, out, err) = Sf({"experiment", "fork", "987654321"});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_EQ(err, "sf: experiment 987654321 does not exist\n");
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments"), stored);
}

// A fork stays in its original's workspace (not Uncategorized), unless --workspace moves it.
TEST_F(Fork, ForkStaysInTheOriginalsWorkspace) {
  cluster_ = std::make_unique<Cluster>(0, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  auto [wcode, wbody] = c.Post("/api/v1/workspaces", R"({"name":"team"})");
  ASSERT_EQ(wcode, 200) << wbody.ToJson();
  auto [code, created] = c.Post("/api/v1/experiments",
                                Value(Value::Map{{"configYaml", TinyExperiment(1, 40, 10, "in-team")},
                                                 {"activate", false},
                                                 {"workspace", "team"}})
                                    .ToJson());
  ASSERT_EQ(code, 200) << created.ToJson();
  const int64_t original = Id(*created.Find("experiment"));
  auto workspace_of = [&](int64_t id) {
    auto [c2, v] = c.Get("/api/v1/experiments/" + std::to_string(id));
    EXPECT_EQ(c2, 200);
    return c2 == 200 ? v.Find("experiment")->Find("workspace")->as_string() : "";
  };
  ASSERT_EQ(workspace_of(original), "team");
  auto fork_of = [&](std::vector<std::string> extra) -> int64_t {
    std::vector<std::string> args = {"experiment", "fork", std::to_string(original), "--paused", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto [fcode, out, err] = Sf(args);
    EXPECT_EQ(fcode, 0) << out << err;
    auto json = Value::FromJson(out);
    return json.ok() && json->Find("experiment") ? Id(*json->Find("experiment")) : 0;
  };
  const int64_t same = fork_of({});
  ASSERT_GT(same, 0);
  EXPECT_EQ(workspace_of(same), "team");
  const int64_t moved = fork_of({"--workspace", "Uncategorized"});
  ASSERT_GT(moved, 0);
  EXPECT_EQ(workspace_of(moved), "Uncategorized");
  // A workspace that does not exist is refused, nothing stored.
  const int64_t stored = Count(c.db(), "SELECT count(*) FROM experiments");
  auto [bad, out, err] = Sf({"experiment", "fork", std::to_string(original), "--workspace", "nowhere"});
  EXPECT_NE(bad, 0) << out << err;
  EXPECT_NE(err.find("nowhere"), std::string::npos) << err;
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments"), stored);
}

// A single-searcher TinyExperiment: one trial of `batches`, metrics every 10, a checkpoint every 20.
std::string SingleExperiment(int64_t batches) {
  std::string yaml = TinyExperiment(1, batches, 10, "single");
  yaml.replace(yaml.find("  name: grid"), 12, "  name: single");
  const size_t dropout = yaml.find("  dropout:");
  yaml.replace(dropout, yaml.find('\n', dropout) - dropout, "  dropout: 0.0");
  const size_t concurrent = yaml.find("  max_concurrent_trials:");
  yaml.erase(concurrent, yaml.find('\n', concurrent) - concurrent + 1);
  return yaml;
}

std::vector<int64_t> Column(const std::string& db, const std::string& sql) {
  std::vector<int64_t> out;
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  for (const auto& row : tx.exec(sql)) out.push_back(row[0].as<int64_t>());
  return out;
}

TEST_F(Fork, ContinueTrainsACompletedTrialFurtherFromItsLatestCheckpoint) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  const int64_t original = c.Submit(SingleExperiment(20));
  ASSERT_GT(original, 0);
  ASSERT_TRUE(c.WaitForState(original, "EXPERIMENT_STATE_COMPLETED", std::chrono::seconds(300)));
  const int64_t old_trial = Id(c.Trials(original).as_list()[0]);
  const std::string from = c.Get("/api/v1/trials/" + std::to_string(old_trial)).second.Find("trial")
                               ->Find("latestCheckpointUuid")->as_string();
  ASSERT_FALSE(from.empty());

  auto [code, out, err] = Sf({"experiment", "continue", std::to_string(original), "--max-length", "50"});
  ASSERT_EQ(code, 0) << out << err;
  const std::string prefix = "created experiment ";
  ASSERT_EQ(out.rfind(prefix, 0), 0u) << out;
  const int64_t next = std::stoll(out.substr(prefix.size()));
  EXPECT_EQ(out, prefix + std::to_string(next) + " (continues experiment " + std::to_string(original) +
                     " to 50 batches)\n");
  ASSERT_TRUE(c.WaitForState(next, "EXPERIMENT_STATE_COMPLETED", std::chrono::seconds(300)));
  const int64_t trial = Id(c.Trials(next).as_list()[0]);
  // Trained from step 20 on: its own training rows are 30, 40, 50, and it never restarted.
  EXPECT_EQ(Column(c.db(), "SELECT batches FROM metrics WHERE kind = 'training' AND trial_id = " +
                               std::to_string(trial) + " ORDER BY batches"),
            (std::vector<int64_t>{30, 40, 50}));
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id = " + std::to_string(trial)), 0);
  EXPECT_EQ(Count(c.db(), "SELECT max(batches) FROM checkpoints WHERE trial_id = " + std::to_string(trial)), 50);
  // Its first allocation restored the old trial's latest checkpoint.
  std::ifstream log(c.dir() + "/master-0.log");
  const std::string master_log((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  const size_t at = master_log.find("allocation=t" + std::to_string(trial) + "-r0-a1 ");
  ASSERT_NE(at, std::string::npos);
  const std::string line = master_log.substr(at, master_log.find('\n', at) - at);
  const std::string path = c.Get("/api/v1/experiments/" + std::to_string(original) + "/checkpoints")
                               .second.Find("checkpoints")->as_list().back().Find("path")->as_string();
  EXPECT_NE(line.find("restore=" + path), std::string::npos) << line;
  // The original is unchanged.
  EXPECT_EQ(c.ExperimentState(original), "EXPERIMENT_STATE_COMPLETED");

  // Refusals: a length it has already trained (exit 2), a running or grid experiment (exit 1).
  std::tie(code, out, err) = Sf({"experiment", "continue", std::to_string(original), "--max-length", "20"});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_EQ(err, "sf: max_length: 20 must be more than the 20 batches trial " + std::to_string(old_trial) +
                     " has trained\n");
  const int64_t grid = c.Submit(TinyExperiment(2, 10000, 10, "grid"));
  std::tie(code, out, err) = Sf({"experiment", "continue", std::to_string(grid), "--max-length", "99"});
  EXPECT_EQ(code, 1) << out << err;
  EXPECT_EQ(err, "sf: experiment " + std::to_string(grid) + " is ACTIVE; only a completed experiment can be continued\n");
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(grid) + "/kill", "").first, 200);
}

}  // namespace
}  // namespace sf::testing
