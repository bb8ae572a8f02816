// The coordinator's allocation side (class Cluster, master/core/cluster.h): trials submitted to
// the scheduler, placed on agents' slots (their tasks started with tokens, contexts and
// rendezvous), released, and what happens when an allocation's tasks exit or fail (restart
// from the latest checkpoint, or the trial's end).
//
// Lock discipline: every *Locked member here runs with mu_ held by its caller (the API,
// AgentLink and TrialLink entry points in the other cluster_*.cc files take it); nothing here
// blocks on the network or the database beyond the statements a transition writes. Messages
// to agents are queued on their connections, written by the connections' own threads.
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/log.h"
#include "master/core/cluster.h"
#include "master/core/task_ids.h"
#include "master/housekeeping/experiment_deletion.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;
using std::chrono::steady_clock;

namespace {

double SchedulerNow() {
  return std::chrono::duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Scheduling and tasks

std::string Cluster::CheckpointDirLocked(const Experiment& e, const Trial& t) const {
  return ExperimentCheckpointDir(e.config, options_.checkpoint_root, e.id) + "/trial-" + std::to_string(t.id);
}

void Cluster::SubmitLocked(Trial& t, bool keep_place) {
  Experiment& e = experiments_[t.experiment_id];
  t.allocation_id = AllocationId(t.id, t.restarts, ++t.allocations);
  AllocationRequest req;
  req.allocation_id = t.allocation_id;
  req.experiment_id = e.id;
  req.trial_id = t.id;
  req.resource_pool = e.config.resources.resource_pool;
  req.slots = static_cast<int>(e.config.resources.slots_per_trial);
  req.priority = static_cast<int>(e.config.resources.priority);
  req.max_slots = static_cast<int>(e.config.resources.max_slots.value_or(0));
  req.weight = e.config.resources.weight;
  static int64_t submit_order = 0;
  if (!keep_place || t.submit_order == 0) t.submit_order = ++submit_order;
  req.submit_order = t.submit_order;
  (void)store_->CreateAllocation(t.allocation_id, t.id, t.restarts);
  if (t.state != v1::TRIAL_STATE_QUEUED) SetTrialStateLocked(t, v1::TRIAL_STATE_QUEUED);
  if (rm::ResourceManager* manager = ExternalManagerLocked(e)) {
    SubmitExternalLocked(t, *manager);
    return;
  }
  scheduler_.Submit(req);
}

void Cluster::WithdrawLocked(Trial& t) {
  if (t.allocation_id.empty()) return;
  if (rm::ResourceManager* manager = ExternalManagerLocked(experiments_[t.experiment_id])) {
    manager->Kill(t.allocation_id);
    rendezvous_.Close(t.allocation_id);
  } else {
    scheduler_.Release(t.allocation_id);
  }
}

void Cluster::ScheduleLocked() {
  const double now = SchedulerNow();
  for (const Assignment& a : scheduler_.Schedule(now)) {
    Trial* found = nullptr;
    for (auto& [id, t] : trials_) {
      if (t.allocation_id == a.allocation_id) found = &t;
    }
    if (!found) {
      scheduler_.Release(a.allocation_id);
      continue;
    }
    StartAllocationLocked(*found, a);
  }
  for (const Preemption& p : scheduler_.Preempt(now)) {
    Trial* t = FindTrialLocked(p.trial_id);
    if (!t || t->allocation_id != p.allocation_id || !t->stop.empty()) continue;  // stopping anyway
    t->stop = "preempt";  // the trainer checkpoints and exits at its next stop check
    t->preempt_deadline = steady_clock::now() + options_.preemption_grace;
    TrialUpdate u;
    u.stop_requested = t->stop;
    (void)store_->UpdateTrial(t->id, u);
    log::Info("trial", {{"event", "preempt"}, {"id", std::to_string(t->id)}, {"allocation", p.allocation_id},
                        {"for_trial", std::to_string(p.for_trial_id)}});
  }
  // Publish why each queued trial waits, for PendingReason().
  std::map<int64_t, std::string> reasons;
  for (const auto& [id, t] : trials_) {
    if (t.state != v1::TRIAL_STATE_QUEUED) continue;
    if (t.allocation_id.empty()) {
      reasons[id] = "waiting for the searcher's next operation";
    } else if (auto e = experiments_.find(t.experiment_id); e != experiments_.end() && ExternalManagerLocked(e->second)) {
      reasons[id] = t.external_reason.empty() ? "submitting to " + ExternalManagerLocked(e->second)->Kind()
                                              : t.external_reason;
    } else {
      reasons[id] = scheduler_.PendingReason(t.allocation_id);
    }
  }
  std::lock_guard<std::mutex> lock(reasons_mu_);
  pending_reasons_ = std::move(reasons);
}

void Cluster::StartAllocationLocked(Trial& t, const Assignment& a) {
  Experiment& e = experiments_[t.experiment_id];
  t.allocated = true;
  t.slots = a.slots;
  t.world_size = static_cast<int>(a.slots.size());
  t.live_ranks.clear();
  t.exit_codes.clear();
  t.first_failure.clear();
  t.rank_agent.clear();
  t.told_to_stop = false;
  Value::List slots;
  for (const SlotRef& s : a.slots) slots.push_back(Value(Value::Map{{"agent_id", s.agent_id}, {"slot_id", s.slot_id}}));
  (void)store_->UpdateAllocation(t.allocation_id, "ASSIGNED", Value(slots), false);
  SetTrialStateLocked(t, v1::TRIAL_STATE_RUNNING);
  // One task per agent slot group: ranks are per slot (one trainer per slot).
  std::string restore;
  if (!t.latest_checkpoint_uuid.empty()) {
    auto ck = store_->GetCheckpoint(t.latest_checkpoint_uuid);
    if (ck.ok() && ck->has_value()) restore = (*ck)->path();
  }
  // Each rank's index among the trial's ranks on its agent (LOCAL_RANK), and their number.
  std::map<std::string, int> ranks_on_agent;
  std::vector<int> local_rank(a.slots.size());
  for (size_t rank = 0; rank < a.slots.size(); ++rank) local_rank[rank] = ranks_on_agent[a.slots[rank].agent_id]++;
  for (int rank = 0; rank < t.world_size; ++rank) {
    const SlotRef& slot = a.slots[rank];
    auto agent = agents_.find(slot.agent_id);
    t.rank_agent[rank] = slot.agent_id;
    t.live_ranks.insert(rank);
    if (agent == agents_.end() || !agent->second.conn) {
      t.exit_codes[rank] = -1;
      t.live_ranks.erase(rank);
      continue;
    }
    v1::MasterMessage m;
    v1::StartTask* s = m.mutable_start_task();
    *s = TaskSpecLocked(e, t, rank, t.world_size, restore, options_.trial_link_address);
    s->add_slot_ids(slot.slot_id);
    s->set_local_rank(local_rank[rank]);
    s->set_local_size(ranks_on_agent[slot.agent_id]);
    agent->second.conn->Send(m);
  }
  std::vector<std::string> rank_agents;
  for (int rank = 0; rank < t.world_size; ++rank) rank_agents.push_back(t.rank_agent[rank]);
  rendezvous_.Open(t.allocation_id, std::move(rank_agents));
  log::Info("trial", {{"event", "started"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                      {"world_size", std::to_string(t.world_size)}, {"restore", restore}});
  if (t.live_ranks.empty()) AllocationExitedLocked(t);
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
    // The bearer token its clients send (master/serving/serving.h), in the environment only.
    if (e.serving) (*s.mutable_env())["SF_SERVE_TOKEN"] = options_.task_tokens->IssueServing(e.id);
  }
  return s;
}

void Cluster::KillTrialTasksLocked(Trial& t) {
  if (rm::ResourceManager* manager = ExternalManagerLocked(experiments_[t.experiment_id])) {
    if (!t.allocation_id.empty()) manager->Kill(t.allocation_id);
    return;
  }
  for (int rank : t.live_ranks) {
    auto agent = agents_.find(t.rank_agent[rank]);
    if (agent == agents_.end() || !agent->second.conn) continue;
    v1::MasterMessage m;
    m.mutable_kill_task()->set_task_id(TaskId(t.allocation_id, rank));
    m.mutable_kill_task()->set_grace_period_ms(static_cast<int32_t>(options_.kill_grace.count()));
    agent->second.conn->Send(m);
  }
}

void Cluster::ReleaseLocked(Trial& t) {
  if (!t.allocation_id.empty()) {
    rendezvous_.Close(t.allocation_id);
    scheduler_.Release(t.allocation_id);
    Value codes(Value::Map{});
    for (auto [rank, code] : t.exit_codes) codes.as_map()[std::to_string(rank)] = code;
    (void)store_->UpdateAllocation(t.allocation_id, "TERMINATED", Value(Value::List{}), true);
  }
  t.allocated = false;
  t.allocation_id.clear();
  t.slots.clear();
  t.live_ranks.clear();
  t.missing_ranks.clear();
  t.adopt_deadline.reset();
  t.external_id.clear();
  t.external_reason.clear();
}

// Every rank of the trial's allocation has exited: decide what happens to the trial.
void Cluster::AllocationExitedLocked(Trial& t) {
  Experiment& e = experiments_[t.experiment_id];
  bool success = true;
  for (auto [rank, code] : t.exit_codes) success = success && code == 0;
  ReleaseLocked(t);
  // A preemption ends with the run: the trial's next run starts with no stop request.
  const bool preempted = t.stop == "preempt" && (success || t.preempt_killed);
  if (t.stop == "preempt") {
    t.stop.clear();
    TrialUpdate u;
    u.stop_requested = "";
    (void)store_->UpdateTrial(t.id, u);
  }
  t.preempt_deadline.reset();
  t.preempt_killed = false;
  if (t.stop == "kill") {
    SetTrialStateLocked(t, v1::TRIAL_STATE_CANCELED);
    auto ops = e.searcher->TrialExitedEarly(t.request_id, ExitReason::kUserCanceled);
    ApplyOpsLocked(e, ops);
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
        if (code == -1 && t.rank_agent.count(rank)) why += " (agent " + t.rank_agent[rank] + " lost)";
      }
    }
    TrialFailedLocked(t, why);
  }
  SaveSearcherLocked(e);
  MaybeFinishExperimentLocked(e);
  ScheduleLocked();
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
