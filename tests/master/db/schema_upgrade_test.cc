// A database an older release left behind, upgraded by this release's master: the migrations up
// to an old schema version, rows written in that version's columns, then Database::Migrate().
// Every row is still there and reads back through the Store as this release reads it (the
// trial counts of migration 021, the workspace of 009, the defaults of every added column), and
// the upgraded database takes this release's writes. One case per version a deployment can be at.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "master/db/database.h"
#include "master/db/store.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

class SchemaUpgradeTest : public sf::testing::PostgresTest,
                          public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (HasFatalFailure()) return;
    auto db = Database::Open(connection_string(), 2, std::chrono::seconds(10));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
  }
  // The schema as the release that stopped at `version` left it (Migrate()'s bookkeeping too).
  void MigrateTo(int version) {
    ASSERT_TRUE(
        db_->Transact(
               "old release",
               [&](pqxx::work& tx) {
                 tx.exec(
                     "CREATE TABLE schema_migrations (version INT PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
                 for (const Migration& m : Migrations()) {
                   if (m.version > version) continue;
                   tx.exec(m.sql);
                   tx.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                                  m.version, m.name);
                 }
                 return Status::Ok();
               })
            .ok());
    ASSERT_EQ(db_->SchemaVersion(), version);
  }
  void Sql(const std::string& statement) {
    Status st = db_->Transact("old rows", [&](pqxx::work& tx) {
      tx.exec(statement);
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << statement;
  }
  std::unique_ptr<Database> db_;
};

// Rows in the columns of version 1 (every later version keeps them): a finished grid experiment
// with a COMPLETED and an ERROR trial, and a live one with a RUNNING trial; their allocations,
// metrics, checkpoint, logs and the searcher's snapshot.
TEST_P(SchemaUpgradeTest,
       EveryRowOfAnOlderReleaseReadsBackAfterTheUpgradeAndTheDatabaseTakesNewWrites) {
  const int from = GetParam();
  MigrateTo(from);
  if (HasFatalFailure()) return;
  Sql("INSERT INTO experiments (id, name, description, state, config_yaml, owner, searcher, metric,"
      " smaller_is_better, priority, progress, best_validation_metric, end_time) VALUES"
      " (101, 'old-grid', 'from before', 'COMPLETED', 'name: old-grid', 'alice', 'grid', "
      "'validation_loss',"
      "  true, 42, 1.0, 1.25, now()),"
      " (102, 'old-live', '', 'ACTIVE', 'name: old-live', 'bob', 'single', 'validation_loss', "
      "true, 42, 0.5,"
      "  NULL, NULL)");
  Sql("INSERT INTO trials (id, experiment_id, request_id, state, hparams, restarts, total_batches,"
      " target_length, completed_length, best_validation_metric, latest_validation_metric,"
      " latest_checkpoint_uuid, error, end_time) VALUES"
      " (201, 101, 1, 'COMPLETED', '{\"lr\": 0.1}', 0, 300, 300, 300, 1.25, 1.5, 'ck-201', '', "
      "now()),"
      " (202, 101, 2, 'ERROR', '{\"lr\": 0.2}', 3, 120, 300, 0, NULL, NULL, '', 'trainer exited "
      "with rank 0=1',"
      "  now()),"
      " (203, 102, 1, 'RUNNING', '{}', 1, 50, 100, 0, NULL, NULL, '', '', NULL)");
  Sql("INSERT INTO allocations (id, trial_id, restart, state, slots, exit_codes, end_time) VALUES"
      " ('t201-r0-a1', 201, 0, 'TERMINATED', '[{\"agent_id\": \"a1\", \"slot_id\": \"cpu0\"}]', "
      "'{\"0\": 0}', now()),"
      " ('t203-r1-a2', 203, 1, 'RUNNING', '[{\"agent_id\": \"a1\", \"slot_id\": \"cpu1\"}]', '{}', "
      "NULL)");
  Sql("INSERT INTO metrics (trial_id, kind, batches, restart, vals) VALUES"
      " (201, 'training', 100, 0, '{\"loss\": 3.0}'), (201, 'training', 200, 0, '{\"loss\": 2.0}'),"
      " (201, 'validation', 300, 0, '{\"validation_loss\": 1.5}'), (203, 'training', 50, 1, "
      "'{\"loss\": 4.0}')");
  Sql("INSERT INTO checkpoints (uuid, trial_id, batches, path, size, files, metadata, "
      "validation_metric) VALUES"
      " ('ck-201', 201, 300, '/checkpoints/ck-201', 1234,"
      "  '[{\"path\": \"model.bin\", \"size\": 1234, \"sha256\": \"ab\"}]', '{\"framework\": "
      "\"steadfast\"}', 1.5)");
  Sql("INSERT INTO task_logs (trial_id, rank, stream, message, agent_id) VALUES"
      " (201, 0, 'stdout', 'epoch 1 done', 'a1'), (203, 0, 'stderr', 'warming up', 'a1')");
  Sql("INSERT INTO searcher_snapshots (experiment_id, snapshot) VALUES (102, '{\"searcher\": "
      "{\"n\": 1}}')");

  ASSERT_TRUE(db_->Migrate().ok());
  EXPECT_EQ(db_->SchemaVersion(), Migrations().back().version);
  Store store(db_.get());

  auto grid = store.GetExperiment(101);
  ASSERT_TRUE(grid.ok() && grid->has_value()) << grid.status().ToString();
  const v1::Experiment& e = **grid;
  EXPECT_EQ(e.name(), "old-grid");
  EXPECT_EQ(e.description(), "from before");
  EXPECT_EQ(e.state(), v1::EXPERIMENT_STATE_COMPLETED);
  EXPECT_EQ(e.owner(), "alice");
  EXPECT_EQ(e.searcher(), "grid");
  EXPECT_EQ(e.priority(), 42);
  EXPECT_DOUBLE_EQ(e.best_validation_metric(), 1.25);
  EXPECT_EQ(e.config_yaml(), "name: old-grid");
  EXPECT_EQ(e.num_trials(), 2) << "counted when the counts came (migration 021)";
  EXPECT_EQ(e.num_completed_trials(), 2) << "COMPLETED and ERROR have ended";
  EXPECT_EQ(e.workspace(), "Uncategorized") << "experiments from before workspaces (migration 009)";
  EXPECT_FALSE(e.archived());
  EXPECT_FALSE(e.unmanaged());

  ExperimentFilter all;
  auto page = store.ListExperiments(all);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->second, 2);
  ASSERT_EQ(page->first.size(), 2u);

  auto trials = store.TrialRows(101);
  ASSERT_TRUE(trials.ok()) << trials.status().ToString();
  ASSERT_EQ(trials->size(), 2u);
  const TrialRow& done = (*trials)[0];
  EXPECT_EQ(done.id, 201);
  EXPECT_EQ(done.state, "COMPLETED");
  EXPECT_EQ(done.completed_length, 300);
  EXPECT_EQ(done.latest_checkpoint_uuid, "ck-201");
  ASSERT_TRUE(done.latest_validation_metric.has_value());
  EXPECT_DOUBLE_EQ(*done.latest_validation_metric, 1.5);
  EXPECT_EQ(done.allocations, 1);
  EXPECT_EQ(done.latest_allocation_id, "t201-r0-a1");
  EXPECT_EQ(done.preempted_by, 0) << "the default of migration 015";
  EXPECT_FALSE(done.closing) << "the default of migration 019";
  EXPECT_EQ((*trials)[1].restarts, 3);
  auto failed = store.GetTrial(202);
  ASSERT_TRUE(failed.ok() && failed->has_value());
  EXPECT_EQ((*failed)->state(), v1::TRIAL_STATE_ERROR);

  auto live = store.LiveExperiments();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id, 102);
  auto snapshot = store.LoadSearcherSnapshot(102);
  ASSERT_TRUE(snapshot.ok() && snapshot->has_value());
  EXPECT_NE((*snapshot)->Find("searcher"), nullptr);
  auto running = store.TrialRows(102);
  ASSERT_TRUE(running.ok() && running->size() == 1u);
  EXPECT_EQ((*running)[0].latest_allocation_id, "t203-r1-a2");
  EXPECT_EQ((*running)[0].latest_allocation_state, "RUNNING");

  auto training = store.GetMetrics(201, "training", 0, 1000, 100);
  ASSERT_TRUE(training.ok()) << training.status().ToString();
  ASSERT_EQ(training->size(), 2u);
  EXPECT_EQ((*training)[1].batches(), 200);
  auto groups = store.MetricGroups(201);
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(*groups, (std::vector<std::string>{"training", "validation"}));

  auto ck = store.GetCheckpoint("ck-201");
  ASSERT_TRUE(ck.ok() && ck->has_value()) << ck.status().ToString();
  EXPECT_EQ((*ck)->trial_id(), 201);
  EXPECT_EQ((*ck)->batches(), 300);
  EXPECT_EQ((*ck)->size(), 1234);
  ASSERT_EQ((*ck)->files_size(), 1);
  EXPECT_EQ((*ck)->files(0).path(), "model.bin");
  EXPECT_DOUBLE_EQ((*ck)->validation_metric(), 1.5);
  auto listed = store.ListCheckpoints(101);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);

  auto logs = store.GetLogs(201, 0, 100, "");
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  ASSERT_EQ(logs->size(), 1u);
  EXPECT_EQ((*logs)[0].message(), "epoch 1 done");

  // This release's writes on the upgraded rows: a new trial of the old live experiment is
  // counted, its run and its end too, and a second Migrate() changes nothing.
  auto added = store.CreateTrial(102, 2, Value(Value::Map{}), "QUEUED");
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  TrialUpdate end;
  end.state = "COMPLETED";
  end.set_end_time = true;
  ASSERT_TRUE(store.UpdateTrial(*added, end).ok());
  ASSERT_TRUE(store.CreateAllocation("t" + std::to_string(*added) + "-r0-a1", *added, 0).ok());
  auto counted = store.GetExperiment(102);
  ASSERT_TRUE(counted.ok() && counted->has_value());
  EXPECT_EQ((*counted)->num_trials(), 2);
  EXPECT_EQ((*counted)->num_completed_trials(), 1);
  ASSERT_TRUE(db_->Migrate().ok());
  EXPECT_EQ(db_->SchemaVersion(), Migrations().back().version);
}

std::vector<int> OlderVersions() {
  std::vector<int> versions;
  for (const Migration& m : Migrations()) versions.push_back(m.version);
  versions.pop_back();  // the current schema is not an upgrade
  return versions;
}

INSTANTIATE_TEST_SUITE_P(FromEachOlderVersion, SchemaUpgradeTest,
                         ::testing::ValuesIn(OlderVersions()),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Version" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace sf::master
