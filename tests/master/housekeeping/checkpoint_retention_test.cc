// Checkpoint retention: the selection rule on its own (which checkpoints save_trial_latest,
// save_trial_best and save_experiment_best keep), then the pass against a real PostgreSQL (rows
// marked DELETED, unfinished trials' newest pinned, directories removed) and explicit deletion.
#include "master/housekeeping/checkpoint_retention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "master/db/store.h"
#include "master/housekeeping/experiment_deletion.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {
namespace fs = std::filesystem;

RetainedCheckpoint Ck(const std::string& uuid, int64_t trial, int64_t batches, std::optional<double> metric = {}) {
  return RetainedCheckpoint{uuid, trial, batches, metric};
}

RetentionPolicy Policy(int64_t latest, int64_t best, int64_t experiment_best, bool smaller_is_better = true) {
  return RetentionPolicy{latest, best, experiment_best, smaller_is_better};
}

using Uuids = std::vector<std::string>;

TEST(CheckpointRetentionRule, KeepsTheNLatestOfEachTrial) {
  std::vector<RetainedCheckpoint> cks = {Ck("a1", 1, 10), Ck("a2", 1, 20), Ck("a3", 1, 30),
                                         Ck("b1", 2, 10), Ck("b2", 2, 20)};
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(1, 0, 0), {}), (Uuids{"a1", "a2", "b1"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(2, 0, 0), {}), (Uuids{"a1"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(5, 0, 0), {}), Uuids{});
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 0, 0), {}), (Uuids{"a1", "a2", "a3", "b1", "b2"}));
}

TEST(CheckpointRetentionRule, KeepsTheNBestOfEachTrialInTheSearchersDirection) {
  std::vector<RetainedCheckpoint> cks = {Ck("a1", 1, 10, 3.0), Ck("a2", 1, 20, 1.0), Ck("a3", 1, 30, 2.0),
                                         Ck("b1", 2, 10, 5.0), Ck("b2", 2, 20, 4.0)};
  // Smaller is better: a2 and b2; with two each, a3 and b1 too.
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 1, 0), {}), (Uuids{"a1", "a3", "b1"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 2, 0), {}), (Uuids{"a1"}));
  // Larger is better (BLEU): a1 and b1.
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 1, 0, false), {}), (Uuids{"a2", "a3", "b2"}));
}

TEST(CheckpointRetentionRule, KeepsTheNBestAcrossTheExperiment) {
  std::vector<RetainedCheckpoint> cks = {Ck("a1", 1, 10, 3.0), Ck("a2", 1, 20, 1.0), Ck("b1", 2, 10, 0.5),
                                         Ck("b2", 2, 20, 4.0), Ck("c1", 3, 10, 2.0)};
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 0, 1), {}), (Uuids{"a1", "a2", "b2", "c1"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 0, 3), {}), (Uuids{"a1", "b2"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 0, 2, false), {}), (Uuids{"a2", "b1", "c1"}));
}

TEST(CheckpointRetentionRule, ACheckpointKeptByAnyRuleStays) {
  // Trial 1: latest a3 (no metric), best a1; trial 2: latest b2, best b1; experiment best b1.
  std::vector<RetainedCheckpoint> cks = {Ck("a1", 1, 10, 1.0), Ck("a2", 1, 20, 2.0), Ck("a3", 1, 30),
                                         Ck("b1", 2, 10, 0.5), Ck("b2", 2, 20, 0.9), Ck("b3", 2, 5, 3.0)};
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(1, 1, 1), {}), (Uuids{"a2", "b3"}));
  // Experiment best 2 adds b2 (already latest) only; trial best 2 adds a2 and b2.
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(1, 1, 2), {}), (Uuids{"a2", "b3"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(1, 2, 0), {}), (Uuids{"b3"}));
}

TEST(CheckpointRetentionRule, CheckpointsWithoutAMetricAreNeverBest) {
  std::vector<RetainedCheckpoint> cks = {Ck("a1", 1, 10), Ck("a2", 1, 20), Ck("a3", 1, 30, 9.0)};
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 3, 3), {}), (Uuids{"a1", "a2"}));
}

TEST(CheckpointRetentionRule, PinnedCheckpointsStayWhateverThePolicy) {
  std::vector<RetainedCheckpoint> cks = {Ck("a1", 1, 10, 1.0), Ck("a2", 1, 20, 2.0), Ck("b1", 2, 10, 3.0)};
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 0, 0), {"a2"}), (Uuids{"a1", "b1"}));
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(0, 0, 0), {"a2", "b1", "unknown"}), (Uuids{"a1"}));
}

