// Base fixture for the master's database tests: each test gets a fresh PostgreSQL database
// (PostgresTest) with every master migration applied, open as `db_` (4 connections).
// Derived fixtures call MigratedDatabaseTest::SetUp() first and return when it failed:
//   void SetUp() override { MigratedDatabaseTest::SetUp(); if (HasFatalFailure()) return; ... }
#pragma once

#include <chrono>
#include <memory>

#include "master/db/database.h"
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

  std::unique_ptr<Database> db_;
};

}  // namespace sf::master::testing
