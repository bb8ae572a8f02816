// The throwaway PostgreSQL fixture: a real server, real SQL through libpqxx, separate
// databases per test, and a clean teardown.
#include "common/local_postgres.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <pqxx/pqxx>

#include "tests/support/testing.h"

namespace sf {
namespace {

class LocalPostgresTest : public sf::testing::PostgresTest {};

TEST_F(LocalPostgresTest, StoresAndReadsRows) {
  pqxx::connection conn(connection_string());
  {
    pqxx::work tx(conn);
    tx.exec("CREATE TABLE metrics (trial_id BIGINT, step BIGINT, value JSONB)");
    tx.exec_params("INSERT INTO metrics VALUES ($1, $2, $3::jsonb)", 7, 100, R"({"loss": 2.5})");
    tx.commit();
  }
  pqxx::work tx(conn);
  pqxx::row row = tx.exec1("SELECT trial_id, step, value->>'loss' FROM metrics");
  EXPECT_EQ(row[0].as<int64_t>(), 7);
  EXPECT_EQ(row[1].as<int64_t>(), 100);
  EXPECT_EQ(row[2].as<std::string>(), "2.5");
}

TEST_F(LocalPostgresTest, EachTestGetsAnEmptyDatabase) {
  pqxx::connection conn(connection_string());
  pqxx::work tx(conn);
  // The table made by the other test must not be visible here.
  pqxx::row row = tx.exec1("SELECT count(*) FROM information_schema.tables WHERE table_name = 'metrics'");
  EXPECT_EQ(row[0].as<int>(), 0);
}

TEST(LocalPostgresLifecycleTest, StartStopAndRestartKeepData) {
  sf::testing::TempDir dir;
  LocalPostgresOptions o;
  o.dir = dir.path() + "/cluster";
  o.database = "steadfast";
  LocalPostgres pg(o);
  ASSERT_TRUE(pg.Start().ok());
  EXPECT_TRUE(pg.IsRunning());
  {
    pqxx::connection conn(pg.ConnectionString());
    pqxx::work tx(conn);
    tx.exec("CREATE TABLE kept (x INT)");
    tx.exec("INSERT INTO kept VALUES (42)");
    tx.commit();
  }
  ASSERT_TRUE(pg.Stop().ok());
  EXPECT_FALSE(pg.IsRunning());
  EXPECT_THROW(pqxx::connection(pg.ConnectionString()), pqxx::broken_connection);

  // A second Start reuses the data directory and its port.
  LocalPostgres again(o);
  ASSERT_TRUE(again.Start().ok());
  EXPECT_EQ(again.port(), pg.port());
  {
    pqxx::connection conn(again.ConnectionString());
    pqxx::work tx(conn);
    EXPECT_EQ(tx.exec1("SELECT x FROM kept")[0].as<int>(), 42);
  }
  ASSERT_TRUE(again.Stop().ok());
}

}  // namespace
}  // namespace sf