TEST(CheckpointRetentionRule, TiesGoToMoreBatchesThenTheSmallerUuid) {
  // Equal batches: the smaller uuid is "later"; equal metrics: the one with more batches.
  std::vector<RetainedCheckpoint> cks = {Ck("z", 1, 20), Ck("y", 1, 20), Ck("x", 1, 10)};
  EXPECT_EQ(SelectCheckpointsToDelete(cks, Policy(1, 0, 0), {}), (Uuids{"x", "z"}));
  std::vector<RetainedCheckpoint> metrics = {Ck("p", 1, 10, 1.0), Ck("q", 1, 30, 1.0), Ck("r", 1, 20, 1.0)};
  EXPECT_EQ(SelectCheckpointsToDelete(metrics, Policy(0, 1, 0), {}), (Uuids{"p", "r"}));
  // The input order does not matter.
  std::vector<RetainedCheckpoint> reversed(metrics.rbegin(), metrics.rend());
  EXPECT_EQ(SelectCheckpointsToDelete(reversed, Policy(0, 1, 0), {}), (Uuids{"p", "r"}));
}

// ---- The pass and explicit deletion against PostgreSQL and a real directory.

class CheckpointRetentionDb : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    CreateRunningTrials("retention", 2, &trials_);
    if (HasFatalFailure()) return;
    experiment_ = ExperimentOf(trials_[0]);
    experiment_dir_ = dir_.path() + "/experiment-" + std::to_string(experiment_);
  }

  // A checkpoint row and its directory (with one file) under the experiment's directory, or at
  // `path` when given.
  void AddCheckpoint(const std::string& uuid, int64_t trial, int64_t batches, std::optional<double> metric,
                     std::string path = "") {
    if (path.empty()) path = experiment_dir_ + "/trial-" + std::to_string(trial) + "/" + uuid;
    fs::create_directories(path);
    std::ofstream(path + "/model.safetensors") << "weights";
    steadfast::v1::Checkpoint c;
    c.set_uuid(uuid);
    c.set_trial_id(trial);
    c.set_batches(batches);
    c.set_path(path);
    if (metric) c.set_validation_metric(*metric);
    Store store(db_.get());
    ASSERT_TRUE(store.InsertCheckpoint(c).ok());
  }

  std::string State(const std::string& uuid) { return CheckpointState(uuid); }

  void SetTrialState(int64_t trial, const std::string& state) {
    TrialUpdate u;
    u.state = state;
    ASSERT_TRUE(Store(db_.get()).UpdateTrial(trial, u).ok());
  }

  sf::testing::TempDir dir_;
  int64_t experiment_ = 0;
  std::string experiment_dir_;
  std::vector<int64_t> trials_;
};

TEST_F(CheckpointRetentionDb, APassMarksWhatThePolicyDropsAndPinsUnfinishedTrialsNewest) {
  const int64_t t1 = trials_[0], t2 = trials_[1];
  AddCheckpoint("a1", t1, 10, 1.0);
  AddCheckpoint("a2", t1, 20, 2.0);
  AddCheckpoint("a3", t1, 30, 3.0);
  AddCheckpoint("b1", t2, 10, 0.5);
  AddCheckpoint("b2", t2, 20, 0.7);
  if (HasFatalFailure()) return;
  SetTrialState(t2, "COMPLETED");
  // Nothing kept by the policy: trial 1 is RUNNING, so its newest (a3) stays; trial 2 is done.
  CheckpointRetention retention(db_.get());
  retention.Start();
  retention.Request(experiment_, Policy(0, 0, 0), experiment_dir_);
  retention.Drain();
  EXPECT_EQ(retention.passes(), 1);
  for (const std::string uuid : {"a1", "a2", "b1", "b2"}) {
    EXPECT_EQ(State(uuid), "DELETED") << uuid;
    EXPECT_FALSE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(uuid[0] == 'a' ? t1 : t2) + "/" + uuid))
        << uuid;
  }
  EXPECT_EQ(State("a3"), "ACTIVE");
  EXPECT_TRUE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(t1) + "/a3/model.safetensors"));

  // Paused, trial 1 still needs a3; once it is finished, nothing pins it.
  SetTrialState(t1, "PAUSED");
  retention.Request(experiment_, Policy(0, 0, 0), experiment_dir_);
  retention.Drain();
  EXPECT_EQ(State("a3"), "ACTIVE");
  SetTrialState(t1, "CANCELED");
  retention.Request(experiment_, Policy(0, 0, 0), experiment_dir_);
  retention.Drain();
  EXPECT_EQ(State("a3"), "DELETED");
  EXPECT_FALSE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(t1) + "/a3"));
}

