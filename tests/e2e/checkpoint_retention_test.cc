// Checkpoint retention end to end, with real trainers: after the checkpoints of a small sweep,
// exactly the ones checkpoint_storage's save_trial_latest / save_trial_best /
// save_experiment_best keep are ACTIVE and on disk, every other one is DELETED and gone from
// disk; a paused trial's latest checkpoint is never deleted (it resumes from it); and
// POST /api/v1/checkpoints/delete deletes on request, one result per uuid.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// TinyExperiment checkpointing every `checkpoint_every` batches, validating every
// `validate_every`, into the cluster's checkpoint root with the given retention.
std::string RetentionExperiment(const Cluster& c, int trials, int64_t batches, int64_t checkpoint_every,
                                int64_t validate_every, int latest, int best, int experiment_best) {
  std::string yaml = TinyExperiment(trials, batches, 10, "retention");
  const std::string period = "min_checkpoint_period: {batches: 20}";
  yaml.replace(yaml.find(period), period.size(),
               "min_checkpoint_period: {batches: " + std::to_string(checkpoint_every) + "}");
  yaml += "min_validation_period: {batches: " + std::to_string(validate_every) + "}\n";
  yaml += "checkpoint_storage: {type: shared_fs, host_path: " + c.checkpoint_root() +
          ", save_trial_latest: " + std::to_string(latest) + ", save_trial_best: " + std::to_string(best) +
          ", save_experiment_best: " + std::to_string(experiment_best) + "}\n";
  return yaml;
}

struct Row {
  std::string uuid, path, state;
  int64_t trial = 0, batches = 0;
  std::optional<double> metric;
};

std::vector<Row> Checkpoints(const Cluster& c, int64_t experiment) {
  std::vector<Row> out;
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  for (const auto& r : tx.exec("SELECT c.uuid, c.path, c.state, c.trial_id, c.batches, c.validation_metric "
                               "FROM checkpoints c JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = " +
                               std::to_string(experiment) + " ORDER BY c.trial_id, c.batches")) {
    Row row{r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(), r[3].as<int64_t>(),
            r[4].as<int64_t>(), std::nullopt};
    if (!r[5].is_null()) row.metric = r[5].as<double>();
    out.push_back(row);
  }
  return out;
}

std::set<std::string> Active(const std::vector<Row>& rows) {
  std::set<std::string> out;
  for (const Row& r : rows) {
    if (r.state == "ACTIVE") out.insert(r.uuid);
  }
  return out;
}

// What the policy keeps once every trial has finished, computed here on its own: the `latest`
// newest of each trial, its `best` lowest validation losses, and the `experiment_best` lowest
// across the experiment.
std::set<std::string> Expected(const std::vector<Row>& rows, int latest, int best, int experiment_best) {
  std::set<std::string> keep;
  std::map<int64_t, std::vector<Row>> by_trial;
  std::vector<Row> with_metric;
  for (const Row& r : rows) {
    by_trial[r.trial].push_back(r);
    if (r.metric) with_metric.push_back(r);
  }
  auto by_metric = [](const Row& a, const Row& b) { return *a.metric < *b.metric; };
  for (auto& [trial, cks] : by_trial) {
    std::sort(cks.begin(), cks.end(), [](const Row& a, const Row& b) { return a.batches > b.batches; });
    for (int i = 0; i < latest && i < static_cast<int>(cks.size()); ++i) keep.insert(cks[i].uuid);
    std::vector<Row> scored;
    for (const Row& r : cks) {
      if (r.metric) scored.push_back(r);
    }
    std::sort(scored.begin(), scored.end(), by_metric);
    for (int i = 0; i < best && i < static_cast<int>(scored.size()); ++i) keep.insert(scored[i].uuid);
  }
  std::sort(with_metric.begin(), with_metric.end(), by_metric);
  for (int i = 0; i < experiment_best && i < static_cast<int>(with_metric.size()); ++i) {
    keep.insert(with_metric[i].uuid);
  }
  return keep;
}

std::string Show(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += " " + x;
  return out;
}

class CheckpointRetentionEndToEnd : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }
  // A one-agent cluster running the one-trial experiment `yaml(cluster)` until it has
  // `checkpoints` checkpoints, then paused: its id and its trial's.
  void RunUntilPaused(const std::function<std::string(const Cluster&)>& yaml, size_t checkpoints, int64_t* id,
                      int64_t* trial) {
    cluster_ = std::make_unique<Cluster>(1, 1);
    Cluster& c = *cluster_;
    ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
    ASSERT_TRUE(c.WaitForAgents(1));
    *id = c.Submit(yaml(c));
    ASSERT_GT(*id, 0);
    ASSERT_TRUE(c.WaitFor([&] { return Checkpoints(c, *id).size() >= checkpoints; }, 300s)) << "no checkpoints";
    ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(*id) + "/pause", "").first, 200);
    *trial = Id(c.Trials(*id).as_list()[0]);
    ASSERT_TRUE(c.WaitFor(
        [&] { return c.Trials(*id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; }, 120s));
  }
  std::unique_ptr<Cluster> cluster_;
};

