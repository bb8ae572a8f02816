#include "core_api/metric_reporter.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "common/log.h"

namespace sf::core {

namespace {
MetricReporterOptions AtLeastOneRow(MetricReporterOptions options) {
  options.max_pending_rows = std::max<size_t>(1, options.max_pending_rows);
  options.max_rows_per_call = std::max<size_t>(1, options.max_rows_per_call);
  return options;
}
}  // namespace

MetricReporter::MetricReporter(Send send, MetricReporterOptions options)
    : send_(std::move(send)), options_(AtLeastOneRow(options)), sender_([this] { Run(); }) {}

MetricReporter::~MetricReporter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait_for(lock, options_.close_timeout, [&] { return resolved_ >= added_; });
    stopping_ = true;
  }
  work_cv_.notify_all();
  sender_.join();
  // Only this thread is left.
  if (const int64_t left = added_ - resolved_; left > 0 || stats_.dropped_rows > 0) {
    log::Warn("metric_reporter", {{"event", "closed_with_undelivered_rows"},
                                  {"unsent", std::to_string(left)},
                                  {"dropped", std::to_string(stats_.dropped_rows)},
                                  {"error", error_.ToString()}});
  }
}

bool MetricReporter::IsRetryable(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kResourceExhausted ||
         code == StatusCode::kInternal || code == StatusCode::kCancelled;
}

Status MetricReporter::Add(MetricReport row) {
  std::unique_lock<std::mutex> lock(mu_);
  room_cv_.wait(lock, [&] { return pending_.size() < options_.max_pending_rows || !error_.ok(); });
  if (!error_.ok()) return error_;
  pending_.push_back(std::move(row));
  ++added_;
  work_cv_.notify_one();
  return Status::Ok();
}

Status MetricReporter::Flush(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t target = added_;
  done_cv_.wait_until(lock, deadline, [&] { return resolved_ >= target || !error_.ok(); });
  if (!error_.ok()) return error_;
  if (resolved_ < target) {
    return Unavailable("ReportMetrics: " + std::to_string(target - resolved_) +
                       " metric rows not acknowledged by the deadline");
  }
  return Status::Ok();
}

MetricReporterStats MetricReporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void MetricReporter::TakeLocked(std::vector<MetricReport>& batch) {
  const size_t n = std::min(pending_.size(), options_.max_rows_per_call - batch.size());
  if (n == 0) return;
  std::move(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n),
            std::back_inserter(batch));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  room_cv_.notify_all();
}

void MetricReporter::ResolveLocked(std::vector<MetricReport>& batch) {
  resolved_ += static_cast<int64_t>(batch.size());
  batch.clear();
  done_cv_.notify_all();
}

std::string MetricReporter::WindowText() const {
  const int64_t ms = options_.retry_window.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

void MetricReporter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<MetricReport> batch;
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;  // the destructor waited for delivery as long as it would
    TakeLocked(batch);
    std::optional<std::chrono::steady_clock::time_point> first_failure;
    auto delay = options_.first_retry_delay;
    while (!batch.empty()) {
      lock.unlock();
      Status st = send_(batch);
      lock.lock();
      if (st.ok()) {
        ++stats_.calls;
        stats_.rows += static_cast<int64_t>(batch.size());
        stats_.largest_call_rows =
            std::max(stats_.largest_call_rows, static_cast<int64_t>(batch.size()));
        ResolveLocked(batch);
        break;
      }
      const auto now = std::chrono::steady_clock::now();
      if (!first_failure) first_failure = now;
      if (!IsRetryable(st.code()) || now - *first_failure >= options_.retry_window) {
        ++stats_.failed_calls;
        stats_.dropped_rows += static_cast<int64_t>(batch.size());
        log::Warn("metric_reporter", {{"event", "rows_dropped"},
                                      {"rows", std::to_string(batch.size())},
                                      {"error", st.ToString()}});
        if (error_.ok()) {
          error_ = IsRetryable(st.code())
                       ? st.WithContext("gave up after retrying for " + WindowText())
                       : st;
          room_cv_.notify_all();
        }
        ResolveLocked(batch);
        break;
      }
      ++stats_.retries;
      if (*first_failure == now) {  // one line per call that has to wait, not one per attempt
        log::Warn(
            "metric_reporter",
            {{"event", "retry"}, {"rows", std::to_string(batch.size())}, {"error", st.ToString()}});
      }
      if (work_cv_.wait_for(lock, delay, [&] { return stopping_; })) return;
      delay = std::min(delay * 2, options_.max_retry_delay);
      TakeLocked(batch);  // rows added meanwhile join the retry, after the older ones
    }
  }
}

}  // namespace sf::core
