// What only allocations another resource manager places need (class Cluster,
// master/core/cluster.h; the seam: master/rm/resource_manager.h; Slurm: docs/slurm.md).
//
// Every pool's gangs go through the same seam, the allocation service (cluster_allocation.cc:
// SubmitLocked, AllocationUpdateLocked). An external manager differs in two ways, handled here:
// after a restart its jobs are adopted by the job ids stored with their allocations
// (AdoptExternalLocked); and with no agent watching its ranks, a rank says itself how its
// program ended (ReportExit), which the allocation keeps as the run's failure until the manager
// reports the job's end.
#include <string>
#include <vector>

#include "common/log.h"
#include "common/utf8.h"
#include "master/core/cluster.h"
#include "master/allocation/task_ids.h"

namespace sf::master {
namespace v1 = steadfast::v1;

bool Cluster::ExternalLocked(const Experiment& e) const {
  return allocations_.IsExternal(e.config.resources.resource_pool);
}

void Cluster::AdoptExternalLocked(Trial& t, const std::string& allocation_id, const std::string& external_id,
                                  const std::string& allocation_state) {
  Experiment& e = experiments_[t.experiment_id];
  if (!ExternalLocked(e)) return;
  SetAllocationLocked(t, allocation_id);
  t.world_size = static_cast<int>(e.config.resources.slots_per_trial);
  const bool running = t.state == v1::TRIAL_STATE_RUNNING;
  allocations_.Adopt({TaskKind::kTrial, t.id, t.restarts, GangLocked(e, t, /*with_ranks=*/false)}, external_id,
                     running);
  if (running) SetAllocatedLocked(t, true);
  log::Info("trial", {{"event", "adopt_external"}, {"id", std::to_string(t.id)}, {"allocation", allocation_id},
                      {"job", external_id}, {"allocation_state", allocation_state}});
}

Status Cluster::ReportExit(const v1::ReportExitRequest& request) {
  if (request.reason().size() > 1024 || !IsText(request.reason())) {
    return InvalidArgument("report_exit: reason must be UTF-8 text of at most 1 KiB");
  }
  if (request.host().size() > 256 || !IsText(request.host())) {
    return InvalidArgument("report_exit: host must be UTF-8 text of at most 256 bytes");
  }
  if (TaskCoordinator::Names(request.who())) return tasks_.ReportExit(request);
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  Experiment& e = experiments_[t->experiment_id];
  if (!ExternalLocked(e)) {
    return FailedPrecondition("trial " + std::to_string(t->id) + " runs on agents, which report its tasks' exits");
  }
  const int rank = request.who().rank();
  log::Info("trial", {{"event", "rank_exit"}, {"id", std::to_string(t->id)}, {"task", request.who().task_id()},
                      {"code", std::to_string(request.exit_code())}, {"reason", request.reason()}});
  if (request.exit_code() != 0 && t->stop.empty()) {
    allocations_.RecordRankFailure(
        t->allocation_id, rank, request.host(),
        request.reason().empty() ? "exit status " + std::to_string(request.exit_code()) : request.reason());
  }
  return Status::Ok();
}

}  // namespace sf::master