// A checkpoint that failed verification on resume (TrialLink ReportCheckpointUnusable): marked
// once, logged once, the trial's latest falls back to its newest ACTIVE one, it is never offered
// again, and retention leaves it alone.
TEST_F(CheckpointRetentionDb, ACorruptedCheckpointIsMarkedOnceAndTheTrialsLatestFallsBack) {
  const int64_t t1 = trials_[0], t2 = trials_[1];
  AddCheckpoint("a1", t1, 10, std::nullopt);
  AddCheckpoint("a2", t1, 20, std::nullopt);
  AddCheckpoint("a3", t1, 30, std::nullopt);
  AddCheckpoint("b1", t2, 40, std::nullopt);
  if (HasFatalFailure()) return;
  Store store(db_.get());
  auto uuids = [](const std::vector<Store::CheckpointPlace>& places) {
    std::vector<std::string> out;
    for (const auto& p : places) out.push_back(p.uuid);
    return out;
  };
  auto fallbacks = store.RestoreFallbacks(t1, "a3", 8);
  ASSERT_TRUE(fallbacks.ok());
  EXPECT_EQ(uuids(*fallbacks), (std::vector<std::string>{"a2", "a1"}));
  auto master_lines = [&] {
    int64_t n = -1;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     n = tx.exec_params1("SELECT count(*) FROM task_logs WHERE stream = 'master' AND trial_id = $1",
                                         t1)[0].as<int64_t>();
                     return Status::Ok();
                   }).ok());
    return n;
  };
  auto latest = [&](int64_t trial) {
    std::string uuid;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     uuid = tx.exec_params1("SELECT latest_checkpoint_uuid FROM trials WHERE id = $1", trial)[0]
                                .as<std::string>();
                     return Status::Ok();
                   }).ok());
    return uuid;
  };
  ASSERT_EQ(latest(t1), "a3");

  for (int report = 0; report < 2; ++report) {  // a second rank's report changes nothing
    auto now = store.MarkCheckpointCorrupted(t1, "a3", "a3 failed");
    ASSERT_TRUE(now.ok()) << now.status().ToString();
    EXPECT_EQ(now->uuid, "a2");
    EXPECT_EQ(now->path, experiment_dir_ + "/trial-" + std::to_string(t1) + "/a2");
    EXPECT_EQ(State("a3"), "CORRUPTED");
    EXPECT_EQ(latest(t1), "a2");
    EXPECT_EQ(master_lines(), 1) << "report " << report;
  }
  fallbacks = store.RestoreFallbacks(t1, "a2", 8);
  ASSERT_TRUE(fallbacks.ok());
  EXPECT_EQ(uuids(*fallbacks), (std::vector<std::string>{"a1"}));
  // An older one marked leaves the latest where it is; an unknown uuid is NotFound.
  auto older = store.MarkCheckpointCorrupted(t1, "a1", "a1 failed");
  ASSERT_TRUE(older.ok());
  EXPECT_EQ(older->uuid, "a2");
  EXPECT_EQ(store.MarkCheckpointCorrupted(t1, "nope", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(latest(t2), "b1");

  // Retention (keep nothing) deletes neither the latest (pinned) nor a corrupted one: those
  // stay on disk for a look until the experiment is deleted.
  CheckpointRetention retention(db_.get());
  retention.Start();
  retention.Request(experiment_, Policy(0, 0, 0), experiment_dir_);
  retention.Drain();
  EXPECT_EQ(State("a2"), "ACTIVE");
  EXPECT_EQ(State("a3"), "CORRUPTED");
  EXPECT_TRUE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(t1) + "/a3/model.safetensors"));
}

