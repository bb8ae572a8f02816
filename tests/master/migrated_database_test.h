// Base fixture for the master's database tests: each test gets a fresh PostgreSQL database
// (PostgresTest) with every master migration applied, open as `db_` (4 connections).
// Derived fixtures call MigratedDatabaseTest::SetUp() first and return when it failed:
//   void SetUp() override { MigratedDatabaseTest::SetUp(); if (HasFatalFailure()) return; ... }
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "master/db/database.h"
#include "master/db/store.h"
#include "tests/support/testing.h"

namespace sf::master::testing {

class MigratedDatabaseTest : public sf::testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (HasFatalFailure()) return;
    auto db = Database::Open(connection_string(), 4, std::chrono::seconds(10));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    ASSERT_TRUE(db_->Migrate().ok());
  }

  // Creates an ACTIVE single-searcher experiment `name` with `count` RUNNING trials (request ids
  // 1..count) and appends their ids to `trials`. Fails the test (fatally) when the database
  // refuses; callers check HasFatalFailure().
  void CreateRunningTrials(const std::string& name, int count, std::vector<int64_t>* trials) {
    Store store(db_.get());
    NewExperiment e;
    e.name = name;
    e.config_yaml = "name: " + name;
    e.searcher = "single";
    e.metric = "validation_loss";
    e.state = "ACTIVE";
    auto experiment = store.CreateExperiment(e);
    ASSERT_TRUE(experiment.ok()) << experiment.status().ToString();
    for (int i = 0; i < count; ++i) {
      auto trial = store.CreateTrial(*experiment, i + 1, Value(Value::Map{}), "RUNNING");
      ASSERT_TRUE(trial.ok()) << trial.status().ToString();
      trials->push_back(*trial);
    }
  }

  // The experiment of trial `trial` (0, with a failure, when the database refuses).
  int64_t ExperimentOf(int64_t trial) {
    int64_t experiment = 0;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     experiment =
                         tx.exec_params1("SELECT experiment_id FROM trials WHERE id = $1", trial)[0].as<int64_t>();
                     return Status::Ok();
                   }).ok());
    return experiment;
  }

  // The state of checkpoint `uuid`: ACTIVE, DELETED or CORRUPTED.
  std::string CheckpointState(const std::string& uuid) {
    std::string state;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     state = tx.exec_params1("SELECT state FROM checkpoints WHERE uuid = $1", uuid)[0].as<std::string>();
                     return Status::Ok();
                   }).ok());
    return state;
  }

  std::unique_ptr<Database> db_;
};

}  // namespace sf::master::testing
