// The throwaway PostgreSQL fixture: a real server, real SQL through libpqxx, separate
// databases per test, and a clean teardown.
#include "common/local_postgres.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// A server copied out of Debian's layout (as bench/gpu_bundle.sh carries one to a machine
// without PostgreSQL) runs from SF_POSTGRES_BIN_DIR: the binaries, the libraries initdb loads
// (plpgsql, the snowball dictionaries) and the share directory, nothing else.
TEST(LocalPostgresLifecycleTest, ARelocatedCopyRunsFromSfPostgresBinDir) {
  namespace fs = std::filesystem;
  unsetenv("SF_POSTGRES_BIN_DIR");
  auto installed = LocalPostgres::FindBinDir();
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  const fs::path bin(*installed);                        // /usr/lib/postgresql/V/bin
  const std::string version = bin.parent_path().filename();
  const fs::path share = bin.parent_path().parent_path().parent_path().parent_path() / "share" /
                         "postgresql" / version;          // /usr/share/postgresql/V
  sf::testing::TempDir dir;
  // Reachable by the unprivileged user the server runs as when the test runs as root.
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const fs::path prefix = fs::path(dir.path()) / "pg";
  const fs::path copy_bin = prefix / "lib" / "postgresql" / version / "bin";
  fs::create_directories(copy_bin);
  for (const char* tool : {"initdb", "pg_ctl", "postgres", "psql"}) fs::copy_file(bin / tool, copy_bin / tool);
  fs::create_directories(prefix / "lib" / "postgresql" / version / "lib");
  for (const char* lib : {"plpgsql.so", "dict_snowball.so"}) {
    fs::copy_file(bin.parent_path() / "lib" / lib, prefix / "lib" / "postgresql" / version / "lib" / lib);
  }
  fs::create_directories(prefix / "share" / "postgresql");
  fs::copy(share, prefix / "share" / "postgresql" / version, fs::copy_options::recursive);

  // A directory without the server is refused, naming the variable and what it lacks.
  setenv("SF_POSTGRES_BIN_DIR", dir.path().c_str(), 1);
  auto missing = LocalPostgres::FindBinDir();
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("SF_POSTGRES_BIN_DIR=" + dir.path() + " has no executable initdb"),
            std::string::npos)
      << missing.status().ToString();

  setenv("SF_POSTGRES_BIN_DIR", copy_bin.c_str(), 1);
  auto found = LocalPostgres::FindBinDir();
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, copy_bin.string());
  LocalPostgresOptions o;
  o.dir = dir.path() + "/cluster";
  LocalPostgres pg(o);
  Status started = pg.Start();
  unsetenv("SF_POSTGRES_BIN_DIR");
  ASSERT_TRUE(started.ok()) << started.ToString();
  {
    pqxx::connection conn(pg.ConnectionString());
    pqxx::work tx(conn);
    // The copy is what runs, and a PL/pgSQL function works (plpgsql.so came from the copy).
    EXPECT_NE(tx.exec1("SELECT setting FROM pg_settings WHERE name = 'data_directory'")[0].as<std::string>().find(dir.path()),
              std::string::npos);
    tx.exec("CREATE FUNCTION twice(x INT) RETURNS INT AS $$ BEGIN RETURN 2 * x; END $$ LANGUAGE plpgsql");
    EXPECT_EQ(tx.exec1("SELECT twice(21)")[0].as<int>(), 42);
  }
  std::ifstream pid_file(pg.DataDir() + "/postmaster.pid");
  std::string pid;
  std::getline(pid_file, pid);
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink("/proc/" + pid + "/exe", ec), copy_bin / "postgres");
  ASSERT_TRUE(pg.Stop().ok());
}

}  // namespace
}  // namespace sf