// Whether a checkpoint's directory is gone, or goes within 30 s: the retention pass marks rows
// DELETED first and removes their directories after its transaction commits
// (master/housekeeping/checkpoint_retention.h), so a row can read DELETED a moment before.
bool FilesGo(Cluster& c, const std::string& path) {
  return c.WaitFor([&] { return !fs::exists(path); }, std::chrono::seconds(30));
}

TEST_F(CheckpointRetentionEndToEnd, LeavesExactlyTheConfiguredCheckpointsOnDiskAndInTheDatabase) {
  cluster_ = std::make_unique<Cluster>(1, 2);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  // Two trials of 60 batches: checkpoints at 10, 20, ..., 60, validated at 20, 40 and 60.
  const int64_t id = c.Submit(RetentionExperiment(c, 2, 60, 10, 20, 2, 1, 1));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 600s));
  std::vector<Row> rows = Checkpoints(c, id);
  ASSERT_EQ(rows.size(), 12u) << "expected 6 checkpoints per trial";
  const std::set<std::string> expected = Expected(rows, 2, 1, 1);
  ASSERT_GE(expected.size(), 4u);
  ASSERT_LT(expected.size(), rows.size());
  // The last pass runs when the last trial ends; wait for it.
  EXPECT_TRUE(c.WaitFor([&] { return Active(Checkpoints(c, id)) == expected; }, 120s))
      << "active:" << Show(Active(Checkpoints(c, id))) << "\nexpected:" << Show(expected);
  for (const Row& r : Checkpoints(c, id)) {
    if (r.state == "ACTIVE") {
      EXPECT_TRUE(fs::exists(r.path + "/manifest.json")) << r.uuid << " " << r.path;
    } else {
      EXPECT_EQ(r.state, "DELETED") << r.uuid;
      EXPECT_TRUE(FilesGo(c, r.path)) << r.uuid << " " << r.path;
    }
  }
  // REST shows the states too.
  auto [code, listed] = c.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(code, 200);
  std::set<std::string> rest_active;
  for (const Value& ck : listed.Find("checkpoints")->as_list()) {
    if (ck.Find("state")->as_string() == "ACTIVE") rest_active.insert(ck.Find("uuid")->as_string());
  }
  EXPECT_EQ(rest_active, expected);

  // Explicit deletion of a kept checkpoint, an unknown uuid and the same uuid twice: one result
  // per distinct uuid; the kept one's files go and it is DELETED.
  const std::string victim = *expected.begin();
  auto [dcode, deleted] = c.Post("/api/v1/checkpoints/delete",
                                 "{\"uuids\": [\"" + victim + "\", \"no-such-uuid\", \"" + victim + "\"]}");
  ASSERT_EQ(dcode, 200) << deleted.ToJson();
  const Value::List& results = deleted.Find("results")->as_list();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].Find("ok")->as_bool());
  EXPECT_FALSE(results[1].Find("ok")->as_bool());
  EXPECT_EQ(results[1].Find("code")->as_int(), 5);
  EXPECT_EQ(results[1].Find("error")->as_string(), "checkpoint no-such-uuid does not exist");
  for (const Row& r : Checkpoints(c, id)) {
    if (r.uuid != victim) continue;
    EXPECT_EQ(r.state, "DELETED");
    EXPECT_FALSE(fs::exists(r.path)) << r.path;
  }
  std::set<std::string> left = expected;
  left.erase(victim);
  EXPECT_EQ(Active(Checkpoints(c, id)), left);
}

