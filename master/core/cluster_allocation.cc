// The coordinator's allocation side (class Cluster, master/core/cluster.h): trials handed to
// the allocation service (master/allocation/allocation_service.h) as gangs (each rank's
// StartTask with its token, context and restore point), what it says back once it has recorded
// a manager's event (pending, running, preempt, exited), and what happens when an allocation
// ends or fails (restart from the latest checkpoint, or the trial's end).
//
// Lock discipline: every *Locked member here runs with mu_ held by its caller (the API,
// AgentLink and TrialLink entry points in the other cluster_*.cc files take it); nothing here
// blocks on the network or the database beyond the statements a transition writes. Updates
// arrive on each manager's delivery thread through OnAllocationUpdate, which takes mu_; the
// service's own lock is only ever taken after mu_.
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "master/core/cluster.h"
#include "master/allocation/task_ids.h"
#include "master/housekeeping/experiment_deletion.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;
using std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// Scheduling and tasks

std::string Cluster::CheckpointDirLocked(const Experiment& e, const Trial& t) const {
  return ExperimentCheckpointDir(e.config, options_.checkpoint_root, e.id) + "/trial-" + std::to_string(t.id);
}

int64_t Cluster::TrialSeed(const Experiment& e, const Trial& t) {
  // splitmix64's finaliser over (experiment seed, request id): neighbouring ids give unrelated seeds.
  uint64_t z = static_cast<uint64_t>(e.config.experiment_seed.value_or(e.id)) * 0x9E3779B97F4A7C15ULL +
               static_cast<uint64_t>(t.request_id);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<int64_t>(z & 0x7FFFFFFFULL);
}