TEST_F(CheckpointRetentionDb, APassKeepsTheConfiguredCheckpointsAndLeavesFilesOutsideTheExperimentAlone) {
  const int64_t t1 = trials_[0], t2 = trials_[1];
  const std::string outside = dir_.path() + "/elsewhere/a1";
  AddCheckpoint("a1", t1, 10, 1.0, outside);
  AddCheckpoint("a2", t1, 20, 2.0);
  AddCheckpoint("a3", t1, 30, 3.0);
  AddCheckpoint("b1", t2, 10, 0.5);
  AddCheckpoint("b2", t2, 20, 0.7);
  if (HasFatalFailure()) return;
  SetTrialState(t1, "COMPLETED");
  SetTrialState(t2, "COMPLETED");
  auto marked = MarkCheckpointsForRetention(db_.get(), experiment_, Policy(1, 0, 1));
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  // Latest per trial: a3, b2; experiment best: b1. Dropped: a1, a2.
  ASSERT_EQ(marked->size(), 2u);
  EXPECT_EQ((*marked)[0].uuid, "a1");
  EXPECT_EQ((*marked)[1].uuid, "a2");
  EXPECT_EQ(RemoveCheckpointDirectories(*marked, experiment_dir_), 1);
  EXPECT_TRUE(fs::exists(outside)) << "a path outside the experiment's directory was removed";
  EXPECT_FALSE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(t1) + "/a2"));
  for (const std::string uuid : {"a3", "b1", "b2"}) EXPECT_EQ(State(uuid), "ACTIVE") << uuid;
  // A second pass finds nothing more to do.
  auto again = MarkCheckpointsForRetention(db_.get(), experiment_, Policy(1, 0, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

TEST_F(CheckpointRetentionDb, ExplicitDeleteRefusesWhatAnUnfinishedTrialResumesFrom) {
  const int64_t t1 = trials_[0];
  AddCheckpoint("a1", t1, 10, 1.0);
  AddCheckpoint("a2", t1, 20, 2.0);
  if (HasFatalFailure()) return;
  // The experiment row's config names no storage: the default root is where its files are.
  const std::string root = dir_.path();
  Status newest = DeleteCheckpoint(db_.get(), "a2", root);
  EXPECT_EQ(newest.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(newest.message(), "checkpoint a2 is the latest of trial " + std::to_string(t1) +
                                  ", which is RUNNING and would resume from it");
  EXPECT_EQ(State("a2"), "ACTIVE");
  EXPECT_TRUE(DeleteCheckpoint(db_.get(), "a1", root).ok());
  EXPECT_EQ(State("a1"), "DELETED");
  EXPECT_FALSE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(t1) + "/a1"));
  EXPECT_TRUE(DeleteCheckpoint(db_.get(), "a1", root).ok()) << "deleting twice is not an error";
  EXPECT_EQ(DeleteCheckpoint(db_.get(), "nope", root).code(), StatusCode::kNotFound);
  EXPECT_EQ(DeleteCheckpoint(db_.get(), "", root).code(), StatusCode::kInvalidArgument);
  SetTrialState(t1, "COMPLETED");
  EXPECT_TRUE(DeleteCheckpoint(db_.get(), "a2", root).ok());
  EXPECT_FALSE(fs::exists(experiment_dir_ + "/trial-" + std::to_string(t1) + "/a2"));
}

TEST_F(CheckpointRetentionDb, ACheckpointAnotherExperimentsTrialContinuesFromStays) {
  const int64_t t1 = trials_[0];
  AddCheckpoint("a1", t1, 10, 1.0);
  AddCheckpoint("a2", t1, 20, 2.0);
  if (HasFatalFailure()) return;
  SetTrialState(trials_[0], "COMPLETED");
  SetTrialState(trials_[1], "COMPLETED");
  // A trial of another experiment, continued from a1 (sf experiment continue), still running.
  std::vector<int64_t> other;
  CreateRunningTrials("continued", 1, &other);
  if (HasFatalFailure()) return;
  TrialUpdate u;
  u.latest_checkpoint_uuid = "a1";
  ASSERT_TRUE(Store(db_.get()).UpdateTrial(other[0], u).ok());

  auto marked = MarkCheckpointsForRetention(db_.get(), experiment_, Policy(0, 0, 0));
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  ASSERT_EQ(marked->size(), 1u);
  EXPECT_EQ((*marked)[0].uuid, "a2");
  EXPECT_EQ(State("a1"), "ACTIVE");
  Status refused = DeleteCheckpoint(db_.get(), "a1", dir_.path());
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "checkpoint a1 is where trial " + std::to_string(other[0]) + " (continued from it) would resume");
  ASSERT_TRUE(Store(db_.get()).SetExperimentState(experiment_, "COMPLETED").ok());
  auto deleted = DeleteExperimentRows(db_.get(), experiment_, dir_.path());
  EXPECT_EQ(deleted.status().code(), StatusCode::kFailedPrecondition) << deleted.status().ToString();
  // Once that trial has finished, both go.
  SetTrialState(other[0], "COMPLETED");
  EXPECT_TRUE(DeleteCheckpoint(db_.get(), "a1", dir_.path()).ok());
  EXPECT_TRUE(DeleteExperimentRows(db_.get(), experiment_, dir_.path()).ok());
}

}  // namespace
}  // namespace sf::master
