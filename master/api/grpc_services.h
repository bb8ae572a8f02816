// gRPC front ends of the master: Api (for the CLI and CI), AgentLink (one bidirectional
// stream per agent) and TrialLink (trainers). Each is a thin translation onto the method table
// (api_methods.h, shared with REST), ApiHandlers or Cluster; gRPC runs them on its own thread pool, and they are thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>

#include "master/agentlink/delivery_ledger.h"
#include "master/api/api_handlers.h"
#include "master/api/api_methods.h"
#include "master/auth/access_policy.h"
#include "master/auth/agent_revocations.h"
#include "master/auth/accounts.h"
#include "master/auth/audit_log.h"
#include "master/rm/agents/agent_manager.h"
#include "steadfast/v1/agent_link.grpc.pb.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::master {

grpc::Status ToGrpc(const Status& s);

// Observes each API call (route, seconds, ok) for the Prometheus metrics; may be empty.
using CallObserver = std::function<void(const std::string& route, double seconds, int code)>;

class ApiGrpcService final : public steadfast::v1::Api::Service {
 public:
  ApiGrpcService(ApiHandlers* handlers, CallObserver observer)
      : handlers_(handlers), observer_(std::move(observer)) {
    Rebuild();
  }
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

  grpc::Status CreateExperiment(grpc::ServerContext*, const steadfast::v1::CreateExperimentRequest*,
                                steadfast::v1::CreateExperimentResponse*) override;
  grpc::Status CreateUnmanagedTrial(grpc::ServerContext*, const steadfast::v1::CreateUnmanagedTrialRequest*,
                                    steadfast::v1::CreateUnmanagedTrialResponse*) override;
  grpc::Status GetExperiments(grpc::ServerContext*, const steadfast::v1::GetExperimentsRequest*,
                              steadfast::v1::GetExperimentsResponse*) override;
  grpc::Status GetExperiment(grpc::ServerContext*, const steadfast::v1::GetExperimentRequest*,
                             steadfast::v1::GetExperimentResponse*) override;
  grpc::Status KillExperiment(grpc::ServerContext*, const steadfast::v1::ExperimentActionRequest*,
                              steadfast::v1::ExperimentActionResponse*) override;
  grpc::Status PauseExperiment(grpc::ServerContext*, const steadfast::v1::ExperimentActionRequest*,
                               steadfast::v1::ExperimentActionResponse*) override;
  grpc::Status ActivateExperiment(grpc::ServerContext*, const steadfast::v1::ExperimentActionRequest*,
                                  steadfast::v1::ExperimentActionResponse*) override;
  grpc::Status ArchiveExperiment(grpc::ServerContext*, const steadfast::v1::ExperimentActionRequest*,
                                 steadfast::v1::ExperimentActionResponse*) override;
  grpc::Status UnarchiveExperiment(grpc::ServerContext*, const steadfast::v1::ExperimentActionRequest*,
                                   steadfast::v1::ExperimentActionResponse*) override;
  grpc::Status DeleteExperiment(grpc::ServerContext*, const steadfast::v1::ExperimentActionRequest*,
                                steadfast::v1::DeleteExperimentResponse*) override;
  grpc::Status KillExperiments(grpc::ServerContext*, const steadfast::v1::BulkExperimentActionRequest*,
                               steadfast::v1::BulkExperimentActionResponse*) override;
  grpc::Status PauseExperiments(grpc::ServerContext*, const steadfast::v1::BulkExperimentActionRequest*,
                                steadfast::v1::BulkExperimentActionResponse*) override;
  grpc::Status ActivateExperiments(grpc::ServerContext*, const steadfast::v1::BulkExperimentActionRequest*,
                                   steadfast::v1::BulkExperimentActionResponse*) override;
  grpc::Status ArchiveExperiments(grpc::ServerContext*, const steadfast::v1::BulkExperimentActionRequest*,
                                  steadfast::v1::BulkExperimentActionResponse*) override;
  grpc::Status UnarchiveExperiments(grpc::ServerContext*, const steadfast::v1::BulkExperimentActionRequest*,
                                    steadfast::v1::BulkExperimentActionResponse*) override;
  grpc::Status DeleteExperiments(grpc::ServerContext*, const steadfast::v1::BulkExperimentActionRequest*,
                                 steadfast::v1::BulkExperimentActionResponse*) override;
  grpc::Status DeleteCheckpoints(grpc::ServerContext*, const steadfast::v1::DeleteCheckpointsRequest*,
                                 steadfast::v1::DeleteCheckpointsResponse*) override;
  grpc::Status GetExperimentTrials(grpc::ServerContext*, const steadfast::v1::GetExperimentTrialsRequest*,
                                   steadfast::v1::GetExperimentTrialsResponse*) override;
  grpc::Status GetExperimentCheckpoints(grpc::ServerContext*,
                                        const steadfast::v1::GetExperimentCheckpointsRequest*,
                                        steadfast::v1::GetExperimentCheckpointsResponse*) override;
  grpc::Status GetTrial(grpc::ServerContext*, const steadfast::v1::GetTrialRequest*,
                        steadfast::v1::GetTrialResponse*) override;
  grpc::Status GetTrialMetrics(grpc::ServerContext*, const steadfast::v1::GetTrialMetricsRequest*,
                               steadfast::v1::GetTrialMetricsResponse*) override;
  grpc::Status FollowTrialMetrics(grpc::ServerContext*, const steadfast::v1::GetTrialMetricsRequest*,
                                  grpc::ServerWriter<steadfast::v1::MetricReport>*) override;
  grpc::Status GetTrialLogs(grpc::ServerContext*, const steadfast::v1::GetTrialLogsRequest*,
                            steadfast::v1::GetTrialLogsResponse*) override;
  grpc::Status FollowTrialLogs(grpc::ServerContext*, const steadfast::v1::GetTrialLogsRequest*,
                               grpc::ServerWriter<steadfast::v1::LogLine>*) override;
  grpc::Status GetAgents(grpc::ServerContext*, const steadfast::v1::GetAgentsRequest*,
                         steadfast::v1::GetAgentsResponse*) override;
  grpc::Status GetResourcePools(grpc::ServerContext*, const steadfast::v1::GetResourcePoolsRequest*,
                                steadfast::v1::GetResourcePoolsResponse*) override;
  grpc::Status ContinueExperiment(grpc::ServerContext*, const steadfast::v1::ContinueExperimentRequest*,
                                  steadfast::v1::CreateExperimentResponse*) override;
  grpc::Status GetMaster(grpc::ServerContext*, const steadfast::v1::GetMasterRequest*,
                         steadfast::v1::GetMasterResponse*) override;
  grpc::Status GetClusterUtilization(grpc::ServerContext*, const steadfast::v1::GetClusterUtilizationRequest*,
                                     steadfast::v1::GetClusterUtilizationResponse*) override;
  grpc::Status GetExperimentContext(grpc::ServerContext*, const steadfast::v1::GetExperimentContextRequest*,
                                    steadfast::v1::GetExperimentContextResponse*) override;
  grpc::Status GetExperimentSearcher(grpc::ServerContext*, const steadfast::v1::GetExperimentSearcherRequest*,
                                     steadfast::v1::GetExperimentSearcherResponse*) override;
  grpc::Status DeleteCheckpoint(grpc::ServerContext*, const steadfast::v1::DeleteCheckpointRequest*,
                                steadfast::v1::DeleteCheckpointResponse*) override;
  grpc::Status RevokeAgent(grpc::ServerContext*, const steadfast::v1::AgentRevocationRequest*,
                           steadfast::v1::AgentRevocationResponse*) override;
  grpc::Status RestoreAgent(grpc::ServerContext*, const steadfast::v1::AgentRevocationRequest*,
                            steadfast::v1::AgentRevocationResponse*) override;
  grpc::Status GetAuditLog(grpc::ServerContext*, const steadfast::v1::GetAuditLogRequest*,
                           steadfast::v1::GetAuditLogResponse*) override;
  grpc::Status Login(grpc::ServerContext*, const steadfast::v1::LoginRequest*, steadfast::v1::LoginResponse*) override;
  grpc::Status Logout(grpc::ServerContext*, const steadfast::v1::LogoutRequest*, steadfast::v1::LogoutResponse*) override;
  grpc::Status GetMe(grpc::ServerContext*, const steadfast::v1::GetMeRequest*, steadfast::v1::GetMeResponse*) override;
  grpc::Status ListUsers(grpc::ServerContext*, const steadfast::v1::ListUsersRequest*, steadfast::v1::ListUsersResponse*) override;
  grpc::Status CreateUser(grpc::ServerContext*, const steadfast::v1::CreateUserRequest*, steadfast::v1::UserResponse*) override;
  grpc::Status SetUserRole(grpc::ServerContext*, const steadfast::v1::SetUserRoleRequest*, steadfast::v1::UserResponse*) override;
  grpc::Status ActivateUser(grpc::ServerContext*, const steadfast::v1::UserNameRequest*, steadfast::v1::UserResponse*) override;
  grpc::Status DeactivateUser(grpc::ServerContext*, const steadfast::v1::UserNameRequest*, steadfast::v1::UserResponse*) override;
  grpc::Status SetUserPassword(grpc::ServerContext*, const steadfast::v1::SetUserPasswordRequest*, steadfast::v1::UserResponse*) override;
  grpc::Status ListTokens(grpc::ServerContext*, const steadfast::v1::ListTokensRequest*, steadfast::v1::ListTokensResponse*) override;
  grpc::Status CreateToken(grpc::ServerContext*, const steadfast::v1::CreateTokenRequest*, steadfast::v1::Token*) override;
  grpc::Status RevokeToken(grpc::ServerContext*, const steadfast::v1::RevokeTokenRequest*, steadfast::v1::RevokeTokenResponse*) override;
  grpc::Status ListWorkspaces(grpc::ServerContext*, const steadfast::v1::ListWorkspacesRequest*, steadfast::v1::ListWorkspacesResponse*) override;
  grpc::Status CreateWorkspace(grpc::ServerContext*, const steadfast::v1::CreateWorkspaceRequest*, steadfast::v1::Workspace*) override;
  grpc::Status SetWorkspaceMember(grpc::ServerContext*, const steadfast::v1::SetWorkspaceMemberRequest*, steadfast::v1::WorkspaceMemberResponse*) override;
  grpc::Status RemoveWorkspaceMember(grpc::ServerContext*, const steadfast::v1::RemoveWorkspaceMemberRequest*, steadfast::v1::WorkspaceMemberResponse*) override;
  // Model registry (docs/registry.md).
  grpc::Status CreateModel(grpc::ServerContext*, const steadfast::v1::CreateModelRequest*, steadfast::v1::ModelResponse*) override;
  grpc::Status ListModels(grpc::ServerContext*, const steadfast::v1::ListModelsRequest*, steadfast::v1::ListModelsResponse*) override;
  grpc::Status GetModel(grpc::ServerContext*, const steadfast::v1::GetModelRequest*, steadfast::v1::GetModelResponse*) override;
  grpc::Status UpdateModel(grpc::ServerContext*, const steadfast::v1::UpdateModelRequest*, steadfast::v1::ModelResponse*) override;
  grpc::Status ArchiveModel(grpc::ServerContext*, const steadfast::v1::ModelActionRequest*, steadfast::v1::ModelResponse*) override;
  grpc::Status UnarchiveModel(grpc::ServerContext*, const steadfast::v1::ModelActionRequest*, steadfast::v1::ModelResponse*) override;
  grpc::Status DeleteModel(grpc::ServerContext*, const steadfast::v1::DeleteModelRequest*, steadfast::v1::DeleteModelResponse*) override;
  grpc::Status RegisterModelVersion(grpc::ServerContext*, const steadfast::v1::RegisterModelVersionRequest*, steadfast::v1::ModelVersionResponse*) override;
  grpc::Status GetModelVersion(grpc::ServerContext*, const steadfast::v1::ModelVersionRequest*, steadfast::v1::GetModelVersionResponse*) override;
  grpc::Status DeleteModelVersion(grpc::ServerContext*, const steadfast::v1::ModelVersionRequest*, steadfast::v1::DeleteModelVersionResponse*) override;
  // Webhooks (docs/webhooks.md).
  grpc::Status CreateWebhook(grpc::ServerContext*, const steadfast::v1::CreateWebhookRequest*, steadfast::v1::Webhook*) override;
  grpc::Status ListWebhooks(grpc::ServerContext*, const steadfast::v1::ListWebhooksRequest*, steadfast::v1::ListWebhooksResponse*) override;
  grpc::Status DeleteWebhook(grpc::ServerContext*, const steadfast::v1::DeleteWebhookRequest*, steadfast::v1::DeleteWebhookResponse*) override;
  grpc::Status ListWebhookDeliveries(grpc::ServerContext*, const steadfast::v1::ListWebhookDeliveriesRequest*, steadfast::v1::ListWebhookDeliveriesResponse*) override;
  grpc::Status TestWebhook(grpc::ServerContext*, const steadfast::v1::TestWebhookRequest*, steadfast::v1::TestWebhookResponse*) override;
  // Serving on the cluster (docs/serving.md).
  grpc::Status StartServing(grpc::ServerContext*, const steadfast::v1::StartServingRequest*, steadfast::v1::ServingResponse*) override;
  grpc::Status ListServings(grpc::ServerContext*, const steadfast::v1::ListServingsRequest*, steadfast::v1::ListServingsResponse*) override;
  grpc::Status GetServing(grpc::ServerContext*, const steadfast::v1::ServingRequest*, steadfast::v1::ServingResponse*) override;
  grpc::Status StopServing(grpc::ServerContext*, const steadfast::v1::ServingRequest*, steadfast::v1::ServingResponse*) override;
  grpc::Status CreateCommand(grpc::ServerContext*, const steadfast::v1::CreateCommandRequest*,
                             steadfast::v1::TaskResponse*) override;
  grpc::Status ListTasks(grpc::ServerContext*, const steadfast::v1::ListTasksRequest*,
                         steadfast::v1::ListTasksResponse*) override;
  grpc::Status GetTask(grpc::ServerContext*, const steadfast::v1::TaskRequest*, steadfast::v1::TaskResponse*) override;
  grpc::Status KillTask(grpc::ServerContext*, const steadfast::v1::TaskRequest*, steadfast::v1::TaskResponse*) override;
  grpc::Status GetTaskLogs(grpc::ServerContext*, const steadfast::v1::GetTaskLogsRequest*,
                           steadfast::v1::GetTrialLogsResponse*) override;

