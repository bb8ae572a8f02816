// The master's PostgreSQL connection pool and schema migrations.
//
// Every statement goes through a pooled connection inside a transaction (Transact) and is
// parameterised; nothing concatenates values into SQL. Errors from PostgreSQL come back as a
// Status naming the operation; the master never dies on a failed statement.
//
// Thread-safe: any number of threads may call Transact concurrently; each gets its own
// connection (waiting when all are busy, at most acquire_timeout() when one is set).
//
// The master opens three (master/main.cc, docs/cluster.md "Reads under load"): one for the
// coordinator and accounts (every write but ingestion), one for metric and log ingestion, one
// for API reads; so a saturated ingestion path holds none of the connections reads wait for,
// and commits() of the first counts every write a cached read could miss (snapshot_cache.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf::master {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};
// The numbered migrations in master/db/migrations, compiled in.
const std::vector<Migration>& Migrations();

// While one lives on a thread, the transactions that thread commits through any Database return
// without waiting for their WAL to be flushed to disk (`SET LOCAL synchronous_commit = off` in
// each). What that gives up: a crash of PostgreSQL itself (or of its machine) may lose the last
// such commits (PostgreSQL's WAL writer flushes them within 3 x wal_writer_delay, 0.6 s by
// default); it never corrupts, reorders or half-applies them, and a master crash loses nothing
// (the commits are in PostgreSQL's memory). What it gains: the thread no longer waits for a disk
// flush per commit — on a busy machine the flush is milliseconds, and a serial path of several
// commits per event is bounded by it.
//
// Why: the coordinator writes under its lock, so each flush it waits for there is a wait every
// other trial's call shares; deferred, the lock is held for the statements only, and the flushes
// happen outside it, where concurrent ones merge into one (PostgreSQL flushes all WAL up to the
// latest commit waiting).
//
// What still waits for the disk, so no caller is told "done" before it is durable (a flush
// covers every earlier commit in the WAL):
//   - an agent's events: the allocation service applies each in a DeferredFlush
//     (allocation_service.h), and the delivery ledger records the event afterwards in a
//     transaction that waits for its flush, before the agent hears the acknowledgement
//     (delivery_ledger.h);
//   - a trainer's calls that write (Cluster::Durably): their writes defer under the lock, then
//     WaitForDurability() outside it, before the reply.
// Nests; not for ingestion or the ledger itself.
class DeferredFlush {
 public:
  DeferredFlush();
  ~DeferredFlush();
  DeferredFlush(const DeferredFlush&) = delete;
  DeferredFlush& operator=(const DeferredFlush&) = delete;
  // Whether this thread's commits defer their flush now.
  static bool Active();
  // Whether this thread committed a transaction (through any Database) while this scope lived.
  bool committed() const;

 private:
  uint64_t commits_at_start_;
};

class Database {
 public:
  // Connects `pool_size` connections (retrying for up to `wait` while the server starts).
  static Result<std::unique_ptr<Database>> Open(const std::string& connection_string,
                                                int pool_size = 4,
                                                std::chrono::seconds wait = std::chrono::seconds(30));
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Applies every migration newer than the stored schema version, each in its own transaction,
  // under an advisory lock so two masters can't migrate at once.
  Status Migrate();
  int SchemaVersion();

  // Runs `body` in a transaction on a pooled connection and commits when it returns OK (without
  // waiting for the disk while a DeferredFlush lives on this thread).
  // A pqxx or std exception inside `body` is caught and returned as an Internal/Unavailable
  // status naming `what`; the transaction is rolled back.
  //
  // A lost connection (PostgreSQL restarted, crashed or is shutting down) is waited out: the
  // transaction is retried from the start on a new connection, with backoff, until it goes
  // through or reconnect_patience() has passed; then Unavailable. So a database restart delays
  // the master's writes instead of dropping them. A commit whose outcome is unknown (the
  // connection broke during COMMIT) is not retried: it returns Unavailable.
  Status Transact(const std::string& what, const std::function<Status(pqxx::work&)>& body);

  // Returns once every transaction committed before the call (through any connection to this
  // server) is on disk: one transaction that writes (a row of durability_marks, one of 256:
  // PostgreSQL waits for the flush only for a commit that wrote WAL) and waits for its flush,
  // which covers everything before it. For callers whose writes deferred their flush
  // (DeferredFlush). Call it outside any DeferredFlush.
  Status WaitForDurability();

  // Transactions committed through this pool so far (one more after each COMMIT, or each one
  // whose outcome is unknown); it only grows. Lock-free.
  uint64_t commits() const { return commits_.load(std::memory_order_acquire); }

  // How long a Transact waits for a free connection before it returns kUnavailable ("busy")
  // without running; zero (the default) waits as long as it takes. The read pool sets it, so a
  // request that cannot be served in time gets an honest 503 instead of a queue.
  void SetAcquireTimeout(std::chrono::milliseconds timeout) { acquire_timeout_ = timeout; }
  std::chrono::milliseconds acquire_timeout() const { return acquire_timeout_; }
  // Transactions refused because no connection came free within acquire_timeout().
  uint64_t busy_refusals() const { return busy_refusals_.load(std::memory_order_relaxed); }

  // How long Transact keeps retrying after losing the server (default 60 s).
  void SetReconnectPatience(std::chrono::milliseconds patience) { patience_ = patience; }
  std::chrono::milliseconds reconnect_patience() const { return patience_; }

  // Observes each transaction's duration (for the Prometheus histogram); may be null.
  void SetLatencyObserver(std::function<void(const std::string& what, double seconds)> observer);

 private:
  explicit Database(std::string connection_string) : connection_string_(std::move(connection_string)) {}
  // False when acquire_timeout() passed first (`conn` untouched).
  bool Acquire(std::unique_ptr<pqxx::connection>& conn);
  void Release(std::unique_ptr<pqxx::connection> conn);

  std::string connection_string_;
  std::mutex mu_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  std::function<void(const std::string&, double)> observer_;
  std::chrono::milliseconds patience_{60000};
  std::chrono::milliseconds acquire_timeout_{0};
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> busy_refusals_{0};
};

}  // namespace sf::master
