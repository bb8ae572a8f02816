// Shared test support: temporary directories, paths into the source and build trees, and a
// real PostgreSQL server for tests that touch the database.
//
// Cleanup: destructors and atexit handlers stop servers and remove directories in the normal
// path. A test process that is killed or crashes runs none of them, so what must not outlive it
// (the shared PostgreSQL server and its directory, the data copies, the e2e cluster's processes)
// is also registered with the CleanupWatchdog (cleanup_watchdog.h), a separate process that does
// the same cleanup within seconds of the test process's death.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/local_postgres.h"

namespace sf::testing {

// The repository root and the build directory (compiled in by sf_add_test). SF_BINARY_DIR in the
// environment overrides the build directory: bench/soak.sh runs a long test from a snapshot of the
// build so that rebuilding meanwhile does not change the programs it restarts.
std::string SourceDir();
std::string BinaryDir();
// Runs `command` with /bin/sh, stdout and stderr together; `status` gets pclose's status (-1
// when it could not start). For the reference scripts the engine tests compare against.
std::string RunShellCommand(const std::string& command, int* status);
// A private copy of ../shared/data/<name> (e.g. "multi30k-de-en-tiny"), made once per test
// process under a temporary directory removed at exit (or by the CleanupWatchdog), and writable:
// caches built beside the data (trainer/data/translation_data.h) land in the copy. Tests read
// ../shared only through these copies (or with an explicit cache directory), so the suite behaves
// the same whether that folder is writable or not, and never writes into it. The source is
// $SF_SHARED_DATA when set. Fails the calling test when the corpus is missing.
std::string DataCopy(const std::string& name);
// Like DataCopy, but a new copy whose directory and files are read-only (0555 / 0444) for
// tests of read-only data; removed (permissions restored first) when `owner` is destroyed.
class TempDir;
std::string ReadOnlyDataCopy(const std::string& name, const TempDir& owner);

// A directory under /tmp removed (recursively) on destruction. World-traversable so an
// unprivileged server process can use a sub-directory of it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `content` to path()/name and returns the full path.
  std::string WriteFile(const std::string& name, const std::string& content) const;
  // Also remove the directory when the test process dies without running the destructor
  // (registers it with the CleanupWatchdog, which this starts if needed).
  void RemoveEvenIfProcessDies();

 private:
  std::string path_;
  bool watched_ = false;
};

// A real PostgreSQL server for one test binary: started by the first test suite that asks,
// stopped (and its directory removed) when the binary exits. Each test gets a database of its
// own from NewDatabase(), so tests can't see each other's rows. pg_ctl starts the server as a
// daemon (not our child), so if the binary is killed or crashes, the CleanupWatchdog shuts it
// down (immediate mode) and removes its directory.
class PostgresServer {
 public:
  // The shared server; starts it on first use. Fails the calling test on error.
  static PostgresServer* Get();
  // Creates an empty database and returns its libpq connection string.
  std::string NewDatabase();
  LocalPostgres& postgres() { return *postgres_; }
  // Stops the server and removes its directory (registered with atexit by Get()).
  static void Shutdown();

 private:
  PostgresServer() = default;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<LocalPostgres> postgres_;
  int next_database_ = 0;
};

// Base fixture for database tests: `connection_string()` names a fresh, empty database.
class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override;
  const std::string& connection_string() const { return connection_string_; }
  PostgresServer* server() { return server_; }

 private:
  PostgresServer* server_ = nullptr;
  std::string connection_string_;
};

}  // namespace sf::testing
