// Translation servers the master schedules (docs/serving.md "On the cluster";
// proto/steadfast/v1/serving.proto): `sf serve start --model NAME` runs sf-serve for a model
// version on agent slots, like a trial.
//
// Contract:
// - A server is carried by an experiment of its own whose one trial is the sf-serve process: the
//   scheduler places it (slots, pool, priority, preemption), the agent runs it (its entrypoint
//   is the agent's own sf-serve, agent/user_task.h), the coordinator restarts it when it crashes
//   (max_restarts) and ends it when the experiment is killed (`sf serve stop`). Its id is that
//   experiment's id; its row in `servings` (migrations/013_servings.sql) is stored in the
//   experiment's transaction and keeps it out of the experiment list.
// - ServingConfigYaml writes that experiment's config; the checkpoint directory is the one the
//   master recorded for the version's checkpoint (the agents mount checkpoint storage at the
//   same path, as trials restoring a checkpoint need too).
// - sf-serve, once its weights are loaded and it answers, reports its URL over TrialLink
//   (ReportEndpoint, core_api/steadfast_core.h); the URL is shown only while the allocation that
//   reported it runs, so a restarted server is STARTING until it reports again.
// - State, from the experiment, its trial and the trial's newest allocation: QUEUED, STARTING,
//   READY, PAUSED, STOPPING, STOPPED, FAILED (serving.proto).
// - Thread-safe: each call is one transaction on a pooled connection; statements are
//   parameterised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/db/database.h"
#include "steadfast/v1/serving.pb.h"

namespace sf::master {

// kInvalidArgument unless `url` is http:// or https:// followed by a host, at most 512 bytes of
// printable ASCII.
Status CheckEndpointUrl(const std::string& url);

// What a server's experiment runs: the request's knobs checked (kInvalidArgument naming the
// field) and turned into sf-serve's flags.
struct ServingLaunch {
  std::string model_name;
  int32_t model_version = 0;
  std::string checkpoint_uuid;
  std::string checkpoint_dir;
};
Result<std::string> ServingConfigYaml(const steadfast::v1::StartServingRequest& request, const ServingLaunch& launch);

class ServingStore {
 public:
  explicit ServingStore(Database* db) : db_(db) {}

  // Records where the server of `experiment_id` answers, reported by `allocation`.
  // kFailedPrecondition when that experiment carries no server.
  Status SetEndpoint(int64_t experiment_id, const std::string& url, const std::string& allocation);
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
