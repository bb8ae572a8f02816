// The master's metric ingestion: TrialLink metric reports from many trainers, written by one
// thread with group commit (master/ingest/group_commit.h).
//
// Contract:
// - Thread-safe: any number of threads (gRPC handlers) call Write concurrently. It does no
//   locking of the coordinator; callers must not hold the coordinator's lock while they wait.
// - Durable on return: Write returns OK only after the transaction carrying its rows (and the
//   trial's total_batches) has committed, so the rows are visible to every other connection.
// - One transaction per group: everything queued when the writer becomes free goes into one
//   multi-row INSERT ... ON CONFLICT (trial_id, kind, batches) DO NOTHING, plus one UPDATE of
//   every touched trial's total_batches to GREATEST(stored, reported).
// - Idempotent: a row whose (trial_id, kind, batches) is already stored is skipped, and
//   total_batches never goes down, so a retried or repeated Write is harmless.
// - Errors: a non-OK status (kUnavailable when PostgreSQL is unreachable or the writer is
//   stopping, kInternal for a failed statement) means none of the call's rows may be assumed
//   written. Unreachable: every caller of the group gets the error. A refused statement: each
//   report of the group is retried alone, so only the report PostgreSQL refuses fails (e.g. a
//   string value with a NUL character). The trainer retries.
// - Bounded: at most `max_queued_rows` rows wait; beyond that Write blocks until there is room.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "master/db/database.h"
#include "master/ingest/group_commit.h"
#include "steadfast/v1/common.pb.h"

namespace sf::master {

// One trainer's report: its rows (trial_id, restart and kind already set and checked) and the
// trial's total batches after them.
struct MetricBatch {
  int64_t trial_id = 0;
  int64_t total_batches = 0;
  std::vector<steadfast::v1::MetricReport> rows;
};

struct MetricWriterOptions {
  size_t max_queued_rows = 100000;
  size_t max_rows_per_transaction = 20000;
};

class MetricWriter {
 public:
  // `db` must outlive the writer.
  explicit MetricWriter(Database* db, MetricWriterOptions options = {});
  ~MetricWriter();  // writes what is queued, then stops
  MetricWriter(const MetricWriter&) = delete;
  MetricWriter& operator=(const MetricWriter&) = delete;

  // Blocks until the batch is committed (OK) or its group failed (the error).
  Status Write(MetricBatch batch);
  // The same without a waiting thread: returns once queued (after waiting for room when the
  // queue is full); `done` gets the status on the writer thread. It must not block for long:
  // the next group waits for it.
  void WriteAsync(MetricBatch batch, std::function<void(Status)> done);
  GroupCommitStats stats() const { return queue_.stats(); }

 private:
  Status Flush(std::vector<MetricBatch>& batches);

  Database* db_;
  GroupCommitQueue<MetricBatch> queue_;
};

}  // namespace sf::master
