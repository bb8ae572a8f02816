// Deleting an experiment for good: its rows and its checkpoints' files.
//
// Contract: only a terminal experiment (COMPLETED, CANCELED, ERROR) is deleted, and not while an
// unfinished trial of another experiment was continued from one of its checkpoints, nor while
// one of its checkpoints is a model version (kFailedPrecondition naming the model and version:
// docs/registry.md). The rows go in
// one transaction (the experiment row, locked FOR UPDATE and re-checked there; trials,
// allocations, metrics, logs, checkpoints and the searcher snapshot follow by ON DELETE
// CASCADE), so a failure leaves everything in place. The files are removed afterwards and
// without any lock of the coordinator (Cluster::DeleteExperiment calls these two in that
// order): a failure to remove a file is logged and reported, never undone into rows.
//
// Files: the experiment's checkpoint directory (<root>/experiment-<id>, where <root> is
// `checkpoint_storage.host_path[/storage_path]` of its config, or the master's
// --checkpoint-root) is removed whole. A checkpoint whose recorded path lies outside that
// directory (a trainer reported somewhere else) is not touched: only paths under it are
// ours to remove. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

// Where the experiment's trials keep their checkpoints: "<root>/experiment-<id>".
std::string ExperimentCheckpointDir(const config::ExperimentConfig& config,
                                    const std::string& default_root, int64_t experiment_id);

// What DeleteExperimentRows removed, for the file removal that follows.
struct DeletedExperiment {
  std::string checkpoint_dir;                 // ExperimentCheckpointDir of its config
  std::vector<std::string> checkpoint_paths;  // every checkpoint it had on record
  std::optional<config::CheckpointStorageConfig> storage;  // its config's, for s3 endpoint and keys
};

// Deletes the rows of terminal experiment `id`. kNotFound when there is no such experiment,
// kFailedPrecondition naming its state when it is not terminal.
Result<DeletedExperiment> DeleteExperimentRows(Database* db, int64_t id,
                                               const std::string& default_root);

// Removes the experiment's checkpoint directory (see above). Returns the number of
// checkpoints whose paths were outside it and were therefore left; an error names the
// directory that could not be removed.
Result<int> RemoveExperimentFiles(const DeletedExperiment& deleted);

// Whether `path` lies inside directory `dir` (lexically, after normalising both; `dir` itself
// does not count).
bool IsInside(const std::string& path, const std::string& dir);

}  // namespace sf::master
