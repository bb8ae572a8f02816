// The coordinator's experiment side (class Cluster, master/core/cluster.h): creating
// experiments, their searchers' operations turned into trials, experiment and trial state
// transitions, and the API's actions (pause, activate, kill, archive, delete).
//
// Lock discipline: the public entry points here take mu_ (the one lock of the coordinator's
// in-memory state) for their whole, short run; every *Locked member runs with mu_ held by its
// caller. Allocations (cluster_allocation.cc), the inventory (cluster_inventory.cc), external managers
// (cluster_external.cc), trainers (cluster_trial_link.cc) and recovery (cluster_recovery.cc)
// follow the same rule.
#include "master/core/cluster.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <limits>

#include "common/context/context_archive.h"
#include "common/log.h"
#include "common/storage/checkpoint_storage.h"
#include "common/sha256.h"
#include "master/allocation/task_ids.h"
#include "master/housekeeping/experiment_deletion.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;
using std::chrono::steady_clock;

bool IsTerminal(v1::ExperimentState s) {
  return s == v1::EXPERIMENT_STATE_COMPLETED || s == v1::EXPERIMENT_STATE_CANCELED ||
         s == v1::EXPERIMENT_STATE_ERROR;
}
bool IsTerminal(v1::TrialState s) {
  return s == v1::TRIAL_STATE_COMPLETED || s == v1::TRIAL_STATE_CANCELED || s == v1::TRIAL_STATE_ERROR;
}

namespace {

// The scheduler's clock (it keeps none): seconds on the steady clock.

std::vector<config::ConfigError> CheckDataFiles(const config::ExperimentConfig& c) {
  std::vector<config::ConfigError> errors;
  auto check = [&](const std::string& path, const std::string& file) {
    if (!std::filesystem::path(file).is_absolute()) {
      errors.push_back({path, "\"" + file + "\" must be an absolute path (the CLI makes relative paths absolute)", 0, 0});
    } else if (access(file.c_str(), R_OK) != 0) {
      errors.push_back({path, "\"" + file + "\" cannot be read by the cluster", 0, 0});
    }
  };
  for (const auto& [key, file] : config::DataFiles(c.data)) check(key, file);
  return errors;
}

}  // namespace

Cluster::Cluster(Store* store, ClusterOptions options)
    : store_(store),
      options_(std::move(options)),
      allocations_(store, options_.default_manager, options_.external_pools),
      tasks_(store->db(), &allocations_,
             TaskCoordinatorOptions{options_.trial_link_address, options_.external_trial_link_address,
                                    options_.task_tokens, options_.task_certificates}),
      metric_writer_(options_.ingest_db ? options_.ingest_db : store->db()),
      log_writer_(options_.ingest_db ? options_.ingest_db : store->db()) {
  // What happens to trials' allocations comes on each manager's delivery thread and takes mu_
  // (allocation_service.h). Set now: gangs Recover() submits are placed once the managers start.
  allocations_.SetOwner(TaskKind::kTrial, [this](const AllocationUpdate& update) { OnAllocationUpdate(update); });
}

Cluster::~Cluster() { Stop(); }

void Cluster::Start() {
  housekeeping_ = std::thread([this] { HousekeepingLoop(); });
  retention_.Start();
  // After Recover: a manager's first pass may cancel the jobs nobody adopted.
  allocations_.Start();
}

void Cluster::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  allocations_.Stop();  // outside mu_: the managers' threads take it
  if (housekeeping_.joinable()) housekeeping_.join();
  retention_.Stop();
}

// ------------------------------------------------------------------------------------------
// Experiments

