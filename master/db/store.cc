// Store: experiments, trials, allocations and agents. What trials produce (metrics,
// checkpoints, logs) is in store_outputs.cc.
#include "master/db/store.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "master/db/jsonb.h"
#include "master/db/pg_array.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

namespace {

// One trial's update, in the caller's transaction (UpdateTrial, SaveSearcherSnapshot).
void WriteTrialUpdate(pqxx::work& tx, int64_t trial_id, const TrialUpdate& u) {
  tx.exec_params(
      "UPDATE trials SET "
      "state = COALESCE($2, state), restarts = COALESCE($3, restarts), "
      "total_batches = COALESCE($4, total_batches), target_length = COALESCE($5, target_length), "
      "latest_validation_metric = COALESCE($6, latest_validation_metric), "
      "best_validation_metric = COALESCE($7, best_validation_metric), "
      "latest_checkpoint_uuid = COALESCE($8, latest_checkpoint_uuid), "
      "stop_requested = COALESCE($9, stop_requested), error = COALESCE($10, error), "
      "end_time = CASE WHEN $11 THEN now() ELSE end_time END, "
      "completed_length = COALESCE($12, completed_length), preempted_by = COALESCE($13, preempted_by), "
      "closing = COALESCE($14, closing) "
      "WHERE id = $1",
      trial_id, u.state, u.restarts, u.total_batches, u.target_length, u.latest_validation_metric,
      u.best_validation_metric, u.latest_checkpoint_uuid, u.stop_requested, u.error, u.set_end_time,
      u.completed_length, u.preempted_by, u.closing);
}

std::string StripPrefix(const std::string& full, const std::string& prefix) {
  return full.rfind(prefix, 0) == 0 ? full.substr(prefix.size()) : full;
}

// Every column of an experiment but its config: what a list row carries. The config YAML (often
// kilobytes) is appended as the last column only where the caller asks for it.
const char* kExperimentSummaryColumns =
    "e.id, e.name, e.description, e.state, e.owner, e.archived, e.searcher, "
    "e.metric, e.smaller_is_better, e.priority, e.best_validation_metric, e.error, "
    "EXTRACT(EPOCH FROM e.start_time), EXTRACT(EPOCH FROM e.end_time), "
    "e.num_trials, e.num_ended_trials, "  // kept by a trigger on trials (migration 021)
    "(SELECT w.name FROM workspaces w WHERE w.id = e.workspace_id), e.unmanaged";
constexpr int kExperimentConfigColumn = 18;  // index of e.config_yaml when appended

std::string ExperimentColumns(bool with_config) {
  return std::string(kExperimentSummaryColumns) + (with_config ? ", e.config_yaml" : "");
}

// A row of ExperimentColumns(with_config); without the config, config_yaml stays unset (absent
// from the JSON), not "".
v1::Experiment ExperimentFromRow(const pqxx::row& r, bool with_config) {
  v1::Experiment e;
  e.set_id(r[0].as<int64_t>());
  e.set_name(r[1].as<std::string>());
  e.set_description(r[2].as<std::string>());
  e.set_state(ExperimentStateFromName(r[3].as<std::string>()));
  e.set_owner(r[4].as<std::string>());
  e.set_archived(r[5].as<bool>());
  e.set_searcher(r[6].as<std::string>());
  e.set_metric(r[7].as<std::string>());
  e.set_smaller_is_better(r[8].as<bool>());
  e.set_priority(r[9].as<int>());
  if (!r[10].is_null()) e.set_best_validation_metric(r[10].as<double>());
  e.set_error(r[11].as<std::string>());
  *e.mutable_start_time() = SecondsToTimestamp(r[12].as<double>());
  if (!r[13].is_null()) *e.mutable_end_time() = SecondsToTimestamp(r[13].as<double>());
  e.set_num_trials(r[14].as<int>());
  e.set_num_completed_trials(r[15].as<int>());
  if (!r[16].is_null()) e.set_workspace(r[16].as<std::string>());
  e.set_unmanaged(r[17].as<bool>());
  if (with_config) e.set_config_yaml(r[kExperimentConfigColumn].as<std::string>());
  return e;
}

// A trial's newest allocation first (ids of one trial sort by length, then text: a10 after a9).
#define SF_LATEST_ALLOCATION_ORDER "ORDER BY a.start_time DESC, length(a.id) DESC, a.id DESC LIMIT 1"

const char* kTrialColumns =
    "id, experiment_id, state, hparams, restarts, total_batches, target_length, "
    "best_validation_metric, latest_validation_metric, latest_checkpoint_uuid, "
    "EXTRACT(EPOCH FROM start_time), EXTRACT(EPOCH FROM end_time), error, "
    "COALESCE((SELECT jsonb_build_array(a.external_id, a.slots) FROM allocations a WHERE a.trial_id = trials.id "
    "          " SF_LATEST_ALLOCATION_ORDER "), '[\"\", []]'::jsonb)";

v1::Trial TrialFromRow(const pqxx::row& r) {
  v1::Trial t;
  t.set_id(r[0].as<int64_t>());
  t.set_experiment_id(r[1].as<int64_t>());
  t.set_state(TrialStateFromName(r[2].as<std::string>()));
  *t.mutable_hparams() = ValueToStruct(JsonbToValue(r[3]));
  t.set_restarts(r[4].as<int>());
  t.set_total_batches(r[5].as<int64_t>());
  t.set_target_batches(r[6].as<int64_t>());
  if (!r[7].is_null()) t.set_best_validation_metric(r[7].as<double>());
  if (!r[8].is_null()) t.set_latest_validation_metric(r[8].as<double>());
  t.set_latest_checkpoint_uuid(r[9].as<std::string>());
  *t.mutable_start_time() = SecondsToTimestamp(r[10].as<double>());
  if (!r[11].is_null()) *t.mutable_end_time() = SecondsToTimestamp(r[11].as<double>());
  t.set_error(r[12].as<std::string>());
  // The latest allocation: [its external (job) id, its slots in rank order].
  const Value latest = JsonbToValue(r[13]);
  if (latest.is_list() && latest.as_list().size() == 2) {
    const Value::List& parts = latest.as_list();
    if (parts[0].is_string()) t.set_job_id(parts[0].as_string());
    if (parts[1].is_list()) {
      for (const Value& slot : parts[1].as_list()) {
        // An agent's id, or a job's node list as its manager writes it ("slurm:node[1-2]").
        const Value* where = slot.is_map() ? slot.Find("agent_id") : nullptr;
        if (!where || !where->is_string() || where->as_string().empty()) continue;
        const auto& seen = t.hosts();
        if (std::find(seen.begin(), seen.end(), where->as_string()) == seen.end()) t.add_hosts(where->as_string());
      }
    }
  }
  return t;
}

}  // namespace

