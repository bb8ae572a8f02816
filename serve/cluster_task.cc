// sf-serve as a task of the cluster (serve/cluster_task.h).
#include "serve/cluster_task.h"

#include <unistd.h>

#include "core_api/steadfast_core.h"

namespace sf::serve {

std::string EndpointUrl(const std::string& bind_address, int port, bool tls) {
  std::string host = bind_address;
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {0};
    host = gethostname(name, sizeof(name) - 1) == 0 && name[0] ? name : "localhost";
  } else if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";
  }
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port);
}

ClusterTask::ClusterTask(std::unique_ptr<core::Context> ctx) : ctx_(std::move(ctx)) {}
ClusterTask::~ClusterTask() = default;

Result<std::unique_ptr<ClusterTask>> ClusterTask::FromEnvironment() {
  SF_ASSIGN_OR_RETURN(std::unique_ptr<core::Context> ctx, core::Context::FromEnvironment());
  return std::unique_ptr<ClusterTask>(new ClusterTask(std::move(ctx)));
}

Status ClusterTask::Publish(const std::string& url) { return ctx_->ReportEndpoint(url); }

Result<bool> ClusterTask::StopRequested() {
  SF_ASSIGN_OR_RETURN(core::Preempt::Action action, ctx_->preempt().ShouldStop(0));
  return action != core::Preempt::Action::kContinue;
}

}  // namespace sf::serve
