// Tasks that are not an experiment's trials: their part of the method table (api_methods.h;
// master/tasks/task_coordinator.h; docs/tasks.md). CreateCommand checks the request and its
// context and creates a COMMAND task; the list, a task, its logs and KillTask serve every kind
// (servers too). What each method needs is checked by the access policy from its proto option
// (KillTask: acting on the task).
#include <algorithm>

#include "common/context/context_archive.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "master/api/api_methods.h"
#include "master/tasks/task_store.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;

constexpr int kMaxArguments = 1024;

// The task as the API shows it: its row and, while queued, why it waits.
Result<v1::TaskResponse> TaskReply(ApiHandlers* h, int64_t id) {
  SF_ASSIGN_OR_RETURN(std::optional<v1::Task> task, TaskStore(h->writes()).Get(id));
  if (!task) return NotFound("no task " + std::to_string(id) + " (sf task list shows them)");
  if (task->state() == "QUEUED") {
    const std::map<int64_t, std::string> reasons = h->cluster()->tasks().PendingReasons();
    if (auto reason = reasons.find(id); reason != reasons.end()) task->set_pending_reason(reason->second);
  }
  v1::TaskResponse out;
  *out.mutable_task() = std::move(*task);
  return out;
}

}  // namespace

void ApiMethods::AddTaskMethods() {
  ApiHandlers* h = deps_.handlers;
  Authorizer* authz = deps_.authorizer;

  Add<v1::CreateCommandRequest>("CreateCommand", [h, authz](const v1::CreateCommandRequest& r,
                                                            const Principal& p) -> Result<v1::TaskResponse> {
    if (!IsText(p.username)) return InvalidArgument("X-SF-User is not UTF-8 text");
    if (r.entrypoint().empty()) return InvalidArgument("entrypoint: required (the program and its arguments)");
    if (r.entrypoint_size() > kMaxArguments) {
      return InvalidArgument("entrypoint: " + std::to_string(r.entrypoint_size()) + " arguments; at most " +
                             std::to_string(kMaxArguments));
    }
    for (int i = 0; i < r.entrypoint_size(); ++i) {
      if (!IsText(r.entrypoint(i)) || r.entrypoint(i).size() > 64 * 1024) {
        return InvalidArgument("entrypoint[" + std::to_string(i) + "]: must be UTF-8 text without NUL, at most 64 KiB");
      }
    }
    if (r.entrypoint(0).empty()) return InvalidArgument("entrypoint[0]: the program is empty");
    if (r.slots() < 0) return InvalidArgument("slots: " + std::to_string(r.slots()) + " must be >= 1 (0: 1)");
    if (r.priority() != 0 && (r.priority() < 1 || r.priority() > 99)) {
      return InvalidArgument("priority: " + std::to_string(r.priority()) + " must be 1..99");
    }
    if (!IsText(r.workspace()) || !IsText(r.resource_pool())) {
      return InvalidArgument("workspace and resource_pool must be UTF-8 text without NUL");
    }
    TaskSpec spec;
    spec.kind = "COMMAND";
    spec.owner = p.username;
    spec.entrypoint.assign(r.entrypoint().begin(), r.entrypoint().end());
    spec.slots = r.slots() > 0 ? r.slots() : 1;
    spec.resource_pool = r.resource_pool().empty() ? "default" : r.resource_pool();
    spec.priority = r.priority() > 0 ? r.priority() : 42;
    spec.max_restarts = 0;  // a command runs once
    if (!r.context().empty()) {
      if (Status checked = context::ValidateContext(r.context()); !checked.ok()) {
        return InvalidArgument("context: " + checked.message());
      }
      spec.context = r.context();
      spec.context_sha256 = Sha256Hex(r.context());
      spec.context_bytes = static_cast<int64_t>(r.context().size());
    }
    if (authz) {
      SF_ASSIGN_OR_RETURN(spec.workspace_id, authz->WorkspaceForNewExperiment(p, r.workspace(), "commands"));
    }
    SF_ASSIGN_OR_RETURN(int64_t id, h->cluster()->tasks().Create(spec));
    return TaskReply(h, id);
  });
  Add<v1::ListTasksRequest>("ListTasks", [h](const v1::ListTasksRequest& r,
                                             const Principal&) -> Result<v1::ListTasksResponse> {
    if (!r.kind().empty() && r.kind() != "SERVER" && r.kind() != "COMMAND") {
      return InvalidArgument("kind: \"" + ReplaceInvalidUtf8(r.kind().substr(0, 32)) + "\" must be SERVER or COMMAND");
    }
    SF_ASSIGN_OR_RETURN(std::vector<v1::Task> tasks, TaskStore(h->writes()).List(r.kind(), r.include_ended()));
    const std::map<int64_t, std::string> reasons = h->cluster()->tasks().PendingReasons();
    v1::ListTasksResponse out;
    for (v1::Task& t : tasks) {
      if (auto reason = reasons.find(t.id()); t.state() == "QUEUED" && reason != reasons.end()) {
        t.set_pending_reason(reason->second);
      }
      *out.add_tasks() = std::move(t);
    }
    return out;
  });
  Add<v1::TaskRequest>("GetTask", [h](const v1::TaskRequest& r, const Principal&) { return TaskReply(h, r.id()); });
  Add<v1::TaskRequest>("KillTask", [h](const v1::TaskRequest& r, const Principal&) -> Result<v1::TaskResponse> {
    SF_ASSIGN_OR_RETURN(v1::TaskResponse now, TaskReply(h, r.id()));
    if (!IsTerminalTaskState(now.task().state())) {
      Status stopped = h->cluster()->tasks().Stop(r.id());
      // Ended meanwhile: the reply shows where it is.
      if (!stopped.ok() && stopped.code() != StatusCode::kNotFound) return stopped;
    }
    return TaskReply(h, r.id());
  });
  Add<v1::GetTaskLogsRequest>("GetTaskLogs", [h](const v1::GetTaskLogsRequest& r,
                                                 const Principal&) -> Result<v1::GetTrialLogsResponse> {
    SF_ASSIGN_OR_RETURN(std::optional<v1::Task> task, TaskStore(h->writes()).Get(r.id()));
    if (!task) return NotFound("no task " + std::to_string(r.id()) + " (sf task list shows them)");
    const int limit = r.limit() <= 0 ? 10000 : std::min(r.limit(), 100000);
    SF_ASSIGN_OR_RETURN(std::vector<v1::LogLine> lines,
                        TaskStore(h->store()->db()).Logs(r.id(), r.after_id(), limit, r.search()));
    v1::GetTrialLogsResponse out;
    for (auto& l : lines) *out.add_logs() = std::move(l);
    return out;
  });
}

}  // namespace sf::master
