#include "master/db/model_store.h"

#include <algorithm>
#include <map>

#include "common/utf8.h"
#include "common/value.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

namespace {

constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxLabelBytes = 64;
constexpr size_t kMaxLabels = 32;
constexpr size_t kMaxTextBytes = 10000;  // description, notes

// The model a `name_or_id` names: $1 its name, $2 its id (0 when the text is no id).
constexpr const char* kModelMatch = "(m.name = $1 OR m.id = $2)";

int64_t IdOf(const std::string& name_or_id) {
  if (name_or_id.empty() || name_or_id.size() > 18) return 0;
  if (!std::all_of(name_or_id.begin(), name_or_id.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  return std::stoll(name_or_id);
}

std::string Quoted(const std::string& name) { return "\"" + ReplaceInvalidUtf8(name) + "\""; }

Status NoModel(const std::string& name_or_id) { return NotFound("model " + Quoted(name_or_id) + " does not exist"); }

Status CheckText(const std::string& value, const std::string& field) {
  if (!IsText(value)) return InvalidArgument(field + ": is not UTF-8 text without NUL");
  if (value.size() > kMaxTextBytes) return InvalidArgument(field + ": longer than 10000 bytes");
  return Status::Ok();
}

// Labels as the JSON array a statement turns into text[] (jsonb_array_elements_text).
std::string LabelsJson(const std::vector<std::string>& labels) {
  Value::List list;
  for (const std::string& l : labels) list.emplace_back(l);
  return Value(std::move(list)).ToJson();
}

const char* const kModelColumns =
    "m.id, m.name, m.description, to_jsonb(m.labels)::text, m.owner, w.name, m.archived, "
    "EXTRACT(EPOCH FROM m.created_at), EXTRACT(EPOCH FROM m.updated_at), "
    "(SELECT count(*) FROM model_versions v WHERE v.model_id = m.id), "
    "(SELECT COALESCE(max(v.version), 0) FROM model_versions v WHERE v.model_id = m.id) "
    "FROM models m JOIN workspaces w ON w.id = m.workspace_id";

v1::Model ModelFromRow(const pqxx::row& r) {
  v1::Model m;
  m.set_id(r[0].as<int64_t>());
  m.set_name(r[1].as<std::string>());
  m.set_description(r[2].as<std::string>());
  if (auto labels = Value::FromJson(r[3].as<std::string>()); labels.ok() && labels->is_list()) {
    for (const Value& l : labels->as_list()) m.add_labels(l.as_string());
  }
  m.set_owner(r[4].as<std::string>());
  m.set_workspace(r[5].as<std::string>());
  m.set_archived(r[6].as<bool>());
  *m.mutable_created_at() = SecondsToTimestamp(r[7].as<double>());
  *m.mutable_updated_at() = SecondsToTimestamp(r[8].as<double>());
  m.set_num_versions(r[9].as<int>());
  m.set_latest_version(r[10].as<int>());
  return m;
}

// A version's columns (VersionFromRow reads the first 14), and the joins they come from.
const char* const kVersionColumns =
    "v.model_id, m.name, v.version, v.checkpoint_uuid, v.notes, v.creator, EXTRACT(EPOCH FROM v.created_at), "
    "c.trial_id, t.experiment_id, e.metric, e.smaller_is_better, t.best_validation_metric, "
    "t.latest_validation_metric, c.path";
const char* const kVersionFrom =
    " FROM model_versions v JOIN models m ON m.id = v.model_id JOIN checkpoints c ON c.uuid = v.checkpoint_uuid "
    "JOIN trials t ON t.id = c.trial_id JOIN experiments e ON e.id = t.experiment_id";

std::string SelectVersions(const std::string& extra_columns, const std::string& rest) {
  return std::string("SELECT ") + kVersionColumns + extra_columns + kVersionFrom + rest;
}

v1::ModelVersion VersionFromRow(const pqxx::row& r) {
  v1::ModelVersion v;
  v.set_model_id(r[0].as<int64_t>());
  v.set_model_name(r[1].as<std::string>());
  v.set_version(r[2].as<int>());
  v.set_checkpoint_uuid(r[3].as<std::string>());
  v.set_notes(r[4].as<std::string>());
  v.set_creator(r[5].as<std::string>());
  *v.mutable_created_at() = SecondsToTimestamp(r[6].as<double>());
  v.set_trial_id(r[7].as<int64_t>());
  v.set_experiment_id(r[8].as<int64_t>());
  v.set_metric(r[9].as<std::string>());
  v.set_smaller_is_better(r[10].as<bool>());
  if (!r[11].is_null()) v.set_best_validation_metric(r[11].as<double>());
  if (!r[12].is_null()) v.set_latest_validation_metric(r[12].as<double>());
  v.set_checkpoint_path(r[13].as<std::string>());
  return v;
}

// The model's row, locked FOR UPDATE: its id and name; kNotFound when there is none.
Result<std::pair<int64_t, std::string>> LockModel(pqxx::work& tx, const std::string& name_or_id) {
  pqxx::result r = tx.exec_params(std::string("SELECT m.id, m.name FROM models m WHERE ") + kModelMatch + " FOR UPDATE",
                                  name_or_id, IdOf(name_or_id));
  if (r.empty()) return NoModel(name_or_id);
  return std::make_pair(r[0][0].as<int64_t>(), r[0][1].as<std::string>());
}

v1::Model ReadModel(pqxx::work& tx, int64_t id) {
  return ModelFromRow(tx.exec_params(std::string("SELECT ") + kModelColumns + " WHERE m.id = $1", id)[0]);
}

Status CheckVersionNumber(int version) {
  return version >= 1 ? Status::Ok() : InvalidArgument("version: must be 1 or more, not " + std::to_string(version));
}

}  // namespace

Status ValidateModelName(const std::string& name, const std::string& field) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(field + ": " + Quoted(name.substr(0, 200)) + " " + why +
                           " (1-128 of letters, digits, '.', '_' and '-', starting with a letter or digit, not "
                           "only digits)");
  };
  if (name.empty()) return InvalidArgument(field + ": required");
  if (name.size() > kMaxNameBytes) return bad("is longer than 128 characters");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return bad("has a character that is not allowed");
  }
  if (name[0] == '.' || name[0] == '_' || name[0] == '-') return bad("does not start with a letter or digit");
  if (IdOf(name) != 0 || std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("is only digits, which names a model by id");
  }
  return Status::Ok();
}

