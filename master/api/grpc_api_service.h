// The gRPC front end of steadfast.v1.Api (for the CLI, CI and the Python client), generated from
// the route table: every method the proto declares is served from its declaration, with no
// per-method code here. A new Api method is written once — in api.proto (binding, access rule,
// audit) and in the method table (api_methods.h) — and both transports serve it.
//
// Contract:
// - At construction the service registers every method of steadfast.v1.Api (common/api/
//   route_table.h lists them from the generated descriptors) as a raw-bytes handler on gRPC's
//   synchronous thread pool, as the generated service did. Clients see the same service: the
//   generated Api::Stub, grpcurl and the Python stubs call it unchanged.
// - A unary call: the request is parsed into the method's input type (a malformed one is
//   INVALID_ARGUMENT naming the method), the caller is authenticated and held to the method's
//   policy entry (Guard; master/auth/access_policy.h), the method table runs it, the reply is
//   serialized back. A reply that carries field-path config errors (`repeated ConfigError
//   errors`, as CreateExperiment's) is INVALID_ARGUMENT with the errors one per line, and the
//   serialized reply as the status details. Each call is observed for the metrics ("grpc
//   <Method>") and, when the proto says so (AccessRule.audit), put on the audit log.
// - A server-streaming call (FollowTrialMetrics, FollowTrialLogs) runs its follower below;
//   streaming methods are not in the method table.
// - A declared method with neither a method-table entry nor a follower, or whose declaration is
//   not ok (RouteTableProblems()), answers UNIMPLEMENTED naming why; Unserved() lists them and
//   tests/master/api/grpc_api_service_test.cc fails on any, so none can land.
// - Thread-safe. The Set* calls configure the service before the server starts.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "master/api/api_handlers.h"
#include "master/api/api_methods.h"
#include "master/api/grpc_services.h"
#include "master/auth/access_policy.h"
#include "master/auth/accounts.h"
#include "master/auth/agent_revocations.h"
#include "master/auth/audit_log.h"

namespace sf::master {

class ApiGrpcService final : public grpc::Service {
 public:
  ApiGrpcService(ApiHandlers* handlers, CallObserver observer);

  // Mutations are recorded there (none when not set); GetAuditLog reads it.
  void SetAuditLog(AuditLog* audit) {
    audit_ = audit;
    Rebuild();
  }
  // RevokeAgent and RestoreAgent act there (none when not set: NOT_FOUND).
  void SetRevocations(AgentRevocations* revocations) {
    revocations_ = revocations;
    Rebuild();
  }
  // The webhook methods act there (none when not set: NOT_FOUND).
  void SetWebhooks(webhooks::Webhooks* hooks) {
    webhooks_ = hooks;
    Rebuild();
  }
  // Authentication (as the REST server's, http_server.h): with `accounts` set, every call is
  // held to GrpcPolicy() (master/auth/access_policy.h) with the token from the `authorization:
  // Bearer TOKEN` metadata; a method without a policy entry is refused. Without, the caller is
  // whoever x-sf-user names, with every right. `authorizer` is used either way (workspaces).
  // `limiter` rate-limits Login (null: not limited).
  void SetAuth(Accounts* accounts, Authorizer* authorizer, LoginLimiter* limiter = nullptr) {
    accounts_ = accounts;
    authorizer_ = authorizer;
    limiter_ = limiter;
    Rebuild();
  }

  // "Method: why" for every declared Api method this service cannot serve; empty when it
  // serves them all.
  const std::vector<std::string>& Unserved() const { return unserved_; }

 private:
  // Streams the replies of one server-streaming method to `writer` (typed, serialized here).
  using Follower = grpc::Status (ApiGrpcService::*)(grpc::ServerContext*,
                                                    const google::protobuf::Message&,
                                                    const Principal&,
                                                    grpc::ServerWriter<grpc::ByteBuffer>*);

  void Rebuild() {
    methods_ = std::make_unique<ApiMethods>(ApiDependencies{.handlers = handlers_,
                                                            .accounts = accounts_,
                                                            .login_limiter = limiter_,
                                                            .authorizer = authorizer_,
                                                            .revocations = revocations_,
                                                            .audit = audit_,
                                                            .webhooks = webhooks_});
  }
  // The unary call of `method` (parse, Guard, method table, config errors, audit, metrics).
  grpc::Status Unary(const google::protobuf::MethodDescriptor* method, grpc::ServerContext* ctx,
                     const grpc::ByteBuffer& request, grpc::ByteBuffer* reply);
  // The server-streaming call of `method`: parse, Guard, then its follower.
  grpc::Status Stream(const google::protobuf::MethodDescriptor* method, Follower follow,
                      grpc::ServerContext* ctx, const grpc::ByteBuffer& request,
                      grpc::ServerWriter<grpc::ByteBuffer>* writer);
  grpc::Status FollowTrialMetrics(grpc::ServerContext* ctx,
                                  const google::protobuf::Message& request, const Principal& caller,
                                  grpc::ServerWriter<grpc::ByteBuffer>* writer);
  grpc::Status FollowTrialLogs(grpc::ServerContext* ctx, const google::protobuf::Message& request,
                               const Principal& caller,
                               grpc::ServerWriter<grpc::ByteBuffer>* writer);
  // Authenticates the caller and checks `method`'s policy entry; OK with *p filled, or the
  // refusal (UNAUTHENTICATED, PERMISSION_DENIED) with a one-line reason.
  grpc::Status Guard(grpc::ServerContext* ctx, const std::string& method,
                     const google::protobuf::Message& request, Principal* p);
  // Puts the call on record when its method is audited (master/api/api_audit.h; docs/security.md,
  // "Audit log"): actor `who` (as Guard found the caller), path
  // "/steadfast.v1.Api/<method>[/<target>]", status the gRPC code.
  void Audit(const grpc::ServerContext& ctx, const std::string& method,
             const google::protobuf::Message& request, const google::protobuf::Message* reply,
             const grpc::Status& status, const Principal& who) const;

  ApiHandlers* handlers_;
  CallObserver observer_;
  AuditLog* audit_ = nullptr;
  Accounts* accounts_ = nullptr;
  Authorizer* authorizer_ = nullptr;
  AgentRevocations* revocations_ = nullptr;
  LoginLimiter* limiter_ = nullptr;
  webhooks::Webhooks* webhooks_ = nullptr;
  std::unique_ptr<ApiMethods> methods_;
  std::vector<std::string> unserved_;
  std::deque<std::string> paths_;  // "/steadfast.v1.Api/<Method>", which gRPC points into
};

}  // namespace sf::master