 private:
  void Rebuild() {
    methods_ = std::make_unique<ApiMethods>(ApiDependencies{.handlers = handlers_,
                                                            .accounts = accounts_,
                                                            .login_limiter = limiter_,
                                                            .authorizer = authorizer_,
                                                            .revocations = revocations_,
                                                            .audit = audit_,
                                                            .webhooks = webhooks_});
  }
  // Api method `name` from the table (api_methods.h), guarded and observed as Call does; the
  // caller Guard found goes to *who (for the audit record).
  template <typename Req, typename Resp>
  grpc::Status Serve(grpc::ServerContext* ctx, const std::string& name, const Req& request, Resp* out, Principal* who);
  // Guard, then `fn(principal)` with its result in *out, observed for the metrics; the caller
  // Guard found goes to *caller when given (for the audit record).
  template <typename Resp, typename Fn>
  grpc::Status Call(grpc::ServerContext* ctx, const std::string& route, const google::protobuf::Message& request,
                    Resp* out, Principal* caller, Fn&& fn);
  // Authenticates the caller and checks `method`'s policy entry; OK with *p filled, or the
  // refusal (UNAUTHENTICATED, PERMISSION_DENIED) with a one-line reason.
  grpc::Status Guard(grpc::ServerContext* ctx, const std::string& method, const google::protobuf::Message& request,
                     Principal* p);
  // Puts the call on record when its method is audited (master/api/api_audit.h; docs/security.md,
  // "Audit log"): actor `who` (as Guard found the caller), path
  // "/steadfast.v1.Api/<method>[/<target>]", status the gRPC code.
  void Audit(const grpc::ServerContext& ctx, const std::string& method, const google::protobuf::Message& request,
             const google::protobuf::Message& reply, const grpc::Status& status, const Principal& who) const;

