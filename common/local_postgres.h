// A private PostgreSQL server in a directory of our own: initdb, start, stop.
//
// Used by `sf deploy local` (the embedded default cluster) and by the test fixture that gives
// each test binary a real, throwaway database. The server listens on 127.0.0.1:<port> and on a
// Unix socket inside the data directory, trusts local connections (it is reachable only from
// this machine), and runs as an unprivileged user when started by root (PostgreSQL refuses
// to run as root): `postgres` if that user exists, else `nobody`.
//
// Not thread-safe; one owner drives the lifecycle. The destructor does not stop the server:
// call Stop() (the fixture does), so a cluster can outlive the process that started it.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace sf {

struct LocalPostgresOptions {
  std::string dir;           // holds data/ and the socket; created if missing
  int port = 0;              // 0: pick a free port on 127.0.0.1
  std::string database = "steadfast";
  bool durable = true;       // false turns fsync off (tests): safe against a server crash, not an OS crash
};

class LocalPostgres {
 public:
  explicit LocalPostgres(LocalPostgresOptions options);
  LocalPostgres(const LocalPostgres&) = delete;
  LocalPostgres& operator=(const LocalPostgres&) = delete;

  // Finds the PostgreSQL server binaries (initdb, pg_ctl, postgres, psql): the directory
  // $SF_POSTGRES_BIN_DIR names when set (refused, naming what is missing, unless it holds all
  // four), else those of the newest version under /usr/lib/postgresql. A copy outside Debian's
  // layout runs as long as it keeps the layout's shape: PREFIX/lib/postgresql/V/{bin,lib} and
  // PREFIX/share/postgresql/V (the server finds its share and library directories relative to
  // its own binary).
  static Result<std::string> FindBinDir();

  // initdb when the data directory is new, then start the server and wait until it accepts
  // connections; creates `database` when missing. Idempotent: a running server is reused.
  Status Start();
  // How Stop() shuts the server down (pg_ctl -m): kFast rolls back open transactions and
  // checkpoints; kImmediate aborts every process without a checkpoint, like a crash (the next
  // Start() replays the WAL).
  enum class StopMode { kFast, kImmediate };
  // OK when not running.
  Status Stop(StopMode mode = StopMode::kFast);
  bool IsRunning() const;

  int port() const { return port_; }
  const std::string& dir() const { return options_.dir; }
  // The data directory inside dir() (PG_VERSION, postmaster.pid).
  std::string DataDir() const { return options_.dir + "/data"; }
  // libpq connection string: "host=127.0.0.1 port=N user=postgres dbname=steadfast".
  std::string ConnectionString() const;
  std::string ConnectionString(const std::string& database) const;
  // Runs SQL through psql as the superuser (for setup; errors carry psql's output).
  Status RunSql(const std::string& database, const std::string& sql) const;

 private:
  std::optional<std::string> ServerUser() const;

  LocalPostgresOptions options_;
  std::string bin_dir_;
  int port_ = 0;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
Result<int> PickFreePort();

}  // namespace sf
