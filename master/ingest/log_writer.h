// Task log ingestion: AgentLink log batches from every agent, written by one thread with group
// commit (master/ingest/group_commit.h): everything queued goes into one multi-row INSERT in one
// transaction, lines in the order they were submitted.
//
// Thread-safe. Write returns after the transaction carrying its lines has committed (OK) or
// failed (every batch of that group gets the error, and none of its lines is stored). Log lines
// have no natural key, so a retried batch is stored twice unless it carries its AgentLink
// delivery stamp: a stamped batch advances the agent's delivery record in the same transaction
// (DeliveryLedger::ClaimInTransaction) and is left out when the record shows it was stored
// before, so a re-sent batch is stored exactly once. At most `max_queued_lines` lines wait; beyond that Write blocks.
#pragma once

#include <optional>
#include <vector>

#include "master/agentlink/delivery_ledger.h"
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

  // `delivery`, when set, names the AgentLink event that carried the lines (see above).
  Status Write(std::vector<steadfast::v1::LogLine> lines,
               std::optional<DeliveryStamp> delivery = std::nullopt);
  GroupCommitStats stats() const { return queue_.stats(); }

 private:
  struct Batch {
    std::vector<steadfast::v1::LogLine> lines;
    std::optional<DeliveryStamp> delivery;
  };
  Status Flush(std::vector<Batch>& batches);

  Database* db_;
  GroupCommitQueue<Batch> queue_;
};

}  // namespace sf::master
