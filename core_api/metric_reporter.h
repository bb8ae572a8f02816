// MetricReporter: metric rows handed to a background sender that batches them into ReportMetrics
// calls (TrialLink, proto/steadfast/v1/trial_link.proto). The training loop never waits a round
// trip for a report; when the master is slow, rows pile up and go in fewer, larger calls.
//
//   MetricReporter reporter([&](const std::vector<MetricReport>& rows) { return SendOneCall(rows);
//   }); SF_RETURN_IF_ERROR(reporter.Add(row));            // returns at once (unless the buffer is
//   full) SF_RETURN_IF_ERROR(reporter.Flush(deadline));     // every row added so far is
//   acknowledged
//
// Contract:
// - One background thread, owned by the reporter, makes every `send` call, one at a time. Each
//   call carries everything pending when it starts (at most max_rows_per_call rows, oldest
//   first); rows added while a call is in flight wait for the next one, which then carries them
//   all. Rows are sent in the order Add accepted them, each in exactly one acknowledged call
//   (a call that fails is sent again, never split or reordered).
// - Backpressure: Add returns at once while fewer than max_pending_rows rows wait to be taken by
//   the sender; at that many it blocks until the sender takes the next call's rows. So memory is
//   bounded (max_pending_rows + max_rows_per_call rows) and a producer faster than the master is
//   slowed to the master's pace instead of dropping rows.
// - Retries: a call that fails with kUnavailable, kResourceExhausted, kInternal or kCancelled
//   (the transport's and an overloaded master's errors; the gRPC sender maps DEADLINE_EXCEEDED
//   and ABORTED to kUnavailable) is sent again after 50 ms, doubling to 2 s, for up to
//   retry_window; before each retry it is topped up with rows added meanwhile (still in order).
//   The master stores a row once per (trial, kind, batches), so a resent row is never doubled.
// - Errors: any other error, or a retryable one that outlasts retry_window, is permanent: that
//   call's rows are dropped (stats().dropped_rows) and the error is kept. From then on Add
//   returns it without taking the row, and Flush returns it. Rows accepted before still go out.
// - Add and Flush are safe to call from any number of threads at once; stats() too.
// - The destructor waits up to close_timeout for every row to be acknowledged (it cannot return
//   an error: it logs the rows it could not deliver), then stops the sender, waiting for a call
//   in flight to return. Call Flush first to learn whether everything arrived. Not copyable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "steadfast/v1/common.pb.h"

namespace sf::core {

struct MetricReporterOptions {
  size_t max_pending_rows = 10000;  // Add blocks while this many rows wait for the sender (>= 1)
  size_t max_rows_per_call = 1000;  // the most rows one send carries (>= 1)
  std::chrono::milliseconds first_retry_delay{50};
  std::chrono::milliseconds max_retry_delay{2000};
  std::chrono::milliseconds retry_window{std::chrono::minutes(5)};    // from a call's first failure
  std::chrono::milliseconds close_timeout{std::chrono::seconds(30)};  // the destructor's wait
};

// Counters since construction (for tests and benchmarks).
struct MetricReporterStats {
  int64_t calls = 0;              // acknowledged send calls
  int64_t rows = 0;               // rows in them
  int64_t largest_call_rows = 0;  // the most rows one acknowledged call carried
  int64_t retries = 0;            // failed calls that were sent again
  int64_t failed_calls = 0;       // calls given up on (permanent error or retry_window spent)
  int64_t dropped_rows = 0;       // the rows of those calls
};

class MetricReporter {
 public:
  using MetricReport = steadfast::v1::MetricReport;
  // One ReportMetrics call carrying `rows`: OK once the master has stored them. Called only from
  // the sender thread, never with an empty vector.
  using Send = std::function<Status(const std::vector<MetricReport>& rows)>;

  explicit MetricReporter(Send send, MetricReporterOptions options = {});
  ~MetricReporter();
  MetricReporter(const MetricReporter&) = delete;
  MetricReporter& operator=(const MetricReporter&) = delete;

  // Queues `row` for the sender; blocks while max_pending_rows rows are queued (backpressure).
  // The permanent error, if one has happened (the row is then not taken).
  Status Add(MetricReport row);

  // Waits until every row added before this call has been acknowledged. The permanent error if
  // there is one (also one that dropped an earlier row); kUnavailable naming how many rows are
  // still unacknowledged if `deadline` passes first.
  Status Flush(std::chrono::steady_clock::time_point deadline);

  MetricReporterStats stats() const;

  // Whether a failed call with this code is sent again (see the contract above).
  static bool IsRetryable(StatusCode code);

 private:
  void Run();
  // Moves pending rows into `batch` until it holds max_rows_per_call; wakes blocked Adds.
  void TakeLocked(std::vector<MetricReport>& batch);
  // The rows of `batch` are done with (acknowledged or dropped): wakes Flush and the destructor.
  void ResolveLocked(std::vector<MetricReport>& batch);
  std::string WindowText() const;  // retry_window, for messages

  const Send send_;
  const MetricReporterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the sender: rows pending, or stop
  std::condition_variable room_cv_;  // Add: room in the buffer, or an error
  std::condition_variable done_cv_;  // Flush, destructor: rows resolved, or an error
  std::deque<MetricReport> pending_;
  int64_t added_ = 0;     // rows Add accepted
  int64_t resolved_ = 0;  // of those, rows acknowledged or dropped (always the oldest ones)
  Status error_;          // the permanent error, once there is one
  bool stopping_ = false;
  MetricReporterStats stats_;

  std::thread sender_;  // last: starts once everything above is ready
};

}  // namespace sf::core
