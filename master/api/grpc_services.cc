#include "master/api/grpc_services.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <thread>

#include "common/log.h"
#include "common/secret_file.h"
#include "master/api/api_audit.h"

namespace sf::master {
namespace v1 = steadfast::v1;

grpc::Status ToGrpc(const Status& s) {
  using grpc::StatusCode;
  StatusCode code = StatusCode::UNKNOWN;
  switch (s.code()) {
    case sf::StatusCode::kOk: return grpc::Status::OK;
    case sf::StatusCode::kInvalidArgument: code = StatusCode::INVALID_ARGUMENT; break;
    case sf::StatusCode::kNotFound: code = StatusCode::NOT_FOUND; break;
    case sf::StatusCode::kAlreadyExists: code = StatusCode::ALREADY_EXISTS; break;
    case sf::StatusCode::kFailedPrecondition: code = StatusCode::FAILED_PRECONDITION; break;
    case sf::StatusCode::kDataLoss: code = StatusCode::DATA_LOSS; break;
    case sf::StatusCode::kUnavailable: code = StatusCode::UNAVAILABLE; break;
    case sf::StatusCode::kInternal: code = StatusCode::INTERNAL; break;
    case sf::StatusCode::kOutOfRange: code = StatusCode::OUT_OF_RANGE; break;
    case sf::StatusCode::kResourceExhausted: code = StatusCode::RESOURCE_EXHAUSTED; break;
    case sf::StatusCode::kCancelled: code = StatusCode::CANCELLED; break;
    case sf::StatusCode::kUnauthenticated: code = StatusCode::UNAUTHENTICATED; break;
    case sf::StatusCode::kPermissionDenied: code = StatusCode::PERMISSION_DENIED; break;
  }
  return grpc::Status(code, s.message());
}

namespace {
// "ipv4:127.0.0.1:54321" -> "127.0.0.1" (the address, as REST records it); "unknown" if none.
std::string PeerAddress(const grpc::ServerContext& ctx) {
  std::string peer = ctx.peer();
  if (size_t colon = peer.find(':'); colon != std::string::npos) peer = peer.substr(colon + 1);
  if (size_t port = peer.rfind(':'); port != std::string::npos) peer = peer.substr(0, port);
  if (peer.size() > 2 && peer.front() == '[' && peer.back() == ']') peer = peer.substr(1, peer.size() - 2);
  return peer.empty() ? "unknown" : peer;
}
}  // namespace

grpc::Status ApiGrpcService::Guard(grpc::ServerContext* ctx, const std::string& method,
                                   const google::protobuf::Message& request, Principal* p) {
  auto rule = GrpcPolicy().find(method);
  if (rule == GrpcPolicy().end()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, method + " has no access rule (access_policy.h)");
  }
  p->peer = PeerAddress(*ctx);
  if (!accounts_) {
    p->user_id = -1;
    p->role = Role::kAdmin;
    auto md = ctx->client_metadata().find("x-sf-user");
    if (md != ctx->client_metadata().end()) p->username.assign(md->second.data(), md->second.size());
    return grpc::Status::OK;
  }
  const auto& [need, action] = rule->second;
  if (need == Need::kPublic) return grpc::Status::OK;
  auto md = ctx->client_metadata().find("authorization");
  if (md == ctx->client_metadata().end()) {
    return ToGrpc(Unauthenticated("log in first: no credentials (metadata authorization: Bearer TOKEN)"));
  }
  std::string_view v(md->second.data(), md->second.size());
  if (v.size() < 8 || v.substr(0, 7) != "Bearer " || v.size() > 7 + Accounts::kMaxTokenBytes) {
    return ToGrpc(Unauthenticated("authorization metadata: expected \"Bearer TOKEN\""));
  }
  auto who = accounts_->Authenticate(v.substr(7));
  if (!who.ok()) return ToGrpc(who.status());
  const std::string peer = p->peer;
  *p = *who;
  p->peer = peer;
  Resource r;
  if (need == Need::kExperiment || need == Need::kTask) {
    // Every method that acts on one experiment (or task) names it in an int64 field `id`.
    const auto* field = request.GetDescriptor()->FindFieldByName("id");
    if (field && field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
      (need == Need::kTask ? r.task_id : r.experiment_id) = request.GetReflection()->GetInt64(request, field);
    }
  }
  // ... and the checkpoint, user, workspace or model one acts on in a string field of that name.
  auto text = [&](const char* name) {
    const auto* field = request.GetDescriptor()->FindFieldByName(name);
    return field && field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING && !field->is_repeated()
               ? request.GetReflection()->GetString(request, field)
               : std::string();
  };
  r.checkpoint_uuid = text("uuid");
  r.username = text("username");
  r.workspace = text("workspace");
  r.model = text("name");  // kModel: the model's name or id
  return ToGrpc(authorizer_->Check(*p, need, action, r));
}

