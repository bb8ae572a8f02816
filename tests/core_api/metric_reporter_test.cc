// MetricReporter (core_api/metric_reporter.h) with an injected send: batching while a call is in
// flight, backpressure, retries, permanent errors, Flush and the destructor. Real threads; the
// only waits are generous timeouts on things that must happen, and short ones on things that
// must not.
#include "core_api/metric_reporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sf::core {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Row = MetricReporter::MetricReport;

constexpr auto kPatience = seconds(30);  // for what must happen

Row MakeRow(int64_t batches, const std::string& kind = "training") {
  Row r;
  r.set_kind(kind);
  r.set_batches(batches);
  (*r.mutable_values()->mutable_fields())["loss"].set_number_value(
      1.0 / static_cast<double>(batches + 1));
  return r;
}

std::chrono::steady_clock::time_point Within(std::chrono::steady_clock::duration d) {
  return std::chrono::steady_clock::now() + d;
}

// What the master stored: the rows of each acknowledged call, in call order. Optionally the
// first call blocks until released (a slow master), and calls fail as `fail` says.
class FakeMaster {
 public:
  explicit FakeMaster(bool block_first_call = false) : block_first_(block_first_call) {}
  // Returns the status for the n-th attempt (0-based); OK stores the rows.
  std::function<Status(int attempt)> fail = [](int) { return Status::Ok(); };

  MetricReporter::Send Sender() {
    return [this](const std::vector<Row>& rows) {
      EXPECT_FALSE(rows.empty());
      const int attempt = attempts_++;
      if (attempt == 0 && block_first_) {
        first_entered_.set_value();
        release_.get_future().wait();
      }
      Status st = fail(attempt);
      if (st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<int64_t> call;
        call.reserve(rows.size());
        for (const auto& r : rows) call.push_back(r.batches());
        calls_.push_back(std::move(call));
        for (const auto& r : rows) kinds_.push_back(r.kind());
      }
      return st;
    };
  }
  void WaitFirstCallEntered() {
    ASSERT_EQ(first_entered_.get_future().wait_for(kPatience), std::future_status::ready);
  }
  void Release() { release_.set_value(); }

  std::vector<std::vector<int64_t>> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<int64_t> rows() {
    std::vector<int64_t> all;
    for (const auto& c : calls()) all.insert(all.end(), c.begin(), c.end());
    return all;
  }
  std::vector<std::string> kinds() {
    std::lock_guard<std::mutex> lock(mu_);
    return kinds_;
  }
  int attempts() const { return attempts_.load(); }

 private:
  std::atomic<int> attempts_{0};
  const bool block_first_;
  std::promise<void> first_entered_, release_;
  std::mutex mu_;
  std::vector<std::vector<int64_t>> calls_;
  std::vector<std::string> kinds_;
};

std::vector<int64_t> Range(int64_t from, int64_t to) {  // [from, to]
  std::vector<int64_t> v;
  for (int64_t i = from; i <= to; ++i) v.push_back(i);
  return v;
}

// Adds rows `from`..`to`; each Add must succeed.
void AddRows(MetricReporter& reporter, int64_t from, int64_t to) {
  for (int64_t i = from; i <= to; ++i) ASSERT_TRUE(reporter.Add(MakeRow(i)).ok()) << "row " << i;
}

// Adds row 1 and waits until the (blocked) first call carrying it has started.
void StartBlockedFirstCall(MetricReporter& reporter, FakeMaster& master) {
  AddRows(reporter, 1, 1);
  master.WaitFirstCallEntered();
}

MetricReporterOptions Limits(size_t max_pending_rows, size_t max_rows_per_call) {
  MetricReporterOptions o;
  o.max_pending_rows = max_pending_rows;
  o.max_rows_per_call = max_rows_per_call;
  return o;
}

MetricReporterOptions FastRetries() {
  MetricReporterOptions o;
  o.first_retry_delay = milliseconds(1);
  o.max_retry_delay = milliseconds(4);
  return o;
}

TEST(MetricReporter, RowsArriveInOrderAndExactlyOnce) {
  FakeMaster master;
  MetricReporter reporter(master.Sender());
  ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 1, 5000));
  ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
  EXPECT_EQ(master.rows(), Range(1, 5000));
  const MetricReporterStats s = reporter.stats();
  EXPECT_EQ(s.rows, 5000);
  EXPECT_EQ(s.calls, static_cast<int64_t>(master.calls().size()));
  EXPECT_LE(s.largest_call_rows, 1000);  // max_rows_per_call
  EXPECT_EQ(s.retries, 0);
  EXPECT_EQ(s.dropped_rows, 0);
}

