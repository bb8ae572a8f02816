#include "master/ingest/log_writer.h"

#include "common/value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

LogWriter::LogWriter(Database* db, size_t max_queued_lines)
    : db_(db),
      queue_([this](std::vector<std::vector<v1::LogLine>>& batches) { return Flush(batches); },
             [](const std::vector<v1::LogLine>& lines) { return lines.size(); },
             GroupCommitOptions{max_queued_lines, 20000}) {}

LogWriter::~LogWriter() { queue_.Stop(); }

Status LogWriter::Write(std::vector<v1::LogLine> lines) {
  if (lines.empty()) return Status::Ok();
  return queue_.Submit(std::move(lines));
}

Status LogWriter::Flush(std::vector<std::vector<v1::LogLine>>& batches) {
  // One statement for the group; ids follow the order lines were submitted (ordinality).
  Value::List rows;
  for (const auto& lines : batches) {
    for (const v1::LogLine& l : lines) {
      rows.push_back(Value(Value::Map{{"trial_id", l.trial_id()},
                                      {"rank", static_cast<int64_t>(l.rank())},
                                      {"stream", l.stream()},
                                      {"message", l.message()},
                                      {"agent_id", l.agent_id()}}));
    }
  }
  const std::string json = Value(std::move(rows)).ToJson();
  return db_->Transact("ingest logs", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO task_logs (trial_id, rank, stream, message, agent_id) "
        "SELECT (e->>'trial_id')::bigint, (e->>'rank')::int, e->>'stream', e->>'message', "
        "e->>'agent_id' "
        "FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(e, n) ORDER BY n",
        json);
    return Status::Ok();
  });
}

}  // namespace sf::master