template <typename Resp, typename Fn>
grpc::Status ApiGrpcService::Call(grpc::ServerContext* ctx, const std::string& route,
                                  const google::protobuf::Message& request, Resp* out, Principal* caller, Fn&& fn) {
  auto start = std::chrono::steady_clock::now();
  Principal local;
  Principal& p = caller ? *caller : local;
  grpc::Status status = Guard(ctx, route, request, &p);
  if (status.ok()) {
    auto r = fn(p);
    status = r.ok() ? grpc::Status::OK : ToGrpc(r.status());
    if (r.ok()) *out = std::move(r).value();
  }
  if (observer_) {
    observer_("grpc " + route, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              status.error_code());
  }
  return status;
}

void ApiGrpcService::Audit(const grpc::ServerContext& ctx, const std::string& method,
                           const google::protobuf::Message& request, const google::protobuf::Message& reply,
                           const grpc::Status& status, const Principal& who) const {
  const api::ApiRoute* route = api::FindApiRoute(method);
  if (!route) return;
  RecordApiCall(audit_, *route, &request, &reply, who,
                {"GRPC", "", PeerAddress(ctx), static_cast<int>(status.error_code())});
}

template <typename Req, typename Resp>
grpc::Status ApiGrpcService::Serve(grpc::ServerContext* ctx, const std::string& name, const Req& request, Resp* out,
                                   Principal* who) {
  return Call(ctx, name, request, out, who, [&](const Principal& p) -> Result<Resp> {
    SF_ASSIGN_OR_RETURN(auto reply, methods_->Invoke(name, request, p));
    return std::move(static_cast<Resp&>(*reply));
  });
}

// Every unary method runs its entry in the method table (api_methods.h), as REST does.

namespace {
// A reply that carries field-path config errors (and no experiment) is INVALID_ARGUMENT: the
// errors, one per line, in the message, and with `details` the serialized reply too.
template <typename Resp>
grpc::Status RefuseConfigErrors(grpc::Status st, const Resp& out, bool details) {
  if (!st.ok() || out.errors_size() == 0) return st;
  std::string msg;
  for (const auto& e : out.errors()) msg += e.path() + ": " + e.message() + "\n";
  return details ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, msg, out.SerializeAsString())
                 : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, msg);
}
}  // namespace

grpc::Status ApiGrpcService::CreateExperiment(grpc::ServerContext* ctx, const v1::CreateExperimentRequest* r,
                                              v1::CreateExperimentResponse* out) {
  Principal who;
  grpc::Status st = RefuseConfigErrors(Serve(ctx, "CreateExperiment", *r, out, &who), *out, /*details=*/true);
  Audit(*ctx, "CreateExperiment", *r, *out, st, who);
  return st;
}
grpc::Status ApiGrpcService::CreateUnmanagedTrial(grpc::ServerContext* ctx, const v1::CreateUnmanagedTrialRequest* r,
                                                  v1::CreateUnmanagedTrialResponse* out) {
  Principal who;
  grpc::Status st = RefuseConfigErrors(Serve(ctx, "CreateUnmanagedTrial", *r, out, &who), *out, /*details=*/false);
  Audit(*ctx, "CreateUnmanagedTrial", *r, *out, st, who);
  return st;
}