  ApiHandlers* handlers_;
  CallObserver observer_;
  AuditLog* audit_ = nullptr;
  Accounts* accounts_ = nullptr;
  Authorizer* authorizer_ = nullptr;
  AgentRevocations* revocations_ = nullptr;
  LoginLimiter* limiter_ = nullptr;
  webhooks::Webhooks* webhooks_ = nullptr;
  std::unique_ptr<ApiMethods> methods_;
};

// AgentLink.Connect: an agent's connection, which ends in the agents' resource manager
// (master/rm/agents/agent_manager.h: registration, heartbeats, its tasks' exits); its task logs
// go to the coordinator's log ingestion, and its row to the store. Events (task state changes, log batches) are delivered at least once by
// the agent and applied once here through `ledger` (master/agentlink/delivery_ledger.h): each is
// acknowledged (MasterMessage.ack) after it was applied; one that failed ends the stream
// without an ack, so that the agent reconnects and re-sends it. One that fails the same way
// DeliveryLedger::kMaxAttempts times in a row (the database refuses it for good, e.g. a
// constraint; not merely unavailable) is logged, acknowledged and dropped, so that it cannot
// wedge the agent's queue. Events without a sequence (an agent without
// delivery tracking), or every event when `ledger` is null, are applied as they come.
// An agent joins only with the cluster's join token, when the master has one (docs/security.md):
// a missing or wrong token ends the stream with UNAUTHENTICATED, and an agent id held by another
// connected agent process with ALREADY_EXISTS; both are logged on the master and the agent.
class AgentLinkGrpcService final : public steadfast::v1::AgentLink::Service {
 public:
  // `join_token` empty: agents are not authenticated.
  AgentLinkGrpcService(rm::AgentManager* agents, Cluster* cluster, Store* store, DeliveryLedger* ledger,
                       std::string join_token = "")
      : agents_(agents), cluster_(cluster), store_(store), ledger_(ledger), join_token_(std::move(join_token)) {}
  grpc::Status Connect(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<steadfast::v1::MasterMessage, steadfast::v1::AgentMessage>* stream)
      override;
  // Revoked agents are refused, and a connected one is disconnected at its next heartbeat.
  void SetRevocations(const AgentRevocations* revocations) { revocations_ = revocations; }

 private:
  rm::AgentManager* agents_;
  Cluster* cluster_;
  Store* store_;
  DeliveryLedger* ledger_;
  std::string join_token_;
  const AgentRevocations* revocations_ = nullptr;
};

}  // namespace sf::master
