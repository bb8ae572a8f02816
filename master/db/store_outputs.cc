// Store: what trials produce — metrics, checkpoints, logs (the rest is in store.cc).
#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "master/db/jsonb.h"
#include "master/db/store.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

namespace {

v1::Checkpoint CheckpointFromRow(const pqxx::row& r) {
  v1::Checkpoint c;
  c.set_uuid(r[0].as<std::string>());
  c.set_trial_id(r[1].as<int64_t>());
  c.set_batches(r[2].as<int64_t>());
  c.set_path(r[3].as<std::string>());
  c.set_size(r[4].as<int64_t>());
  Value files = JsonbToValue(r[5]);
  if (files.is_list()) {
    for (const Value& f : files.as_list()) {
      auto* out = c.add_files();
      if (const Value* p = f.Find("path"); p && p->is_string()) out->set_path(p->as_string());
      if (const Value* s = f.Find("size"); s && s->is_number()) out->set_size(static_cast<int64_t>(s->as_double()));
      if (const Value* h = f.Find("sha256"); h && h->is_string()) out->set_sha256(h->as_string());
    }
  }
  *c.mutable_metadata() = ValueToStruct(JsonbToValue(r[6]));
  if (!r[7].is_null()) c.set_validation_metric(r[7].as<double>());
  c.set_state(r[8].as<std::string>());
  *c.mutable_time() = SecondsToTimestamp(r[9].as<double>());
  c.set_experiment_id(r[10].as<int64_t>());
  return c;
}

const char* kCheckpointColumns =
    "c.uuid, c.trial_id, c.batches, c.path, c.size, c.files, c.metadata, c.validation_metric, "
    "c.state, EXTRACT(EPOCH FROM c.reported_at), t.experiment_id";

std::string StructJson(const google::protobuf::Struct& s) { return StructToValue(s).ToJson(); }

}  // namespace