Cluster::CreateResult Cluster::CreateExperiment(const std::string& config_yaml, bool activate,
                                                bool validate_only, const std::string& owner,
                                                const std::string& initial_checkpoint, int64_t workspace_id,
                                                const std::string& context) {
  CreateResult result;
  config::ParseResult parsed = config::ParseExperimentConfig(config_yaml);
  if (!parsed.ok()) {
    result.errors = parsed.errors;
    return result;
  }
  // The master's default storage goes into the stored text itself, so the trials, retention and
  // every later reader see where the checkpoints are.
  std::string with_storage;
  if (!parsed.config->checkpoint_storage && !options_.default_checkpoint_storage.empty()) {
    auto added = config::ApplyOverride(config_yaml, "checkpoint_storage=" + options_.default_checkpoint_storage);
    if (added.ok()) parsed = config::ParseExperimentConfig(*added);
    if (!added.ok() || !parsed.ok()) {
      result.errors.push_back({"checkpoint_storage",
                               "the master's default checkpoint_storage does not apply: " +
                                   (added.ok() ? parsed.ErrorText() : added.status().message()),
                               0, 0});
      return result;
    }
    with_storage = std::move(*added);
  }
  const std::string& stored_yaml = with_storage.empty() ? config_yaml : with_storage;
  config::ExperimentConfig& c = *parsed.config;
  // A user trial's code reads what it likes; the native trainer's data files must be readable.
  if (options_.check_data_files && !c.has_entrypoint()) {
    result.errors = CheckDataFiles(c);
    if (!result.errors.empty()) return result;
  }
  if (!context.empty()) {
    if (!c.has_entrypoint()) {
      result.errors.push_back({"context_directory",
                               "a context was sent, but the config has no entrypoint to run it (native trials "
                               "read data files, not a context)",
                               0, 0});
      return result;
    }
    if (Status checked = context::ValidateContext(context); !checked.ok()) {
      result.errors.push_back({"context_directory", checked.message(), 0, 0});
      return result;
    }
  }
  auto searcher = MakeSearchMethod(c);
  if (!searcher.ok()) {
    result.errors.push_back({"searcher", searcher.status().message(), 0, 0});
    return result;
  }
  // Object storage is asked once now (one HEAD on the bucket, off the coordinator's lock): a
  // wrong key, a missing bucket or an endpoint that does not answer is refused at submission
  // rather than at the first checkpoint. The master deletes by retention, so it needs the
  // keys too (from the config or its own environment).
  if (c.checkpoint_storage && c.checkpoint_storage->is_s3()) {
    auto store = storage::CheckpointStorage::Open(c.checkpoint_storage, options_.checkpoint_root);
    Status checked = store.ok() ? (*store)->Check() : store.status();
    if (!checked.ok()) {
      result.errors.push_back({"checkpoint_storage", checked.message(), 0, 0});
      return result;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  // A gang larger than every slot the pool has could never be placed: refuse it now rather
  // than queue it forever; likewise a pool no agent is in. (With no agent known yet, e.g.
  // while a cluster starts, accept.)
  if (auto refused = allocations_.CheckPlaceable(c.resources.resource_pool,
                                                 static_cast<int>(c.resources.slots_per_trial))) {
    result.errors.push_back(
        {refused->field == "slots" ? "resources.slots_per_trial" : "resources.resource_pool", refused->message, 0, 0});
    return result;
  }
  if (validate_only) return result;

  NewExperiment row = ExperimentRow(c, stored_yaml, owner, workspace_id);
  row.state = activate ? "ACTIVE" : "PAUSED";
  row.initial_checkpoint = initial_checkpoint;
  row.context = context;
  if (!context.empty()) row.context_sha256 = Sha256Hex(context);
  auto id = store_->CreateExperiment(row);
  if (!id.ok()) {
    result.errors.push_back({"<server>", id.status().message(), 0, 0});
    return result;
  }
  Experiment& e = experiments_[*id];
  e.id = *id;
  e.config = std::move(c);
  e.config_yaml = stored_yaml;
  e.state = activate ? v1::EXPERIMENT_STATE_ACTIVE : v1::EXPERIMENT_STATE_PAUSED;
  e.searcher = std::move(searcher).value();
  e.initial_checkpoint = initial_checkpoint;
  e.context_sha256 = row.context_sha256;
  e.context_bytes = static_cast<int64_t>(context.size());
  log::Info("experiment", {{"event", "created"}, {"id", std::to_string(e.id)}, {"name", e.config.name},
                           {"context_bytes", std::to_string(e.context_bytes)}});
  ApplyOpsLocked(e, e.searcher->InitialOperations());
  SaveSearcherLocked(e);
  PublishReasonsSoonLocked();
  result.id = *id;
  return result;
}

NewExperiment Cluster::ExperimentRow(const config::ExperimentConfig& c, const std::string& config_yaml,
                                     const std::string& owner, int64_t workspace_id) {
  NewExperiment row;
  row.name = c.name;
  row.description = c.description;
  row.config_yaml = config_yaml;
  row.owner = owner;
  row.workspace_id = workspace_id;
  row.searcher = config::SearcherName(c.searcher.name);
  row.metric = c.searcher.metric;
  row.smaller_is_better = c.searcher.smaller_is_better;
  row.priority = static_cast<int>(c.resources.priority);
  return row;
}

void Cluster::SaveSearcherLocked(Experiment& e, const std::vector<std::pair<int64_t, TrialUpdate>>& trials) {
  Value snapshot(Value::Map{{"searcher", e.searcher->Snapshot()},
                            {"done", e.searcher_done},
                            {"failed", e.search_failed}});
  Status st = store_->SaveSearcherSnapshot(e.id, snapshot, e.searcher->Progress(), e.best, trials);
  if (!st.ok()) log::Error("experiment", {{"event", "snapshot_failed"}, {"error", st.message()}});
}

void Cluster::ApplyOpsLocked(Experiment& e, std::vector<SearcherOp> ops) {
  // Ops may produce more ops (TrialCreated); process them in order.
  for (size_t i = 0; i < ops.size(); ++i) {
    SearcherOp op = ops[i];
    switch (op.kind) {
      case SearcherOp::Kind::kCreate: {
        // A request whose trial exists already: a master died after creating its row and before
        // storing the searcher's snapshot, and the searcher, restored without it, asks again (the
        // same request id and hyperparameters). The trial it has is the one: created, not twice.
        if (auto existing = e.trial_by_request.find(op.request_id); existing != e.trial_by_request.end()) {
          log::Info("experiment", {{"event", "trial_recreated"}, {"id", std::to_string(e.id)},
                                   {"request", std::to_string(op.request_id)},
                                   {"trial", std::to_string(existing->second)}});
          auto more = e.searcher->TrialCreated(op.request_id);
          ops.insert(ops.end(), more.begin(), more.end());
          break;
        }
        // A continued experiment's trial starts from its initial checkpoint, stored with the row.
        auto id = store_->CreateTrial(e.id, op.request_id, op.hparams, "QUEUED", e.initial_checkpoint);
        if (!id.ok()) {
          log::Error("experiment", {{"event", "create_trial_failed"}, {"error", id.status().message()}});
          continue;
        }
        Trial& t = trials_[*id];
        t.id = *id;
        registry_.Track(t.id, 0);
        t.experiment_id = e.id;
        t.request_id = op.request_id;
        t.hparams = op.hparams;
        t.latest_checkpoint_uuid = e.initial_checkpoint;  // continued: its first run restores it
        e.trial_by_request[op.request_id] = t.id;
        auto more = e.searcher->TrialCreated(op.request_id);
        ops.insert(ops.end(), more.begin(), more.end());
        break;
      }
      case SearcherOp::Kind::kTrain: {
        auto it = e.trial_by_request.find(op.request_id);
        if (it == e.trial_by_request.end()) break;
        Trial& t = trials_[it->second];
        if (t.completed_length > 0 && t.completed_length >= op.target_length && !t.closing && !IsTerminal(t.state)) {
          // The trial already trained this far, for a searcher that did not know it yet: a
          // master died after creating the trial's row and before storing the searcher's
          // snapshot, the trial ran (the restarted master queued it from its row) and its
          // completion reached a searcher restored without it, which asks for it only now.
          // The searcher hears the stored completion instead of waiting for ever for an
          // operation the trial has done.
          log::Info("experiment", {{"event", "completion_replayed"}, {"id", std::to_string(e.id)},
                                   {"trial", std::to_string(t.id)}, {"length", std::to_string(t.completed_length)}});
          auto more = e.searcher->ValidationCompleted(
              t.request_id, t.latest_metric.value_or(std::numeric_limits<double>::quiet_NaN()), t.completed_length);
          ops.insert(ops.end(), more.begin(), more.end());
          break;
        }
        t.target_length = op.target_length;
        TrialUpdate u;
        u.target_length = t.target_length;
        (void)store_->UpdateTrial(t.id, u);
        if (e.state == v1::EXPERIMENT_STATE_ACTIVE && !t.allocated && t.allocation_id.empty() &&
            !IsTerminal(t.state)) {
          SubmitLocked(t);
        }
        break;
      }
      case SearcherOp::Kind::kClose: {
        auto it = e.trial_by_request.find(op.request_id);
        if (it == e.trial_by_request.end()) break;
        Trial& t = trials_[it->second];
        t.closing = true;
        if (t.allocated) {  // its exit completes it, after a master restart too
          TrialUpdate u;
          u.closing = true;
          (void)store_->UpdateTrial(t.id, u);
        } else {
          // Not running: it is done now.
          if (!t.allocation_id.empty()) {
            WithdrawLocked(t);
            SetAllocationLocked(t, "");
          }
          if (!IsTerminal(t.state)) {
            SetTrialStateLocked(t, v1::TRIAL_STATE_COMPLETED);
            auto more = e.searcher->TrialClosed(t.request_id);
            ops.insert(ops.end(), more.begin(), more.end());
          }
        }
        break;
      }
      case SearcherOp::Kind::kShutdown:
        e.searcher_done = true;
        e.search_failed = op.failure;
        break;
    }
  }
  changed_.notify_all();
  MaybeFinishExperimentLocked(e);
}

void Cluster::MaybeFinishExperimentLocked(Experiment& e) {
  if (IsTerminal(e.state)) return;
  bool all_terminal = true;
  for (const auto& [req, tid] : e.trial_by_request) {
    if (!IsTerminal(trials_[tid].state)) all_terminal = false;
  }
  if (!all_terminal) return;
  if (e.state == v1::EXPERIMENT_STATE_STOPPING_CANCELED) {
    SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_CANCELED);
  } else if (e.searcher_done) {
    // The searcher judges by the metrics it got; the trials' ends count too. A trial whose
    // rank 0 reported its validation and completed the operation can still fail afterwards
    // (another rank raises, a checkpoint cannot be written): with no trial COMPLETED and one
    // in ERROR, the experiment failed, and says which trial and why.
    bool any_completed = false;
    const Trial* failed = nullptr;
    int errored = 0;
    for (const auto& [req, tid] : e.trial_by_request) {
      const Trial& t = trials_[tid];
      if (t.state == v1::TRIAL_STATE_COMPLETED) any_completed = true;
      if (t.state == v1::TRIAL_STATE_ERROR) {
        ++errored;
        if (!failed) failed = &t;
      }
    }
    if (e.search_failed || (!any_completed && failed)) {
      std::string why = "every trial failed";
      if (failed) {
        std::string reason = failed->error;
        const std::string self = "trial " + std::to_string(failed->id) + ": ";
        if (reason.rfind(self, 0) == 0) reason = reason.substr(self.size());
        if (!reason.empty()) reason = ": " + reason;
        why = errored == 1 ? "trial " + std::to_string(failed->id) + " failed" + reason
                           : why + " (" + std::to_string(errored) + " in ERROR; trial " +
                                 std::to_string(failed->id) + reason + ")";
      }
      SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_ERROR, why);
    } else {
      SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_COMPLETED);
    }
  }
}

