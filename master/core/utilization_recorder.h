// The master's record of cluster utilisation over time: a background thread that, every
// `sample_interval`, takes a snapshot of the agents' slots, counts per resource pool the slots
// there are and the slots a trial holds, and folds the counts into that minute's row of
// cluster_utilization (UtilizationStore::Record). Every `prune_interval` it deletes the rows
// older than `retention`. GET /api/v1/cluster/utilization and the dashboard's "Busy slots"
// chart read those rows, so the history survives page reloads and master restarts.
//
// What is counted (the same as the dashboard's own summary): slots that are enabled, on agents
// that are connected. A pool whose agents are all disconnected records 0 of 0, so the chart drops
// to zero instead of leaving a gap. Busy means a trial's allocation holds the slot.
//
// Locking: the snapshot function is called without any lock of ours and is expected to copy
// what it needs under its own (Cluster::Agents takes the coordinator's lock only while it
// copies); the database is written after it returns, so the coordinator's lock is never held
// across database I/O.
//
// A failed write is logged (once when writes start failing, once when they recover) and the
// next sample is tried as usual; the master never stops for it.
//
// Thread-safety: Start and Stop are for the one owner (main); SampleOnce and PruneOnce may be
// called from any thread, also while the background thread runs (each is one transaction).
// Stop joins the thread and is idempotent; the destructor calls it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "master/db/utilization_store.h"
#include "steadfast/v1/common.pb.h"

namespace sf::master {

struct UtilizationRecorderOptions {
  std::chrono::seconds sample_interval{10};
  std::chrono::hours retention{168};
  std::chrono::seconds prune_interval{600};
};

// Per pool (by name, sorted): enabled slots of connected agents and how many of them are busy
// (trial_id != 0). Agents with an empty pool name count as "default".
std::vector<PoolSample> PoolSamplesOf(const std::vector<steadfast::v1::Agent>& agents);

class UtilizationRecorder {
 public:
  using Snapshot = std::function<std::vector<steadfast::v1::Agent>()>;

  // `store` must outlive the recorder; `snapshot` is called from the recorder's thread.
  UtilizationRecorder(UtilizationStore* store, Snapshot snapshot,
                      UtilizationRecorderOptions options);
  ~UtilizationRecorder();
  UtilizationRecorder(const UtilizationRecorder&) = delete;
  UtilizationRecorder& operator=(const UtilizationRecorder&) = delete;

  // Starts the thread: it prunes, samples at once, then samples every sample_interval (on a
  // fixed grid, so slow writes do not make it drift) and prunes every prune_interval.
  void Start();
  // Wakes and joins the thread; a write in progress finishes first.
  void Stop();

  // One sample taken now and recorded as of `now_unix_seconds`.
  Status SampleOnce(int64_t now_unix_seconds);
  // Deletes rows older than `now_unix_seconds - retention`; returns how many.
  Result<int64_t> PruneOnce(int64_t now_unix_seconds);

 private:
  void Loop();
  void Report(const char* what, const Status& st);

  UtilizationStore* store_;
  Snapshot snapshot_;
  UtilizationRecorderOptions options_;
  std::mutex mu_;  // guards stopping_ and failing_
  std::condition_variable wake_;
  bool stopping_ = false;
  bool failing_ = false;  // the last write failed (log transitions only)
  std::thread thread_;
};

}  // namespace sf::master
