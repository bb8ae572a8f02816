#include "master/core/utilization_recorder.h"

#include <algorithm>
#include <map>

#include "common/log.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

namespace {
int64_t NowUnixSeconds() { return static_cast<int64_t>(NowSeconds()); }
}  // namespace

std::vector<PoolSample> PoolSamplesOf(const std::vector<v1::Agent>& agents) {
  std::map<std::string, PoolSample> by_pool;
  for (const v1::Agent& a : agents) {
    const std::string pool = a.resource_pool().empty() ? "default" : a.resource_pool();
    PoolSample& s = by_pool[pool];
    s.pool = pool;
    if (!a.connected()) continue;
    for (const v1::Slot& slot : a.slots()) {
      if (!slot.enabled()) continue;
      s.slots_total++;
      if (slot.trial_id() != 0) s.slots_busy++;
    }
  }
  std::vector<PoolSample> out;
  out.reserve(by_pool.size());
  for (auto& [name, s] : by_pool) out.push_back(std::move(s));
  return out;
}

UtilizationRecorder::UtilizationRecorder(UtilizationStore* store, Snapshot snapshot,
                                         UtilizationRecorderOptions options)
    : store_(store), snapshot_(std::move(snapshot)), options_(options) {}

UtilizationRecorder::~UtilizationRecorder() { Stop(); }

void UtilizationRecorder::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void UtilizationRecorder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status UtilizationRecorder::SampleOnce(int64_t now_unix_seconds) {
  // The snapshot copies under the coordinator's lock and returns; the write happens after.
  std::vector<PoolSample> samples = PoolSamplesOf(snapshot_());
  return store_->Record(now_unix_seconds, samples);
}

Result<int64_t> UtilizationRecorder::PruneOnce(int64_t now_unix_seconds) {
  const int64_t retention =
      std::chrono::duration_cast<std::chrono::seconds>(options_.retention).count();
  return store_->DeleteBefore(now_unix_seconds - retention);
}

void UtilizationRecorder::Report(const char* what, const Status& st) {
  bool was_failing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_failing = failing_;
    failing_ = !st.ok();
  }
  if (!st.ok() && !was_failing) {
    log::Warn("utilization", {{"event", "write_failed"}, {"op", what}, {"error", st.message()}});
  } else if (st.ok() && was_failing) {
    log::Info("utilization", {{"event", "write_recovered"}, {"op", what}});
  }
}

void UtilizationRecorder::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::max(options_.sample_interval, std::chrono::seconds(1));
  const auto prune_every = std::max(options_.prune_interval, std::chrono::seconds(1));
  log::Info("utilization", {{"event", "recording"},
                            {"sample_seconds", std::to_string(interval.count())},
                            {"retention_hours", std::to_string(options_.retention.count())}});
  auto next_sample = Clock::now();
  auto next_prune = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const auto now = Clock::now();
    if (now >= next_prune) {
      lock.unlock();
      auto pruned = PruneOnce(NowUnixSeconds());
      Report("prune", pruned.status());
      if (pruned.ok() && *pruned > 0) {
        log::Info("utilization", {{"event", "pruned"}, {"rows", std::to_string(*pruned)}});
      }
      lock.lock();
      next_prune = now + prune_every;
      continue;
    }
    if (now >= next_sample) {
      lock.unlock();
      Report("sample", SampleOnce(NowUnixSeconds()));
      lock.lock();
      // The next point of the grid after now: a slow write skips ticks instead of bunching them.
      while (next_sample <= Clock::now()) next_sample += interval;
      continue;
    }
    wake_.wait_until(lock, std::min(next_sample, next_prune), [&] { return stopping_; });
  }
}

}  // namespace sf::master
