// Translation servers the master schedules (docs/serving.md "On the cluster";
// proto/steadfast/v1/serving.proto): `sf serve start --model NAME` runs sf-serve for a model
// version on agent slots.
//
// Contract:
// - A server is a task of its own (master/tasks/task_coordinator.h, kind SERVER): the scheduler
//   places it (slots, pool, priority, preemption), the agent runs it (its entrypoint is the
//   agent's own sf-serve, task/user_task.h), the task coordinator restarts it when it crashes
//   (max_restarts) and stops it (`sf serve stop`). Its id is its task's; its row in `servings`
//   (migrations/013_servings.sql, 016_tasks.sql) names the model version it serves and is
//   stored in the task's transaction (InsertRow).
// - ServingTaskSpec turns the request into the task: sf-serve's flags checked (kInvalidArgument
//   naming the field); the checkpoint directory is the one the master recorded for the version's
//   checkpoint (the agents mount checkpoint storage at the same path, as trials restoring a
//   checkpoint need too).
// - sf-serve, once its weights are loaded and it answers, reports its URL over TrialLink
//   (ReportEndpoint, core_api/steadfast_core.h); the URL is shown only while the allocation that
//   reported it runs, so a restarted server is STARTING until it reports again.
// - State, from its task and the task's newest allocation: QUEUED, STARTING, READY, STOPPING,
//   STOPPED, FAILED (serving.proto).
// - Thread-safe: each call is one transaction on a pooled connection; statements are
//   parameterised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include <pqxx/pqxx>

#include "master/db/database.h"
#include "master/tasks/task_store.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/serving.pb.h"

namespace sf::master {

// kInvalidArgument unless `url` is http:// or https:// followed by a host, at most 512 bytes of
// printable ASCII.
Status CheckEndpointUrl(const std::string& url);

// What a server runs: the request's knobs checked (kInvalidArgument naming the field) and turned
// into sf-serve's flags.
struct ServingLaunch {
  std::string model_name;
  int32_t model_version = 0;
  std::string checkpoint_uuid;
  std::string checkpoint_dir;
  // Its storage; for s3 the server fetches the checkpoint with its agent's keys from here.
  steadfast::v1::CheckpointLocation location;
};
// The task (owner and workspace left to the caller).
Result<TaskSpec> ServingTaskSpec(const steadfast::v1::StartServingRequest& request, const ServingLaunch& launch);

// The model version a server serves, stored with its task.
struct NewServing {
  int64_t model_id = 0;
  std::string model_name;
  int32_t model_version = 0;
  std::string checkpoint_uuid;
  int32_t slots = 1;
  std::string resource_pool;
};

class ServingStore {
 public:
  explicit ServingStore(Database* db) : db_(db) {}

  // The servings row of task `task_id`, in the task's transaction (TaskStore::Create's `with`).
  static void InsertRow(pqxx::work& tx, int64_t task_id, const NewServing& row);
  // Live servers by id (with `include_stopped`, also the newest 100 ended ones).
  Result<std::vector<steadfast::v1::Serving>> List(bool include_stopped);
  // kNotFound naming the id when no server has it.
  Result<steadfast::v1::Serving> Get(int64_t id);

 private:
  Result<std::vector<steadfast::v1::Serving>> Select(const std::string& where, std::optional<int64_t> id,
                                                    const std::string& what);
  Database* db_;
};

}  // namespace sf::master