Result<std::vector<v1::MetricReport>> Store::GetMetrics(int64_t trial_id, const std::string& kind,
                                                        int64_t start, int64_t end, int max_points) {
  std::vector<v1::MetricReport> out;
  Status st = db_->Transact("get metrics", [&](pqxx::work& tx) {
    // Downsampling keeps every k-th row (and always the last) so curves keep their shape.
    int64_t count = tx.exec_params1(
                          "SELECT count(*) FROM metrics WHERE trial_id = $1 AND kind = $2 "
                          "AND batches >= $3 AND ($4::bigint = 0 OR batches < $4::bigint)",
                          trial_id, kind, start, end)[0]
                        .as<int64_t>();
    int64_t stride = (max_points > 0 && count > max_points) ? (count + max_points - 1) / max_points : 1;
    pqxx::result r = tx.exec_params(
        "SELECT trial_id, batches, kind, vals, EXTRACT(EPOCH FROM reported_at), restart FROM ("
        "  SELECT *, row_number() OVER (ORDER BY batches) - 1 AS rn FROM metrics "
        "  WHERE trial_id = $1 AND kind = $2 AND batches >= $3 AND ($4::bigint = 0 OR batches < $4::bigint)) m "
        "WHERE rn % $5 = 0 OR rn = $6 - 1 ORDER BY batches",
        trial_id, kind, start, end, stride, count);
    for (const auto& row : r) {
      v1::MetricReport m;
      m.set_trial_id(row[0].as<int64_t>());
      m.set_batches(row[1].as<int64_t>());
      m.set_kind(row[2].as<std::string>());
      *m.mutable_values() = ValueToStruct(JsonbToValue(row[3]));
      *m.mutable_time() = SecondsToTimestamp(row[4].as<double>());
      m.set_restart(row[5].as<int>());
      out.push_back(std::move(m));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<int64_t> Store::CountMetrics(int64_t trial_id, const std::string& kind) {
  int64_t n = 0;
  Status st = db_->Transact("count metrics", [&](pqxx::work& tx) {
    n = tx.exec_params1("SELECT count(*) FROM metrics WHERE trial_id = $1 AND kind = $2", trial_id, kind)[0].as<int64_t>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return n;
}

Result<std::vector<std::string>> Store::MetricGroups(int64_t trial_id) {
  std::vector<std::string> out;
  Status st = db_->Transact("metric groups", [&](pqxx::work& tx) {
    // A skip scan over metrics_range_idx (trial_id, kind, batches): one probe per kind, however
    // many rows each has.
    pqxx::result r = tx.exec_params(
        "WITH RECURSIVE k(kind) AS ("
        " (SELECT kind FROM metrics WHERE trial_id = $1 ORDER BY kind LIMIT 1)"
        " UNION ALL"
        " SELECT (SELECT m.kind FROM metrics m WHERE m.trial_id = $1 AND m.kind > k.kind ORDER BY m.kind LIMIT 1)"
        " FROM k WHERE k.kind IS NOT NULL)"
        " SELECT kind FROM k WHERE kind IS NOT NULL",
        trial_id);
    for (const auto& row : r) out.push_back(row[0].as<std::string>());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status Store::InsertCheckpoint(const v1::Checkpoint& c) {
  Value::List files;
  for (const auto& f : c.files()) {
    files.push_back(Value(Value::Map{{"path", f.path()}, {"size", f.size()}, {"sha256", f.sha256()}}));
  }
  std::optional<double> metric;
  if (c.has_validation_metric()) metric = c.validation_metric();
  return db_->Transact("insert checkpoint", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO checkpoints (uuid, trial_id, batches, path, size, files, metadata, validation_metric) "
        "VALUES ($1,$2,$3,$4,$5,$6::jsonb,$7::jsonb,$8) ON CONFLICT (uuid) DO NOTHING",
        c.uuid(), c.trial_id(), c.batches(), c.path(), c.size(), Value(files).ToJson(),
        StructJson(c.metadata()), metric);
    // The latest checkpoint is the one with the most batches.
    tx.exec_params(
        "UPDATE trials SET latest_checkpoint_uuid = $2 WHERE id = $1 AND COALESCE("
        "(SELECT c.batches FROM checkpoints c WHERE c.uuid = trials.latest_checkpoint_uuid), -1) <= $3",
        c.trial_id(), c.uuid(), c.batches());
    return Status::Ok();
  });
}

Result<int> Store::SetCheckpointMetric(int64_t trial_id, int64_t batches, double metric) {
  int changed = 0;
  Status st = db_->Transact("set checkpoint metric", [&](pqxx::work& tx) {
    changed = static_cast<int>(
        tx.exec_params("UPDATE checkpoints SET validation_metric = $3 WHERE trial_id = $1 AND batches = $2 "
                       "AND validation_metric IS NULL AND state = 'ACTIVE'",
                       trial_id, batches, metric)
            .affected_rows());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return changed;
}

Result<std::vector<v1::Checkpoint>> Store::ListCheckpoints(int64_t experiment_id) {
  std::vector<v1::Checkpoint> out;
  Status st = db_->Transact("list checkpoints", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kCheckpointColumns +
                                        " FROM checkpoints c JOIN trials t ON t.id = c.trial_id "
                                        "WHERE t.experiment_id = $1 ORDER BY c.trial_id, c.batches",
                                    experiment_id);
    for (const auto& row : r) out.push_back(CheckpointFromRow(row));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::optional<v1::Checkpoint>> Store::GetCheckpoint(const std::string& uuid) {
  std::optional<v1::Checkpoint> out;
  Status st = db_->Transact("get checkpoint", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kCheckpointColumns +
                                        " FROM checkpoints c JOIN trials t ON t.id = c.trial_id WHERE c.uuid = $1",
                                    uuid);
    if (!r.empty()) out = CheckpointFromRow(r[0]);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<Store::CheckpointPlace>> Store::RestoreFallbacks(int64_t trial_id, const std::string& except,
                                                                   int limit) {
  std::vector<CheckpointPlace> out;
  Status st = db_->Transact("restore fallbacks", [&](pqxx::work& tx) {
    out.clear();
    for (const auto& row : tx.exec_params("SELECT uuid, path FROM checkpoints WHERE trial_id = $1 AND state = 'ACTIVE' "
                                          "AND uuid <> $2 ORDER BY batches DESC, uuid LIMIT $3",
                                          trial_id, except, limit)) {
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>()});
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<Store::CheckpointPlace> Store::MarkCheckpointCorrupted(int64_t trial_id, const std::string& uuid,
                                                              const std::string& log_line) {
  CheckpointPlace latest;
  Status st = db_->Transact("mark checkpoint corrupted", [&](pqxx::work& tx) -> Status {
    latest = {};
    pqxx::result r = tx.exec_params("SELECT state FROM checkpoints WHERE uuid = $1 FOR UPDATE", uuid);
    if (r.empty()) return NotFound("checkpoint " + uuid + " does not exist");
    if (r[0][0].as<std::string>() == "ACTIVE") {
      tx.exec_params("UPDATE checkpoints SET state = 'CORRUPTED' WHERE uuid = $1", uuid);
      tx.exec_params("INSERT INTO task_logs (trial_id, rank, stream, message) VALUES ($1, 0, 'master', $2)",
                     trial_id, log_line);
    }
    tx.exec_params(
        "UPDATE trials SET latest_checkpoint_uuid = COALESCE((SELECT c.uuid FROM checkpoints c WHERE c.trial_id = $1 "
        "AND c.state = 'ACTIVE' ORDER BY c.batches DESC, c.uuid LIMIT 1), '') "
        "WHERE id = $1 AND latest_checkpoint_uuid = $2",
        trial_id, uuid);
    pqxx::result now = tx.exec_params(
        "SELECT c.uuid, c.path FROM trials t JOIN checkpoints c ON c.uuid = t.latest_checkpoint_uuid "
        "WHERE t.id = $1 AND c.state = 'ACTIVE'",
        trial_id);
    if (!now.empty()) latest = {now[0][0].as<std::string>(), now[0][1].as<std::string>()};
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return latest;
}

Status Store::InsertLogs(const std::vector<v1::LogLine>& lines) {
  if (lines.empty()) return Status::Ok();
  // One statement per batch (agents send up to 500 lines at a time), order kept by ordinality.
  Value::List rows;
  rows.reserve(lines.size());
  for (const auto& l : lines) {
    rows.push_back(Value(Value::Map{{"trial_id", l.trial_id()},
                                    {"rank", static_cast<int64_t>(l.rank())},
                                    {"stream", l.stream()},
                                    {"message", l.message()},
                                    {"agent_id", l.agent_id()}}));
  }
  return db_->Transact("insert logs", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO task_logs (trial_id, rank, stream, message, agent_id) "
        "SELECT (e->>'trial_id')::bigint, (e->>'rank')::int, e->>'stream', e->>'message', e->>'agent_id' "
        "FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(e, n) ORDER BY n",
        Value(std::move(rows)).ToJson());
    return Status::Ok();
  });
}

Result<std::vector<v1::LogLine>> ReadLogs(Database* db, LogOwner owner, int64_t id, int64_t after_id, int limit,
                                          const std::string& search) {
  std::vector<v1::LogLine> out;
  const std::string column = owner == LogOwner::kTrial ? "trial_id" : "task_id";
  Status st = db->Transact("get logs", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT id, COALESCE(trial_id, 0), rank, stream, message, EXTRACT(EPOCH FROM logged_at), agent_id "
        "FROM task_logs WHERE " + column + " = $1 AND id > $2 AND ($4 = '' OR strpos(message, $4) > 0) "
        "ORDER BY id LIMIT $3",
        id, after_id, limit, search);
    for (const auto& row : r) {
      v1::LogLine l;
      l.set_id(row[0].as<int64_t>());
      l.set_trial_id(row[1].as<int64_t>());
      l.set_rank(row[2].as<int>());
      l.set_stream(row[3].as<std::string>());
      l.set_message(row[4].as<std::string>());
      *l.mutable_time() = SecondsToTimestamp(row[5].as<double>());
      l.set_agent_id(row[6].as<std::string>());
      out.push_back(std::move(l));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<v1::LogLine>> Store::GetLogs(int64_t trial_id, int64_t after_id, int limit,
                                                const std::string& search) {
  return ReadLogs(db_, LogOwner::kTrial, trial_id, after_id, limit, search);
}

}  // namespace sf::master
