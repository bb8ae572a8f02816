// Database::Transact against a real PostgreSQL that goes away: a server restart (immediate
// stop: like a crash) is waited out and the transaction goes through once the server is back;
// past the patience the caller gets Unavailable; statement errors are not retried; commits
// deferred (DeferredFlush) are on disk once WaitForDurability returns.
#include "master/db/database.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/master/migrated_database_test.h"

namespace sf::master::testing {
namespace {

using namespace std::chrono_literals;

class DatabaseOutageTest : public MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(db_->Transact("create", [](pqxx::work& tx) {
                      tx.exec("CREATE TABLE outage_rows (id INT PRIMARY KEY)");
                      return Status::Ok();
                    }).ok());
  }
  void TearDown() override {
    // Whatever a test did, the next one finds the server up.
    (void)server()->postgres().Start();
  }
  Status Insert(int id, std::atomic<int>* attempts = nullptr) {
    return db_->Transact("insert outage row", [&](pqxx::work& tx) {
      if (attempts) ++*attempts;
      tx.exec_params("INSERT INTO outage_rows (id) VALUES ($1)", id);
      return Status::Ok();
    });
  }
  int64_t Rows() {
    int64_t n = -1;
    EXPECT_TRUE(db_->Transact("count", [&](pqxx::work& tx) {
                      n = tx.exec1("SELECT count(*) FROM outage_rows")[0].as<int64_t>();
                      return Status::Ok();
                    }).ok());
    return n;
  }
};

TEST_F(DatabaseOutageTest, ATransactionWaitsOutAServerRestartAndCommitsOnce) {
  ASSERT_TRUE(Insert(1).ok());  // every pooled connection has been used once before the crash
  ASSERT_TRUE(server()->postgres().Stop(LocalPostgres::StopMode::kImmediate).ok());
  std::thread restart([&] {
    std::this_thread::sleep_for(1500ms);
    EXPECT_TRUE(server()->postgres().Start().ok());
  });
  Status st = Insert(2);
  restart.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Rows(), 2);
}

TEST_F(DatabaseOutageTest, PastItsPatienceTheCallerHearsUnavailableAndThePoolRecovers) {
  db_->SetReconnectPatience(300ms);
  ASSERT_TRUE(server()->postgres().Stop(LocalPostgres::StopMode::kImmediate).ok());
  Status st = Insert(3);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("insert outage row"), std::string::npos) << st.message();
  ASSERT_TRUE(server()->postgres().Start().ok());
  // Every connection of the pool was broken by the restart; each is replaced on its next use.
  for (int i = 10; i < 18; ++i) EXPECT_TRUE(Insert(i).ok()) << i;
  EXPECT_EQ(Rows(), 8);
}

TEST_F(DatabaseOutageTest, AStatementErrorIsNotRetried) {
  ASSERT_TRUE(Insert(4).ok());
  std::atomic<int> attempts{0};
  Status st = Insert(4, &attempts);  // duplicate key
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
  EXPECT_EQ(attempts.load(), 1);
  EXPECT_EQ(Rows(), 1);
}

// DeferredFlush: inside it a transaction commits with synchronous_commit off (PostgreSQL's own
// setting, read back in the transaction), outside it on; committed() says whether this thread
// committed while it lived. WaitForDurability() then puts what it deferred on disk: with the WAL
// writer slowed to 10 s, the deferred row survives a crash of the server (immediate stop) only
// because the wait flushed the WAL.
TEST_F(DatabaseOutageTest, DeferredCommitsAreOnDiskOnceWaitForDurabilityReturns) {
  auto setting = [&] {
    std::string value;
    EXPECT_TRUE(db_->Transact("show", [&](pqxx::work& tx) {
                      value = tx.exec1("SHOW synchronous_commit")[0].as<std::string>();
                      return Status::Ok();
                    }).ok());
    return value;
  };
  auto system = [&](const std::string& sql) {
    pqxx::connection conn(server()->postgres().ConnectionString());
    pqxx::nontransaction tx(conn);
    tx.exec(sql);
    tx.exec("SELECT pg_reload_conf()");
  };
  system("ALTER SYSTEM SET wal_writer_delay = '10s'");
  EXPECT_EQ(setting(), "on");
  {
    DeferredFlush deferred;
    EXPECT_TRUE(DeferredFlush::Active());
    EXPECT_FALSE(deferred.committed());
    EXPECT_EQ(setting(), "off");
    EXPECT_TRUE(deferred.committed());
    {
      DeferredFlush nested;  // nests; counts only its own lifetime's commits
      EXPECT_FALSE(nested.committed());
      ASSERT_TRUE(Insert(7).ok());
      EXPECT_TRUE(nested.committed());
    }
    EXPECT_TRUE(DeferredFlush::Active());
  }
  EXPECT_FALSE(DeferredFlush::Active());
  EXPECT_EQ(setting(), "on");
  ASSERT_TRUE(db_->WaitForDurability().ok());
  ASSERT_TRUE(server()->postgres().Stop(LocalPostgres::StopMode::kImmediate).ok());
  ASSERT_TRUE(server()->postgres().Start().ok());
  EXPECT_EQ(Rows(), 1);
  system("ALTER SYSTEM RESET wal_writer_delay");
}

}  // namespace
}  // namespace sf::master::testing