steadfast::v1::ExperimentState ExperimentStateFromName(const std::string& name) {
  v1::ExperimentState s;
  if (v1::ExperimentState_Parse("EXPERIMENT_STATE_" + StripPrefix(name, "EXPERIMENT_STATE_"), &s)) return s;
  return v1::EXPERIMENT_STATE_UNSPECIFIED;
}
std::string ExperimentStateName(v1::ExperimentState s) {
  return StripPrefix(v1::ExperimentState_Name(s), "EXPERIMENT_STATE_");
}
steadfast::v1::TrialState TrialStateFromName(const std::string& name) {
  v1::TrialState s;
  if (v1::TrialState_Parse("TRIAL_STATE_" + StripPrefix(name, "TRIAL_STATE_"), &s)) return s;
  return v1::TRIAL_STATE_UNSPECIFIED;
}
std::string TrialStateName(v1::TrialState s) { return StripPrefix(v1::TrialState_Name(s), "TRIAL_STATE_"); }

Result<int64_t> Store::CreateExperiment(const NewExperiment& e) {
  int64_t id = 0;
  Status st = db_->Transact("create experiment", [&](pqxx::work& tx) {
    id = tx.exec_params1(
               "INSERT INTO experiments (name, description, state, config_yaml, owner, searcher, "
               "metric, smaller_is_better, priority, workspace_id, initial_checkpoint) "
               "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) RETURNING id",
               e.name, e.description, e.state, e.config_yaml, e.owner, e.searcher, e.metric,
               e.smaller_is_better, e.priority, e.workspace_id, e.initial_checkpoint)[0]
             .as<int64_t>();
    if (e.unmanaged) tx.exec_params("UPDATE experiments SET unmanaged = true WHERE id = $1", id);
    if (!e.context.empty()) {
      tx.exec_params("INSERT INTO experiment_contexts (experiment_id, sha256, archive) VALUES ($1, $2, $3)", id,
                     e.context_sha256, pqxx::binarystring(e.context.data(), e.context.size()));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return id;
}

Status Store::SetExperimentState(int64_t id, const std::string& state, const std::string& error,
                                 bool ended) {
  return db_->Transact("set experiment state", [&](pqxx::work& tx) {
    tx.exec_params(
        "UPDATE experiments SET state = $2, error = CASE WHEN $3 = '' THEN error ELSE $3 END, "
        "end_time = CASE WHEN $4 THEN now() ELSE NULL END WHERE id = $1",
        id, state, error, ended);
    return Status::Ok();
  });
}

Status Store::SetExperimentProgress(int64_t id, double progress, std::optional<double> best) {
  return db_->Transact("set experiment progress", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE experiments SET progress = $2, best_validation_metric = $3 WHERE id = $1",
                   id, progress, best);
    return Status::Ok();
  });
}

Status Store::SetExperimentArchived(int64_t id, bool archived) {
  return db_->Transact("archive experiment", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE experiments SET archived = $2 WHERE id = $1", id, archived);
    return Status::Ok();
  });
}

