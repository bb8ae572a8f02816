// Metric and log ingestion with group commit, against a real PostgreSQL migrated by the
// master's own migrations: concurrent writers store every row exactly once with the right
// total_batches, retries are harmless, a call returns only once its rows are visible to another
// connection, queued callers share one transaction, a database failure reaches every caller of
// the group without crashing (and a retry then succeeds), and a report PostgreSQL refuses fails
// only its own caller.
#include "master/ingest/metric_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <future>
#include <condition_variable>
#include <thread>

#include "master/db/store.h"
#include "master/ingest/log_writer.h"
#include "tests/master/migrated_database_test.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;
using namespace std::chrono_literals;

// A report of `count` training rows of `trial`: batches first, first+1, ...
MetricBatch Rows(int64_t trial, int64_t first, int count) {
  MetricBatch b;
  b.trial_id = trial;
  for (int i = 0; i < count; ++i) {
    v1::MetricReport m;
    m.set_trial_id(trial);
    m.set_kind("training");
    m.set_batches(first + i);
    (*m.mutable_values()->mutable_fields())["loss"].set_number_value(
        1.0 / static_cast<double>(first + i));
    b.rows.push_back(std::move(m));
  }
  b.total_batches = first + count - 1;
  return b;
}

// Waits (up to 10 s) for `cond`.
bool Eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 1000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

class IngestTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    CreateRunningTrials("ingest", 4, &trials_);
    if (HasFatalFailure()) return;
    observer_ = std::make_unique<pqxx::connection>(connection_string());
  }

  // Read on a connection of its own (not the writer's pool).
  int64_t Scalar(const std::string& sql) {
    pqxx::work tx(*observer_);
    return tx.exec1(sql)[0].as<int64_t>();
  }
  int64_t MetricRows(int64_t trial) {
    return Scalar("SELECT count(*) FROM metrics WHERE trial_id = " + std::to_string(trial));
  }
  int64_t TotalBatches(int64_t trial) {
    return Scalar("SELECT total_batches FROM trials WHERE id = " + std::to_string(trial));
  }

  // Holds `writer` up behind a lock on its table: starts a call writing batch 1 of trials_[0]
  // (status into results[0]), waits until the writer took it (its transaction now waits on the
  // lock), then starts a call writing batch_of(i) for each i = 1..results.size()-1 and waits until
  // all of them are queued. The caller releases the lock and joins `threads`.
  void QueueBehindBlockedWrite(MetricWriter& writer, std::vector<Status>& results,
                               std::vector<std::thread>& threads,
                               const std::function<MetricBatch(int)>& batch_of) {
    threads.emplace_back([&] { results[0] = writer.Write(Rows(trials_[0], 1, 1)); });
    ASSERT_TRUE(
        Eventually([&] { return writer.stats().submitted == 1 && writer.stats().queued == 0; }));
    for (size_t i = 1; i < results.size(); ++i) {
      threads.emplace_back(
          [&, i, batch_of] { results[i] = writer.Write(batch_of(static_cast<int>(i))); });
    }
    const auto queued = static_cast<int64_t>(results.size()) - 1;
    ASSERT_TRUE(Eventually([&] { return writer.stats().queued == queued; }));
  }

  std::vector<int64_t> trials_;
  std::unique_ptr<pqxx::connection> observer_;
};

// Holds an ACCESS EXCLUSIVE lock on `table` (on a connection of its own) so the writer's
// transaction blocks and callers pile up behind it; Release commits `then` first.
class TableLock {
 public:
  TableLock(const std::string& connection_string, const std::string& table)
      : conn_(connection_string), tx_(conn_) {
    tx_.exec("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE");
  }
  void Release(const std::string& then = "") {
    if (!then.empty()) tx_.exec(then);
    tx_.commit();
  }

 private:
  pqxx::connection conn_;
  pqxx::work tx_;
};

