// Checkpoint retention: which checkpoints of an experiment to keep (Determined's
// save_trial_latest / save_trial_best / save_experiment_best), and the worker that deletes the
// others' files and marks them DELETED in the `checkpoints` table.
//
// The rule (SelectCheckpointsToDelete), over an experiment's ACTIVE checkpoints:
//   - per trial, keep the `save_trial_latest` with the most batches;
//   - per trial, keep the `save_trial_best` by validation metric (the searcher's metric, lower
//     or higher is better as the searcher says); checkpoints without a metric never count as best;
//   - across the experiment, keep the `save_experiment_best` best by the same metric;
//   - a checkpoint kept by any rule stays, and so does every pinned one: for each trial that is
//     not finished (queued, running, paused, restarting), its newest checkpoint, which its next
//     run restores from; and any checkpoint that an unfinished trial of another experiment was
//     continued from (`sf experiment continue`) and has as its latest, and every checkpoint that
//     is a model version (docs/registry.md). Everything else is deleted.
// Ties go to the checkpoint with more batches, then to the smaller uuid, so the rule is a
// function of its input.
//
// When it runs: Cluster requests a pass (CheckpointRetention::Request) after each reported
// checkpoint and whenever a trial ends. Requests only queue, and a queued pass settles a moment
// (the Cluster's: one second) so a burst of requests makes one pass; a thread of the worker's own does the work, holding no lock of the coordinator:
// one transaction reads the experiment's ACTIVE checkpoints and its unfinished trials' newest
// checkpoints and marks the ones to delete DELETED (persisted before acted upon; a concurrent
// explicit delete or a second pass marks each row once), then the worker removes their
// directories. A checkpoint reported after that read is not in it, so it is never deleted by
// that pass. Only directories inside the experiment's checkpoint directory are removed (a path
// recorded elsewhere is marked but its files are left, and logged).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

struct RetentionPolicy {
  int64_t save_trial_latest = 1;
  int64_t save_trial_best = 1;
  int64_t save_experiment_best = 0;
  bool smaller_is_better = true;
};

struct RetainedCheckpoint {
  std::string uuid;
  int64_t trial_id = 0;
  int64_t batches = 0;
  std::optional<double> metric;  // the searcher metric at the checkpoint, if validated there
};

// The uuids of `checkpoints` that the policy does not keep and that are not `pinned`, sorted.
std::vector<std::string> SelectCheckpointsToDelete(const std::vector<RetainedCheckpoint>& checkpoints,
                                                   const RetentionPolicy& policy,
                                                   const std::set<std::string>& pinned);

// A checkpoint that one pass marked DELETED, for the file removal.
struct DeletedCheckpoint {
  std::string uuid, path;
};

// Marks DELETED, in one transaction, the ACTIVE checkpoints of `experiment_id` that the policy
// drops (pinning each unfinished trial's newest); returns them. Holds no lock but PostgreSQL's.
Result<std::vector<DeletedCheckpoint>> MarkCheckpointsForRetention(Database* db, int64_t experiment_id,
                                                                   const RetentionPolicy& policy);

// Removes the directories of `deleted` that lie inside `experiment_dir`; returns how many were
// removed. Failures and paths outside are logged, not returned.
// `experiment_dir` may be an s3:// URL (checkpoint_storage type s3, whose config `storage` gives
// the endpoint and keys; common/storage/checkpoint_storage.h): then the objects are deleted.
int RemoveCheckpointDirectories(const std::vector<DeletedCheckpoint>& deleted, const std::string& experiment_dir,
                                const std::optional<config::CheckpointStorageConfig>& storage = std::nullopt);

// Explicit deletion of one checkpoint (`sf checkpoint delete`): marks it DELETED and removes its
// directory (inside its experiment's checkpoint directory, as above). OK if it was already
// deleted; kNotFound for an unknown uuid; kFailedPrecondition for a checkpoint an unfinished
// trial would resume from (its newest, or the one another experiment's trial was continued from)
// and for a model version's checkpoint (naming the model and version); kInvalidArgument for an empty uuid or one with a NUL.
Status DeleteCheckpoint(Database* db, const std::string& uuid, const std::string& default_root);

class CheckpointRetention {
 public:
  // `settle`: a queued pass waits this long after its first request before it runs, so the
  // requests of a burst (a trial's last checkpoint and its end; the many trials of a sweep
  // ending together) make one pass. Zero: as soon as the worker is free.
  explicit CheckpointRetention(Database* db, std::chrono::milliseconds settle = std::chrono::milliseconds(0));
  ~CheckpointRetention();  // Stop()
  CheckpointRetention(const CheckpointRetention&) = delete;
  CheckpointRetention& operator=(const CheckpointRetention&) = delete;

  // Starts the worker thread. Requests made before are kept and run then.
  void Start();
  // Finishes the pass in progress, drops the rest, and joins the thread. Idempotent.
  void Stop();

  // Queues a pass over the experiment's checkpoints with `policy`; `experiment_dir` is where its
  // checkpoints live (ExperimentCheckpointDir). Never blocks; a request for an experiment that
  // is already queued replaces the queued one.
  void Request(int64_t experiment_id, const RetentionPolicy& policy, const std::string& experiment_dir,
               const std::optional<config::CheckpointStorageConfig>& storage = std::nullopt);

  // Waits until no pass is queued or running (for tests and orderly shutdown); queued passes
  // run without waiting for their settle time.
  void Drain();

  // Passes run so far (for tests).
  int64_t passes() const;

 private:
  struct Pending {
    RetentionPolicy policy;
    std::string experiment_dir;
    std::optional<config::CheckpointStorageConfig> storage;
    std::chrono::steady_clock::time_point due;  // first request + settle
  };
  void Loop();

  Database* db_;
  const std::chrono::milliseconds settle_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<int64_t> queue_;
  std::map<int64_t, Pending> pending_;  // by experiment, what the queue's entry runs with
  bool running_pass_ = false;
  bool stopping_ = false;
  int drainers_ = 0;  // callers in Drain(): queued passes run without settling
  int64_t passes_ = 0;
  std::thread worker_;
};

}  // namespace sf::master