// Whether a call is audited, and what its record names, is the proto's (AccessRule.audit).
#define SF_UNARY_RPC(Method, Req, Resp)                                                                    \
  grpc::Status ApiGrpcService::Method(grpc::ServerContext* ctx, const v1::Req* r, v1::Resp* out) {        \
    Principal who;                                                                                         \
    grpc::Status st = Serve(ctx, #Method, *r, out, &who);                                                  \
    Audit(*ctx, #Method, *r, *out, st, who);                                                               \
    return st;                                                                                             \
  }
SF_UNARY_RPC(GetExperiments, GetExperimentsRequest, GetExperimentsResponse)
SF_UNARY_RPC(GetExperiment, GetExperimentRequest, GetExperimentResponse)
SF_UNARY_RPC(KillExperiment, ExperimentActionRequest, ExperimentActionResponse)
SF_UNARY_RPC(PauseExperiment, ExperimentActionRequest, ExperimentActionResponse)
SF_UNARY_RPC(ActivateExperiment, ExperimentActionRequest, ExperimentActionResponse)
SF_UNARY_RPC(ArchiveExperiment, ExperimentActionRequest, ExperimentActionResponse)
SF_UNARY_RPC(UnarchiveExperiment, ExperimentActionRequest, ExperimentActionResponse)
SF_UNARY_RPC(DeleteExperiment, ExperimentActionRequest, DeleteExperimentResponse)
SF_UNARY_RPC(KillExperiments, BulkExperimentActionRequest, BulkExperimentActionResponse)
SF_UNARY_RPC(PauseExperiments, BulkExperimentActionRequest, BulkExperimentActionResponse)
SF_UNARY_RPC(ActivateExperiments, BulkExperimentActionRequest, BulkExperimentActionResponse)
SF_UNARY_RPC(ArchiveExperiments, BulkExperimentActionRequest, BulkExperimentActionResponse)
SF_UNARY_RPC(UnarchiveExperiments, BulkExperimentActionRequest, BulkExperimentActionResponse)
SF_UNARY_RPC(DeleteExperiments, BulkExperimentActionRequest, BulkExperimentActionResponse)
SF_UNARY_RPC(DeleteCheckpoints, DeleteCheckpointsRequest, DeleteCheckpointsResponse)
SF_UNARY_RPC(DeleteCheckpoint, DeleteCheckpointRequest, DeleteCheckpointResponse)
SF_UNARY_RPC(ContinueExperiment, ContinueExperimentRequest, CreateExperimentResponse)
SF_UNARY_RPC(GetResourcePools, GetResourcePoolsRequest, GetResourcePoolsResponse)
SF_UNARY_RPC(GetExperimentTrials, GetExperimentTrialsRequest, GetExperimentTrialsResponse)
SF_UNARY_RPC(GetExperimentCheckpoints, GetExperimentCheckpointsRequest, GetExperimentCheckpointsResponse)
SF_UNARY_RPC(GetExperimentContext, GetExperimentContextRequest, GetExperimentContextResponse)
SF_UNARY_RPC(GetExperimentSearcher, GetExperimentSearcherRequest, GetExperimentSearcherResponse)
SF_UNARY_RPC(GetTrial, GetTrialRequest, GetTrialResponse)
SF_UNARY_RPC(GetTrialMetrics, GetTrialMetricsRequest, GetTrialMetricsResponse)
SF_UNARY_RPC(GetTrialLogs, GetTrialLogsRequest, GetTrialLogsResponse)
SF_UNARY_RPC(GetAgents, GetAgentsRequest, GetAgentsResponse)
SF_UNARY_RPC(GetMaster, GetMasterRequest, GetMasterResponse)
SF_UNARY_RPC(GetClusterUtilization, GetClusterUtilizationRequest, GetClusterUtilizationResponse)
SF_UNARY_RPC(RevokeAgent, AgentRevocationRequest, AgentRevocationResponse)
SF_UNARY_RPC(RestoreAgent, AgentRevocationRequest, AgentRevocationResponse)
SF_UNARY_RPC(GetAuditLog, GetAuditLogRequest, GetAuditLogResponse)
SF_UNARY_RPC(Login, LoginRequest, LoginResponse)
SF_UNARY_RPC(Logout, LogoutRequest, LogoutResponse)
SF_UNARY_RPC(GetMe, GetMeRequest, GetMeResponse)
SF_UNARY_RPC(ListUsers, ListUsersRequest, ListUsersResponse)
SF_UNARY_RPC(CreateUser, CreateUserRequest, UserResponse)
SF_UNARY_RPC(SetUserRole, SetUserRoleRequest, UserResponse)
SF_UNARY_RPC(ActivateUser, UserNameRequest, UserResponse)
SF_UNARY_RPC(DeactivateUser, UserNameRequest, UserResponse)
SF_UNARY_RPC(SetUserPassword, SetUserPasswordRequest, UserResponse)
SF_UNARY_RPC(ListTokens, ListTokensRequest, ListTokensResponse)
SF_UNARY_RPC(CreateToken, CreateTokenRequest, Token)
SF_UNARY_RPC(RevokeToken, RevokeTokenRequest, RevokeTokenResponse)
SF_UNARY_RPC(ListWorkspaces, ListWorkspacesRequest, ListWorkspacesResponse)
SF_UNARY_RPC(CreateWorkspace, CreateWorkspaceRequest, Workspace)
SF_UNARY_RPC(SetWorkspaceMember, SetWorkspaceMemberRequest, WorkspaceMemberResponse)
SF_UNARY_RPC(RemoveWorkspaceMember, RemoveWorkspaceMemberRequest, WorkspaceMemberResponse)
// Model registry (docs/registry.md).
SF_UNARY_RPC(CreateModel, CreateModelRequest, ModelResponse)
SF_UNARY_RPC(ListModels, ListModelsRequest, ListModelsResponse)
SF_UNARY_RPC(GetModel, GetModelRequest, GetModelResponse)
SF_UNARY_RPC(UpdateModel, UpdateModelRequest, ModelResponse)
SF_UNARY_RPC(ArchiveModel, ModelActionRequest, ModelResponse)
SF_UNARY_RPC(UnarchiveModel, ModelActionRequest, ModelResponse)
SF_UNARY_RPC(DeleteModel, DeleteModelRequest, DeleteModelResponse)
SF_UNARY_RPC(RegisterModelVersion, RegisterModelVersionRequest, ModelVersionResponse)
SF_UNARY_RPC(GetModelVersion, ModelVersionRequest, GetModelVersionResponse)
SF_UNARY_RPC(DeleteModelVersion, ModelVersionRequest, DeleteModelVersionResponse)
// Webhooks (docs/webhooks.md).
SF_UNARY_RPC(CreateWebhook, CreateWebhookRequest, Webhook)
SF_UNARY_RPC(ListWebhooks, ListWebhooksRequest, ListWebhooksResponse)
SF_UNARY_RPC(DeleteWebhook, DeleteWebhookRequest, DeleteWebhookResponse)
SF_UNARY_RPC(ListWebhookDeliveries, ListWebhookDeliveriesRequest, ListWebhookDeliveriesResponse)
SF_UNARY_RPC(TestWebhook, TestWebhookRequest, TestWebhookResponse)
// Serving on the cluster (docs/serving.md).
SF_UNARY_RPC(StartServing, StartServingRequest, ServingResponse)
SF_UNARY_RPC(ListServings, ListServingsRequest, ListServingsResponse)
SF_UNARY_RPC(GetServing, ServingRequest, ServingResponse)
SF_UNARY_RPC(StopServing, ServingRequest, ServingResponse)
SF_UNARY_RPC(CreateCommand, CreateCommandRequest, TaskResponse)
SF_UNARY_RPC(ListTasks, ListTasksRequest, ListTasksResponse)
SF_UNARY_RPC(GetTask, TaskRequest, TaskResponse)
SF_UNARY_RPC(KillTask, TaskRequest, TaskResponse)
SF_UNARY_RPC(GetTaskLogs, GetTaskLogsRequest, GetTrialLogsResponse)
#undef SF_UNARY_RPC

namespace {
bool TrialFinished(ApiHandlers* h, int64_t trial_id) {
  auto t = h->store()->GetTrial(trial_id);
  return !t.ok() || !t->has_value() || IsTerminal((*t)->state());
}
}  // namespace

grpc::Status ApiGrpcService::FollowTrialMetrics(grpc::ServerContext* ctx, const v1::GetTrialMetricsRequest* r,
                                                grpc::ServerWriter<v1::MetricReport>* writer) {
  Principal p;
  if (grpc::Status st = Guard(ctx, "FollowTrialMetrics", *r, &p); !st.ok()) return st;
  v1::GetTrialMetricsRequest req = *r;
  req.set_max_points(0);
  int64_t next = req.start_batches();
  while (!ctx->IsCancelled()) {
    bool finished = TrialFinished(handlers_, req.trial_id());
    req.set_start_batches(next);
    auto rows = handlers_->GetTrialMetrics(req);
    if (!rows.ok()) return ToGrpc(rows.status());
    for (const auto& m : rows->metrics()) {
      if (!writer->Write(m)) return grpc::Status::OK;
      next = m.batches() + 1;
    }
    if (finished) return grpc::Status::OK;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return grpc::Status::OK;
}

grpc::Status ApiGrpcService::FollowTrialLogs(grpc::ServerContext* ctx, const v1::GetTrialLogsRequest* r,
                                             grpc::ServerWriter<v1::LogLine>* writer) {
  Principal p;
  if (grpc::Status st = Guard(ctx, "FollowTrialLogs", *r, &p); !st.ok()) return st;
  v1::GetTrialLogsRequest req = *r;
  while (!ctx->IsCancelled()) {
    bool finished = TrialFinished(handlers_, req.trial_id());
    auto rows = handlers_->GetTrialLogs(req);
    if (!rows.ok()) return ToGrpc(rows.status());
    for (const auto& l : rows->logs()) {
      if (!writer->Write(l)) return grpc::Status::OK;
      req.set_after_id(l.id());
    }
    if (finished && rows->logs().empty()) return grpc::Status::OK;
    if (rows->logs().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return grpc::Status::OK;
}

// ------------------------------------------------------------------------------------------
// AgentLink

namespace {

// Messages to one agent, written by a thread of their own so the cluster never blocks.
class GrpcAgentConnection final : public AgentConnection {
 public:
  explicit GrpcAgentConnection(grpc::ServerReaderWriter<v1::MasterMessage, v1::AgentMessage>* stream)
      : stream_(stream), writer_([this] { WriteLoop(); }) {}
  ~GrpcAgentConnection() override { Close(); }

  void Send(const v1::MasterMessage& m) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      outbox_.push_back(m);
    }
    cv_.notify_one();
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_one();
    if (writer_.joinable()) writer_.join();
  }

 private:
  void WriteLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return closed_ || !outbox_.empty(); });
      if (outbox_.empty() && closed_) return;
      v1::MasterMessage m = std::move(outbox_.front());
      outbox_.pop_front();
      lock.unlock();
      bool ok = stream_->Write(m);
      lock.lock();
      if (!ok) {
        closed_ = true;
        outbox_.clear();
        return;
      }
    }
  }

  grpc::ServerReaderWriter<v1::MasterMessage, v1::AgentMessage>* stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::MasterMessage> outbox_;
  bool closed_ = false;
  std::thread writer_;
};

}  // namespace

