// The coordinator after a restart and over time (class Cluster, master/core/cluster.h):
// Recover() rebuilds live experiments, trials and allocations from PostgreSQL and hands the
// live allocations back to their managers (Adopt); the housekeeping loop lets the agents'
// manager fail over lost agents, ranks that never came back and trials no agent re-adopted,
// kills preempted trials past their grace period, and re-runs the scheduler. Split out of cluster.cc; the same lock (mu_) guards it.
#include "master/core/cluster.h"

#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "master/allocation/task_ids.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;
using std::chrono::steady_clock;

Status Cluster::Recover() {
  auto live = store_->LiveExperiments();
  if (!live.ok()) return live.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& row : *live) {
    config::ParseResult parsed = config::ParseExperimentConfig(row.config_yaml);
    if (!parsed.ok()) {
      (void)store_->SetExperimentState(row.id, "ERROR", "stored config no longer valid: " + parsed.ErrorText(), true);
      continue;
    }
    auto searcher = MakeSearchMethod(*parsed.config);
    if (!searcher.ok()) continue;
    Experiment& e = experiments_[row.id];
    e.id = row.id;
    e.config = std::move(*parsed.config);
    e.config_yaml = row.config_yaml;
    e.state = ExperimentStateFromName(row.state);
    e.searcher = std::move(searcher).value();
    e.context_sha256 = row.context_sha256;
    e.context_bytes = row.context_bytes;
    e.unmanaged = row.unmanaged;
    e.best = row.best;  // a restart forgets no best (searchers and get_experiment_best_validation)
    e.initial_checkpoint = row.initial_checkpoint;  // trials it creates from now on start there too
    auto snap = store_->LoadSearcherSnapshot(row.id);
    if (!snap.ok()) return snap.status();
    const bool never_stored = !snap->has_value();
    if (snap->has_value()) {
      const Value& s = **snap;
      if (const Value* inner = s.Find("searcher")) (void)e.searcher->Restore(*inner);
      if (const Value* d = s.Find("done"); d && d->is_bool()) e.searcher_done = d->as_bool();
      if (const Value* f = s.Find("failed"); f && f->is_bool()) e.search_failed = f->as_bool();
    }
    auto trials = store_->TrialRows(row.id);
    if (!trials.ok()) return trials.status();
    std::vector<int64_t> completed_requests;
    for (const TrialRow& tr : *trials) {
      Trial& t = trials_[tr.id];
      t.id = tr.id;
      t.experiment_id = tr.experiment_id;
      t.request_id = tr.request_id;
      t.state = TrialStateFromName(tr.state);
      t.hparams = tr.hparams;
      t.restarts = tr.restarts;
      registry_.Track(t.id, tr.total_batches);
      t.target_length = tr.target_length;
      t.completed_length = tr.completed_length;
      SetStopLocked(t, tr.stop_requested);
      t.latest_checkpoint_uuid = tr.latest_checkpoint_uuid;
      t.preempted_by = tr.preempted_by;
      t.allocations = tr.allocations;
      t.closing = tr.closing;
      t.latest_metric = tr.latest_validation_metric;
      e.trial_by_request[tr.request_id] = tr.id;
      if (t.state == v1::TRIAL_STATE_COMPLETED) completed_requests.push_back(tr.request_id);
      if (IsTerminal(t.state)) continue;
      // A closed trial whose last run failed runs again too (Trial::HasRunLeft): a master that
      // died before that run started would otherwise leave it QUEUED for ever.
      const bool to_run = t.HasRunLeft();
      if (e.unmanaged) {  // its script reports on; no agent runs it
        t.last_call = steady_clock::now();  // the timeout counts from the restart
        continue;
      }
      if (ExternalLocked(e)) {
        // Its job, if the manager took it before the restart, is watched again; else (a job id
        // never stored) it is submitted anew, and the manager's first pass cancels any job of
        // the old allocation that did start.
        const bool live_job = !tr.latest_allocation_external_id.empty() && tr.latest_allocation_state != "TERMINATED";
        const bool wanted = t.state == v1::TRIAL_STATE_RUNNING ||
                            (t.state == v1::TRIAL_STATE_QUEUED && e.state == v1::EXPERIMENT_STATE_ACTIVE && to_run);
        if (live_job && wanted) {
          AdoptExternalLocked(t, tr.latest_allocation_id, tr.latest_allocation_external_id, tr.latest_allocation_state);
        } else if (wanted && e.state == v1::EXPERIMENT_STATE_ACTIVE && to_run) {
          SubmitLocked(t);
        } else if (t.state == v1::TRIAL_STATE_RUNNING) {
          SetTrialStateLocked(t, e.state == v1::EXPERIMENT_STATE_PAUSED ? v1::TRIAL_STATE_PAUSED
                                                                        : v1::TRIAL_STATE_QUEUED);
        }
        continue;
      }
      if (t.state == v1::TRIAL_STATE_RUNNING) {
        // The agents report its ranks when they re-register; ranks none reports in time are
        // lost, and the trial restarts (master/rm/agents/agent_manager.h).
        SetAllocationLocked(t, tr.latest_allocation_id);
        t.world_size = static_cast<int>(e.config.resources.slots_per_trial);
        allocations_.Adopt({TaskKind::kTrial, t.id, t.restarts, GangLocked(e, t, /*with_ranks=*/false)}, "",
                           /*running=*/false);
        // Preempted before the restart: the trainer is asked again; the grace period restarts.
        if (t.stop == "preempt") t.preempt_deadline = steady_clock::now() + options_.preemption_grace;
      } else if (t.state == v1::TRIAL_STATE_QUEUED && e.state == v1::EXPERIMENT_STATE_ACTIVE && to_run) {
        SubmitLocked(t);
      }
    }
    // An experiment whose searcher never stored a snapshot: the master died between the
    // experiment's row (and perhaps some of its trials' rows) and the first snapshot. Its
    // searcher starts the search again; a request whose trial exists is that trial, not a
    // second one, and a trial that already did its operation is heard as done (ApplyOpsLocked).
    if (!e.unmanaged && never_stored) {
      log::Info("experiment", {{"event", "search_restarted"}, {"id", std::to_string(e.id)},
                               {"trials", std::to_string(e.trial_by_request.size())}});
      ApplyOpsLocked(e, e.searcher->InitialOperations());
      SaveSearcherLocked(e);
    }
    // A trial that completed after the searcher's last stored snapshot (the master died between
    // the trial's row and the snapshot): the searcher, restored without its close, hears it
    // again. Every search method ignores the close of a trial it has already closed, and a
    // trial the close makes it create again is the one created before (ApplyOpsLocked).
    if (!e.unmanaged) {
      std::vector<SearcherOp> ops;
      for (int64_t request : completed_requests) {
        auto more = e.searcher->TrialClosed(request);
        ops.insert(ops.end(), more.begin(), more.end());
      }
      if (!ops.empty()) {
        log::Info("experiment", {{"event", "closes_replayed"}, {"id", std::to_string(e.id)},
                                 {"ops", std::to_string(ops.size())}});
        ApplyOpsLocked(e, std::move(ops));
        SaveSearcherLocked(e);
      }
    }
    // Trials the searcher closed while we were down are marked by its snapshot; recompute.
    log::Info("experiment", {{"event", "recovered"}, {"id", std::to_string(e.id)}, {"state", row.state},
                             {"trials", std::to_string(e.trial_by_request.size())}});
    MaybeFinishExperimentLocked(e);
  }
  // Tasks of their own (servers) have their own lock and rows.
  return tasks_.Recover();
}