void Cluster::SetExperimentStateLocked(Experiment& e, v1::ExperimentState s, const std::string& error) {
  e.state = s;
  Status st = store_->SetExperimentState(e.id, ExperimentStateName(s), error, IsTerminal(s));
  if (!st.ok()) log::Error("experiment", {{"event", "state_write_failed"}, {"error", st.message()}});
  log::Info("experiment", {{"event", "state"}, {"id", std::to_string(e.id)}, {"state", ExperimentStateName(s)}});
  if (IsTerminal(s)) SaveSearcherLocked(e);
  changed_.notify_all();
}

void Cluster::SetTrialStateLocked(Trial& t, v1::TrialState s, const std::string& error) {
  t.state = s;
  if (s == v1::TRIAL_STATE_ERROR) t.error = error;
  if (s != v1::TRIAL_STATE_QUEUED) {  // out of the queue: no reason of a pass before stays with it
    std::lock_guard<std::mutex> reasons(reasons_mu_);
    pending_reasons_.erase(t.id);
  }
  TrialUpdate u;
  u.state = TrialStateName(s);
  if (!error.empty()) u.error = error;
  u.set_end_time = IsTerminal(s);
  Status st = store_->UpdateTrial(t.id, u);
  if (!st.ok()) log::Error("trial", {{"event", "state_write_failed"}, {"error", st.message()}});
  log::Info("trial", {{"event", "state"}, {"id", std::to_string(t.id)}, {"state", TrialStateName(s)}});
  // A trial that ends no longer pins its newest checkpoint; one that pauses, is queued again or
  // runs keeps pinning it (nothing for retention to do: its checkpoints ask for their own pass).
  if (auto e = experiments_.find(t.experiment_id); e != experiments_.end() && IsTerminal(s)) {
    RequestRetentionLocked(e->second);
  }
  changed_.notify_all();
}

