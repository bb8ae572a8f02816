// Typed reads and writes of the master's tables (schema: migrations/*.sql).
//
// Rows come back as the wire types of steadfast.v1 where the API serves them as they are
// (Experiment, Trial, MetricReport, Checkpoint, LogLine), so the API layer adds nothing in
// between. Every statement is parameterised. Thread-safe (each call is one transaction on a
// pooled connection).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/value.h"
#include "master/db/database.h"
#include "steadfast/v1/common.pb.h"

namespace sf::master {

struct ExperimentFilter {
  std::vector<std::string> states;   // state names without prefix: ACTIVE, PAUSED, ...
  std::string name_contains;
  std::string sort_by = "id";        // id | name | state | start_time | end_time | best_metric
  bool descending = false;
  int offset = 0;
  int limit = 100;
  bool include_archived = false;
  bool include_config = false;       // also read config_yaml (otherwise left unset)
};

struct NewExperiment {
  std::string name, description, config_yaml, owner, searcher, metric;
  bool smaller_is_better = true;
  int priority = 42;
  std::string state;
  int64_t workspace_id = 1;  // Uncategorized
  // A user trial's code (docs/core-api.md): the context archive and its SHA-256 (hex); both
  // empty for none. Stored in the same transaction as the experiment.
  std::string context;
  std::string context_sha256;
  bool unmanaged = false;  // an unmanaged experiment (CreateUnmanagedTrial)
  // The checkpoint every trial of a continued experiment starts from (Cluster::CreateExperiment);
  // "" for none. Kept in the experiment's row for a restarted master (migration 023).
  std::string initial_checkpoint;
};

struct TrialUpdate {
  std::optional<std::string> state;
  std::optional<int> restarts;
  std::optional<int64_t> total_batches;
  std::optional<int64_t> target_length;
  std::optional<int64_t> completed_length;
  std::optional<double> latest_validation_metric;
  std::optional<double> best_validation_metric;
  std::optional<std::string> latest_checkpoint_uuid;
  std::optional<std::string> stop_requested;
  std::optional<std::string> error;
  std::optional<int64_t> preempted_by;  // 0 clears it
  std::optional<bool> closing;          // the searcher closed it (migration 019)
  bool set_end_time = false;
};

// A trial as the master's experiment manager needs it after a restart.
struct TrialRow {
  int64_t id = 0, experiment_id = 0, request_id = 0;
  std::string state;
  Value hparams;
  int restarts = 0;
  int64_t total_batches = 0, target_length = 0, completed_length = 0;
  std::string latest_checkpoint_uuid, stop_requested;
  int64_t preempted_by = 0;          // the trial it waits for after a preemption (0: none)
  bool closing = false;              // the searcher closed it; its exit completes it
  std::optional<double> latest_validation_metric;  // its last completed operation's metric
  int allocations = 0;               // allocations made for the trial so far
  std::string latest_allocation_id;  // the newest of them ("" when none)
  std::string latest_allocation_state, latest_allocation_external_id;  // its state and external id
};

class Store {
 public:
  explicit Store(Database* db) : db_(db) {}

  // Experiments
  Result<int64_t> CreateExperiment(const NewExperiment& e);
  Status SetExperimentState(int64_t id, const std::string& state, const std::string& error = "",
                            bool ended = false);
  Status SetExperimentProgress(int64_t id, double progress, std::optional<double> best);
  Status SetExperimentArchived(int64_t id, bool archived);
  // The whole experiment, config_yaml included.
  Result<std::optional<steadfast::v1::Experiment>> GetExperiment(int64_t id);
  // One page of summaries (config_yaml unset unless filter.include_config) and the number of
  // experiments matching the filter. Reads PostgreSQL only; takes no lock of the coordinator.
  Result<std::pair<std::vector<steadfast::v1::Experiment>, int>> ListExperiments(
      const ExperimentFilter& filter);
  // Experiments not yet in a terminal state (for recovery after a restart): id, state, config.
  struct LiveExperiment {
    int64_t id;
    std::string state;
    std::string config_yaml;
    std::string context_sha256;  // "" without a context
    int64_t context_bytes = 0;
    bool unmanaged = false;
    std::optional<double> best;  // best_validation_metric: the best searcher metric so far
    std::string initial_checkpoint;  // NewExperiment::initial_checkpoint
  };
  Result<std::vector<LiveExperiment>> LiveExperiments();
  // The experiment's context archive; kNotFound when it has none.
  Result<std::string> ExperimentContext(int64_t experiment_id);

  // The searcher's snapshot and the experiment's progress and best metric, in one transaction
  // (every trial's end writes both), with `trials`' updates: what the searcher heard (an
  // operation's completion) is on disk exactly when the searcher's state that took it in is,
  // so a master that dies between the two neither loses it nor tells the searcher twice.
  Status SaveSearcherSnapshot(int64_t experiment_id, const Value& snapshot, double progress,
                              std::optional<double> best,
                              const std::vector<std::pair<int64_t, TrialUpdate>>& trials = {});
  Result<std::optional<Value>> LoadSearcherSnapshot(int64_t experiment_id);

