// Tasks that are not an experiment's trials (master/tasks/task_coordinator.h).
#include "master/tasks/task_coordinator.h"

#include <utility>

#include "common/log.h"
#include "master/allocation/task_ids.h"

namespace sf::master {
namespace v1 = steadfast::v1;

TaskCoordinator::TaskCoordinator(Database* db, AllocationService* allocations, TaskCoordinatorOptions options)
    : store_(db), allocations_(allocations), options_(std::move(options)) {
  allocations_->SetOwner(TaskKind::kServer, [this](const AllocationUpdate& update) { OnUpdate(update); });
}

std::string TaskCoordinator::ServingToken(int64_t id) const {
  return options_.task_tokens ? options_.task_tokens->IssueServing(id) : "";
}

Result<int64_t> TaskCoordinator::Create(const TaskSpec& spec, const std::function<void(pqxx::work&, int64_t)>& with) {
  if (spec.slots < 1) return InvalidArgument("slots: " + std::to_string(spec.slots) + " must be >= 1");
  if (auto refused = allocations_->CheckPlaceable(spec.resource_pool, spec.slots)) {
    return InvalidArgument(refused->field + ": " + refused->message);
  }
  SF_ASSIGN_OR_RETURN(int64_t id, store_.Create(spec, with));
  std::lock_guard<std::mutex> lock(mu_);
  Task& t = tasks_[id];
  t.id = id;
  t.spec = spec;
  t.state = "QUEUED";
  log::Info("task", {{"event", "created"}, {"id", std::to_string(id)}, {"kind", spec.kind}, {"owner", spec.owner},
                     {"slots", std::to_string(spec.slots)}, {"pool", spec.resource_pool}});
  SubmitLocked(t, /*keep_place=*/false);
  return id;
}

rm::GangLaunch TaskCoordinator::GangLocked(const Task& t, bool with_ranks) const {
  rm::GangLaunch gang;
  gang.allocation_id = t.allocation_id;
  gang.trial_id = 0;
  // The scheduler shares a pool's slots among experiments; a task is a group of its own.
  gang.experiment_id = -t.id;
  gang.pool = t.spec.resource_pool;
  gang.world_size = t.spec.slots;
  gang.priority = t.spec.priority;
  gang.submit_order = t.submit_order;
  if (!with_ranks) return gang;
  auto address = options_.external_trial_link_address.find(gang.pool);
  const std::string master = address == options_.external_trial_link_address.end() || address->second.empty()
                                 ? options_.trial_link_address
                                 : address->second;
  for (int rank = 0; rank < gang.world_size; ++rank) {
    v1::StartTask s;
    s.set_task_id(TaskId(t.allocation_id, rank));
    s.set_rank(rank);
    s.set_world_size(gang.world_size);
    s.set_master_address(master);
    s.set_restart(t.restarts);
    for (const std::string& part : t.spec.entrypoint) s.add_entrypoint(part);
    if (!t.spec.context_sha256.empty()) {  // the agent fetches it (TrialLink GetContext) and unpacks it
      s.set_context_sha256(t.spec.context_sha256);
      s.set_context_bytes(t.spec.context_bytes);
    }
    (*s.mutable_env())["SF_TASK_KIND"] = t.spec.kind;
    if (options_.task_tokens) {
      s.set_task_token(options_.task_tokens->Issue({0, rank, t.restarts, s.task_id()}));
      // The bearer token its clients send (master/serving/serving.h), in the environment only.
      // A notebook's and a shell's is what the master's proxy sends them (master/proxy/task_proxy.h).
      if (t.spec.kind == "SERVER" || t.spec.kind == "NOTEBOOK" || t.spec.kind == "SHELL") {
        (*s.mutable_env())["SF_SERVE_TOKEN"] = options_.task_tokens->IssueServing(t.id);
      }
    }
    if (options_.task_certificates && rank == 0 &&
        (t.spec.kind == "SERVER" || t.spec.kind == "NOTEBOOK" || t.spec.kind == "SHELL")) {
      Result<ServerCertificate> cert = options_.task_certificates->IssueTask(t.id);
      if (cert.ok()) {
        (*s.mutable_env())["SF_TASK_TLS_CERT"] = cert->cert_chain_pem;
        (*s.mutable_env())["SF_TASK_TLS_KEY"] = cert->private_key_pem;
        (*s.mutable_env())["SF_TASK_TLS_CA"] = options_.task_certificates->ca_pem();
      } else {  // it then serves plain HTTP, which the proxy refuses to reach (task_proxy.h)
        log::Error("tasks", {{"event", "certificate_failed"}, {"task", std::to_string(t.id)},
                             {"error", cert.status().message()}});
      }
    }
    gang.ranks.push_back(std::move(s));
  }
  return gang;
}

void TaskCoordinator::SubmitLocked(Task& t, bool keep_place) {
  t.allocation_id = TaskAllocationId(t.id, t.restarts, ++t.allocations);
  (void)store_.SetAllocations(t.id, t.allocations);
  if (!keep_place || t.submit_order == 0) t.submit_order = allocations_->NextSubmitOrder();
  t.running = false;
  t.preempted = false;
  if (t.state != "QUEUED") SetStateLocked(t, "QUEUED");
  TaskLaunch request{TaskKind::kServer, t.id, t.restarts, GangLocked(t, /*with_ranks=*/true)};
  log::Info("task", {{"event", "submitted"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                     {"manager", allocations_->ManagerKind(request.gang.pool)}, {"pool", request.gang.pool}});
  allocations_->Submit(std::move(request));
}

void TaskCoordinator::SetStateLocked(Task& t, const std::string& state, const std::string& error) {
  if (Status st = store_.SetState(t.id, state, error); !st.ok()) {
    log::Error("task", {{"event", "state_not_stored"}, {"id", std::to_string(t.id)}, {"error", st.message()}});
  }
  log::Info("task", {{"event", "state"}, {"id", std::to_string(t.id)}, {"state", state}, {"error", error}});
  t.state = state;
  if (IsTerminalTaskState(state)) tasks_.erase(t.id);  // `t` is gone
}

Status TaskCoordinator::Recover() {
  SF_ASSIGN_OR_RETURN(std::vector<TaskRow> live, store_.Live());
  std::lock_guard<std::mutex> lock(mu_);
  for (TaskRow& row : live) {
    Task& t = tasks_[row.id];
    t.id = row.id;
    t.spec = std::move(row.spec);
    t.state = row.state;
    t.restarts = row.restarts;
    t.allocations = row.allocations;
    const bool allocation_live = !row.latest_allocation_id.empty() && row.latest_allocation_state != "TERMINATED";
    if ((t.state == "RUNNING" || t.state == "STOPPING") && allocation_live) {
      // The agents report its ranks when they re-register (an external manager's job is watched
      // again); ranks none reports in time are lost, and the run ends as a failure.
      t.allocation_id = row.latest_allocation_id;
      t.submit_order = allocations_->NextSubmitOrder();
      t.running = row.latest_allocation_state == "RUNNING";
      allocations_->Adopt({TaskKind::kServer, t.id, t.restarts, GangLocked(t, /*with_ranks=*/false)},
                          row.latest_allocation_external_id, /*running=*/false);
      if (t.state == "STOPPING") allocations_->Kill(t.allocation_id);
    } else if (t.state == "STOPPING") {
      SetStateLocked(t, "STOPPED");
      continue;
    } else {
      // Queued (or running when its allocation had ended unseen): submitted anew; the managers
      // cancel a job of the old allocation that did start.
      SubmitLocked(t, /*keep_place=*/false);
    }
    log::Info("task", {{"event", "recovered"}, {"id", std::to_string(t.id)}, {"state", t.state},
                       {"allocation", t.allocation_id}});
  }
  return Status::Ok();
}

Status TaskCoordinator::Stop(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFound("task " + std::to_string(id) + " is not live on this master");
  Task& t = it->second;
  if (t.state == "STOPPING") return Status::Ok();
  if (!t.running && !t.allocation_id.empty() && !allocations_->IsExternal(t.spec.resource_pool)) {
    // Not placed yet: taken back from its manager; nothing runs it.
    allocations_->Withdraw(t.allocation_id);
    SetStateLocked(t, "STOPPED");
    return Status::Ok();
  }
  // Running (or an external job that may have started): its ranks are killed; it is STOPPED
  // when they have exited.
  SetStateLocked(t, "STOPPING");
  if (!t.allocation_id.empty()) allocations_->Kill(t.allocation_id);
  return Status::Ok();
}

void TaskCoordinator::OnUpdate(const AllocationUpdate& update) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(update.owner);
  const rm::AllocationEvent& event = update.event;
  using Kind = rm::AllocationEvent::Kind;
  if (it == tasks_.end() || it->second.allocation_id != event.allocation_id) {
    if (event.kind == Kind::kRunning) allocations_->Kill(event.allocation_id);  // nothing may run it
    return;
  }
  Task& t = it->second;
  switch (event.kind) {
    case Kind::kSubmitted:
    case Kind::kPending:
      break;
    case Kind::kRunning:
      if (t.running) break;
      t.running = true;
      if (t.state == "QUEUED") SetStateLocked(t, "RUNNING");
      log::Info("task", {{"event", "started"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                         {"where", update.where}});
      break;
    case Kind::kPreempt:
      if (t.spec.kind != "SERVER") {
        // A command runs once, and a notebook's kernels or a shell's sessions would lose what
        // they hold: none is killed to be run again; each holds its slots until it ends.
        log::Info("task", {{"event", "preempt_declined"}, {"id", std::to_string(t.id)}, {"for", event.reason}});
        break;
      }
      if (t.state != "RUNNING" || t.preempted) break;
      t.preempted = true;
      log::Info("task", {{"event", "preempt"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                         {"for", event.reason}});
      allocations_->Kill(t.allocation_id);
      break;
    case Kind::kExited:
      ExitedLocked(t, update);
      break;
  }
}

void TaskCoordinator::ExitedLocked(Task& t, const AllocationUpdate& update) {
  const rm::AllocationEvent& event = update.event;
  log::Info("task", {{"event", "allocation_exited"}, {"id", std::to_string(t.id)}, {"allocation", t.allocation_id},
                     {"manager", update.manager}, {"reason", event.reason}});
  t.running = false;
  t.allocation_id.clear();
  if (t.state == "STOPPING") {
    SetStateLocked(t, "STOPPED");
    return;
  }
  const std::string who = "task " + std::to_string(t.id) + ": ";
  if (event.refused) {
    SetStateLocked(t, "FAILED", who + event.reason);
    return;
  }
  if (t.preempted || event.preempted) {
    SubmitLocked(t, /*keep_place=*/true);  // not a restart: it makes room and comes back
    return;
  }
  bool success = !event.exit_codes.empty();
  for (auto [rank, code] : event.exit_codes) success = success && code == 0;
  const bool command = t.spec.kind == "COMMAND";
  if (auto chief = event.exit_codes.find(0); command && chief != event.exit_codes.end() && chief->second >= 0) {
    (void)store_.SetExitCode(t.id, chief->second);  // what `sf cmd run` exits with
  }
  if (success) {
    SetStateLocked(t, command ? "COMPLETED" : "STOPPED", command ? "" : who + "its processes exited with status 0");
    return;
  }
  std::string why = update.reported_failure;
  if (why.empty()) why = event.first_failure;
  if (why.empty()) {
    why = "exited with";
    for (auto [rank, code] : event.exit_codes) {
      why += " rank " + std::to_string(rank) + "=" + std::to_string(code);
      if (auto host = update.rank_hosts.find(rank); code == -1 && host != update.rank_hosts.end()) {
        why += " (agent " + host->second + " lost)";
      }
    }
    if (event.exit_codes.empty()) why = event.reason;
  }
  if (t.restarts < t.spec.max_restarts) {
    t.restarts++;
    (void)store_.SetRestarts(t.id, t.restarts, who + why);
    log::Warn("task", {{"event", "restart"}, {"id", std::to_string(t.id)}, {"restarts", std::to_string(t.restarts)},
                       {"reason", why}});
    SubmitLocked(t, /*keep_place=*/false);
    return;
  }
  SetStateLocked(t, "FAILED", who + why);
}

// ---- TrialLink

bool TaskCoordinator::Names(const v1::TrialIdentity& who) {
  return who.trial_id() == 0 && AllocationTaskRowId(who.task_id()) != 0;
}

Result<TaskCoordinator::Task*> TaskCoordinator::FindLocked(const v1::TrialIdentity& who) {
  const int64_t id = AllocationTaskRowId(who.task_id());
  auto it = tasks_.find(id);
  if (id == 0 || it == tasks_.end()) {
    return NotFound("task " + std::to_string(id) + " (" + who.task_id().substr(0, 64) + ") is not live on this master");
  }
  Task& t = it->second;
  std::string allocation;
  int rank = 0;
  if (!ParseTaskId(who.task_id(), allocation, rank) || allocation != t.allocation_id || rank < 0 ||
      rank >= t.spec.slots) {
    return FailedPrecondition("task " + who.task_id().substr(0, 64) + " is not a rank of task " + std::to_string(id) +
                              "'s current run (" + (t.allocation_id.empty() ? "none" : t.allocation_id) + ")");
  }
  // An external manager's rank called in before its poll saw the job run: the job runs.
  if (!t.running && allocations_->IsExternal(t.spec.resource_pool) && allocations_->MarkRunning(t.allocation_id)) {
    t.running = true;
    if (t.state == "QUEUED") SetStateLocked(t, "RUNNING");
  }
  return &t;
}

Result<int64_t> TaskCoordinator::Admit(const v1::TrialIdentity& who) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Task * t, FindLocked(who));
  return t->id;
}

Result<v1::ShouldStopResponse> TaskCoordinator::ShouldStop(const v1::TrialIdentity& who) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Task * t, FindLocked(who));
  v1::ShouldStopResponse r;
  r.set_action(t->state == "STOPPING" || t->preempted ? v1::ShouldStopResponse::ACTION_STOP_NOW
                                                       : v1::ShouldStopResponse::ACTION_CONTINUE);
  return r;
}