void Cluster::RequestRetentionLocked(const Experiment& e) {
  RetentionPolicy policy;
  if (e.config.checkpoint_storage) {
    policy.save_trial_latest = e.config.checkpoint_storage->save_trial_latest;
    policy.save_trial_best = e.config.checkpoint_storage->save_trial_best;
    policy.save_experiment_best = e.config.checkpoint_storage->save_experiment_best;
  }
  policy.smaller_is_better = e.config.searcher.smaller_is_better;
  retention_.Request(e.id, policy, ExperimentCheckpointDir(e.config, options_.checkpoint_root, e.id),
                     e.config.checkpoint_storage);
}

// An experiment that is not live (finished, or never existed) can't change state.
Status Cluster::NotLive(int64_t id, const std::string& verb) {
  auto row = store_->GetExperiment(id);
  if (row.ok() && row->has_value()) {
    return FailedPrecondition("experiment " + std::to_string(id) + " is " +
                              ExperimentStateName((*row)->state()) + " and cannot be " + verb);
  }
  return NotFound("experiment " + std::to_string(id) + " does not exist");
}

Status Cluster::PauseExperiment(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = experiments_.find(id);
  if (it == experiments_.end()) return NotLive(id, "paused");
  Experiment& e = it->second;
  if (e.unmanaged) {
    return FailedPrecondition("experiment " + std::to_string(id) +
                              " is unmanaged: its script runs outside the scheduler and cannot be paused (kill it)");
  }
  if (e.state == v1::EXPERIMENT_STATE_PAUSED) return Status::Ok();
  if (e.state != v1::EXPERIMENT_STATE_ACTIVE) {
    return FailedPrecondition("experiment " + std::to_string(id) + " is " + ExperimentStateName(e.state) +
                              " and cannot be paused");
  }
  SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_PAUSED);
  for (auto& [req, tid] : e.trial_by_request) {
    Trial& t = trials_[tid];
    if (IsTerminal(t.state)) continue;
    if (t.allocated) {
      SetStopLocked(t, "pause");  // the trainer checkpoints and exits at its next stop check
      TrialUpdate u;
      u.stop_requested = t.stop;
      (void)store_->UpdateTrial(t.id, u);
    } else {
      WithdrawLocked(t);
      SetAllocationLocked(t, "");
      SetTrialStateLocked(t, v1::TRIAL_STATE_PAUSED);
    }
  }
  return Status::Ok();
}

