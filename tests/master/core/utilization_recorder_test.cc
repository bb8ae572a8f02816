// The utilisation history against a real PostgreSQL (migrated by the master's own migrations):
// samples of one minute fold into one row per pool (mean, max, count), pruning deletes only rows
// older than the retention, reads filter by time and pool, concurrent writers lose no sample, and
// the background thread samples on its own and stops promptly.
#include "master/core/utilization_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/master/migrated_database_test.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

// 2026-11-24T16:01:00Z, a minute boundary.
constexpr int64_t kMinute = 1795536060;
static_assert(kMinute % 60 == 0);

v1::Agent MakeAgent(const std::string& id, const std::string& pool, bool connected,
                    std::vector<std::pair<bool, int64_t>> slots /* enabled, trial */) {
  v1::Agent a;
  a.set_id(id);
  a.set_resource_pool(pool);
  a.set_connected(connected);
  int n = 0;
  for (const auto& [enabled, trial] : slots) {
    v1::Slot* s = a.add_slots();
    s->set_id("cpu" + std::to_string(n++));
    s->set_enabled(enabled);
    s->set_trial_id(trial);
  }
  return a;
}

class UtilizationHistoryTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<UtilizationStore>(db_.get());
  }

  // Rows as the API would return them from `since` on.
  std::vector<UtilizationPoint> Rows(int64_t since = 0, const std::string& pool = "") {
    auto rows = store_->Read(since, pool);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<UtilizationPoint>{};
  }

  std::unique_ptr<UtilizationStore> store_;
};

TEST(PoolSamples, CountEnabledSlotsOfConnectedAgentsPerPool) {
  std::vector<v1::Agent> agents = {
      MakeAgent("a", "default", true, {{true, 7}, {true, 0}, {false, 0}}),
      MakeAgent("b", "", true, {{true, 8}}),                 // empty pool name: "default"
      MakeAgent("c", "gpu", false, {{true, 9}, {true, 0}}),  // disconnected: counted as 0 of 0
      MakeAgent("d", "big", true, {{true, 0}, {true, 0}}),
  };
  std::vector<PoolSample> s = PoolSamplesOf(agents);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].pool, "big");
  EXPECT_EQ(s[0].slots_total, 2);
  EXPECT_EQ(s[0].slots_busy, 0);
  EXPECT_EQ(s[1].pool, "default");
  EXPECT_EQ(s[1].slots_total, 3);
  EXPECT_EQ(s[1].slots_busy, 2);
  EXPECT_EQ(s[2].pool, "gpu");
  EXPECT_EQ(s[2].slots_total, 0);
  EXPECT_EQ(s[2].slots_busy, 0);
}

TEST(PoolSamples, MinuteStartFloorsAlsoBeforeTheEpoch) {
  EXPECT_EQ(MinuteStart(kMinute), kMinute);
  EXPECT_EQ(MinuteStart(kMinute + 59), kMinute);
  EXPECT_EQ(MinuteStart(kMinute + 60), kMinute + 60);
  EXPECT_EQ(MinuteStart(-1), -60);
  EXPECT_EQ(MinuteStart(-60), -60);
}

TEST_F(UtilizationHistoryTest, MigrationCreatesTheTable) {
  EXPECT_GE(db_->SchemaVersion(), 2);
  EXPECT_TRUE(Rows().empty());
}

TEST_F(UtilizationHistoryTest, SamplesOfOneMinuteFoldIntoOneRowPerPool) {
  // The snapshot the recorder sees changes between samples, as the cluster's would.
  int busy = 0;
  int total = 4;
  auto snapshot = [&] {
    std::vector<std::pair<bool, int64_t>> slots;
    for (int i = 0; i < total; ++i) slots.push_back({true, i < busy ? 100 + i : 0});
    return std::vector<v1::Agent>{MakeAgent("a", "default", true, slots),
                                  MakeAgent("g", "gpu", true, {{true, 0}, {true, 0}})};
  };
  UtilizationRecorder recorder(store_.get(), snapshot, {});
  busy = 1;
  ASSERT_TRUE(recorder.SampleOnce(kMinute + 0).ok());
  busy = 2;
  ASSERT_TRUE(recorder.SampleOnce(kMinute + 10).ok());
  busy = 0;
  total = 3;  // an agent's slot went away mid-minute: the row keeps the most seen
  ASSERT_TRUE(recorder.SampleOnce(kMinute + 20).ok());
  busy = 3;
  ASSERT_TRUE(recorder.SampleOnce(kMinute + 59).ok());
  busy = 1;
  ASSERT_TRUE(recorder.SampleOnce(kMinute + 60).ok());  // the next minute

  std::vector<UtilizationPoint> rows = Rows();
  ASSERT_EQ(rows.size(), 4u);  // 2 minutes x 2 pools, ordered by minute then pool
  EXPECT_EQ(rows[0].pool, "default");
  EXPECT_EQ(rows[0].minute, kMinute);
  EXPECT_EQ(rows[0].samples, 4);
  EXPECT_DOUBLE_EQ(rows[0].busy_avg, (1 + 2 + 0 + 3) / 4.0);
  EXPECT_EQ(rows[0].busy_max, 3);
  EXPECT_EQ(rows[0].slots_total, 4);
  EXPECT_EQ(rows[1].pool, "gpu");
  EXPECT_EQ(rows[1].minute, kMinute);
  EXPECT_EQ(rows[1].samples, 4);
  EXPECT_DOUBLE_EQ(rows[1].busy_avg, 0.0);
  EXPECT_EQ(rows[1].busy_max, 0);
  EXPECT_EQ(rows[1].slots_total, 2);
  EXPECT_EQ(rows[2].pool, "default");
  EXPECT_EQ(rows[2].minute, kMinute + 60);
  EXPECT_EQ(rows[2].samples, 1);
  EXPECT_DOUBLE_EQ(rows[2].busy_avg, 1.0);
  EXPECT_EQ(rows[2].busy_max, 1);
  EXPECT_EQ(rows[2].slots_total, 3);
  EXPECT_EQ(rows[3].pool, "gpu");
}