TEST_F(IngestTest, ConcurrentWritersStoreEveryRowOnceWithTheHighestTotal) {
  MetricWriter writer(db_.get());
  constexpr int kThreads = 32, kCalls = 40, kRowsPerCall = 5;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int64_t trial = trials_[t % 4];
      int64_t base = (t / 4) * kCalls * kRowsPerCall;  // 8 threads per trial, disjoint ranges
      for (int c = 0; c < kCalls; ++c) {
        // Every report is sent twice, as a trainer retrying after a lost reply would.
        for (int attempt = 0; attempt < 2; ++attempt) {
          if (!writer.Write(Rows(trial, base + c * kRowsPerCall + 1, kRowsPerCall)).ok())
            failures++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int64_t trial : trials_) {
    EXPECT_EQ(MetricRows(trial), kThreads / 4 * kCalls * kRowsPerCall) << "trial " << trial;
    EXPECT_EQ(TotalBatches(trial), kThreads / 4 * kCalls * kRowsPerCall) << "trial " << trial;
  }
  EXPECT_EQ(Scalar("SELECT count(*) FROM (SELECT trial_id, kind, batches FROM metrics "
                   "GROUP BY 1, 2, 3 HAVING count(*) > 1) d"),
            0);
  GroupCommitStats s = writer.stats();
  EXPECT_EQ(s.submitted, kThreads * kCalls * 2);
  EXPECT_EQ(s.failed_flushes, 0);
  EXPECT_LT(s.flushes, s.submitted) << "32 concurrent callers never shared a transaction";
  std::cout << "submitted " << s.submitted << " calls in " << s.flushes
            << " transactions (largest group " << s.largest_group << ")\n";
}

TEST_F(IngestTest, RetriedReportIsStoredOnceAndTotalNeverGoesDown) {
  MetricWriter writer(db_.get());
  ASSERT_TRUE(writer.Write(Rows(trials_[0], 1, 10)).ok());
  ASSERT_TRUE(writer.Write(Rows(trials_[0], 1, 10)).ok());
  ASSERT_TRUE(writer.Write(Rows(trials_[0], 3, 3)).ok());  // an older report, arriving late
  EXPECT_EQ(MetricRows(trials_[0]), 10);
  EXPECT_EQ(TotalBatches(trials_[0]), 10);
  MetricBatch empty{trials_[1], 7, {}};  // no rows, only progress
  ASSERT_TRUE(writer.Write(empty).ok());
  EXPECT_EQ(TotalBatches(trials_[1]), 7);
  EXPECT_EQ(MetricRows(trials_[1]), 0);
}

TEST_F(IngestTest, WriteReturnsOnlyOnceItsRowsAreVisibleToAnotherConnection) {
  MetricWriter writer(db_.get());
  // Background writers keep the writer busy, so the checked calls ride in shared groups.
  std::atomic<bool> stop{false};
  std::vector<std::thread> background;
  for (int t = 1; t < 4; ++t) {
    background.emplace_back([&, t] {
      for (int64_t b = 1; !stop; b += 3) (void)writer.Write(Rows(trials_[t], b, 3));
    });
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(writer.Write(Rows(trials_[0], i + 1, 1)).ok());
    ASSERT_EQ(MetricRows(trials_[0]), i + 1)
        << "call " << i << " returned before its row was committed";
    ASSERT_EQ(TotalBatches(trials_[0]), i + 1);
  }
  stop = true;
  for (auto& th : background) th.join();
}

TEST_F(IngestTest, QueuedCallersShareOneTransaction) {
  MetricWriter writer(db_.get());
  TableLock lock(connection_string(), "metrics");
  std::vector<Status> results(32);
  std::vector<std::thread> threads;
  // The first call's transaction blocks on the lock; the other 31 queue behind it.
  QueueBehindBlockedWrite(writer, results, threads,
                          [&](int i) { return Rows(trials_[i % 4], 100 + i, 2); });
  if (HasFatalFailure()) return;
  lock.Release();
  for (auto& th : threads) th.join();
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
  GroupCommitStats s = writer.stats();
  EXPECT_EQ(s.flushes, 2);
  EXPECT_EQ(s.largest_group, 31);
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), 1 + 31 * 2);
}