Status Cluster::ActivateExperiment(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = experiments_.find(id);
  if (it == experiments_.end()) return NotLive(id, "activated");
  Experiment& e = it->second;
  if (e.state == v1::EXPERIMENT_STATE_ACTIVE) return Status::Ok();
  if (e.state != v1::EXPERIMENT_STATE_PAUSED) {
    return FailedPrecondition("experiment " + std::to_string(id) + " is " + ExperimentStateName(e.state) +
                              " and cannot be activated");
  }
  SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_ACTIVE);
  for (auto& [req, tid] : e.trial_by_request) {
    Trial& t = trials_[tid];
    if (IsTerminal(t.state)) continue;
    if (t.stop == "pause") {
      SetStopLocked(t, "");
      TrialUpdate u;
      u.stop_requested = "";
      (void)store_->UpdateTrial(t.id, u);
    }
    if (!t.allocated && t.allocation_id.empty() && t.HasRunLeft()) {
      SetTrialStateLocked(t, v1::TRIAL_STATE_QUEUED);
      SubmitLocked(t);
    }
  }
  PublishReasonsSoonLocked();
  return Status::Ok();
}

Status Cluster::KillExperiment(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = experiments_.find(id);
  if (it == experiments_.end()) {
    auto row = store_->GetExperiment(id);
    if (row.ok() && row->has_value()) return Status::Ok();  // already terminal: nothing to kill
    return NotFound("experiment " + std::to_string(id) + " does not exist");
  }
  Experiment& e = it->second;
  if (IsTerminal(e.state) || e.state == v1::EXPERIMENT_STATE_STOPPING_CANCELED) return Status::Ok();
  SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_STOPPING_CANCELED);
  for (auto& [req, tid] : e.trial_by_request) {
    Trial& t = trials_[tid];
    if (IsTerminal(t.state)) continue;
    SetStopLocked(t, "kill");
    TrialUpdate u;
    u.stop_requested = t.stop;
    (void)store_->UpdateTrial(t.id, u);
    if (t.allocated) {
      KillTrialTasksLocked(t);
    } else {
      WithdrawLocked(t);
      SetAllocationLocked(t, "");
      SetTrialStateLocked(t, v1::TRIAL_STATE_CANCELED);
    }
  }
  MaybeFinishExperimentLocked(e);
  return Status::Ok();
}