void Cluster::HousekeepingLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    changed_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping_; });  // a timer, not per change
    if (stopping_) break;
    auto now = steady_clock::now();
    // Preempted trials that ignored the request past the grace period: killed; they resume
    // from their latest checkpoint.
    for (auto& [tid, t] : trials_) {
      if (!t.preempt_deadline || now < *t.preempt_deadline || !t.allocated || t.stop != "preempt") continue;
      t.preempt_deadline.reset();
      t.preempt_killed = true;
      log::Warn("trial", {{"event", "preempt_grace_expired"}, {"id", std::to_string(tid)},
                          {"grace_seconds", std::to_string(options_.preemption_grace.count())}});
      KillTrialTasksLocked(t);
    }
    EndSilentUnmanagedLocked(now);
    PublishReasonsLocked();
  }
}

void Cluster::EndSilentUnmanagedLocked(steady_clock::time_point now) {
  for (auto& [tid, t] : trials_) {
    // A managed trial runs in an allocation (its liveness is its manager's); an unmanaged one never does.
    if (t.state != v1::TRIAL_STATE_RUNNING || t.allocated || now - t.last_call < options_.unmanaged_timeout) continue;
    auto e = experiments_.find(t.experiment_id);
    if (e == experiments_.end() || !e->second.unmanaged) continue;
    const auto quiet = std::chrono::duration_cast<std::chrono::seconds>(now - t.last_call).count();
    const std::string why = "trial " + std::to_string(t.id) + ": its unmanaged script made no call for " +
                            std::to_string(quiet) + " s (unmanaged_timeout_seconds): it ended without end_trial";
    log::Warn("trial", {{"event", "unmanaged_silent"}, {"id", std::to_string(t.id)}, {"reason", why}});
    // As EndTrial(failed) would have ended it.
    SetTrialStateLocked(t, v1::TRIAL_STATE_ERROR, why);
    e->second.searcher_done = true;
    e->second.search_failed = true;
    if (!IsTerminal(e->second.state)) SetExperimentStateLocked(e->second, v1::EXPERIMENT_STATE_ERROR, why);
  }
}

}  // namespace sf::master
