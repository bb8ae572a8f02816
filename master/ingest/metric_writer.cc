#include "master/ingest/metric_writer.h"

#include <algorithm>
#include <map>

#include "common/value.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

MetricWriter::MetricWriter(Database* db, MetricWriterOptions options)
    : db_(db),
      queue_([this](std::vector<MetricBatch>& batches) { return Flush(batches); },
             [](const MetricBatch& b) { return b.rows.size(); },
             GroupCommitOptions{options.max_queued_rows, options.max_rows_per_transaction}) {}

MetricWriter::~MetricWriter() { queue_.Stop(); }

Status MetricWriter::Write(MetricBatch batch) { return queue_.Submit(std::move(batch)); }

void MetricWriter::WriteAsync(MetricBatch batch, std::function<void(Status)> done) {
  queue_.SubmitAsync(std::move(batch), std::move(done));
}

Status MetricWriter::Flush(std::vector<MetricBatch>& batches) {
  // The rows of every batch travel as one JSON array parameter (one statement, however many
  // rows); the trials' totals as another, highest per trial, in id order.
  Value::List rows;
  std::map<int64_t, int64_t> totals;
  for (const MetricBatch& b : batches) {
    for (const v1::MetricReport& m : b.rows) {
      rows.push_back(Value(Value::Map{{"trial_id", m.trial_id()},
                                      {"kind", m.kind()},
                                      {"batches", m.batches()},
                                      {"restart", static_cast<int64_t>(m.restart())},
                                      {"vals", StructToValue(m.values())}}));
    }
    auto [it, inserted] = totals.emplace(b.trial_id, b.total_batches);
    if (!inserted) {
      it->second = std::max(it->second, b.total_batches);
    }
  }
  Value::List trials;
  std::string ids = "{";  // the same trials as a bigint[] literal (the index's bound below)
  for (const auto& [id, total] : totals) {
    trials.push_back(Value(Value::Map{{"id", id}, {"total_batches", total}}));
    ids += (ids.size() > 1 ? "," : "") + std::to_string(id);
  }
  ids += "}";
  const bool has_rows = !rows.empty();
  const std::string rows_json = Value(std::move(rows)).ToJson();
  const std::string trials_json = Value(std::move(trials)).ToJson();
  return db_->Transact("ingest metrics", [&](pqxx::work& tx) {
    if (has_rows) {
      tx.exec_params(
          "INSERT INTO metrics (trial_id, kind, batches, restart, vals) "
          "SELECT x.trial_id, x.kind, x.batches, x.restart, x.vals FROM "
          "jsonb_to_recordset($1::jsonb) "
          "AS x(trial_id BIGINT, kind TEXT, batches BIGINT, restart INT, vals JSONB) "
          "ON CONFLICT (trial_id, kind, batches) DO NOTHING",
          rows_json);
    }
    // Rows that would not grow are left alone (no dead tuple for a retry). The id list lets the
    // planner read the few trials by their key: joined with the record set alone it scanned the
    // whole table (1.3 ms a batch with 10,000 trials).
    tx.exec_params(
        "UPDATE trials AS t SET total_batches = v.total_batches "
        "FROM jsonb_to_recordset($1::jsonb) AS v(id BIGINT, total_batches BIGINT) "
        "WHERE t.id = ANY($2::bigint[]) AND t.id = v.id AND v.total_batches > t.total_batches",
        trials_json, ids);
    return Status::Ok();
  });
}

}  // namespace sf::master