void Cluster::SubmitLocked(Trial& t, bool keep_place) {
  Experiment& e = experiments_[t.experiment_id];
  SetAllocationLocked(t, AllocationId(t.id, t.restarts, ++t.allocations));
  if (!keep_place || t.submit_order == 0) t.submit_order = allocations_.NextSubmitOrder();
  if (t.state != v1::TRIAL_STATE_QUEUED) SetTrialStateLocked(t, v1::TRIAL_STATE_QUEUED);
  t.world_size = static_cast<int>(e.config.resources.slots_per_trial);
  t.first_failure.clear();
  t.exit_codes.clear();
  TaskLaunch request{TaskKind::kTrial, t.id, t.restarts, GangLocked(e, t, /*with_ranks=*/true)};
  t.restore = request.gang.ranks.empty() ? "" : request.gang.ranks[0].restore_checkpoint();
  log::Info("trial", {{"event", "submitted"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                      {"manager", allocations_.ManagerKind(request.gang.pool)}, {"pool", request.gang.pool},
                      {"world_size", std::to_string(t.world_size)}, {"restore", t.restore}});
  allocations_.Submit(std::move(request));
}

rm::GangLaunch Cluster::GangLocked(const Experiment& e, const Trial& t, bool with_ranks) {
  rm::GangLaunch gang;
  gang.allocation_id = t.allocation_id;
  gang.trial_id = t.id;
  gang.experiment_id = e.id;
  gang.pool = e.config.resources.resource_pool;
  gang.world_size = static_cast<int>(e.config.resources.slots_per_trial);
  gang.priority = static_cast<int>(e.config.resources.priority);
  gang.weight = e.config.resources.weight;
  gang.max_slots = static_cast<int>(e.config.resources.max_slots.value_or(0));
  gang.submit_order = t.submit_order;
  gang.preempted_by = t.preempted_by;
  gang.requests.time = e.config.slurm.time;
  gang.requests.account = e.config.slurm.account;
  gang.requests.qos = e.config.slurm.qos;
  gang.requests.sbatch_args = e.config.slurm.sbatch_args;
  if (!with_ranks) return gang;
  std::string restore;
  std::vector<Store::CheckpointPlace> fallbacks;  // when `restore` fails verification
  if (!t.latest_checkpoint_uuid.empty()) {
    auto ck = store_->GetCheckpoint(t.latest_checkpoint_uuid);
    if (ck.ok() && ck->has_value()) restore = (*ck)->path();
  }
  if (!restore.empty()) {  // fallbacks only for a checkpoint it resumes from
    constexpr int kRestoreFallbacks = 8;
    auto older = store_->RestoreFallbacks(t.id, t.latest_checkpoint_uuid, kRestoreFallbacks);
    if (older.ok()) fallbacks = std::move(older).value();
  }
  // What the ranks dial: an external pool's nodes may need another address than the agents'.
  auto address = options_.external_trial_link_address.find(gang.pool);
  const std::string master = address == options_.external_trial_link_address.end() || address->second.empty()
                                 ? options_.trial_link_address
                                 : address->second;
  for (int rank = 0; rank < gang.world_size; ++rank) {
    gang.ranks.push_back(TaskSpecLocked(e, t, rank, gang.world_size, restore, master));
    for (const Store::CheckpointPlace& f : fallbacks) {
      v1::RestoreFallback* out = gang.ranks.back().add_restore_fallbacks();
      out->set_uuid(f.uuid);
      out->set_path(f.path);
    }
  }
  return gang;
}

void Cluster::WithdrawLocked(Trial& t) {
  if (!t.allocation_id.empty()) allocations_.Withdraw(t.allocation_id);
}

void Cluster::OnAllocationUpdate(const AllocationUpdate& update) {
  std::lock_guard<std::mutex> lock(mu_);
  AllocationUpdateLocked(update);
  // A Pending event updates its own trial's reason; the others change which trials wait (a pass
  // over every trial, not one per queued gang's reason).
  if (update.event.kind != rm::AllocationEvent::Kind::kPending) PublishReasonsSoonLocked();
}

namespace {
constexpr std::chrono::milliseconds kReasonsEvery{200};
}  // namespace

void Cluster::PublishReasonsSoonLocked() {
  if (steady_clock::now() - reasons_published_ >= kReasonsEvery) {
    PublishReasonsLocked();
  } else {
    reasons_stale_ = true;  // HousekeepingLoop runs it
  }
}

void Cluster::PublishReasonsLocked() {
  if (options_.scheduling_pass_hook) options_.scheduling_pass_hook();
  reasons_stale_ = false;
  // Publish why each queued trial waits, for PendingReason().
  std::map<int64_t, std::string> reasons;
  const std::map<std::string, std::string> waiting = allocations_.PendingReasons();
  for (const auto& [id, t] : trials_) {
    auto reason = t.allocation_id.empty() ? waiting.end() : waiting.find(t.allocation_id);
    if (t.state == v1::TRIAL_STATE_RUNNING && t.allocated && reason != waiting.end()) {
      reasons[id] = reason->second;  // held by its manager (Slurm: SUSPENDED)
      continue;
    }
    if (t.state != v1::TRIAL_STATE_QUEUED) continue;
    if (t.allocation_id.empty()) {
      reasons[id] = "waiting for the searcher's next operation";
    } else if (reason != waiting.end()) {
      reasons[id] = reason->second;
    } else if (t.preempted_by != 0) {
      // Queued again after its preemption, not yet in its manager's queue: the preemption is
      // still why it waits (not a passing "submitting to ...").
      reasons[id] = PreemptedReason(t.preempted_by);
    } else if (auto e = experiments_.find(t.experiment_id); e != experiments_.end()) {
      reasons[id] = "submitting to " + allocations_.ManagerKind(e->second.config.resources.resource_pool);
    }
  }
  std::lock_guard<std::mutex> lock(reasons_mu_);
  pending_reasons_ = std::move(reasons);
  reasons_published_ = steady_clock::now();  // after the walk: a long pass is not followed by another at once
}

void Cluster::AllocationUpdateLocked(const AllocationUpdate& update) {
  const rm::AllocationEvent& event = update.event;
  // The allocation id names its trial; a trial that has moved on to another allocation (or ended)
  // does not take the event.
  Trial* found = FindTrialLocked(update.owner);
  if (found && found->allocation_id != event.allocation_id) found = nullptr;
  using Kind = rm::AllocationEvent::Kind;
  if (!found) {
    // Ended meanwhile (a killed one): nothing may run it.
    if (event.kind == Kind::kRunning) allocations_.Kill(event.allocation_id);
    return;
  }
  Trial& t = *found;
  Experiment& e = experiments_[t.experiment_id];
  switch (event.kind) {
    case Kind::kSubmitted:
      break;  // its job id is the allocation's (the service stored it)
    case Kind::kPending: {
      // Queued: why it waits. Running: why its manager holds it (Slurm: SUSPENDED), until an
      // empty reason says it runs again.
      std::lock_guard<std::mutex> reasons(reasons_mu_);
      if (t.state == v1::TRIAL_STATE_QUEUED || (t.state == v1::TRIAL_STATE_RUNNING && !event.reason.empty())) {
        pending_reasons_[t.id] = event.reason;
      } else if (t.state == v1::TRIAL_STATE_RUNNING) {
        pending_reasons_.erase(t.id);
      }
      break;
    }
    case Kind::kRunning:
      AllocationRunningLocked(t, update.where);
      break;
    case Kind::kPreempt: {
      if (!t.stop.empty()) break;  // stopping anyway
      SetStopLocked(t, "preempt");  // the trainer checkpoints and exits at its next stop check
      t.preempt_deadline = steady_clock::now() + options_.preemption_grace;
      TrialUpdate u;
      u.stop_requested = t.stop;
      if (event.for_trial_id > 0) u.preempted_by = t.preempted_by = event.for_trial_id;
      (void)store_->UpdateTrial(t.id, u);
      log::Info("trial", {{"event", "preempt"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                          {"for", event.reason}});
      break;
    }
    case Kind::kExited: {
      log::Info("trial", {{"event", "allocation_exited"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                          {"manager", update.manager}, {"job", update.external_id}, {"reason", event.reason}});
      if (event.refused) {
        // The manager will never run this request: as an invalid experiment, no restart.
        const std::string why = "trial " + std::to_string(t.id) + ": " + event.reason;
        ReleaseLocked(t);
        SetTrialStateLocked(t, v1::TRIAL_STATE_ERROR, why);
        ApplyOpsLocked(e, e.searcher->TrialExitedEarly(t.request_id, ExitReason::kErrored));
        SaveSearcherLocked(e);
        MaybeFinishExperimentLocked(e);
        break;
      }
      SetAllocatedLocked(t, true);  // so AllocationExitedLocked releases it and decides
      t.exit_codes = event.exit_codes;
      if (event.preempted && t.stop.empty()) {
        // The resource manager took the nodes back: it resumes from its checkpoint, not a restart.
        SetStopLocked(t, "preempt");
        t.preempt_killed = true;
      }
      bool success = !t.exit_codes.empty();
      for (auto [rank, code] : t.exit_codes) success = success && code == 0;
      if (!success) {
        // A rank that said why (ReportExit) is kept only while no stop was asked for.
        t.first_failure = update.reported_failure;
        if (t.first_failure.empty() && t.stop.empty()) t.first_failure = event.first_failure;
        if (t.first_failure.empty()) {
          t.first_failure = event.reason;
        } else if (!update.external_id.empty()) {
          // A rank said why; the job is named as its manager calls it.
          t.first_failure += " (" + std::string(update.manager == "slurm" ? "Slurm" : update.manager) + " job " +
                             update.external_id + ")";
        }
      }
      AllocationExitedLocked(t, update.rank_hosts);
      break;
    }
  }
}

void Cluster::AllocationRunningLocked(Trial& t, const std::string& where) {
  if (t.allocated) return;  // seen before (a rank of an external job called in first)
  SetAllocatedLocked(t, true);
  t.exit_codes.clear();
  t.first_failure.clear();
  t.told_to_stop = false;
  t.early_exit = 0;
  SetTrialStateLocked(t, v1::TRIAL_STATE_RUNNING);
  if (t.preempted_by != 0) {  // it runs again: the preemption is over
    t.preempted_by = 0;
    TrialUpdate u;
    u.preempted_by = 0;
    (void)store_->UpdateTrial(t.id, u);
  }
  log::Info("trial", {{"event", "started"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                      {"world_size", std::to_string(t.world_size)}, {"where", where}, {"restore", t.restore}});
}

v1::StartTask Cluster::TaskSpecLocked(const Experiment& e, const Trial& t, int rank, int world_size,
                                      const std::string& restore, const std::string& master_address) {
  v1::StartTask s;
  s.set_task_id(TaskId(t.allocation_id, rank));
  s.set_trial_id(t.id);
  s.set_experiment_id(e.id);
  s.set_rank(rank);
  s.set_world_size(world_size);
  s.set_config_yaml(e.config_yaml);
  *s.mutable_hparams() = ValueToStruct(t.hparams);
  s.set_master_address(master_address);
  s.set_restore_checkpoint(restore);
  s.set_checkpoint_dir(CheckpointDirLocked(e, t));
  s.set_restart(t.restarts);
  (*s.mutable_env())["SF_TRIAL_SEED"] = std::to_string(TrialSeed(e, t));
  if (!restore.empty()) s.set_restore_checkpoint_uuid(t.latest_checkpoint_uuid);
  if (e.config.has_entrypoint()) {
    // Where the code came from, for data beside it on a shared filesystem (docs/core-api.md).
    if (e.config.context_directory) (*s.mutable_env())["SF_CONTEXT_DIRECTORY"] = *e.config.context_directory;
    for (const std::string& part : e.config.entrypoint) s.add_entrypoint(part);
    s.set_entrypoint_shell(e.config.entrypoint_is_shell);
    s.set_context_sha256(e.context_sha256);
    s.set_context_bytes(e.context_bytes);
  }
  if (options_.task_tokens) {
    s.set_task_token(options_.task_tokens->Issue({t.id, rank, t.restarts, s.task_id()}));
  }
  return s;
}

void Cluster::KillTrialTasksLocked(Trial& t) {
  if (!t.allocation_id.empty()) allocations_.Kill(t.allocation_id);
}

void Cluster::SetAllocationLocked(Trial& t, const std::string& allocation_id) {
  t.allocation_id = allocation_id;
  registry_.SetAllocation(t.id, allocation_id);
}

void Cluster::SetStopLocked(Trial& t, const std::string& stop) {
  t.stop = stop;
  registry_.SetStop(t.id, stop);
}

void Cluster::SetAllocatedLocked(Trial& t, bool allocated) {
  t.allocated = allocated;
  registry_.SetRunning(t.id, allocated);
}

void Cluster::ReleaseLocked(Trial& t) {
  if (!t.allocation_id.empty()) allocations_.Release(t.allocation_id);
  SetAllocatedLocked(t, false);
  SetAllocationLocked(t, "");
}

// Every rank of the trial's allocation has exited: decide what happens to the trial.
void Cluster::AllocationExitedLocked(Trial& t, const std::map<int, std::string>& rank_hosts) {
  Experiment& e = experiments_[t.experiment_id];
  bool success = true;
  for (auto [rank, code] : t.exit_codes) success = success && code == 0;
  ReleaseLocked(t);
  // A preemption ends with the run: the trial's next run starts with no stop request.
  const bool preempted = t.stop == "preempt" && (success || t.preempt_killed);
  if (t.stop == "preempt" || (!preempted && t.preempted_by != 0)) {
    SetStopLocked(t, "");
    TrialUpdate u;
    u.stop_requested = "";
    if (!preempted) u.preempted_by = t.preempted_by = 0;  // it ended otherwise: no one to wait for
    (void)store_->UpdateTrial(t.id, u);
  }
  t.preempt_deadline.reset();
  t.preempt_killed = false;
  const int early_exit = std::exchange(t.early_exit, 0);
  if (t.stop == "kill") {
    SetTrialStateLocked(t, v1::TRIAL_STATE_CANCELED);
    auto ops = e.searcher->TrialExitedEarly(t.request_id, ExitReason::kUserCanceled);
    ApplyOpsLocked(e, ops);
  } else if (success && early_exit != 0 && t.stop.empty() && t.completed_length < t.target_length) {
    // The script ended its operation early and said why (report_early_exit): the searcher acts
    // on the reason; no restart.
    const std::string who = "trial " + std::to_string(t.id) + ": ";
    if (early_exit == v1::ReportEarlyExitRequest::REASON_USER_REQUESTED_STOP) {
      SetTrialStateLocked(t, v1::TRIAL_STATE_COMPLETED);
      ApplyOpsLocked(e, e.searcher->TrialExitedEarly(t.request_id, ExitReason::kUserCanceled));
    } else if (early_exit == v1::ReportEarlyExitRequest::REASON_INVALID_HYPERPARAMETERS) {
      SetTrialStateLocked(t, v1::TRIAL_STATE_ERROR,
                          who + "the script reported its hyperparameters invalid (report_early_exit INVALID_HP)");
      ApplyOpsLocked(e, e.searcher->TrialExitedEarly(t.request_id, ExitReason::kInvalidHyperparameters));
    } else {
      SetTrialStateLocked(t, v1::TRIAL_STATE_ERROR, who + "the script reported an error (report_early_exit ERRORED)");
      ApplyOpsLocked(e, e.searcher->TrialExitedEarly(t.request_id, ExitReason::kErrored));
    }
  } else if (t.stop == "pause" && success) {
    SetTrialStateLocked(t, v1::TRIAL_STATE_PAUSED);
  } else if (success && t.closing && t.completed_length >= t.target_length) {
    SetTrialStateLocked(t, v1::TRIAL_STATE_COMPLETED);
    ApplyOpsLocked(e, e.searcher->TrialClosed(t.request_id));
  } else if (preempted) {
    // Checkpointed and stopped for a trial of higher priority (or a fairer share): back to the
    // queue, to resume from that checkpoint, as after a pause. Not a restart.
    if (e.state == v1::EXPERIMENT_STATE_ACTIVE && t.target_length > t.completed_length) {
      SubmitLocked(t, /*keep_place=*/true);
    } else {
      SetTrialStateLocked(t, e.state == v1::EXPERIMENT_STATE_PAUSED ? v1::TRIAL_STATE_PAUSED : v1::TRIAL_STATE_QUEUED);
    }
  } else if (success && t.completed_length >= t.target_length && !t.closing) {
    // The trainer finished its operation and exited; it resumes when the searcher has more.
    SetTrialStateLocked(t, v1::TRIAL_STATE_QUEUED);
    if (e.state == v1::EXPERIMENT_STATE_ACTIVE && t.target_length > t.completed_length) SubmitLocked(t);
  } else if (success && t.stop.empty() && t.completed_length < t.target_length && t.told_to_stop) {
    // It checkpointed and stopped as asked (a pause or preemption withdrawn before it exited,
    // e.g. pause then activate): it resumes from that checkpoint.
    if (e.state == v1::EXPERIMENT_STATE_ACTIVE) {
      SubmitLocked(t, /*keep_place=*/true);
    } else {
      SetTrialStateLocked(t, v1::TRIAL_STATE_PAUSED);
    }
  } else if (success && t.stop.empty() && t.completed_length < t.target_length && e.config.has_entrypoint()) {
    // User code returned 0 on every rank with its operation unfinished and no stop asked for:
    // it ended without training to the searcher's length (or never asked for it). Running it
    // again would end the same way. (A native trainer exits 0 early only when signalled: it
    // checkpointed, and is restarted below.)
    const std::string unit =
        e.config.searcher.max_length.unit == config::Length::Unit::kEpochs ? "epochs" : "batches";
    const std::string why =
        "trial " + std::to_string(t.id) + ": the entrypoint exited with status 0 before completing its searcher operation (train to " +
        std::to_string(t.target_length) + " " + unit + "; completed " + std::to_string(t.completed_length) +
        "): it must report_completed each operation from searcher.operations() (docs/core-api.md)";
    log::Warn("trial", {{"event", "exited_early"}, {"id", std::to_string(t.id)}, {"reason", why}});
    SetTrialStateLocked(t, v1::TRIAL_STATE_ERROR, why);
    ApplyOpsLocked(e, e.searcher->TrialExitedEarly(t.request_id, ExitReason::kErrored));
  } else {
    std::string why = t.first_failure;
    if (why.empty()) {
      why = "trainer exited with";
      for (auto [rank, code] : t.exit_codes) {
        why += " rank " + std::to_string(rank) + "=" + std::to_string(code);
        if (auto host = rank_hosts.find(rank); code == -1 && host != rank_hosts.end()) {
          why += " (agent " + host->second + " lost)";
        }
      }
    }
    TrialFailedLocked(t, why);
  }
  SaveSearcherLocked(e);
  MaybeFinishExperimentLocked(e);
  PublishReasonsSoonLocked();
}

void Cluster::TrialFailedLocked(Trial& t, const std::string& why) {
  Experiment& e = experiments_[t.experiment_id];
  if (t.restarts < e.config.max_restarts && e.state != v1::EXPERIMENT_STATE_STOPPING_CANCELED) {
    t.restarts++;
    TrialUpdate u;
    u.restarts = t.restarts;
    u.error = why;
    (void)store_->UpdateTrial(t.id, u);
    log::Warn("trial", {{"event", "restart"}, {"id", std::to_string(t.id)}, {"restarts", std::to_string(t.restarts)},
                        {"reason", why}});
    if (e.state == v1::EXPERIMENT_STATE_ACTIVE) {
      SubmitLocked(t);
    } else {
      SetTrialStateLocked(t, v1::TRIAL_STATE_PAUSED);
    }
    return;
  }
  SetTrialStateLocked(t, v1::TRIAL_STATE_ERROR, why);
  ApplyOpsLocked(e, e.searcher->TrialExitedEarly(t.request_id, ExitReason::kErrored));
}

}  // namespace sf::master
