#include "master/ingest/log_writer.h"

#include "common/value.h"
#include "master/allocation/task_ids.h"

namespace sf::master {
namespace v1 = steadfast::v1;

LogWriter::LogWriter(Database* db, size_t max_queued_lines)
    : db_(db),
      queue_([this](std::vector<Batch>& batches) { return Flush(batches); },
             [](const Batch& batch) { return batch.lines.size(); },
             GroupCommitOptions{max_queued_lines, 20000}) {}

LogWriter::~LogWriter() { queue_.Stop(); }

Status LogWriter::Write(std::vector<v1::LogLine> lines, std::optional<DeliveryStamp> delivery) {
  if (lines.empty() && !delivery) return Status::Ok();
  return queue_.Submit(Batch{std::move(lines), std::move(delivery)});
}

Status LogWriter::Flush(std::vector<Batch>& batches) {
  return db_->Transact("ingest logs", [&](pqxx::work& tx) {
    // One statement for the group; ids follow the order lines were submitted (ordinality).
    // A stamped batch whose delivery record shows it stored before is left out.
    Value::List rows;
    for (const Batch& batch : batches) {
      if (batch.delivery && !DeliveryLedger::ClaimInTransaction(tx, *batch.delivery)) continue;
      for (const v1::LogLine& l : batch.lines) {
        // A trial's rank, or a rank of a task that is not a trial's (a server): its task id names
        // it. A line that names neither has no owner to be stored with.
        const int64_t task = l.trial_id() == 0 ? AllocationTaskRowId(l.task_id()) : 0;
        if (l.trial_id() == 0 && task == 0) continue;
        rows.push_back(Value(Value::Map{{"trial_id", l.trial_id()},
                                        {"task_id", task},
                                        {"rank", static_cast<int64_t>(l.rank())},
                                        {"stream", l.stream()},
                                        {"message", l.message()},
                                        {"agent_id", l.agent_id()}}));
      }
    }
    if (rows.empty()) return Status::Ok();
    const std::string json = Value(std::move(rows)).ToJson();
    tx.exec_params(
        "INSERT INTO task_logs (trial_id, task_id, rank, stream, message, agent_id) "
        "SELECT NULLIF((e->>'trial_id')::bigint, 0), NULLIF((e->>'task_id')::bigint, 0), (e->>'rank')::int, "
        "e->>'stream', e->>'message', "
        "e->>'agent_id' "
        "FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(e, n) ORDER BY n",
        json);
    return Status::Ok();
  });
}

}  // namespace sf::master
