#include "master/db/database.h"

#include <thread>

namespace sf::master {

Result<std::unique_ptr<Database>> Database::Open(const std::string& connection_string,
                                                 int pool_size, std::chrono::seconds wait) {
  std::unique_ptr<Database> db(new Database(connection_string));
  auto deadline = std::chrono::steady_clock::now() + wait;
  std::string last_error;
  for (int i = 0; i < pool_size; ++i) {
    while (true) {
      try {
        db->idle_.push_back(std::make_unique<pqxx::connection>(connection_string));
        break;
      } catch (const std::exception& e) {
        last_error = e.what();
        if (std::chrono::steady_clock::now() > deadline) {
          return Unavailable("cannot connect to PostgreSQL: " + last_error);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    }
  }
  return db;
}

Database::~Database() = default;

void Database::SetLatencyObserver(std::function<void(const std::string&, double)> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(observer);
}

bool Database::Acquire(std::unique_ptr<pqxx::connection>& conn) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return !idle_.empty(); };
  if (acquire_timeout_.count() > 0) {
    if (!available_.wait_for(lock, acquire_timeout_, ready)) return false;
  } else {
    available_.wait(lock, ready);
  }
  conn = std::move(idle_.back());
  idle_.pop_back();
  return true;
}

void Database::Release(std::unique_ptr<pqxx::connection> conn) {
  // `conn` may be null (dropped after a lost server): the slot stays in the pool, and the
  // Transact that takes it next connects anew.
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(conn));
  }
  available_.notify_one();
}

namespace {

// An error that means the server went away or is not accepting work right now (restart,
// crash, immediate shutdown), as opposed to a problem with the statement: SQLSTATE classes
// 08 (connection exception) and 57 (operator intervention: admin_shutdown, crash_shutdown,
// cannot_connect_now).
bool IsConnectionLoss(const pqxx::sql_error& e) {
  const std::string state = e.sqlstate();
  return state.rfind("08", 0) == 0 || state.rfind("57", 0) == 0;
}

}  // namespace

namespace {
thread_local int deferred_flush_depth = 0;
thread_local uint64_t thread_commits = 0;  // this thread's commits, through any Database
}  // namespace

DeferredFlush::DeferredFlush() : commits_at_start_(thread_commits) { ++deferred_flush_depth; }
DeferredFlush::~DeferredFlush() { --deferred_flush_depth; }
bool DeferredFlush::Active() { return deferred_flush_depth > 0; }
bool DeferredFlush::committed() const { return thread_commits != commits_at_start_; }

Status Database::WaitForDurability() {
  // A commit waits for the flush only if its transaction wrote WAL (PostgreSQL's
  // RecordTransactionCommit): so a write, to a row of this session's (migration 020), keyed by
  // its backend pid modulo 256: concurrent sessions rarely share one, and the table never holds
  // more than 256 rows however often the server's sessions come and go (a soak of restarts
  // grew it by one row per new session before).
  return Transact("wait for the disk", [](pqxx::work& tx) {
    tx.exec(
        "INSERT INTO durability_marks (backend_pid, waits) VALUES (pg_backend_pid() % 256, 1) "
        "ON CONFLICT (backend_pid) DO UPDATE SET waits = durability_marks.waits + 1");
    return Status::Ok();
  });
}

Status Database::Transact(const std::string& what,
                          const std::function<Status(pqxx::work&)>& body) {
  auto start = std::chrono::steady_clock::now();
  const auto give_up = start + patience_;
  std::unique_ptr<pqxx::connection> conn;
  if (!Acquire(conn)) {
    busy_refusals_.fetch_add(1, std::memory_order_relaxed);
    return Unavailable(what + ": the database is busy (no connection free within " +
                       std::to_string(acquire_timeout_.count()) + " ms); retry shortly");
  }
  Status result;
  auto backoff = std::chrono::milliseconds(50);
  while (true) {
    bool lost = false;
    try {
      if (!conn || !conn->is_open()) conn = std::make_unique<pqxx::connection>(connection_string_);
      pqxx::work tx(*conn);
      if (DeferredFlush::Active()) tx.exec("SET LOCAL synchronous_commit = off");
      result = body(tx);
      if (result.ok()) {
        tx.commit();
        commits_.fetch_add(1, std::memory_order_acq_rel);
        ++thread_commits;
      }
      break;
    } catch (const pqxx::in_doubt_error& e) {
      commits_.fetch_add(1, std::memory_order_acq_rel);  // it may have committed
      ++thread_commits;
      result = Unavailable(what + ": connection lost during commit; the outcome is unknown: " + e.what());
      conn.reset();
      break;
    } catch (const pqxx::broken_connection& e) {
      result = Unavailable(what + ": database connection lost: " + e.what());
      lost = true;
    } catch (const pqxx::sql_error& e) {
      if (!IsConnectionLoss(e)) {
        result = Internal(what + ": " + e.what());
        break;
      }
      result = Unavailable(what + ": database unavailable: " + e.what());
      lost = true;
    } catch (const std::exception& e) {
      result = Internal(what + ": " + e.what());
      break;
    }
    if (!lost || std::chrono::steady_clock::now() + backoff > give_up) break;
    // The server restarted or dropped us: a fresh connection, after a pause, and the whole
    // transaction again (it was rolled back with the connection).
    conn.reset();
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  Release(std::move(conn));
  std::function<void(const std::string&, double)> observer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observer = observer_;
  }
  if (observer) {
    observer(what, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return result;
}

int Database::SchemaVersion() {
  int version = 0;
  (void)Transact("schema version", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec(
        "SELECT 1 FROM information_schema.tables WHERE table_name = 'schema_migrations'");
    if (r.empty()) return Status::Ok();
    version = tx.exec1("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")[0].as<int>();
    return Status::Ok();
  });
  return version;
}

Status Database::Migrate() {
  return Transact("migrate", [&](pqxx::work& tx) {
    // One migrating master at a time; the lock is released at commit.
    tx.exec("SELECT pg_advisory_xact_lock(7011)");
    tx.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INT PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
    int current = tx.exec1("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")[0].as<int>();
    for (const Migration& m : Migrations()) {
      if (m.version <= current) continue;
      tx.exec(m.sql);
      tx.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                     m.name);
    }
    return Status::Ok();
  });
}

}  // namespace sf::master