  // Trials
  // A new trial's row; `latest_checkpoint_uuid` is where its first run starts from ("" for
  // nothing: a continued experiment's trials start from its initial checkpoint).
  Result<int64_t> CreateTrial(int64_t experiment_id, int64_t request_id, const Value& hparams,
                              const std::string& state, const std::string& latest_checkpoint_uuid = "");
  Status UpdateTrial(int64_t trial_id, const TrialUpdate& u);
  Result<std::optional<steadfast::v1::Trial>> GetTrial(int64_t trial_id);
  Result<std::vector<steadfast::v1::Trial>> ListTrials(int64_t experiment_id, int offset = 0,
                                                       int limit = 100000);
  Result<std::vector<TrialRow>> TrialRows(int64_t experiment_id);

  // Allocations (one per scheduled run of a trial)
  // An allocation of a trial, or (trial_id 0) of a task of its own (master/tasks).
  Status CreateAllocation(const std::string& id, int64_t trial_id, int restart, int64_t task_id = 0);
  // The state alone; the slots it was given stay (RUNNING once its tasks started).
  Status SetAllocationState(const std::string& id, const std::string& state);
  // The id its resource manager gave it (a Slurm job id).
  Status SetAllocationExternalId(const std::string& id, const std::string& external_id);
  Status UpdateAllocation(const std::string& id, const std::string& state, const Value& slots,
                          bool ended);
  // TERMINATED with its end time; the slots stay, so a trial still says where it last ran.
  Status EndAllocation(const std::string& id);

  // Metrics (written by master/ingest/metric_writer.h, read here).
  Result<std::vector<steadfast::v1::MetricReport>> GetMetrics(int64_t trial_id,
                                                              const std::string& kind,
                                                              int64_t start_batches,
                                                              int64_t end_batches, int max_points);
  Result<int64_t> CountMetrics(int64_t trial_id, const std::string& kind);
  // The kinds (groups) of metrics the trial has rows of, sorted; one index probe per group.
  Result<std::vector<std::string>> MetricGroups(int64_t trial_id);

  // Checkpoints
  Status InsertCheckpoint(const steadfast::v1::Checkpoint& c);
  // Gives the trial's active checkpoints at `batches` that have no validation metric this one
  // (a Core API trial registers its checkpoint before it completes the operation); returns how
  // many it changed.
  Result<int> SetCheckpointMetric(int64_t trial_id, int64_t batches, double metric);
  Result<std::vector<steadfast::v1::Checkpoint>> ListCheckpoints(int64_t experiment_id);
  Result<std::optional<steadfast::v1::Checkpoint>> GetCheckpoint(const std::string& uuid);
  // A checkpoint's uuid and directory.
  struct CheckpointPlace {
    std::string uuid, path;
  };
  // The trial's ACTIVE checkpoints other than `except`, newest (most batches) first, at most
  // `limit`: what it resumes from when the one it was told fails verification.
  Result<std::vector<CheckpointPlace>> RestoreFallbacks(int64_t trial_id, const std::string& except, int limit);
  // `uuid` failed verification when trial `trial_id` resumed from it: in one transaction it
  // becomes CORRUPTED (once: a second report changes nothing and logs nothing), `log_line` goes
  // to the trial's logs (stream "master"), and the trial's latest checkpoint becomes its newest
  // ACTIVE one when it was this one. Returns the trial's latest then (empty uuid: none left).
  // kNotFound for an unknown uuid.
  Result<CheckpointPlace> MarkCheckpointCorrupted(int64_t trial_id, const std::string& uuid,
                                                  const std::string& log_line);

  // Logs
  Status InsertLogs(const std::vector<steadfast::v1::LogLine>& lines);
  Result<std::vector<steadfast::v1::LogLine>> GetLogs(int64_t trial_id, int64_t after_id,
                                                      int limit, const std::string& search);

  // Agents (their live state is in memory; this is the registry of every agent ever seen)
  Status UpsertAgent(const steadfast::v1::Agent& a);

  Database* db() { return db_; }

 private:
  Database* db_;
};

// Output lines of one trial (kTrial) or one task of its own (kTask, master/tasks) with id >
// `after_id`, in order, at most `limit`, those containing `search` when it is not empty.
enum class LogOwner { kTrial, kTask };
Result<std::vector<steadfast::v1::LogLine>> ReadLogs(Database* db, LogOwner owner, int64_t id, int64_t after_id,
                                                     int limit, const std::string& search);

// "EXPERIMENT_STATE_ACTIVE" <-> "ACTIVE" and the like.
steadfast::v1::ExperimentState ExperimentStateFromName(const std::string& name);
std::string ExperimentStateName(steadfast::v1::ExperimentState s);
steadfast::v1::TrialState TrialStateFromName(const std::string& name);
std::string TrialStateName(steadfast::v1::TrialState s);

}  // namespace sf::master
