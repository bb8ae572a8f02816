// Reads and writes of the cluster utilisation history (table cluster_utilization, migration
// 002): one row per resource pool per minute with the slots the pool had, the mean and the
// largest number of busy slots sampled in that minute, and how many samples there were.
//
// Minutes are whole UTC minutes: a sample taken at 16:01:37 belongs to the row of 16:01:00.
// Times cross this interface as seconds since the Unix epoch.
//
// Every call is one parameterised transaction on a pooled connection (Database::Transact); a
// failed statement comes back as a Status naming the operation. Thread-safe; two writers of the
// same minute are serialised by PostgreSQL's row lock on the upsert, so no sample is lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

// One pool at one instant: how many slots it has and how many of them a trial holds.
struct PoolSample {
  std::string pool;
  int slots_total = 0;
  int slots_busy = 0;
};

// One row of the history.
struct UtilizationPoint {
  std::string pool;
  int64_t minute = 0;   // start of the minute, seconds since the epoch (a multiple of 60)
  int slots_total = 0;  // the most slots seen in the minute
  double busy_avg = 0;  // mean busy slots over the minute's samples
  int busy_max = 0;     // most busy slots in one sample
  int samples = 0;
};

// The start of the minute holding `unix_seconds` (floor, also for times before 1970).
int64_t MinuteStart(int64_t unix_seconds);

class UtilizationStore {
 public:
  // `db` must outlive the store.
  explicit UtilizationStore(Database* db) : db_(db) {}

  // Folds one sample per pool, all taken at `at_unix_seconds`, into the rows of that minute:
  // a new row starts with samples = 1; an existing one gets the running mean
  // (busy_avg * samples + busy) / (samples + 1), the larger busy_max and slots_total, and
  // samples + 1. All pools in one transaction. An empty list writes nothing and is OK.
  Status Record(int64_t at_unix_seconds, const std::vector<PoolSample>& samples);

  // Deletes the rows whose minute starts before `cutoff_unix_seconds`; returns how many.
  Result<int64_t> DeleteBefore(int64_t cutoff_unix_seconds);

  // The rows from the minute holding `since_unix_seconds` on, of `pool` (empty: every pool),
  // ordered by minute, then pool. Unbounded in count: the retention bounds the table.
  Result<std::vector<UtilizationPoint>> Read(int64_t since_unix_seconds, const std::string& pool);

 private:
  Database* db_;
};

}  // namespace sf::master