TEST_F(UtilizationHistoryTest, ReadsFromTheMinuteHoldingSinceAndFiltersByPool) {
  for (int m = 0; m < 5; ++m) {
    ASSERT_TRUE(store_->Record(kMinute + 60 * m + 30, {{"default", 4, m}, {"gpu", 2, 1}}).ok());
  }
  EXPECT_EQ(Rows().size(), 10u);
  // 16:03:45 lies in the minute of 16:03, which is included.
  std::vector<UtilizationPoint> late = Rows(kMinute + 2 * 60 + 45);
  ASSERT_EQ(late.size(), 6u);
  EXPECT_EQ(late.front().minute, kMinute + 2 * 60);
  std::vector<UtilizationPoint> gpu = Rows(0, "gpu");
  ASSERT_EQ(gpu.size(), 5u);
  for (const auto& p : gpu) EXPECT_EQ(p.pool, "gpu");
  for (size_t i = 1; i < gpu.size(); ++i) EXPECT_LT(gpu[i - 1].minute, gpu[i].minute);
  EXPECT_TRUE(Rows(0, "no-such-pool").empty());
  EXPECT_TRUE(Rows(kMinute + 3600).empty());
  // An empty sample list writes nothing.
  EXPECT_TRUE(store_->Record(kMinute + 7200, {}).ok());
  EXPECT_EQ(Rows().size(), 10u);
}

TEST_F(UtilizationHistoryTest, PruneDeletesOnlyRowsOlderThanTheRetention) {
  UtilizationRecorderOptions options;
  options.retention = std::chrono::hours(168);
  UtilizationRecorder recorder(
      store_.get(), [] { return std::vector<v1::Agent>{}; }, options);
  const int64_t now = kMinute + 7 * 24 * 3600 + 30;  // 30 s into a minute
  const int64_t cutoff = now - 168 * 3600;           // = kMinute + 30
  // Minutes: one well before the cutoff, the one holding it (starts 30 s before it, so it is
  // older), the next (starts after it), and now.
  for (int64_t at : {kMinute - 3600, kMinute + 5, kMinute + 60, now}) {
    ASSERT_TRUE(store_->Record(at, {{"default", 2, 1}, {"gpu", 1, 0}}).ok());
  }
  ASSERT_EQ(Rows().size(), 8u);
  auto deleted = recorder.PruneOnce(now);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 4);
  std::vector<UtilizationPoint> left = Rows();
  ASSERT_EQ(left.size(), 4u);
  for (const auto& p : left) EXPECT_GE(p.minute, cutoff) << p.pool << " " << p.minute;
  EXPECT_EQ(left.front().minute, kMinute + 60);
  EXPECT_EQ(left.back().minute, MinuteStart(now));
  // Pruning again deletes nothing.
  deleted = recorder.PruneOnce(now);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 0);
}

TEST_F(UtilizationHistoryTest, ConcurrentWritersOfOneMinuteLoseNoSample) {
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (!store_->Record(kMinute + i % 60, {{"default", 8, t}}).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<UtilizationPoint> rows = Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].samples, kThreads * kEach);
  EXPECT_NEAR(rows[0].busy_avg, (0 + 1 + 2 + 3) / 4.0, 1e-9);
  EXPECT_EQ(rows[0].busy_max, kThreads - 1);
}

TEST_F(UtilizationHistoryTest, BackgroundThreadSamplesAndStopsPromptly) {
  std::atomic<int> snapshots{0};
  UtilizationRecorderOptions options;
  options.sample_interval = std::chrono::seconds(1);
  UtilizationRecorder recorder(
      store_.get(),
      [&] {
        snapshots++;
        return std::vector<v1::Agent>{MakeAgent("a", "default", true, {{true, 5}, {true, 0}})};
      },
      options);
  recorder.Start();
  // The first sample is taken at once, then one per second.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (snapshots.load() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto stop_started = std::chrono::steady_clock::now();
  recorder.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_started, std::chrono::seconds(2));
  ASSERT_GE(snapshots.load(), 3);
  int samples = 0;
  for (const auto& p : Rows()) {
    EXPECT_EQ(p.pool, "default");
    EXPECT_EQ(p.slots_total, 2);
    EXPECT_DOUBLE_EQ(p.busy_avg, 1.0);
    samples += p.samples;
  }
  EXPECT_EQ(samples, snapshots.load());
  recorder.Stop();  // idempotent
}

}  // namespace
}  // namespace sf::master