Status Cluster::ArchiveExperiment(int64_t id) {
  auto row = store_->GetExperiment(id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return NotFound("experiment " + std::to_string(id) + " does not exist");
  if (!IsTerminal((*row)->state())) {
    return FailedPrecondition("experiment " + std::to_string(id) + " is " +
                              ExperimentStateName((*row)->state()) +
                              "; only completed, canceled or errored experiments can be archived");
  }
  return store_->SetExperimentArchived(id, true);
}

Status Cluster::UnarchiveExperiment(int64_t id) {
  auto row = store_->GetExperiment(id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return NotFound("experiment " + std::to_string(id) + " does not exist");
  return store_->SetExperimentArchived(id, false);
}

Status Cluster::DeleteExperiment(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = experiments_.find(id);
    if (it != experiments_.end() && !IsTerminal(it->second.state)) {
      return FailedPrecondition("experiment " + std::to_string(id) + " is " + ExperimentStateName(it->second.state) +
                                "; only completed, canceled or errored experiments can be deleted (kill it first)");
    }
  }
  // A terminal experiment never changes state again, so its rows can go without the lock (the
  // transaction re-checks the state); only forgetting it in memory needs the lock.
  SF_ASSIGN_OR_RETURN(DeletedExperiment deleted, DeleteExperimentRows(store_->db(), id, options_.checkpoint_root));
  {
    std::lock_guard<std::mutex> lock(mu_);
    experiments_.erase(id);
    std::erase_if(trials_, [this, id](const auto& entry) {
      if (entry.second.experiment_id != id) return false;
      registry_.Forget(entry.first);
      return true;
    });
  }
  log::Info("experiment", {{"event", "deleted"}, {"id", std::to_string(id)},
                           {"checkpoints", std::to_string(deleted.checkpoint_paths.size())}});
  auto removed = RemoveExperimentFiles(deleted);
  if (!removed.ok()) {
    return Internal("experiment " + std::to_string(id) + " was deleted, but its files were not: " +
                    removed.status().message());
  }
  return Status::Ok();
}

Status Cluster::DeleteCheckpoint(const std::string& uuid) {
  return ::sf::master::DeleteCheckpoint(store_->db(), uuid, options_.checkpoint_root);
}

Value Cluster::SearcherSummary(int64_t experiment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = experiments_.find(experiment_id);
  if (it == experiments_.end() || !it->second.searcher) return Value(Value::Map{});
  return it->second.searcher->Summary();
}

std::string Cluster::PendingReason(int64_t trial_id, bool queued) {
  std::lock_guard<std::mutex> lock(reasons_mu_);  // not mu_: list reads never wait on scheduling
  auto it = pending_reasons_.find(trial_id);
  if (it != pending_reasons_.end() && !it->second.empty()) return it->second;
  return queued ? "waiting for the scheduler's next pass" : "";
}

}  // namespace sf::master