grpc::Status AgentLinkGrpcService::Connect(
    grpc::ServerContext* context, grpc::ServerReaderWriter<v1::MasterMessage, v1::AgentMessage>* stream) {
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_() || first.register_().agent_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must be RegisterAgent with an agent_id");
  }
  const std::string agent_id = first.register_().agent_id();
  const std::string incarnation = first.register_().incarnation();
  if (!join_token_.empty() && !SecretEquals(first.register_().join_token(), join_token_)) {
    const std::string why = first.register_().join_token().empty() ? "no join token" : "a wrong join token";
    log::Warn("agent", {{"event", "refused"}, {"id", agent_id}, {"peer", context->peer()}, {"reason", why}});
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "agent " + agent_id + " presented " + why + "; give it the cluster's (docs/security.md)");
  }
  auto revoked = [&] { return revocations_ && revocations_->IsRevoked(agent_id); };
  const std::string revoked_why = "agent " + agent_id + " is revoked; an admin restores it with `sf agent restore " +
                                  agent_id + "` (docs/security.md)";
  if (revoked()) {
    log::Warn("agent", {{"event", "refused"}, {"id", agent_id}, {"peer", context->peer()}, {"reason", "revoked"}});
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, revoked_why);
  }
  if (Status claim = agents_->CheckClaim(agent_id, incarnation); !claim.ok()) {
    log::Warn("agent", {{"event", "refused"}, {"id", agent_id}, {"peer", context->peer()}, {"reason", claim.message()}});
    return ToGrpc(claim);
  }
  const bool tracked = ledger_ != nullptr && !incarnation.empty();
  int64_t applied_through = 0;
  if (tracked) {
    auto applied = ledger_->Register(agent_id, incarnation);
    if (!applied.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, applied.status().message());
    applied_through = *applied;
  }
  auto conn = std::make_shared<GrpcAgentConnection>(stream);
  v1::MasterMessage ack;
  ack.mutable_register_ack()->set_master_id("steadfast-master");
  ack.mutable_register_ack()->set_heartbeat_interval_ms(1000);
  ack.mutable_register_ack()->set_applied_through(applied_through);
  conn->Send(ack);
  // Registers the agent: its row, then the manager (which re-adopts what it runs).
  auto registered = [&](const v1::RegisterAgent& reg) {
    v1::Agent row;
    row.set_id(reg.agent_id());
    row.set_hostname(reg.hostname());
    row.set_resource_pool(reg.resource_pool().empty() ? "default" : reg.resource_pool());
    row.set_version(reg.version());
    for (const auto& s : reg.slots()) {
      v1::Slot* slot = row.add_slots();
      *slot = s;
      slot->clear_usage();
    }
    if (store_) (void)store_->UpsertAgent(row);
    agents_->Connected(reg, conn);
  };
  registered(first.register_());
  // Applies one event (a task state change or a log batch). A task's exit has been acted on by
  // the coordinator when TaskStateChanged returns (the manager delivers what it caused).
  auto apply = [&](const v1::AgentMessage& m, std::optional<DeliveryStamp> stamp) -> Status {
    if (m.has_logs()) return cluster_->TaskLogs(m.logs(), std::move(stamp));
    agents_->TaskStateChanged(agent_id, m.task_state());
    return Status::Ok();
  };
  grpc::Status end = grpc::Status::OK;
  v1::AgentMessage msg;
  while (stream->Read(&msg)) {
    switch (msg.body_case()) {
      case v1::AgentMessage::kHeartbeat:
        if (revoked()) {
          log::Warn("agent", {{"event", "disconnected"}, {"id", agent_id}, {"reason", "revoked"}});
          end = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, revoked_why);
          break;
        }
        agents_->Heartbeat(agent_id, msg.heartbeat());
        break;
      case v1::AgentMessage::kTaskState:
      case v1::AgentMessage::kLogs: {
        if (!tracked || msg.sequence() <= 0) {
          (void)apply(msg, std::nullopt);
          break;
        }
        DeliveryStamp stamp{agent_id, incarnation, msg.sequence()};
        auto applied = ledger_->Apply(stamp, /*apply_records=*/msg.has_logs(),
                                      [&] { return apply(msg, stamp); });
        if (!applied.ok()) {
          if (!ledger_->GiveUp(stamp, applied.status())) {
            // Not acknowledged: the stream ends, the agent reconnects and re-sends it (a commit
            // whose outcome was unknown is then recognised by the ledger, not applied twice).
            log::Warn("agentlink", {{"event", "event_not_applied"}, {"agent", agent_id},
                                    {"sequence", std::to_string(msg.sequence())},
                                    {"error", applied.status().message()}});
            end = grpc::Status(grpc::StatusCode::UNAVAILABLE, applied.status().message());
            break;
          }
          log::Error("agentlink", {{"event", "event_refused_dropped"}, {"agent", agent_id},
                                   {"sequence", std::to_string(msg.sequence())},
                                   {"attempts", std::to_string(DeliveryLedger::kMaxAttempts)},
                                   {"error", applied.status().message()}});
        }
        v1::MasterMessage event_ack;
        event_ack.mutable_ack()->set_incarnation(incarnation);
        event_ack.mutable_ack()->set_applied_through(msg.sequence());
        conn->Send(event_ack);
        break;
      }
      case v1::AgentMessage::kRegister: registered(msg.register_()); break;
      default: break;
    }
    if (!end.ok()) break;
  }
  agents_->Disconnected(agent_id, conn.get());
  conn->Close();
  return end;
}

}  // namespace sf::master