// WriteAsync (TrialLink's callback handler): the call returns before the commit; `done` runs once
// the rows are visible to another connection, one group carries the queued reports, a report the
// database refuses fails only its own callback, and after Stop the callback hears Unavailable.
TEST_F(IngestTest, WriteAsyncAnswersAfterTheCommitWithoutAWaitingThread) {
  auto writer = std::make_unique<MetricWriter>(db_.get());
  TableLock lock(connection_string(), "metrics");
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, Status> done;
  std::map<int, int64_t> visible_at_done;
  auto write = [&](int i, MetricBatch batch) {
    writer->WriteAsync(std::move(batch), [&, i](Status st) {
      // Rows must already be visible elsewhere when the answer goes out.
      int64_t visible = -1;
      if (st.ok()) {
        pqxx::connection c(connection_string());
        pqxx::work tx(c);
        visible = tx.exec1("SELECT count(*) FROM metrics WHERE batches = " + std::to_string(1000 + i))[0].as<int64_t>();
      }
      std::lock_guard<std::mutex> g(mu);
      done[i] = st;
      visible_at_done[i] = visible;
      cv.notify_all();
    });
  };
  write(0, Rows(trials_[0], 1000, 1));
  ASSERT_TRUE(Eventually([&] { return writer->stats().submitted == 1 && writer->stats().queued == 0; }));
  for (int i = 1; i < 16; ++i) {
    MetricBatch b = Rows(trials_[i % 4], 1000 + i, 1);
    if (i == 7) (*b.rows[0].mutable_values()->mutable_fields())["note"].set_string_value(std::string("a\0b", 3));
    write(i, std::move(b));  // returns at once: nothing can be written while the table is locked
  }
  EXPECT_EQ(writer->stats().queued, 15);
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_TRUE(done.empty());
  }
  lock.Release();
  {
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(cv.wait_for(g, 30s, [&] { return done.size() == 16; }));
  }
  for (int i = 0; i < 16; ++i) {
    if (i == 7) {
      EXPECT_EQ(done[i].code(), StatusCode::kInternal) << done[i].ToString();
      continue;
    }
    EXPECT_TRUE(done[i].ok()) << i << ": " << done[i].ToString();
    EXPECT_EQ(visible_at_done[i], 1) << "report " << i << " answered before its row was visible";
  }
  EXPECT_EQ(writer->stats().largest_group, 15);
}

// A queue that has stopped answers SubmitAsync at once, through the callback, with Unavailable.
TEST(GroupCommitQueueTest, SubmitAsyncAfterStopIsRefusedThroughTheCallback) {
  std::vector<int> written;
  GroupCommitQueue<int> queue(
      [&](std::vector<int>& items) {
        written.insert(written.end(), items.begin(), items.end());
        return Status::Ok();
      },
      [](const int&) { return size_t{1}; }, GroupCommitOptions{});
  std::promise<Status> first;
  queue.SubmitAsync(1, [&](Status st) { first.set_value(st); });
  EXPECT_TRUE(first.get_future().get().ok());
  queue.Stop();
  std::promise<Status> late;
  queue.SubmitAsync(2, [&](Status st) { late.set_value(st); });
  EXPECT_EQ(late.get_future().get().code(), StatusCode::kUnavailable);
  EXPECT_EQ(written, std::vector<int>{1});
}

TEST_F(IngestTest, FailedTransactionFailsEveryCallerOfItsGroupAndRetrySucceeds) {
  MetricWriter writer(db_.get());
  std::vector<Status> results(16);
  {
    TableLock lock(connection_string(), "metrics");
    std::vector<std::thread> threads;
    QueueBehindBlockedWrite(writer, results, threads,
                            [&](int i) { return Rows(trials_[i % 4], 100 + i, 2); });
    if (HasFatalFailure()) return;
    // The table disappears under the writer: every statement from now on fails.
    lock.Release("ALTER TABLE metrics RENAME TO metrics_gone");
    for (auto& th : threads) th.join();
  }
  for (int i = 0; i < 16; ++i) {
    EXPECT_FALSE(results[i].ok()) << "call " << i << " succeeded without a table";
    EXPECT_NE(results[i].message().find("ingest metrics"), std::string::npos)
        << results[i].ToString();
  }
  EXPECT_EQ(writer.stats().failed_flushes, writer.stats().flushes);
  EXPECT_EQ(TotalBatches(trials_[0]), 0) << "the failed transaction's progress update was kept";
  {
    pqxx::work tx(*observer_);
    tx.exec("ALTER TABLE metrics_gone RENAME TO metrics");
    tx.commit();
  }
  // The trainers retry: everything is stored, once.
  ASSERT_TRUE(writer.Write(Rows(trials_[0], 1, 1)).ok());
  for (int i = 1; i < 16; ++i) ASSERT_TRUE(writer.Write(Rows(trials_[i % 4], 100 + i, 2)).ok());
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), 1 + 15 * 2);
}

