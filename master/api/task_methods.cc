// Tasks: their part of the method table (api_methods.h; master/tasks/task_coordinator.h;
// docs/tasks.md). CreateCommand checks the request and its context and creates a COMMAND task;
// a task, its logs and KillTask serve every kind (servers too); the list also shows trials
// (master/tasks/trial_tasks.h). What each method needs is checked by the access policy from its proto option
// (KillTask: acting on the task).
#include <algorithm>

#include "common/context/context_archive.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "master/api/api_methods.h"
#include "master/tasks/task_store.h"
#include "master/tasks/trial_tasks.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;

constexpr int kMaxArguments = 1024;
constexpr int32_t kDefaultIdleSeconds = 3600;  // a notebook's, a shell's

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

// Where and how a task of a user's is scheduled, as a request gives it.
struct Placement {
  int32_t slots = 0;
  std::string resource_pool;
  int32_t priority = 0;
  std::string workspace;
  std::string context;
};

// Checks `where` and fills the spec's owner, slots, pool, priority, workspace and context.
// Errors name the field; `what` names the kind for the workspace rule ("commands").
Status Place(const Placement& where, Authorizer* authz, const Principal& p, const std::string& what, TaskSpec& spec) {
  if (!IsText(p.username)) return InvalidArgument("X-SF-User is not UTF-8 text");
  if (where.slots < 0) return InvalidArgument("slots: " + std::to_string(where.slots) + " must be >= 1 (0: 1)");
  if (where.priority != 0 && (where.priority < 1 || where.priority > 99)) {
    return InvalidArgument("priority: " + std::to_string(where.priority) + " must be 1..99");
  }
  if (!IsText(where.workspace) || !IsText(where.resource_pool)) {
    return InvalidArgument("workspace and resource_pool must be UTF-8 text without NUL");
  }
  spec.owner = p.username;
  spec.slots = where.slots > 0 ? where.slots : 1;
  spec.resource_pool = where.resource_pool.empty() ? "default" : where.resource_pool;
  spec.priority = where.priority > 0 ? where.priority : 42;
  if (!where.context.empty()) {
    if (Status checked = context::ValidateContext(where.context); !checked.ok()) {
      return InvalidArgument("context: " + checked.message());
    }
    spec.context = where.context;
    spec.context_sha256 = Sha256Hex(where.context);
    spec.context_bytes = static_cast<int64_t>(where.context.size());
  }
  if (authz) {
    SF_ASSIGN_OR_RETURN(spec.workspace_id, authz->WorkspaceForNewExperiment(p, where.workspace, what));
  }
  return Status::Ok();
}

// An interactive task (a notebook, a shell): the agent's steadfast package runs `module`
// (python/steadfast/notebook.py, shell.py), which serves through the master's proxy and stops
// after the request's idle timeout (0: kDefaultIdleSeconds).
Result<v1::TaskResponse> CreateInteractiveTask(ApiHandlers* h, Authorizer* authz, const Principal& p,
                                               const std::string& kind, const std::string& module,
                                               const std::string& what, const v1::InteractiveTaskRequest& r) {
  const int32_t idle = r.idle_timeout_seconds() == 0 ? kDefaultIdleSeconds : r.idle_timeout_seconds();
  if (idle < 10 || idle > 604800) {
    return InvalidArgument("idle_timeout_seconds: " + std::to_string(r.idle_timeout_seconds()) +
                           " must be 10..604800 (0: " + std::to_string(kDefaultIdleSeconds) + ")");
  }
  TaskSpec spec;
  spec.kind = kind;
  // Debian's interpreter: python3-notebook (Jupyter, Tornado) and python3-torch are installed
  // for it (deploy/install-deps.sh).
  spec.entrypoint = {"/usr/bin/python3", "-m", module, "--idle-timeout", std::to_string(idle)};
  spec.max_restarts = 0;  // what its sessions held is gone with it: not run again unasked
  SF_RETURN_IF_ERROR(
      Place({r.slots(), r.resource_pool(), r.priority(), r.workspace(), r.context()}, authz, p, what, spec));
  SF_ASSIGN_OR_RETURN(int64_t id, h->cluster()->tasks().Create(spec));
  return TaskReply(h, id);
}

}  // namespace

void ApiMethods::AddTaskMethods() {
  ApiHandlers* h = deps_.handlers;
  Authorizer* authz = deps_.authorizer;

  Add<v1::CreateCommandRequest>("CreateCommand", [h, authz](const v1::CreateCommandRequest& r,
                                                            const Principal& p) -> Result<v1::TaskResponse> {
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
    TaskSpec spec;
    spec.kind = "COMMAND";
    spec.entrypoint.assign(r.entrypoint().begin(), r.entrypoint().end());
    spec.max_restarts = 0;  // a command runs once
    SF_RETURN_IF_ERROR(Place({r.slots(), r.resource_pool(), r.priority(), r.workspace(), r.context()}, authz, p,
                             "commands", spec));
    SF_ASSIGN_OR_RETURN(int64_t id, h->cluster()->tasks().Create(spec));
    return TaskReply(h, id);
  });
  Add<v1::InteractiveTaskRequest>("CreateNotebook", [h, authz](const v1::InteractiveTaskRequest& r,
                                                               const Principal& p) {
    return CreateInteractiveTask(h, authz, p, "NOTEBOOK", "steadfast.notebook", "notebooks", r);
  });
  Add<v1::InteractiveTaskRequest>("CreateShell", [h, authz](const v1::InteractiveTaskRequest& r,
                                                            const Principal& p) {
    return CreateInteractiveTask(h, authz, p, "SHELL", "steadfast.shell", "shells", r);
  });
  Add<v1::ListTasksRequest>("ListTasks", [h](const v1::ListTasksRequest& r,
                                             const Principal&) -> Result<v1::ListTasksResponse> {
    const bool trials = r.kind().empty() || r.kind() == kTrialTaskKind;
    if (!trials && r.kind() != "SERVER" && r.kind() != "COMMAND" && r.kind() != "NOTEBOOK" && r.kind() != "SHELL") {
      return InvalidArgument("kind: \"" + ReplaceInvalidUtf8(r.kind().substr(0, 32)) +
                             "\" must be SERVER, COMMAND, NOTEBOOK, SHELL or TRIAL");
    }
    std::vector<v1::Task> tasks;
    if (r.kind() != kTrialTaskKind) {
      SF_ASSIGN_OR_RETURN(tasks, TaskStore(h->writes()).List(r.kind(), r.include_ended()));
      const std::map<int64_t, std::string> reasons = h->cluster()->tasks().PendingReasons();
      for (v1::Task& t : tasks) {
        if (auto reason = reasons.find(t.id()); t.state() == "QUEUED" && reason != reasons.end()) {
          t.set_pending_reason(reason->second);
        }
      }
    }
    if (trials) {
      SF_ASSIGN_OR_RETURN(std::vector<v1::Task> rows, TrialTasks(h->writes(), r.include_ended()));
      for (v1::Task& t : rows) {
        if (t.state() == "QUEUED") t.set_pending_reason(h->cluster()->PendingReason(t.id(), /*queued=*/true));
        tasks.push_back(std::move(t));
      }
    }
    // One list, oldest first (tasks and trials are numbered apart).
    std::stable_sort(tasks.begin(), tasks.end(), [](const v1::Task& a, const v1::Task& b) {
      return std::pair(a.created_at().seconds(), a.created_at().nanos()) <
             std::pair(b.created_at().seconds(), b.created_at().nanos());
    });
    v1::ListTasksResponse out;
    for (v1::Task& t : tasks) *out.add_tasks() = std::move(t);
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
