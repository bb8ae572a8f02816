// The model registry's tables (migrations/011_model_registry.sql; docs/registry.md): named models
// and their numbered versions, each a checkpoint.
//
// Contract:
// - A model is named by its name or by its id in decimal (`name_or_id`): names are 1-128 of
//   [A-Za-z0-9._-], start with a letter or digit and are never only digits, so the two cannot be
//   confused. An unknown model is kNotFound naming it; a name taken is kAlreadyExists; a bad
//   name, label, description or notes is kInvalidArgument naming the field.
// - Version numbers start at 1 and are given by RegisterVersion in the transaction that inserts
//   the version, with the model row locked (FOR UPDATE): concurrent registrations get distinct,
//   consecutive numbers. A number is never given twice, even after its version is deleted.
// - A checkpoint that is a model version is protected: RegisterVersion locks the checkpoint row
//   (FOR SHARE) and takes only an ACTIVE one, so it cannot race an explicit delete or a
//   retention pass (both lock it FOR UPDATE); CheckpointVersionRefusal and
//   RegisteredCheckpointsOf are what those deleters ask, inside their own transactions.
// - Every statement is parameterised; thread-safe (each call is one transaction on a pooled
//   connection).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "master/db/database.h"
#include "steadfast/v1/model_registry.pb.h"

namespace sf::master {

struct NewModel {
  std::string name, description, owner;
  std::vector<std::string> labels;
  int64_t workspace_id = 1;  // Uncategorized
};

struct ModelEdit {
  std::optional<std::string> description;
  std::vector<std::string> add_labels, remove_labels;  // removals after additions
};

struct ModelFilter {
  std::string name_contains;     // case-insensitive substring; empty: any
  std::string label;             // exactly this label; empty: any
  bool include_archived = false;
  std::string workspace;         // by name; empty: any
  std::string sort_by = "id";    // id | name | created_at | updated_at
  bool descending = false;
  int offset = 0;
  int limit = 100;               // 1-1000
};

// Who may act on a model (access_policy.h): its owner and workspace, and the caller's role there.
struct ModelOwnership {
  int64_t id = 0;
  std::string name, owner, workspace;
  std::string caller_workspace_role;  // "", "viewer", "editor" or "admin"
};

// What a model version's source trial validated (GetModelVersion).
struct VersionDetails {
  steadfast::v1::ModelVersion version;
  std::string metric;
  bool smaller_is_better = true;
  std::optional<double> best_validation_metric, latest_validation_metric;
  std::optional<steadfast::v1::MetricReport> latest_validation;
};

// Field checks (kInvalidArgument naming the field, or OK).
Status ValidateModelName(const std::string& name, const std::string& field = "name");
Status ValidateModelLabels(const std::vector<std::string>& labels, const std::string& field = "labels");

class ModelStore {
 public:
  explicit ModelStore(Database* db) : db_(db) {}

  Result<steadfast::v1::Model> Create(const NewModel& m);
  // One page and the number of models matching the filter.
  Result<std::pair<std::vector<steadfast::v1::Model>, int>> List(const ModelFilter& f);
  // The model and its versions, oldest first.
  Result<steadfast::v1::GetModelResponse> Get(const std::string& name_or_id);
  Result<steadfast::v1::Model> Update(const std::string& name_or_id, const ModelEdit& edit);
  // Archiving an archived model (or unarchiving one that is not) changes nothing.
  Result<steadfast::v1::Model> SetArchived(const std::string& name_or_id, bool archived);
  // kFailedPrecondition while it has versions, unless `force` (then they go with it).
  Status Delete(const std::string& name_or_id, bool force);

  // The new version of the model (see above). kNotFound for an unknown model or checkpoint (each
  // named); kFailedPrecondition for an archived model or a checkpoint that was deleted.
  Result<steadfast::v1::ModelVersion> RegisterVersion(const std::string& name_or_id, const std::string& checkpoint_uuid,
                                                      const std::string& notes, const std::string& creator);
  Result<VersionDetails> GetVersion(const std::string& name_or_id, int version);
  Status DeleteVersion(const std::string& name_or_id, int version);

  // The model's owner and workspace, and `user_id`'s role in that workspace; nullopt when there
  // is no such model.
  Result<std::optional<ModelOwnership>> Ownership(const std::string& name_or_id, int64_t user_id);

 private:
  Database* db_;
};

// Inside a deleter's transaction: why checkpoint `uuid` may not be deleted because it is a model
// version ("checkpoint X is version 2 of model \"m\"; delete that version first"), or nullopt.
std::optional<std::string> CheckpointVersionRefusal(pqxx::work& tx, const std::string& uuid);
// Inside a retention pass's transaction: the checkpoints of experiment `experiment_id` that are
// model versions.
std::set<std::string> RegisteredCheckpointsOf(pqxx::work& tx, int64_t experiment_id);
// Inside an experiment deletion's transaction: why experiment `experiment_id` may not be deleted
// because one of its checkpoints is a model version, or nullopt.
std::optional<std::string> ExperimentVersionRefusal(pqxx::work& tx, int64_t experiment_id);

}  // namespace sf::master
