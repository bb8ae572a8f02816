// The coordinator's side of allocations another resource manager places (class Cluster,
// master/core/cluster.h; the seam: master/rm/resource_manager.h; Slurm: docs/slurm.md).
//
// A trial in an external pool bypasses the master's scheduler: SubmitLocked hands the gang —
// one StartTask per rank, tokens included — to the pool's manager, which answers with events on
// its own thread (ExternalEvent takes mu_ like any entry point). Submitted stores the job id with
// the allocation (a restarted master adopts the job by it); Pending keeps the manager's reason
// for PendingReason(); Running marks the trial RUNNING; Exited decides the trial exactly as the
// agents' exits do (AllocationExitedLocked: done, paused, preempted, restarted from the latest
// checkpoint, or failed), with the manager's one-line reason as the failure.
#include <string>
#include <vector>

#include "common/log.h"
#include "common/utf8.h"
#include "master/core/cluster.h"
#include "master/core/task_ids.h"

namespace sf::master {
namespace v1 = steadfast::v1;

rm::ResourceManager* Cluster::ExternalManagerLocked(const Experiment& e) const {
  auto it = options_.external_pools.find(e.config.resources.resource_pool);
  return it == options_.external_pools.end() ? nullptr : it->second;
}

void Cluster::SubmitExternalLocked(Trial& t, rm::ResourceManager& manager) {
  Experiment& e = experiments_[t.experiment_id];
  std::string restore;
  if (!t.latest_checkpoint_uuid.empty()) {
    auto ck = store_->GetCheckpoint(t.latest_checkpoint_uuid);
    if (ck.ok() && ck->has_value()) restore = (*ck)->path();
  }
  const std::string& pool = e.config.resources.resource_pool;
  auto address = options_.external_trial_link_address.find(pool);
  const std::string master = address == options_.external_trial_link_address.end() || address->second.empty()
                                 ? options_.trial_link_address
                                 : address->second;
  rm::GangLaunch launch;
  launch.allocation_id = t.allocation_id;
  launch.trial_id = t.id;
  launch.experiment_id = e.id;
  launch.pool = pool;
  const int world = static_cast<int>(e.config.resources.slots_per_trial);
  for (int rank = 0; rank < world; ++rank) launch.ranks.push_back(TaskSpecLocked(e, t, rank, world, restore, master));
  launch.requests.time = e.config.slurm.time;
  launch.requests.account = e.config.slurm.account;
  launch.requests.qos = e.config.slurm.qos;
  launch.requests.sbatch_args = e.config.slurm.sbatch_args;
  t.world_size = world;
  t.external_id.clear();
  t.external_reason.clear();
  // The ranks may call Rendezvous before the manager has seen the job run.
  rendezvous_.Open(t.allocation_id, std::vector<std::string>(world, manager.Kind() + " job"));
  log::Info("trial", {{"event", "submit_external"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                      {"manager", manager.Kind()}, {"pool", pool}, {"world_size", std::to_string(world)},
                      {"restore", restore}});
  manager.Submit(std::move(launch));
}

void Cluster::AdoptExternalLocked(Trial& t, const std::string& allocation_id, const std::string& external_id,
                                  const std::string& allocation_state) {
  Experiment& e = experiments_[t.experiment_id];
  rm::ResourceManager* manager = ExternalManagerLocked(e);
  if (!manager) return;
  const int world = static_cast<int>(e.config.resources.slots_per_trial);
  t.allocation_id = allocation_id;
  t.external_id = external_id;
  t.world_size = world;
  manager->Adopt(allocation_id, external_id, world);
  rendezvous_.Open(allocation_id, std::vector<std::string>(world, manager->Kind() + " job " + external_id));
  if (t.state == v1::TRIAL_STATE_RUNNING) {
    t.allocated = true;
    for (int rank = 0; rank < world; ++rank) t.live_ranks.insert(rank);
  }
  log::Info("trial", {{"event", "adopt_external"}, {"id", std::to_string(t.id)}, {"allocation", allocation_id},
                      {"job", external_id}, {"allocation_state", allocation_state}});
}

void Cluster::ExternalRunningLocked(Trial& t, const std::string& where) {
  if (!where.empty()) {
    for (int rank = 0; rank < t.world_size; ++rank) t.rank_agent[rank] = "slurm:" + where;
  }
  if (t.allocated) return;  // adopted after a restart, or seen before
  t.allocated = true;
  t.live_ranks.clear();
  t.exit_codes.clear();
  t.first_failure.clear();
  t.told_to_stop = false;
  for (int rank = 0; rank < t.world_size; ++rank) t.live_ranks.insert(rank);
  Value::List slots;
  for (int rank = 0; rank < t.world_size; ++rank) {
    slots.push_back(Value(Value::Map{{"agent_id", "slurm:" + where}, {"slot_id", "rank " + std::to_string(rank)}}));
  }
  (void)store_->UpdateAllocation(t.allocation_id, "RUNNING", Value(slots), false);
  SetTrialStateLocked(t, v1::TRIAL_STATE_RUNNING);
  {
    std::lock_guard<std::mutex> reasons(reasons_mu_);
    pending_reasons_.erase(t.id);
  }
  log::Info("trial", {{"event", "started"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                      {"job", t.external_id}, {"nodes", where}});
}

Status Cluster::ReportExit(const v1::ReportExitRequest& request) {
  if (request.reason().size() > 1024 || !IsText(request.reason())) {
    return InvalidArgument("report_exit: reason must be UTF-8 text of at most 1 KiB");
  }
  if (request.host().size() > 256 || !IsText(request.host())) {
    return InvalidArgument("report_exit: host must be UTF-8 text of at most 256 bytes");
  }
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  Experiment& e = experiments_[t->experiment_id];
  if (!ExternalManagerLocked(e)) {
    return FailedPrecondition("trial " + std::to_string(t->id) + " runs on agents, which report its tasks' exits");
  }
  const int rank = request.who().rank();
  log::Info("trial", {{"event", "rank_exit"}, {"id", std::to_string(t->id)}, {"task", request.who().task_id()},
                      {"code", std::to_string(request.exit_code())}, {"reason", request.reason()}});
  if (request.exit_code() != 0 && t->first_failure.empty() && t->stop.empty()) {
    auto host = t->rank_agent.find(rank);
    const std::string where = !request.host().empty()         ? " on " + request.host()
                              : host == t->rank_agent.end() ? ""
                                                            : " on " + host->second;
    t->first_failure = "rank " + std::to_string(rank) + where + ": " +
                       (request.reason().empty() ? "exit status " + std::to_string(request.exit_code()) : request.reason());
  }
  return Status::Ok();
}

void Cluster::ExternalEvent(const rm::AllocationEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  Trial* found = nullptr;
  for (auto& [id, t] : trials_) {
    if (t.allocation_id == event.allocation_id && !event.allocation_id.empty()) found = &t;
  }
  if (!found) return;  // withdrawn or ended meanwhile (a paused queued trial, a killed one)
  Trial& t = *found;
  Experiment& e = experiments_[t.experiment_id];
  using Kind = rm::AllocationEvent::Kind;
  switch (event.kind) {
    case Kind::kSubmitted:
      t.external_id = event.external_id;
      (void)store_->SetAllocationExternalId(t.allocation_id, event.external_id);
      break;
    case Kind::kPending: {
      t.external_reason = event.reason;
      std::lock_guard<std::mutex> reasons(reasons_mu_);
      if (t.state == v1::TRIAL_STATE_QUEUED) pending_reasons_[t.id] = event.reason;
      break;
    }
    case Kind::kRunning: {
      std::string where;
      for (const std::string& h : event.hosts) where += (where.empty() ? "" : ",") + h;
      ExternalRunningLocked(t, where);
      break;
    }
    case Kind::kExited: {
      log::Info("trial", {{"event", "external_exited"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                          {"job", t.external_id}, {"reason", event.reason}});
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
      t.allocated = true;  // so AllocationExitedLocked releases it and decides
      t.live_ranks.clear();
      t.exit_codes = event.exit_codes;
      if (event.preempted && t.stop.empty()) {
        // Slurm took the nodes back: the trial resumes from its checkpoint, not a restart.
        t.stop = "preempt";
        t.preempt_killed = true;
      }
      bool success = !t.exit_codes.empty();
      for (auto [rank, code] : t.exit_codes) success = success && code == 0;
      if (!success && t.first_failure.empty() && !event.reason.empty()) {
        t.first_failure = event.reason;
      } else if (!success && !t.external_id.empty()) {
        // A rank said why (ReportExit); the job is named as its manager calls it.
        const std::string kind = ExternalManagerLocked(e)->Kind();
        t.first_failure += " (" + std::string(kind == "slurm" ? "Slurm" : kind) + " job " + t.external_id + ")";
      }
      AllocationExitedLocked(t);
      break;
    }
  }
}

}  // namespace sf::master