Result<std::optional<v1::Experiment>> Store::GetExperiment(int64_t id) {
  std::optional<v1::Experiment> out;
  Status st = db_->Transact("get experiment", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT " + ExperimentColumns(true) + " FROM experiments e WHERE e.id = $1", id);
    if (!r.empty()) out = ExperimentFromRow(r[0], true);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::pair<std::vector<v1::Experiment>, int>> Store::ListExperiments(const ExperimentFilter& f) {
  // Column and whether it can be NULL: only nullable columns need NULLS LAST (the default for
  // ASC), so a descending sort on a NOT NULL column is a backward scan of its index
  // (migrations/003_experiment_list_indexes.sql).
  struct SortColumn {
    const char* column;
    bool nullable;
  };
  static const std::map<std::string, SortColumn> kSort = {
      {"id", {"e.id", false}},
      {"name", {"e.name", false}},
      {"state", {"e.state", false}},
      {"start_time", {"e.start_time", false}},
      {"end_time", {"e.end_time", true}},
      {"best_metric", {"e.best_validation_metric", true}},
      {"progress", {"e.progress", false}}};
  auto sort = kSort.find(f.sort_by);
  if (sort == kSort.end()) {
    return InvalidArgument("sort_by: \"" + f.sort_by +
                           "\" must be one of id, name, state, start_time, end_time, best_metric, progress");
  }
  const std::string direction = f.descending ? " DESC" : " ASC";
  std::string order = std::string(sort->second.column) + direction;
  if (sort->second.nullable) order += " NULLS LAST";
  if (f.sort_by != "id") order += ", e.id" + direction;
  std::vector<v1::Experiment> rows;
  int total = 0;
  // The state list travels as one text parameter ("{ACTIVE,PAUSED}") cast to an array.
  const std::string states = TextArray(f.states);
  std::string where =
      " FROM experiments e WHERE ($1 = '{}' OR e.state = ANY($1::text[])) "
      "AND ($2 = '' OR strpos(lower(e.name), lower($2)) > 0) AND ($3 OR NOT e.archived) "
      // The experiment that carried a server before servers were tasks (migration 016) is not
      // an experiment the user made.
      "AND NOT EXISTS (SELECT 1 FROM servings s WHERE s.legacy_experiment_id = e.id)";
  Status st = db_->Transact("list experiments", [&](pqxx::work& tx) {
    total = tx.exec_params1("SELECT count(*)" + where, states, f.name_contains, f.include_archived)[0].as<int>();
    pqxx::result r = tx.exec_params("SELECT " + ExperimentColumns(f.include_config) + where + " ORDER BY " + order +
                                        " LIMIT $4 OFFSET $5",
                                    states, f.name_contains, f.include_archived, f.limit, f.offset);
    for (const auto& row : r) rows.push_back(ExperimentFromRow(row, f.include_config));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return std::make_pair(std::move(rows), total);
}

Result<std::vector<Store::LiveExperiment>> Store::LiveExperiments() {
  std::vector<LiveExperiment> out;
  Status st = db_->Transact("live experiments", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec(
        "SELECT e.id, e.state, e.config_yaml, coalesce(c.sha256, ''), coalesce(octet_length(c.archive), 0), "
        "e.unmanaged, e.best_validation_metric, e.initial_checkpoint "
        "FROM experiments e LEFT JOIN experiment_contexts c ON c.experiment_id = e.id "
        "WHERE e.state NOT IN ('COMPLETED','CANCELED','ERROR') ORDER BY e.id");
    for (const auto& row : r) {
      out.push_back({row[0].as<int64_t>(), row[1].as<std::string>(), row[2].as<std::string>(),
                     row[3].as<std::string>(), row[4].as<int64_t>(), row[5].as<bool>(),
                     row[6].is_null() ? std::nullopt : std::optional<double>(row[6].as<double>()),
                     row[7].as<std::string>()});
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::string> Store::ExperimentContext(int64_t experiment_id) {
  std::string archive;
  bool found = false;
  Status st = db_->Transact("experiment context", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT archive FROM experiment_contexts WHERE experiment_id = $1", experiment_id);
    if (r.empty()) return Status::Ok();
    pqxx::binarystring bytes(r[0][0]);
    archive.assign(bytes.get(), bytes.size());
    found = true;
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!found) return NotFound("experiment " + std::to_string(experiment_id) + " has no context");
  return archive;
}

Status Store::SaveSearcherSnapshot(int64_t experiment_id, const Value& snapshot, double progress,
                                   std::optional<double> best,
                                   const std::vector<std::pair<int64_t, TrialUpdate>>& trials) {
  const std::string json = snapshot.ToJson();
  return db_->Transact("save searcher snapshot", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO searcher_snapshots (experiment_id, snapshot) VALUES ($1, $2::jsonb) "
        "ON CONFLICT (experiment_id) DO UPDATE SET snapshot = EXCLUDED.snapshot, updated_at = now()",
        experiment_id, json);
    tx.exec_params("UPDATE experiments SET progress = $2, best_validation_metric = $3 WHERE id = $1",
                   experiment_id, progress, best);
    for (const auto& [id, u] : trials) WriteTrialUpdate(tx, id, u);
    return Status::Ok();
  });
}

Result<std::optional<Value>> Store::LoadSearcherSnapshot(int64_t experiment_id) {
  std::optional<Value> out;
  Status st = db_->Transact("load searcher snapshot", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT snapshot FROM searcher_snapshots WHERE experiment_id = $1",
                                    experiment_id);
    if (!r.empty()) out = JsonbToValue(r[0][0]);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<int64_t> Store::CreateTrial(int64_t experiment_id, int64_t request_id, const Value& hparams,
                                   const std::string& state, const std::string& latest_checkpoint_uuid) {
  int64_t id = 0;
  Status st = db_->Transact("create trial", [&](pqxx::work& tx) {
    id = tx.exec_params1(
               "INSERT INTO trials (experiment_id, request_id, state, hparams, latest_checkpoint_uuid) "
               "VALUES ($1, $2, $3, $4::jsonb, $5) RETURNING id",
               experiment_id, request_id, state, hparams.ToJson(), latest_checkpoint_uuid)[0]
             .as<int64_t>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return id;
}

Status Store::UpdateTrial(int64_t trial_id, const TrialUpdate& u) {
  return db_->Transact("update trial", [&](pqxx::work& tx) {
    WriteTrialUpdate(tx, trial_id, u);
    return Status::Ok();
  });
}

Result<std::optional<v1::Trial>> Store::GetTrial(int64_t trial_id) {
  std::optional<v1::Trial> out;
  Status st = db_->Transact("get trial", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kTrialColumns + " FROM trials WHERE id = $1", trial_id);
    if (!r.empty()) out = TrialFromRow(r[0]);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<v1::Trial>> Store::ListTrials(int64_t experiment_id, int offset, int limit) {
  std::vector<v1::Trial> out;
  Status st = db_->Transact("list trials", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kTrialColumns +
                                        " FROM trials WHERE experiment_id = $1 ORDER BY id LIMIT $2 OFFSET $3",
                                    experiment_id, limit, offset);
    for (const auto& row : r) out.push_back(TrialFromRow(row));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<TrialRow>> Store::TrialRows(int64_t experiment_id) {
  std::vector<TrialRow> out;
  Status st = db_->Transact("trial rows", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT trials.id, trials.experiment_id, trials.request_id, trials.state, trials.hparams, "
        "trials.restarts, trials.total_batches, trials.target_length, trials.latest_checkpoint_uuid, "
        "trials.stop_requested, trials.completed_length, "
        "(SELECT count(*) FROM allocations a WHERE a.trial_id = trials.id), "
        "COALESCE(latest.id, ''), COALESCE(latest.state, ''), COALESCE(latest.external_id, ''), "
        "trials.preempted_by, trials.closing, trials.latest_validation_metric "
        "FROM trials LEFT JOIN LATERAL (SELECT a.id, a.state, a.external_id FROM allocations a "
        "  WHERE a.trial_id = trials.id "
        "  " SF_LATEST_ALLOCATION_ORDER ") latest ON true "
        "WHERE trials.experiment_id = $1 "
        "ORDER BY trials.id",
        experiment_id);
    for (const auto& row : r) {
      TrialRow t;
      t.id = row[0].as<int64_t>();
      t.experiment_id = row[1].as<int64_t>();
      t.request_id = row[2].as<int64_t>();
      t.state = row[3].as<std::string>();
      t.hparams = JsonbToValue(row[4]);
      t.restarts = row[5].as<int>();
      t.total_batches = row[6].as<int64_t>();
      t.target_length = row[7].as<int64_t>();
      t.latest_checkpoint_uuid = row[8].as<std::string>();
      t.stop_requested = row[9].as<std::string>();
      t.completed_length = row[10].as<int64_t>();
      t.allocations = row[11].as<int>();
      t.latest_allocation_id = row[12].as<std::string>();
      t.latest_allocation_state = row[13].as<std::string>();
      t.latest_allocation_external_id = row[14].as<std::string>();
      t.preempted_by = row[15].as<int64_t>();
      t.closing = row[16].as<bool>();
      if (!row[17].is_null()) t.latest_validation_metric = row[17].as<double>();
      out.push_back(std::move(t));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status Store::CreateAllocation(const std::string& id, int64_t trial_id, int restart, int64_t task_id) {
  return db_->Transact("create allocation", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO allocations (id, trial_id, task_id, restart, state) "
        "VALUES ($1, NULLIF($2, 0), NULLIF($4, 0), $3, 'QUEUED')",
        id, trial_id, restart, task_id);
    return Status::Ok();
  });
}

Status Store::SetAllocationState(const std::string& id, const std::string& state) {
  return db_->Transact("set allocation state", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE allocations SET state = $2 WHERE id = $1", id, state);
    return Status::Ok();
  });
}

Status Store::EndAllocation(const std::string& id) {
  return db_->Transact("end allocation", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE allocations SET state = 'TERMINATED', end_time = now() WHERE id = $1", id);
    return Status::Ok();
  });
}

Status Store::SetAllocationExternalId(const std::string& id, const std::string& external_id) {
  return db_->Transact("set allocation external id", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE allocations SET external_id = $2 WHERE id = $1", id, external_id);
    return Status::Ok();
  });
}

Status Store::UpdateAllocation(const std::string& id, const std::string& state, const Value& slots,
                               bool ended) {
  return db_->Transact("update allocation", [&](pqxx::work& tx) {
    tx.exec_params(
        "UPDATE allocations SET state = $2, slots = $3::jsonb, "
        "end_time = CASE WHEN $4 THEN now() ELSE end_time END WHERE id = $1",
        id, state, slots.ToJson(), ended);
    return Status::Ok();
  });
}

Status Store::UpsertAgent(const v1::Agent& a) {
  Value::List slots;
  for (const auto& s : a.slots()) {
    Value::Map slot{{"id", s.id()}, {"type", v1::SlotType_Name(s.type())}, {"device", s.device()}};
    if (!s.uuid().empty()) slot["uuid"] = s.uuid();
    if (s.memory_total_bytes() > 0) slot["memory_total_bytes"] = s.memory_total_bytes();
    slots.push_back(Value(std::move(slot)));
  }
  return db_->Transact("upsert agent", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO agents (id, hostname, resource_pool, slots, version) VALUES ($1,$2,$3,$4::jsonb,$5) "
        "ON CONFLICT (id) DO UPDATE SET hostname = EXCLUDED.hostname, resource_pool = EXCLUDED.resource_pool, "
        "slots = EXCLUDED.slots, version = EXCLUDED.version, last_heartbeat = now()",
        a.id(), a.hostname(), a.resource_pool(), Value(slots).ToJson(), a.version());
    return Status::Ok();
  });
}

}  // namespace sf::master
