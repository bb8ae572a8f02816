#include "master/housekeeping/experiment_deletion.h"

#include <filesystem>
#include <system_error>

#include "common/log.h"
#include "common/storage/checkpoint_storage.h"
#include "master/db/model_store.h"

namespace sf::master {
namespace fs = std::filesystem;

std::string ExperimentCheckpointDir(const config::ExperimentConfig& config,
                                    const std::string& default_root, int64_t experiment_id) {
  if (config.checkpoint_storage && config.checkpoint_storage->is_s3()) {
    const auto& s3 = *config.checkpoint_storage;
    return "s3://" + s3.bucket + (s3.prefix.empty() ? "" : "/" + s3.prefix) + "/experiment-" +
           std::to_string(experiment_id);
  }
  std::string root = default_root;
  if (config.checkpoint_storage) {
    root = config.checkpoint_storage->host_path;
    if (config.checkpoint_storage->storage_path) root += "/" + *config.checkpoint_storage->storage_path;
  }
  return root + "/experiment-" + std::to_string(experiment_id);
}

bool IsInside(const std::string& path, const std::string& dir) {
  const fs::path p = fs::path(path).lexically_normal(), d = fs::path(dir).lexically_normal();
  auto pi = p.begin(), di = d.begin();
  for (; di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // the empty last component of "dir/"
    if (pi == p.end() || *pi != *di) return false;
  }
  for (; pi != p.end(); ++pi) {
    if (!pi->empty() && *pi != ".") return true;  // something below dir
  }
  return false;
}

Result<DeletedExperiment> DeleteExperimentRows(Database* db, int64_t id, const std::string& default_root) {
  DeletedExperiment out;
  Status st = db->Transact("delete experiment", [&](pqxx::work& tx) -> Status {
    pqxx::result row = tx.exec_params("SELECT state, config_yaml FROM experiments WHERE id = $1 FOR UPDATE", id);
    if (row.empty()) return NotFound("experiment " + std::to_string(id) + " does not exist");
    const std::string state = row[0][0].as<std::string>();
    if (state != "COMPLETED" && state != "CANCELED" && state != "ERROR") {
      return FailedPrecondition("experiment " + std::to_string(id) + " is " + state +
                                "; only completed, canceled or errored experiments can be deleted (kill it first)");
    }
    // A trial continued from one of its checkpoints (sf experiment continue) still needs it.
    pqxx::result needed = tx.exec_params(
        "SELECT u.id, u.experiment_id FROM trials u JOIN checkpoints c ON c.uuid = u.latest_checkpoint_uuid "
        "JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = $1 AND u.experiment_id <> $1 "
        "AND u.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR') LIMIT 1",
        id);
    if (!needed.empty()) {
      return FailedPrecondition("experiment " + std::to_string(id) + " has the checkpoint trial " +
                                needed[0][0].as<std::string>() + " of experiment " + needed[0][1].as<std::string>() +
                                " continues from; delete it once that trial has finished");
    }
    // A model version's checkpoint is kept, row and files: the experiment waits for the version
    // to be deleted (docs/registry.md).
    if (auto why = ExperimentVersionRefusal(tx, id)) return FailedPrecondition(*why);
    // The stored config was valid when it was submitted; should it no longer parse (a field
    // renamed since), the master's default root is where its checkpoints went.
    config::ParseResult parsed = config::ParseExperimentConfig(row[0][1].as<std::string>());
    out.checkpoint_dir =
        ExperimentCheckpointDir(parsed.ok() ? *parsed.config : config::ExperimentConfig{}, default_root, id);
    if (parsed.ok()) out.storage = parsed.config->checkpoint_storage;
    for (const auto& r : tx.exec_params(
             "SELECT c.path FROM checkpoints c JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = $1", id)) {
      out.checkpoint_paths.push_back(r[0].as<std::string>());
    }
    tx.exec_params("DELETE FROM experiments WHERE id = $1", id);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<int> RemoveExperimentFiles(const DeletedExperiment& deleted) {
  int left = 0;
  for (const std::string& path : deleted.checkpoint_paths) {
    if (!IsInside(path, deleted.checkpoint_dir)) {
      ++left;
      log::Warn("experiment", {{"event", "checkpoint_left"}, {"path", path},
                               {"why", "outside " + deleted.checkpoint_dir}});
    }
  }
  SF_ASSIGN_OR_RETURN(auto store, storage::CheckpointStorage::ForPath(deleted.checkpoint_dir, deleted.storage));
  SF_RETURN_IF_ERROR(store->RemoveAll(deleted.checkpoint_dir));
  return left;
}

}  // namespace sf::master