TEST(MetricReporter, ConcurrentAddsKeepEachThreadsOrderAndLoseNothing) {
  FakeMaster master;
  MetricReporter reporter(master.Sender());
  constexpr int kThreads = 4, kRows = 2000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 1; i <= kRows; ++i)
        ASSERT_TRUE(reporter.Add(MakeRow(i, "t" + std::to_string(t))).ok());
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
  const std::vector<int64_t> rows = master.rows();
  const std::vector<std::string> kinds = master.kinds();
  ASSERT_EQ(rows.size(), static_cast<size_t>(kThreads * kRows));
  std::vector<std::vector<int64_t>> per_thread(kThreads);
  for (size_t i = 0; i < rows.size(); ++i)
    per_thread[std::stoi(kinds[i].substr(1))].push_back(rows[i]);
  for (const auto& seen : per_thread) EXPECT_EQ(seen, Range(1, kRows));
}

TEST(MetricReporter, RowsAddedWhileACallIsInFlightGoInTheNextCall) {
  FakeMaster master(/*block_first_call=*/true);
  MetricReporter reporter(master.Sender());
  ASSERT_NO_FATAL_FAILURE(StartBlockedFirstCall(reporter, master));
  ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 2, 501));  // none blocks
  master.Release();
  ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
  const auto calls = master.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::vector<int64_t>{1});
  EXPECT_EQ(calls[1], Range(2, 501));
  EXPECT_EQ(reporter.stats().largest_call_rows, 500);
}

TEST(MetricReporter, AFullBufferIsSentInCallsOfAtMostMaxRowsPerCall) {
  FakeMaster master(/*block_first_call=*/true);
  MetricReporter reporter(master.Sender(),
                          Limits(/*max_pending_rows=*/10000, /*max_rows_per_call=*/300));
  ASSERT_NO_FATAL_FAILURE(StartBlockedFirstCall(reporter, master));
  ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 2, 701));
  master.Release();
  ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
  const auto calls = master.calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[1], Range(2, 301));
  EXPECT_EQ(calls[2], Range(302, 601));
  EXPECT_EQ(calls[3], Range(602, 701));
}

TEST(MetricReporter, AddBlocksAtMaxPendingRowsAndResumesWhenTheSenderDrains) {
  FakeMaster master(/*block_first_call=*/true);
  MetricReporter reporter(master.Sender(),
                          Limits(/*max_pending_rows=*/100, /*max_rows_per_call=*/1000));
  ASSERT_NO_FATAL_FAILURE(StartBlockedFirstCall(reporter, master));
  ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 2, 101));  // fills the buffer
  auto blocked = std::async(std::launch::async, [&] { return reporter.Add(MakeRow(102)); });
  EXPECT_EQ(blocked.wait_for(milliseconds(200)), std::future_status::timeout)
      << "Add did not block";
  master.Release();
  ASSERT_EQ(blocked.wait_for(kPatience), std::future_status::ready) << "Add did not resume";
  EXPECT_TRUE(blocked.get().ok());
  ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
  EXPECT_EQ(master.rows(), Range(1, 102));
}

TEST(MetricReporter, RetryableErrorsAreRetriedAndDeliverEveryRowOnce) {
  for (StatusCode code : {StatusCode::kUnavailable, StatusCode::kResourceExhausted,
                          StatusCode::kInternal, StatusCode::kCancelled}) {
    SCOPED_TRACE(StatusCodeName(code));
    FakeMaster master;
    master.fail = [code](int attempt) { return attempt < 3 ? Status(code, "busy") : Status::Ok(); };
    MetricReporter reporter(master.Sender(), FastRetries());
    ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 1, 50));
    ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
    EXPECT_EQ(master.rows(), Range(1, 50));
    EXPECT_EQ(reporter.stats().retries, 3);
    EXPECT_EQ(reporter.stats().dropped_rows, 0);
  }
}

TEST(MetricReporter, ARetriedCallTakesTheRowsAddedMeanwhileInOrder) {
  FakeMaster master(/*block_first_call=*/true);
  master.fail = [](int attempt) {
    return attempt == 0 ? Unavailable("master restarting") : Status::Ok();
  };
  MetricReporter reporter(master.Sender(), FastRetries());
  ASSERT_NO_FATAL_FAILURE(StartBlockedFirstCall(reporter, master));
  ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 2, 300));
  master.Release();  // the first attempt fails; its retry carries rows 1..300
  ASSERT_TRUE(reporter.Flush(Within(kPatience)).ok());
  const auto calls = master.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], Range(1, 300));
}