Status TaskCoordinator::ReportEndpoint(const v1::ReportEndpointRequest& request) {
  int64_t id = 0;
  std::string allocation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SF_ASSIGN_OR_RETURN(Task * t, FindLocked(request.who()));
    id = t->id;
    allocation = t->allocation_id;
  }
  // Outside mu_: one UPDATE of a row nothing here reads.
  SF_RETURN_IF_ERROR(store_.SetEndpoint(id, request.url(), allocation));
  log::Info("task", {{"event", "endpoint"}, {"id", std::to_string(id)}, {"url", request.url()},
                     {"allocation", allocation}});
  return Status::Ok();
}

Result<std::string> TaskCoordinator::Context(const v1::TrialIdentity& who) {
  SF_ASSIGN_OR_RETURN(int64_t id, Admit(who));
  return store_.Context(id);  // up to 96 MiB from PostgreSQL: outside mu_
}

std::map<int64_t, std::string> TaskCoordinator::PendingReasons() {
  std::map<int64_t, std::pair<std::string, std::string>> queued;  // id -> (allocation, pool)
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, t] : tasks_) {
      if (t.state == "QUEUED") queued[id] = {t.allocation_id, t.spec.resource_pool};
    }
  }
  // The service's own lock, after mu_ is released: one pass for every queued task.
  const std::map<std::string, std::string> waiting = allocations_->PendingReasons();
  std::map<int64_t, std::string> out;
  for (const auto& [id, where] : queued) {
    auto reason = waiting.find(where.first);
    out[id] = reason == waiting.end() ? "submitted to " + allocations_->ManagerKind(where.second) : reason->second;
  }
  return out;
}

Status TaskCoordinator::ReportExit(const v1::ReportExitRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Task * t, FindLocked(request.who()));
  if (!allocations_->IsExternal(t->spec.resource_pool)) {
    return FailedPrecondition("task " + std::to_string(t->id) + " runs on agents, which report its processes' exits");
  }
  if (request.exit_code() != 0 && t->state != "STOPPING") {
    allocations_->RecordRankFailure(
        t->allocation_id, request.who().rank(), request.host(),
        request.reason().empty() ? "exit status " + std::to_string(request.exit_code()) : request.reason());
  }
  return Status::Ok();
}

}  // namespace sf::master