TEST_F(CheckpointRetentionEndToEnd, APausedTrialKeepsTheCheckpointItResumesFrom) {
  // Keep nothing: only what an unfinished trial resumes from may stay.
  int64_t id = 0, trial = 0;
  RunUntilPaused([](const Cluster& c) { return RetentionExperiment(c, 1, 400, 10, 1000, 0, 0, 0); }, 3, &id, &trial);
  if (HasFatalFailure()) return;
  Cluster& c = *cluster_;
  // Everything but the newest checkpoint goes; the newest stays, with its files, and is the
  // trial's latest.
  EXPECT_TRUE(c.WaitFor([&] { return Active(Checkpoints(c, id)).size() == 1; }, 120s));
  std::vector<Row> rows = Checkpoints(c, id);
  ASSERT_GE(rows.size(), 3u);
  const Row& newest = rows.back();
  EXPECT_EQ(newest.state, "ACTIVE");
  EXPECT_TRUE(fs::exists(newest.path + "/manifest.json")) << newest.path;
  EXPECT_EQ(c.Get("/api/v1/trials/" + std::to_string(trial)).second.Find("trial")->Find("latestCheckpointUuid")
                ->as_string(),
            newest.uuid);
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_EQ(rows[i].state, "DELETED") << rows[i].uuid;
    EXPECT_TRUE(FilesGo(c, rows[i].path)) << rows[i].path;
  }
  // Nor can it be deleted by hand while the trial would resume from it.
  auto [code, refused] = c.Post("/api/v1/checkpoints/delete", "{\"uuids\": [\"" + newest.uuid + "\"]}");
  ASSERT_EQ(code, 200);
  EXPECT_EQ(refused.Find("results")->as_list()[0].Find("code")->as_int(), 9) << refused.ToJson();

  // Activated, the trial resumes from it (no restart, the step count goes on) and completes;
  // then nothing pins a checkpoint any more, and with 0/0/0 none stays.
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 600s));
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id = " + std::to_string(trial)), 0);
  EXPECT_EQ(Count(c.db(), "SELECT max(batches) FROM metrics WHERE kind = 'training' AND trial_id = " +
                              std::to_string(trial)),
            400);
  // Its second allocation started from exactly that checkpoint.
  std::ifstream log(c.dir() + "/master-0.log");
  const std::string master_log((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  const std::string started = "allocation=t" + std::to_string(trial) + "-r0-a2 ";
  const size_t at = master_log.find(started);
  ASSERT_NE(at, std::string::npos) << "trial " << trial << " did not start a second allocation";
  const std::string line = master_log.substr(at, master_log.find('\n', at) - at);
  const std::string restore = "restore=" + newest.path;
  EXPECT_TRUE(line.size() >= restore.size() && line.substr(line.size() - restore.size()) == restore) << line;
  EXPECT_TRUE(c.WaitFor([&] { return Active(Checkpoints(c, id)).empty(); }, 120s))
      << "active:" << Show(Active(Checkpoints(c, id)));
  for (const Row& r : Checkpoints(c, id)) EXPECT_TRUE(FilesGo(c, r.path)) << r.path;
}

// A trial whose latest checkpoint fails verification when it resumes (a file changed on disk)
// resumes from the newest intact one instead, without a restart: that checkpoint is marked
// CORRUPTED, the trial's logs say so, and the step count goes on from the older checkpoint.
TEST_F(CheckpointRetentionEndToEnd, ACorruptLatestCheckpointFallsBackToTheNewestIntactOne) {
  // Keep the three newest, so an older one exists to fall back to.
  int64_t id = 0, trial = 0;
  RunUntilPaused([](const Cluster& c) { return RetentionExperiment(c, 1, 300, 20, 1000, 3, 0, 0); }, 2, &id, &trial);
  if (HasFatalFailure()) return;
  Cluster& c = *cluster_;
  std::vector<Row> rows = Checkpoints(c, id);
  ASSERT_GE(rows.size(), 2u);
  const Row bad = rows.back(), good = rows[rows.size() - 2];
  ASSERT_EQ(bad.state, "ACTIVE");
  ASSERT_EQ(good.state, "ACTIVE");
  ASSERT_LT(good.batches, bad.batches);
  // One byte of the weights changes; the size stays, so only the SHA-256 check can tell.
  const std::string weights = bad.path + "/model.safetensors";
  ASSERT_TRUE(fs::exists(weights)) << weights;
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(weights) / 2));
    char byte = 0;
    f.read(&byte, 1);
    f.seekp(static_cast<std::streamoff>(fs::file_size(weights) / 2));
    byte = static_cast<char>(byte ^ 0x5a);
    f.write(&byte, 1);
  }

  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", 600s));
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id = " + std::to_string(trial)), 0);
  EXPECT_EQ(Count(c.db(), "SELECT max(batches) FROM metrics WHERE kind = 'training' AND trial_id = " +
                              std::to_string(trial)),
            300);
  EXPECT_EQ(Count(c.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind = 'training' AND trial_id = " +
                              std::to_string(trial)),
            30);
  for (const Row& r : Checkpoints(c, id)) {
    if (r.uuid == bad.uuid) {
      EXPECT_EQ(r.state, "CORRUPTED");
    }
  }
  // The event, once, in the trial's logs (from the master), naming both checkpoints and why.
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  pqxx::result events = tx.exec_params(
      "SELECT message FROM task_logs WHERE trial_id = $1 AND stream = 'master' AND message LIKE '%CORRUPTED%'", trial);
  ASSERT_EQ(events.size(), 1u);
  const std::string event = events[0][0].as<std::string>();
  EXPECT_NE(event.find("checkpoint " + bad.uuid + " (batch " + std::to_string(bad.batches) + ")"), std::string::npos)
      << event;
  EXPECT_NE(event.find("SHA-256"), std::string::npos) << event;
  EXPECT_NE(event.find("resuming from checkpoint " + good.uuid), std::string::npos) << event;
  // The trainer resumed from the older one: its fallback line is in the trial's logs.
  EXPECT_EQ(tx.exec_params("SELECT 1 FROM task_logs WHERE trial_id = $1 AND message LIKE '%restore_fallback%' "
                           "AND message LIKE $2",
                           trial, "%" + good.uuid + "%")
                .size(),
            1u);
  // Neither the API nor retention offers it again: the trial's latest is a newer, intact one.
  const std::string latest = c.Get("/api/v1/trials/" + std::to_string(trial)).second.Find("trial")
                                 ->Find("latestCheckpointUuid")->as_string();
  EXPECT_NE(latest, bad.uuid);
}

}  // namespace
}  // namespace sf::testing