TEST(MetricReporter, APermanentErrorSurfacesFromTheNextAddAndFlush) {
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kPermissionDenied, StatusCode::kUnauthenticated,
        StatusCode::kNotFound, StatusCode::kFailedPrecondition}) {
    SCOPED_TRACE(StatusCodeName(code));
    FakeMaster master;
    master.fail = [code](int attempt) {
      return attempt == 0 ? Status(code, "refused") : Status::Ok();
    };
    MetricReporter reporter(master.Sender(), FastRetries());
    ASSERT_TRUE(reporter.Add(MakeRow(1)).ok());
    Status flushed = reporter.Flush(Within(kPatience));
    EXPECT_EQ(flushed.code(), code);
    EXPECT_EQ(flushed.message(), "refused");
    EXPECT_EQ(reporter.Add(MakeRow(2)).code(), code);  // not taken
    EXPECT_EQ(reporter.Flush(Within(kPatience)).code(), code);
    EXPECT_EQ(master.attempts(), 1);  // never retried
    const MetricReporterStats s = reporter.stats();
    EXPECT_EQ(s.failed_calls, 1);
    EXPECT_EQ(s.dropped_rows, 1);
    EXPECT_EQ(s.rows, 0);
  }
}

TEST(MetricReporter, ATransientErrorThatOutlastsTheRetryWindowBecomesPermanent) {
  FakeMaster master;
  master.fail = [](int) { return Unavailable("connection refused"); };
  MetricReporterOptions o = FastRetries();
  o.retry_window = milliseconds(50);
  MetricReporter reporter(master.Sender(), o);
  ASSERT_TRUE(reporter.Add(MakeRow(1)).ok());
  Status flushed = reporter.Flush(Within(kPatience));
  EXPECT_EQ(flushed.code(), StatusCode::kUnavailable);
  EXPECT_NE(flushed.message().find("connection refused"), std::string::npos) << flushed.message();
  EXPECT_NE(flushed.message().find("gave up"), std::string::npos) << flushed.message();
  EXPECT_GE(reporter.stats().retries, 1);
  EXPECT_EQ(reporter.stats().dropped_rows, 1);
  EXPECT_FALSE(reporter.Add(MakeRow(2)).ok());
}

TEST(MetricReporter, FlushWaitsForRowsInFlight) {
  FakeMaster master(/*block_first_call=*/true);
  MetricReporter reporter(master.Sender());
  ASSERT_NO_FATAL_FAILURE(StartBlockedFirstCall(reporter, master));
  Status early = reporter.Flush(Within(milliseconds(20)));
  EXPECT_EQ(early.code(), StatusCode::kUnavailable);
  EXPECT_NE(early.message().find("1 metric rows not acknowledged"), std::string::npos)
      << early.message();
  auto flushed = std::async(std::launch::async, [&] { return reporter.Flush(Within(kPatience)); });
  EXPECT_EQ(flushed.wait_for(milliseconds(100)), std::future_status::timeout)
      << "Flush did not wait";
  master.Release();
  ASSERT_EQ(flushed.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(flushed.get().ok());
  EXPECT_EQ(master.rows(), Range(1, 1));
}

TEST(MetricReporter, FlushWithNothingAddedReturnsAtOnce) {
  FakeMaster master;
  MetricReporter reporter(master.Sender());
  EXPECT_TRUE(reporter.Flush(std::chrono::steady_clock::now()).ok());
  EXPECT_EQ(master.attempts(), 0);
}

TEST(MetricReporter, TheDestructorDeliversPendingRows) {
  FakeMaster master(/*block_first_call=*/true);
  {
    MetricReporter reporter(master.Sender());
    ASSERT_TRUE(reporter.Add(MakeRow(1)).ok());
    master.WaitFirstCallEntered();
    ASSERT_NO_FATAL_FAILURE(AddRows(reporter, 2, 3000));
    master.Release();
  }
  EXPECT_EQ(master.rows(), Range(1, 3000));
}

TEST(MetricReporter, TheDestructorGivesUpAfterCloseTimeout) {
  FakeMaster master;
  master.fail = [](int) { return Unavailable("master down"); };
  MetricReporterOptions o = FastRetries();
  o.close_timeout = milliseconds(100);
  const auto start = std::chrono::steady_clock::now();
  {
    MetricReporter reporter(master.Sender(), o);
    ASSERT_TRUE(reporter.Add(MakeRow(1)).ok());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, kPatience);
  EXPECT_TRUE(master.rows().empty());
}

}  // namespace
}  // namespace sf::core
