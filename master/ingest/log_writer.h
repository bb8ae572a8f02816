// Task log ingestion: AgentLink log batches from every agent, written by one thread with group
// commit (master/ingest/group_commit.h): everything queued goes into one multi-row INSERT in one
// transaction, lines in the order they were submitted.
//
// Thread-safe. Write returns after the transaction carrying its lines has committed (OK) or
// failed (every batch of that group gets the error, and none of its lines is stored). Log lines
// have no natural key, so a retried batch is stored twice: callers that retry need their own
// de-duplication. At most `max_queued_lines` lines wait; beyond that Write blocks.
#pragma once

#include <vector>

#include "master/db/database.h"
#include "master/ingest/group_commit.h"
#include "steadfast/v1/common.pb.h"

namespace sf::master {

class LogWriter {
 public:
  // `db` must outlive the writer.
  explicit LogWriter(Database* db, size_t max_queued_lines = 100000);
  ~LogWriter();  // writes what is queued, then stops
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  Status Write(std::vector<steadfast::v1::LogLine> lines);
  GroupCommitStats stats() const { return queue_.stats(); }

 private:
  Status Flush(std::vector<std::vector<steadfast::v1::LogLine>>& batches);

  Database* db_;
  GroupCommitQueue<std::vector<steadfast::v1::LogLine>> queue_;
};

}  // namespace sf::master
