// The rows of tasks that are not an experiment's trials (migrations/016_tasks.sql,
// 017_task_commands.sql; master/tasks/task_coordinator.h holds them live): what each runs, its
// context, its state, its restarts and allocation count, where it answers, its exit status, and
// its output lines.
//
// Contract:
// - Create stores a task QUEUED with its context (if any), and in the same transaction whatever
//   its kind adds (`with`: a server's servings row), so no reader sees a task without its kind's
//   row. Returns its id.
// - Each setter is one statement on a pooled connection; parameters are bound, never spliced.
// - Live() lists the tasks not yet STOPPED or FAILED, oldest first, each with its newest
//   allocation (for a master restart).
// - Logs(task, after_id, limit, search): its output lines in order (as Store::GetLogs for trials).
// - Get / List: tasks as the API shows them (steadfast.v1.Task; the pending reason is the
//   coordinator's to add). Context(id): its archive; kNotFound when it has none.
// - Thread-safe (no state besides the database).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "common/status.h"
#include "master/db/database.h"
#include "steadfast/v1/common.pb.h"
#include "steadfast/v1/tasks.pb.h"

namespace sf::master {

// What a task runs and how it is placed.
struct TaskSpec {
  std::string kind = "SERVER";  // or COMMAND
  std::string owner;
  int64_t workspace_id = 1;
  std::vector<std::string> entrypoint;  // the program and its arguments
  int slots = 1;                        // ranks, one slot each
  std::string resource_pool = "default";
  int priority = 42;
  int max_restarts = 5;
  // Its working directory's files (a context archive, common/context/context_archive.h) and the
  // archive's SHA-256; empty: none. Live() reads the digest and size, never the bytes.
  std::string context, context_sha256;
  int64_t context_bytes = 0;
};

struct TaskRow {
  int64_t id = 0;
  TaskSpec spec;
  std::string state;  // QUEUED, RUNNING, STOPPING, STOPPED, COMPLETED, FAILED
  int restarts = 0;
  int allocations = 0;
  // Its newest allocation ("" when none), that allocation's state and external (Slurm) job id.
  std::string latest_allocation_id, latest_allocation_state, latest_allocation_external_id;
};

class TaskStore {
 public:
  explicit TaskStore(Database* db) : db_(db) {}

  Result<int64_t> Create(const TaskSpec& spec, const std::function<void(pqxx::work&, int64_t)>& with = {});
  // The state; a terminal one (STOPPED, COMPLETED, FAILED) gets its end time, and `error` when
  // not empty.
  Status SetState(int64_t id, const std::string& state, const std::string& error = "");
  Status SetExitCode(int64_t id, int exit_code);
  Status SetRestarts(int64_t id, int restarts, const std::string& error);
  Status SetAllocations(int64_t id, int allocations);
  // Where it answers, reported by `allocation` (shown only while that allocation runs).
  Status SetEndpoint(int64_t id, const std::string& url, const std::string& allocation);
  Result<std::vector<TaskRow>> Live();
  // The task's kind, or nullopt when there is no such task.
  Result<std::optional<std::string>> Kind(int64_t id);
  Result<std::vector<steadfast::v1::LogLine>> Logs(int64_t id, int64_t after_id, int limit, const std::string& search);
  Result<std::optional<steadfast::v1::Task>> Get(int64_t id);
  // Live tasks by id (of `kind`, when not empty); with `include_ended`, also the newest 100 that
  // ended.
  Result<std::vector<steadfast::v1::Task>> List(const std::string& kind, bool include_ended);
  Result<std::string> Context(int64_t id);

 private:
  Database* db_;
};

bool IsTerminalTaskState(const std::string& state);

}  // namespace sf::master