TEST_F(IngestTest, ReportTheDatabaseRefusesFailsOnlyItsOwnCaller) {
  MetricWriter writer(db_.get());
  std::vector<Status> results(9);
  {
    TableLock lock(connection_string(), "metrics");
    std::vector<std::thread> threads;
    QueueBehindBlockedWrite(writer, results, threads, [&](int i) {
      MetricBatch b = Rows(trials_[i % 4], 100 + 10 * i, 2);
      // jsonb has no NUL character: PostgreSQL refuses this report's row.
      if (i == 5)
        (*b.rows[1].mutable_values()->mutable_fields())["note"].set_string_value(
            std::string("a\0b", 3));
      return b;
    });
    if (HasFatalFailure()) return;
    lock.Release();
    for (auto& th : threads) th.join();
  }
  for (int i = 0; i < 9; ++i) {
    if (i == 5) {
      EXPECT_EQ(results[i].code(), StatusCode::kInternal) << results[i].ToString();
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
    }
  }
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"),
            1 + 7 * 2);                      // none of the refused report's rows
  EXPECT_EQ(TotalBatches(trials_[1]), 111);  // caller 1's report; caller 5's progress was not kept
}

TEST_F(IngestTest, UnreachableDatabaseIsAnErrorNotACrashAndTheWriterRecovers) {
  std::string dbname;
  {
    pqxx::work tx(*observer_);
    dbname = tx.exec1("SELECT current_database()")[0].as<std::string>();
  }
  MetricWriter writer(db_.get());
  ASSERT_TRUE(writer.Write(Rows(trials_[0], 1, 1)).ok());
  auto admin = [&](const std::string& sql) {
    pqxx::connection c(server()->postgres().ConnectionString("postgres"));
    pqxx::nontransaction tx(c);
    tx.exec(sql);
  };
  // Refuse new connections, then cut the pool's: the reconnect fails too (for longer than the
  // database's reconnect patience, shortened here from the master's 60 s).
  db_->SetReconnectPatience(std::chrono::milliseconds(300));
  admin("ALTER DATABASE \"" + dbname + "\" ALLOW_CONNECTIONS false");
  admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + dbname +
        "' AND pid <> pg_backend_pid()");
  std::vector<Status> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { results[i] = writer.Write(Rows(trials_[i % 4], 10 + i, 1)); });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(results[i].ok()) << i;
    EXPECT_EQ(results[i].code(), StatusCode::kUnavailable) << results[i].ToString();
  }
  admin("ALTER DATABASE \"" + dbname + "\" ALLOW_CONNECTIONS true");
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(writer.Write(Rows(trials_[i % 4], 10 + i, 1)).ok()) << i;
  observer_ = std::make_unique<pqxx::connection>(connection_string());
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), 1 + 8);
}

TEST_F(IngestTest, LogBatchesFromManyAgentsAreStoredWholeAndInOrder) {
  LogWriter writer(db_.get());
  constexpr int kAgents = 8, kBatches = 20, kLines = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int a = 0; a < kAgents; ++a) {
    threads.emplace_back([&, a] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<v1::LogLine> lines;
        for (int l = 0; l < kLines; ++l) {
          v1::LogLine line;
          line.set_trial_id(trials_[a % 4]);
          line.set_agent_id("agent-" + std::to_string(a));
          line.set_stream("stdout");
          line.set_message(std::to_string(b * kLines + l));
          lines.push_back(std::move(line));
        }
        if (!writer.Write(std::move(lines)).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM task_logs"), kAgents * kBatches * kLines);
  // Each agent's lines come back in the order it sent them.
  pqxx::work tx(*observer_);
  pqxx::result r = tx.exec("SELECT agent_id, message FROM task_logs ORDER BY id");
  std::map<std::string, int> next;
  for (const auto& row : r) {
    int& expected = next[row[0].as<std::string>()];
    ASSERT_EQ(row[1].as<int>(), expected) << row[0].as<std::string>();
    expected++;
  }
}

}  // namespace
}  // namespace sf::master
