// The API's read path against a real PostgreSQL (docs/cluster.md "Reads under load"):
// - a pool with an acquire timeout refuses a transaction as busy (kUnavailable, counted) when no
//   connection comes free in time, runs nothing, and serves again once one is free;
// - SnapshotCache serves a page of the experiment list from memory while nothing commits on
//   the writes pool (a change behind the master's back is not seen: the page is not re-read),
//   shows a write through that pool to the very next read, bounds staleness by max_age, and
//   does not cache errors;
// - the list's trial counts, kept in the experiment's row by a trigger (migration 021), equal
//   counting the trials after every insert and every move into or out of an ended state,
//   whichever path wrote it.
#include "master/db/snapshot_cache.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "master/db/database.h"
#include "master/db/store.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master::testing {
namespace {

using namespace std::chrono_literals;
using Page = std::pair<std::vector<steadfast::v1::Experiment>, int>;

TEST_F(MigratedDatabaseTest, AReadWaitingPastTheAcquireTimeoutIsRefusedAsBusyAndThePoolRecovers) {
  auto pool = Database::Open(connection_string(), 1, std::chrono::seconds(10));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  Database& reads = **pool;
  reads.SetAcquireTimeout(150ms);
  // One transaction holds the only connection until released.
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false, release = false;
  std::thread holder([&] {
    Status st = reads.Transact("hold", [&](pqxx::work&) {
      std::unique_lock<std::mutex> lock(mu);
      holding = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return holding; });
  }
  std::atomic<bool> ran{false};
  const auto start = std::chrono::steady_clock::now();
  Status busy = reads.Transact("list experiments", [&](pqxx::work&) {
    ran = true;
    return Status::Ok();
  });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(busy.code(), StatusCode::kUnavailable) << busy.ToString();
  EXPECT_NE(busy.message().find("list experiments: the database is busy"), std::string::npos) << busy.message();
  EXPECT_FALSE(ran);
  EXPECT_GE(waited, 140ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(reads.busy_refusals(), 1u);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  holder.join();
  Status after = reads.Transact("list experiments", [&](pqxx::work& tx) {
    tx.exec1("SELECT 1");
    return Status::Ok();
  });
  EXPECT_TRUE(after.ok()) << after.ToString();
  EXPECT_EQ(reads.busy_refusals(), 1u);
}

TEST_F(MigratedDatabaseTest, CommitsCountsCommittedTransactionsOnly) {
  const uint64_t before = db_->commits();
  ASSERT_TRUE(db_->Transact("read", [](pqxx::work& tx) {
                    tx.exec1("SELECT 1");
                    return Status::Ok();
                  }).ok());
  EXPECT_EQ(db_->commits(), before + 1);
  // A body that fails rolls back: nothing committed, nothing counted.
  EXPECT_FALSE(db_->Transact("refused", [](pqxx::work&) { return InvalidArgument("no"); }).ok());
  EXPECT_EQ(db_->commits(), before + 1);
}

TEST_F(MigratedDatabaseTest, TheListsTrialCountsEqualCountingTheTrialsAfterEveryChange) {
  std::vector<int64_t> trials;
  CreateRunningTrials("counted", 3, &trials);
  CreateRunningTrials("neighbour", 2, &trials);
  if (HasFatalFailure()) return;
  const int64_t experiment = ExperimentOf(trials[0]);
  Store store(db_.get());
  // The counts the list shows against counting the rows, for `experiment`.
  auto expect_counts = [&](int total, int ended, const std::string& after) {
    auto page = store.ListExperiments({});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    int counted = -1, counted_ended = -1;
    ASSERT_TRUE(db_->Transact("count", [&](pqxx::work& tx) {
                     auto r = tx.exec_params1(
                         "SELECT count(*), count(*) FILTER (WHERE state IN ('COMPLETED','CANCELED','ERROR')) "
                         "FROM trials WHERE experiment_id = $1",
                         experiment);
                     counted = r[0].as<int>();
                     counted_ended = r[1].as<int>();
                     return Status::Ok();
                   }).ok());
    EXPECT_EQ(counted, total) << after;
    EXPECT_EQ(counted_ended, ended) << after;
    for (const auto& e : page->first) {
      if (e.id() != experiment) {
        EXPECT_EQ(e.num_trials(), 2) << "the neighbour's counts move only with its own trials; " << after;
        continue;
      }
      EXPECT_EQ(e.num_trials(), total) << after;
      EXPECT_EQ(e.num_completed_trials(), ended) << after;
    }
  };
  expect_counts(3, 0, "three running trials");
  TrialUpdate done;
  done.state = "COMPLETED";
  ASSERT_TRUE(store.UpdateTrial(trials[0], done).ok());
  expect_counts(3, 1, "one completed");
  ASSERT_TRUE(store.UpdateTrial(trials[0], done).ok());
  TrialUpdate batches;
  batches.total_batches = 100;  // no state in the update: nothing to count
  ASSERT_TRUE(store.UpdateTrial(trials[1], batches).ok());
  expect_counts(3, 1, "the same state written twice, and a write without a state");
  TrialUpdate error;
  error.state = "ERROR";
  ASSERT_TRUE(store.UpdateTrial(trials[0], error).ok());
  expect_counts(3, 1, "from one ended state to another");
  TrialUpdate again;
  again.state = "QUEUED";
  ASSERT_TRUE(store.UpdateTrial(trials[0], again).ok());
  expect_counts(3, 0, "an ended trial queued again");
  auto created = store.CreateTrial(experiment, 9, Value(Value::Map{}), "CANCELED");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  expect_counts(4, 1, "a trial created in an ended state");
  // A change past the master (an operator's psql) is counted too.
  ASSERT_TRUE(db_->Transact("psql", [&](pqxx::work& tx) {
                   tx.exec_params("UPDATE trials SET state = 'CANCELED' WHERE experiment_id = $1", experiment);
                   return Status::Ok();
                 }).ok());
  expect_counts(4, 4, "every trial canceled in one statement");
}

class ExperimentPageCacheTest : public MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    auto pool = Database::Open(connection_string(), 2, std::chrono::seconds(10));
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    read_db_ = std::move(*pool);
    writes_ = std::make_unique<Store>(db_.get());
    reads_ = std::make_unique<Store>(read_db_.get());
    for (const char* name : {"first", "second"}) {
      NewExperiment e;
      e.name = name;
      e.config_yaml = std::string("name: ") + name;
      e.searcher = "single";
      e.metric = "validation_loss";
      e.state = "PAUSED";
      auto id = writes_->CreateExperiment(e);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids_.push_back(*id);
    }
  }
  std::function<Result<Page>()> Load(ExperimentFilter f = {}) {
    return [this, f] {
      loads_++;
      return reads_->ListExperiments(f);
    };
  }
  // Renames an experiment on the read pool: a change the writes pool does not see, as an
  // operator's psql would make it.
  void RenameBehindTheMastersBack(int64_t id, const std::string& name) {
    ASSERT_TRUE(read_db_->Transact("rename", [&](pqxx::work& tx) {
                          tx.exec_params("UPDATE experiments SET name = $1 WHERE id = $2", name, id);
                          return Status::Ok();
                        }).ok());
  }
  std::unique_ptr<Database> read_db_;
  std::unique_ptr<Store> writes_, reads_;
  std::vector<int64_t> ids_;
  int loads_ = 0;
};

TEST_F(ExperimentPageCacheTest, APageIsServedFromMemoryUntilAWriteCommitsOnTheWritesPool) {
  SnapshotCache<Page> cache(db_.get(), 60s);
  auto first = cache.Get("page", Load());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->first.size(), 2u);
  EXPECT_EQ(first->first[0].name(), "first");
  RenameBehindTheMastersBack(ids_[0], "renamed behind");
  auto again = cache.Get("page", Load());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->first[0].name(), "first") << "served from memory: the page was not read again";
  EXPECT_EQ(loads_, 1);
  // Another page (another key) is read on its own.
  ExperimentFilter one;
  one.limit = 1;
  ASSERT_TRUE(cache.Get("page of one", Load(one)).ok());
  EXPECT_EQ(loads_, 2);
  // A write through the master's pool: the very next read sees it (and the change behind).
  ASSERT_TRUE(writes_->SetExperimentState(ids_[1], "ACTIVE").ok());
  auto fresh = cache.Get("page", Load());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(loads_, 3);
  EXPECT_EQ(fresh->first[0].name(), "renamed behind");
  EXPECT_EQ(fresh->first[1].state(), steadfast::v1::EXPERIMENT_STATE_ACTIVE);
  const SnapshotCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 3u);
}

TEST_F(ExperimentPageCacheTest, MaxAgeBoundsWhatAChangePastTheMasterWaits) {
  SnapshotCache<Page> cache(db_.get(), 200ms);
  ASSERT_TRUE(cache.Get("page", Load()).ok());
  RenameBehindTheMastersBack(ids_[0], "psql");
  std::this_thread::sleep_for(250ms);
  auto later = cache.Get("page", Load());
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->first[0].name(), "psql");
  EXPECT_EQ(loads_, 2);
}

TEST_F(ExperimentPageCacheTest, ErrorsAreReturnedAndNotCached) {
  SnapshotCache<Page> cache(db_.get(), 60s);
  ExperimentFilter bad;
  bad.sort_by = "no such column";
  for (int i = 0; i < 2; ++i) {
    auto r = cache.Get("bad", Load(bad));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  EXPECT_EQ(loads_, 2);
}

}  // namespace
}  // namespace sf::master::testing
