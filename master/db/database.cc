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

std::unique_ptr<pqxx::connection> Database::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  available_.wait(lock, [&] { return !idle_.empty(); });
  auto conn = std::move(idle_.back());
  idle_.pop_back();
  return conn;
}

void Database::Release(std::unique_ptr<pqxx::connection> conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(conn));
  }
  available_.notify_one();
}

Status Database::Transact(const std::string& what,
                          const std::function<Status(pqxx::work&)>& body) {
  auto start = std::chrono::steady_clock::now();
  auto conn = Acquire();
  Status result;
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (!conn->is_open()) conn = std::make_unique<pqxx::connection>(connection_string_);
      pqxx::work tx(*conn);
      result = body(tx);
      if (result.ok()) tx.commit();
      break;
    } catch (const pqxx::broken_connection& e) {
      // The server restarted or dropped us: reconnect once and retry the whole transaction.
      result = Unavailable(what + ": database connection lost: " + e.what());
      try {
        conn = std::make_unique<pqxx::connection>(connection_string_);
      } catch (const std::exception& e2) {
        result = Unavailable(what + ": cannot reconnect to PostgreSQL: " + e2.what());
        break;
      }
    } catch (const pqxx::sql_error& e) {
      result = Internal(what + ": " + e.what());
      break;
    } catch (const std::exception& e) {
      result = Internal(what + ": " + e.what());
      break;
    }
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
