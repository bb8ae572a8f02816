// The Api methods by name, as one table that both servers call: the REST transcoder
// (http_server.cc, through routes/rest_transcoder.h) and the gRPC service (grpc_api_service.h).
// What a method does beyond ApiHandlers — the workspace a new experiment goes to, which
// experiments or checkpoints a bulk action may touch, the defaults of a request — lives here,
// once, not in a transport.
//
// Contract:
// - Invoke(name, request, caller) runs Api method `name` with `request` (a message of its
//   input type) for `caller`, whom the access policy (master/auth/access_policy.h) has already
//   let through; it answers the method's output message or an error Status. Streaming methods
//   are not in the table (their transports stream themselves).
// - Names() lists every method in the table; RouteTableTest checks that it holds every unary
//   method of steadfast.v1.Api.
// - Thread-safe: the table is fixed at construction; the dependencies are thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <functional>
#include <map>
#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include "master/api/api_handlers.h"
#include "master/auth/access_policy.h"
#include "master/auth/accounts.h"
#include "master/auth/agent_revocations.h"
#include "master/auth/audit_log.h"
#include "master/auth/login_limiter.h"
#include "master/auth/principal.h"
#include "steadfast/v1/common.pb.h"

namespace sf::master {

namespace webhooks {
class Webhooks;
}  // namespace webhooks

struct ApiDependencies {
  ApiHandlers* handlers = nullptr;
  Accounts* accounts = nullptr;             // null: the account methods answer kNotFound
  LoginLimiter* login_limiter = nullptr;    // null: logins are not rate limited
  Authorizer* authorizer = nullptr;         // null: no authentication (every check passes)
  AgentRevocations* revocations = nullptr;  // null: RevokeAgent/RestoreAgent answer kNotFound
  AuditLog* audit = nullptr;                // null: GetAuditLog answers kNotFound
  webhooks::Webhooks* webhooks = nullptr;   // null: the webhook methods answer kNotFound
};

// The field-path config errors a method's reply carries (its `repeated ConfigError errors`, as
// CreateExperiment's); empty when it has none. Both transports refuse such a reply: REST with 400
// and the errors, gRPC with INVALID_ARGUMENT.
std::vector<const steadfast::v1::ConfigError*> ReplyConfigErrors(const google::protobuf::Message& reply);

class ApiMethods {
 public:
  using Reply = Result<std::unique_ptr<google::protobuf::Message>>;
  using Method = std::function<Reply(const google::protobuf::Message& request, const Principal& caller)>;

  explicit ApiMethods(ApiDependencies deps);

  Reply Invoke(const std::string& name, const google::protobuf::Message& request, const Principal& caller) const;
  std::vector<std::string> Names() const;

 private:
  // Registers `fn(const Req&, const Principal&) -> Result<Resp>` as method `name`.
  template <typename Req, typename Fn>
  void Add(const std::string& name, Fn fn) {
    methods_[name] = [fn, name](const google::protobuf::Message& request, const Principal& caller) -> Reply {
      const auto* typed = dynamic_cast<const Req*>(&request);
      if (!typed) return Internal(name + " was given a " + request.GetTypeName());
      auto r = fn(*typed, caller);
      if (!r.ok()) return r.status();
      using Resp = std::remove_cvref_t<decltype(*r)>;
      return std::unique_ptr<google::protobuf::Message>(std::make_unique<Resp>(std::move(r).value()));
    };
  }
  // Sessions, users, API tokens and workspaces (account_methods.cc).
  void AddAccountMethods();
  // The model registry (model_methods.cc; docs/registry.md).
  void AddModelMethods();
  // Webhooks (webhook_methods.cc; docs/webhooks.md).
  void AddWebhookMethods();
  // Servers scheduled on the cluster (serving_methods.cc; master/serving/serving.h).
  void AddServingMethods();
  // Tasks that are not trials: commands, and every task's list, logs and kill (task_methods.cc).
  void AddTaskMethods();

  ApiDependencies deps_;
  std::map<std::string, Method> methods_;
};

}  // namespace sf::master
