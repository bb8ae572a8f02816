// sf-serve as a task of the cluster (`sf serve start`, master/serving/serving.h): the agent starts
// it with the task's environment (SF_MASTER_ADDRESS, SF_TASK_ID, ...; docs/core-api.md), and it
// speaks TrialLink through the Core API (core_api/steadfast_core.h) for two things:
// - once its weights are loaded and it answers, it publishes its URL (ReportEndpoint);
// - it asks, every poll interval, whether the master wants it stopped (ShouldStop: a pause or
//   a preemption; a kill comes as SIGTERM from the agent) and then stops with status 0, which the
//   master takes as "stopped as asked" (it is queued again after a preemption).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"

namespace sf::core {
class Context;
}

namespace sf::serve {

// The URL a client on another host dials: http(s)://HOST:PORT, HOST being the bind address, or
// this host's name when it binds every interface (0.0.0.0, ::); an IPv6 literal in brackets.
std::string EndpointUrl(const std::string& bind_address, int port, bool tls);

class ClusterTask {
 public:
  // Connects with the task's environment; kInvalidArgument naming a variable that is missing.
  static Result<std::unique_ptr<ClusterTask>> FromEnvironment();
  ~ClusterTask();

  Status Publish(const std::string& url);
  // Whether the master asks this task to stop now. An error (the master unreachable past the
  // Core API's retries) is returned; the caller keeps serving and asks again.
  Result<bool> StopRequested();

 private:
  explicit ClusterTask(std::unique_ptr<core::Context> ctx);
  std::unique_ptr<core::Context> ctx_;
};

}  // namespace sf::serve