Status ValidateModelLabels(const std::vector<std::string>& labels, const std::string& field) {
  if (labels.size() > kMaxLabels) return InvalidArgument(field + ": more than 32 labels");
  for (const std::string& l : labels) {
    if (l.empty() || l.size() > kMaxLabelBytes || !IsText(l) || l.find(',') != std::string::npos) {
      return InvalidArgument(field + ": label " + Quoted(l.substr(0, 80)) +
                             " must be 1-64 bytes of UTF-8 text without ',' or NUL");
    }
  }
  return Status::Ok();
}

Result<v1::Model> ModelStore::Create(const NewModel& m) {
  SF_RETURN_IF_ERROR(ValidateModelName(m.name));
  SF_RETURN_IF_ERROR(ValidateModelLabels(m.labels));
  SF_RETURN_IF_ERROR(CheckText(m.description, "description"));
  v1::Model out;
  Status st = db_->Transact("create model", [&](pqxx::work& tx) -> Status {
    pqxx::result r = tx.exec_params(
        "INSERT INTO models (name, description, labels, owner, workspace_id) VALUES ($1, $2, "
        "ARRAY(SELECT DISTINCT l FROM jsonb_array_elements_text($3::jsonb) l ORDER BY l), $4, $5) "
        "ON CONFLICT (name) DO NOTHING RETURNING id",
        m.name, m.description, LabelsJson(m.labels), m.owner, m.workspace_id);
    if (r.empty()) return AlreadyExists("model " + Quoted(m.name) + " already exists");
    out = ReadModel(tx, r[0][0].as<int64_t>());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::pair<std::vector<v1::Model>, int>> ModelStore::List(const ModelFilter& f) {
  static const std::map<std::string, std::string> kSort = {
      {"id", "m.id"}, {"name", "m.name"}, {"created_at", "m.created_at"}, {"updated_at", "m.updated_at"}};
  auto sort = kSort.find(f.sort_by.empty() ? "id" : f.sort_by);
  if (sort == kSort.end()) {
    return InvalidArgument("sort_by: " + Quoted(f.sort_by) + " must be one of id, name, created_at, updated_at");
  }
  if (f.limit < 1 || f.limit > 1000) return InvalidArgument("limit: must be 1-1000");
  if (f.offset < 0) return InvalidArgument("offset: must not be negative");
  for (const auto& [value, field] : {std::pair{&f.name_contains, "name"}, {&f.label, "label"}, {&f.workspace, "workspace"}}) {
    if (!IsText(*value)) return InvalidArgument(std::string(field) + ": is not UTF-8 text without NUL");
  }
  const std::string direction = f.descending ? " DESC" : " ASC";
  const std::string where =
      " WHERE ($1 = '' OR strpos(lower(m.name), lower($1)) > 0) AND ($2 = '' OR $2 = ANY(m.labels)) "
      "AND ($3 OR NOT m.archived) AND ($4 = '' OR w.name = $4)";
  std::vector<v1::Model> rows;
  int total = 0;
  Status st = db_->Transact("list models", [&](pqxx::work& tx) {
    rows.clear();
    total = tx.exec_params1("SELECT count(*) FROM models m JOIN workspaces w ON w.id = m.workspace_id" + where,
                            f.name_contains, f.label, f.include_archived, f.workspace)[0]
                .as<int>();
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kModelColumns + where + " ORDER BY " + sort->second +
                                        direction + ", m.id" + direction + " LIMIT $5 OFFSET $6",
                                    f.name_contains, f.label, f.include_archived, f.workspace, f.limit, f.offset);
    for (const auto& row : r) rows.push_back(ModelFromRow(row));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return std::make_pair(std::move(rows), total);
}

Result<v1::GetModelResponse> ModelStore::Get(const std::string& name_or_id) {
  v1::GetModelResponse out;
  Status st = db_->Transact("get model", [&](pqxx::work& tx) -> Status {
    out.Clear();
    pqxx::result r =
        tx.exec_params(std::string("SELECT ") + kModelColumns + " WHERE " + kModelMatch, name_or_id, IdOf(name_or_id));
    if (r.empty()) return NoModel(name_or_id);
    *out.mutable_model() = ModelFromRow(r[0]);
    for (const auto& row : tx.exec_params(SelectVersions("", " WHERE v.model_id = $1 ORDER BY v.version"),
                                          out.model().id())) {
      *out.add_versions() = VersionFromRow(row);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<v1::Model> ModelStore::Update(const std::string& name_or_id, const ModelEdit& edit) {
  SF_RETURN_IF_ERROR(ValidateModelLabels(edit.add_labels, "add_labels"));
  SF_RETURN_IF_ERROR(ValidateModelLabels(edit.remove_labels, "remove_labels"));
  if (edit.description) SF_RETURN_IF_ERROR(CheckText(*edit.description, "description"));
  v1::Model out;
  Status st = db_->Transact("update model", [&](pqxx::work& tx) -> Status {
    SF_ASSIGN_OR_RETURN(auto model, LockModel(tx, name_or_id));
    const int labels = tx.exec_params1(
                             "UPDATE models SET description = COALESCE($2, description), labels = ARRAY("
                             "SELECT DISTINCT l FROM unnest(labels || ARRAY(SELECT jsonb_array_elements_text($3::jsonb))) l "
                             "WHERE l <> ALL(ARRAY(SELECT jsonb_array_elements_text($4::jsonb))) ORDER BY l), "
                             "updated_at = now() WHERE id = $1 RETURNING cardinality(labels)",
                             model.first, edit.description, LabelsJson(edit.add_labels), LabelsJson(edit.remove_labels))[0]
                             .as<int>();
    if (labels > static_cast<int>(kMaxLabels)) {
      return InvalidArgument("add_labels: model " + Quoted(model.second) + " would have " + std::to_string(labels) +
                             " labels, more than 32");
    }
    out = ReadModel(tx, model.first);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<v1::Model> ModelStore::SetArchived(const std::string& name_or_id, bool archived) {
  v1::Model out;
  Status st = db_->Transact("archive model", [&](pqxx::work& tx) -> Status {
    SF_ASSIGN_OR_RETURN(auto model, LockModel(tx, name_or_id));
    tx.exec_params("UPDATE models SET archived = $2, updated_at = now() WHERE id = $1 AND archived <> $2", model.first,
                   archived);
    out = ReadModel(tx, model.first);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status ModelStore::Delete(const std::string& name_or_id, bool force) {
  return db_->Transact("delete model", [&](pqxx::work& tx) -> Status {
    SF_ASSIGN_OR_RETURN(auto model, LockModel(tx, name_or_id));
    const int versions =
        tx.exec_params1("SELECT count(*) FROM model_versions WHERE model_id = $1", model.first)[0].as<int>();
    if (versions > 0 && !force) {
      return FailedPrecondition("model " + Quoted(model.second) + " has " + std::to_string(versions) +
                                (versions == 1 ? " version" : " versions") +
                                "; delete them first, or delete with force (sf model delete --force)");
    }
    tx.exec_params("DELETE FROM models WHERE id = $1", model.first);
    return Status::Ok();
  });
}

Result<v1::ModelVersion> ModelStore::RegisterVersion(const std::string& name_or_id, const std::string& checkpoint_uuid,
                                                     const std::string& notes, const std::string& creator) {
  if (checkpoint_uuid.empty()) return InvalidArgument("checkpoint_uuid: required");
  if (!IsText(checkpoint_uuid)) return InvalidArgument("checkpoint_uuid: is not UTF-8 text without NUL");
  SF_RETURN_IF_ERROR(CheckText(notes, "notes"));
  v1::ModelVersion out;
  Status st = db_->Transact("register model version", [&](pqxx::work& tx) -> Status {
    // The model row first (FOR UPDATE): registrations of one model queue here, each numbering
    // after the one before it committed.
    pqxx::result m = tx.exec_params(
        std::string("SELECT m.id, m.name, m.archived FROM models m WHERE ") + kModelMatch + " FOR UPDATE", name_or_id,
        IdOf(name_or_id));
    if (m.empty()) return NoModel(name_or_id);
    const int64_t model_id = m[0][0].as<int64_t>();
    const std::string name = m[0][1].as<std::string>();
    if (m[0][2].as<bool>()) {
      return FailedPrecondition("model " + Quoted(name) + " is archived; unarchive it to register versions");
    }
    // The checkpoint, FOR SHARE: a delete or retention pass (FOR UPDATE) waits for this one and
    // then finds the version; one that went first has marked it DELETED.
    pqxx::result c = tx.exec_params("SELECT state FROM checkpoints WHERE uuid = $1 FOR SHARE", checkpoint_uuid);
    if (c.empty()) return NotFound("checkpoint " + checkpoint_uuid + " does not exist");
    if (c[0][0].as<std::string>() != "ACTIVE") {
      return FailedPrecondition("checkpoint " + checkpoint_uuid + " was deleted; register an ACTIVE checkpoint");
    }
    pqxx::result dup = tx.exec_params("SELECT version FROM model_versions WHERE model_id = $1 AND checkpoint_uuid = $2",
                                      model_id, checkpoint_uuid);
    if (!dup.empty()) {
      return AlreadyExists("checkpoint " + checkpoint_uuid + " is already version " + dup[0][0].as<std::string>() +
                           " of model " + Quoted(name));
    }
    const int version = tx.exec_params1(
                              "UPDATE models SET last_version = last_version + 1, updated_at = now() WHERE id = $1 "
                              "RETURNING last_version",
                              model_id)[0]
                            .as<int>();
    tx.exec_params(
        "INSERT INTO model_versions (model_id, version, checkpoint_uuid, notes, creator) VALUES ($1, $2, $3, $4, $5)",
        model_id, version, checkpoint_uuid, notes, creator);
    out = VersionFromRow(
        tx.exec_params(SelectVersions("", " WHERE v.model_id = $1 AND v.version = $2"), model_id, version)[0]);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<VersionDetails> ModelStore::GetVersion(const std::string& name_or_id, int version) {
  SF_RETURN_IF_ERROR(CheckVersionNumber(version));
  VersionDetails out;
  Status st = db_->Transact("get model version", [&](pqxx::work& tx) -> Status {
    out = VersionDetails();
    pqxx::result r = tx.exec_params(
        SelectVersions("", std::string(" WHERE ") + kModelMatch + " AND v.version = $3"),
        name_or_id, IdOf(name_or_id), version);
    if (r.empty()) {
      pqxx::result m =
          tx.exec_params(std::string("SELECT m.name FROM models m WHERE ") + kModelMatch, name_or_id, IdOf(name_or_id));
      if (m.empty()) return NoModel(name_or_id);
      return NotFound("model " + Quoted(m[0][0].as<std::string>()) + " has no version " + std::to_string(version));
    }
    out.version = VersionFromRow(r[0]);
    out.metric = out.version.metric();
    out.smaller_is_better = out.version.smaller_is_better();
    if (out.version.has_best_validation_metric()) out.best_validation_metric = out.version.best_validation_metric();
    if (out.version.has_latest_validation_metric()) out.latest_validation_metric = out.version.latest_validation_metric();
    pqxx::result latest = tx.exec_params(
        "SELECT batches, vals::text, EXTRACT(EPOCH FROM reported_at), restart FROM metrics "
        "WHERE trial_id = $1 AND kind = 'validation' ORDER BY batches DESC LIMIT 1",
        out.version.trial_id());
    if (!latest.empty()) {
      v1::MetricReport report;
      report.set_trial_id(out.version.trial_id());
      report.set_kind("validation");
      report.set_batches(latest[0][0].as<int64_t>());
      auto values = Value::FromJson(latest[0][1].as<std::string>());
      if (values.ok()) *report.mutable_values() = ValueToStruct(*values);
      *report.mutable_time() = SecondsToTimestamp(latest[0][2].as<double>());
      report.set_restart(latest[0][3].as<int>());
      out.latest_validation = std::move(report);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status ModelStore::DeleteVersion(const std::string& name_or_id, int version) {
  SF_RETURN_IF_ERROR(CheckVersionNumber(version));
  return db_->Transact("delete model version", [&](pqxx::work& tx) -> Status {
    SF_ASSIGN_OR_RETURN(auto model, LockModel(tx, name_or_id));
    if (tx.exec_params("DELETE FROM model_versions WHERE model_id = $1 AND version = $2", model.first, version)
            .affected_rows() == 0) {
      return NotFound("model " + Quoted(model.second) + " has no version " + std::to_string(version));
    }
    tx.exec_params("UPDATE models SET updated_at = now() WHERE id = $1", model.first);
    return Status::Ok();
  });
}

Result<std::optional<ModelOwnership>> ModelStore::Ownership(const std::string& name_or_id, int64_t user_id) {
  std::optional<ModelOwnership> out;
  Status st = db_->Transact("model access", [&](pqxx::work& tx) {
    out.reset();
    pqxx::result r = tx.exec_params(
        std::string("SELECT m.id, m.name, m.owner, w.name, COALESCE(wm.role, '') FROM models m "
                    "JOIN workspaces w ON w.id = m.workspace_id LEFT JOIN workspace_members wm "
                    "ON wm.workspace_id = m.workspace_id AND wm.user_id = $3 WHERE ") +
            kModelMatch,
        name_or_id, IdOf(name_or_id), user_id);
    if (!r.empty()) {
      out = ModelOwnership{r[0][0].as<int64_t>(), r[0][1].as<std::string>(), r[0][2].as<std::string>(),
                           r[0][3].as<std::string>(), r[0][4].as<std::string>()};
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

std::optional<std::string> CheckpointVersionRefusal(pqxx::work& tx, const std::string& uuid) {
  pqxx::result r = tx.exec_params(
      "SELECT m.name, v.version FROM model_versions v JOIN models m ON m.id = v.model_id "
      "WHERE v.checkpoint_uuid = $1 ORDER BY m.name, v.version",
      uuid);
  if (r.empty()) return std::nullopt;
  std::string why = "checkpoint " + uuid + " is version " + r[0][1].as<std::string>() + " of model " +
                    Quoted(r[0][0].as<std::string>());
  if (r.size() > 1) why += " (and " + std::to_string(r.size() - 1) + " more model versions)";
  return why + "; delete that version first";
}

std::set<std::string> RegisteredCheckpointsOf(pqxx::work& tx, int64_t experiment_id) {
  std::set<std::string> out;
  for (const auto& row : tx.exec_params(
           "SELECT DISTINCT v.checkpoint_uuid FROM model_versions v JOIN checkpoints c ON c.uuid = v.checkpoint_uuid "
           "JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = $1",
           experiment_id)) {
    out.insert(row[0].as<std::string>());
  }
  return out;
}

std::optional<std::string> ExperimentVersionRefusal(pqxx::work& tx, int64_t experiment_id) {
  pqxx::result r = tx.exec_params(
      "SELECT c.uuid, m.name, v.version FROM model_versions v JOIN models m ON m.id = v.model_id "
      "JOIN checkpoints c ON c.uuid = v.checkpoint_uuid JOIN trials t ON t.id = c.trial_id "
      "WHERE t.experiment_id = $1 ORDER BY m.name, v.version LIMIT 1",
      experiment_id);
  if (r.empty()) return std::nullopt;
  return "experiment " + std::to_string(experiment_id) + " has checkpoint " + r[0][0].as<std::string>() +
         ", version " + r[0][2].as<std::string>() + " of model " + Quoted(r[0][1].as<std::string>()) +
         "; delete that version first";
}

}  // namespace sf::master
