#include "master/api/grpc_api_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <chrono>
#include <set>
#include <thread>

#include "common/api/route_table.h"
#include "master/api/api_audit.h"
#include "steadfast/v1/api.pb.h"

namespace sf::master {
namespace v1 = steadfast::v1;
namespace pb = google::protobuf;

namespace {

// "ipv4:127.0.0.1:54321" -> "127.0.0.1" (the address, as REST records it); "unknown" if none.
std::string PeerAddress(const grpc::ServerContext& ctx) {
  std::string peer = ctx.peer();
  if (size_t colon = peer.find(':'); colon != std::string::npos) peer = peer.substr(colon + 1);
  if (size_t port = peer.rfind(':'); port != std::string::npos) peer = peer.substr(0, port);
  if (peer.size() > 2 && peer.front() == '[' && peer.back() == ']')
    peer = peer.substr(1, peer.size() - 2);
  return peer.empty() ? "unknown" : peer;
}

// A new, empty message of the generated type `type` (the generated class, so the method table's
// typed entries accept it).
std::unique_ptr<pb::Message> NewMessage(const pb::Descriptor* type) {
  return std::unique_ptr<pb::Message>(
      pb::MessageFactory::generated_factory()->GetPrototype(type)->New());
}

bool Parse(const grpc::ByteBuffer& bytes, pb::Message* m) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return false;
  std::string data;
  for (const grpc::Slice& s : slices)
    data.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return m->ParseFromString(data);
}

grpc::ByteBuffer Serialize(const pb::Message& m) {
  grpc::Slice slice(m.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

// A reply that carries field-path config errors is INVALID_ARGUMENT: the errors, one per line,
// in the message, and the serialized reply as the details.
grpc::Status RefuseConfigErrors(const pb::Message& reply) {
  const auto errors = ReplyConfigErrors(reply);
  if (errors.empty()) return grpc::Status::OK;
  std::string message;
  for (const v1::ConfigError* e : errors) message += e->path() + ": " + e->message() + "\n";
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message, reply.SerializeAsString());
}

bool TrialFinished(ApiHandlers* h, int64_t trial_id) {
  auto t = h->store()->GetTrial(trial_id);
  return !t.ok() || !t->has_value() || IsTerminal((*t)->state());
}

using UnaryHandler =
    grpc::internal::RpcMethodHandler<ApiGrpcService, grpc::ByteBuffer, grpc::ByteBuffer>;
using StreamHandler =
    grpc::internal::ServerStreamingHandler<ApiGrpcService, grpc::ByteBuffer, grpc::ByteBuffer>;

}  // namespace

ApiGrpcService::ApiGrpcService(ApiHandlers* handlers, CallObserver observer)
    : handlers_(handlers), observer_(std::move(observer)) {
  Rebuild();
  const std::vector<std::string> names = methods_->Names();
  const std::set<std::string> table(names.begin(), names.end());
  const std::map<std::string, Follower> followers = {
      {"FollowTrialMetrics", &ApiGrpcService::FollowTrialMetrics},
      {"FollowTrialLogs", &ApiGrpcService::FollowTrialLogs},
  };
  for (const api::ApiRoute& route : api::ApiRoutes()) {
    const pb::MethodDescriptor* m = route.method;
    // gRPC keeps the pointer to the path, not a copy: the deque's strings stay where they are.
    const char* path =
        paths_.emplace_back("/" + m->service()->full_name() + "/" + m->name()).c_str();
    std::string why;
    if (!route.ok) {
      why = "its declaration in api.proto has problems (RouteTableProblems)";
    } else if (m->client_streaming()) {
      why = "client streaming is not served";
    } else if (m->server_streaming() && !followers.count(m->name())) {
      why = "a streaming method without a follower (grpc_api_service.cc)";
    } else if (!m->server_streaming() && !table.count(m->name())) {
      why = "not in the method table (api_methods.cc)";
    }
    // A method that cannot be served answers why, as UNIMPLEMENTED.
    grpc::Status refusal;
    if (!why.empty()) {
      unserved_.push_back(m->name() + ": " + why);
      if (m->client_streaming()) continue;  // gRPC answers UNIMPLEMENTED itself
      refusal = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, m->name() + " is not served: " + why);
    }
    if (m->server_streaming()) {
      const auto found = followers.find(m->name());
      const Follower follow = found == followers.end() ? nullptr : found->second;
      AddMethod(new grpc::internal::RpcServiceMethod(
          path, grpc::internal::RpcMethod::SERVER_STREAMING,
          new StreamHandler(
              [m, follow, refusal](ApiGrpcService* service, grpc::ServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ServerWriter<grpc::ByteBuffer>* writer) {
                return refusal.ok() ? service->Stream(m, follow, ctx, *request, writer) : refusal;
              },
              this)));
    } else {
      AddMethod(new grpc::internal::RpcServiceMethod(
          path, grpc::internal::RpcMethod::NORMAL_RPC,
          new UnaryHandler(
              [m, refusal](ApiGrpcService* service, grpc::ServerContext* ctx,
                           const grpc::ByteBuffer* request, grpc::ByteBuffer* reply) {
                return refusal.ok() ? service->Unary(m, ctx, *request, reply) : refusal;
              },
              this)));
    }
  }
}

grpc::Status ApiGrpcService::Unary(const pb::MethodDescriptor* method, grpc::ServerContext* ctx,
                                   const grpc::ByteBuffer& bytes, grpc::ByteBuffer* reply) {
  const auto start = std::chrono::steady_clock::now();
  const std::string& name = method->name();
  std::unique_ptr<pb::Message> request = NewMessage(method->input_type());
  if (!Parse(bytes, request.get())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        name + ": the request is not a valid " + method->input_type()->full_name());
  }
  Principal who;
  std::unique_ptr<pb::Message> out;
  grpc::Status status = Guard(ctx, name, *request, &who);
  if (status.ok()) {
    ApiMethods::Reply r = methods_->Invoke(name, *request, who);
    if (r.ok()) {
      out = std::move(r).value();
      status = RefuseConfigErrors(*out);
    } else {
      status = ToGrpc(r.status());
    }
  }
  if (status.ok()) *reply = Serialize(*out);
  if (observer_) {
    observer_("grpc " + name,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              status.error_code());
  }
  // Whether a call is audited, and what its record names, is the proto's (AccessRule.audit).
  Audit(*ctx, name, *request,
        out ? out.get()
            : pb::MessageFactory::generated_factory()->GetPrototype(method->output_type()),
        status, who);
  return status;
}

grpc::Status ApiGrpcService::Stream(const pb::MethodDescriptor* method, Follower follow,
                                    grpc::ServerContext* ctx, const grpc::ByteBuffer& bytes,
                                    grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  std::unique_ptr<pb::Message> request = NewMessage(method->input_type());
  if (!Parse(bytes, request.get())) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        method->name() + ": the request is not a valid " + method->input_type()->full_name());
  }
  Principal who;
  if (grpc::Status st = Guard(ctx, method->name(), *request, &who); !st.ok()) return st;
  return (this->*follow)(ctx, *request, who, writer);
}

grpc::Status ApiGrpcService::Guard(grpc::ServerContext* ctx, const std::string& method,
                                   const pb::Message& request, Principal* p) {
  auto rule = GrpcPolicy().find(method);
  if (rule == GrpcPolicy().end()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        method + " has no access rule (access_policy.h)");
  }
  p->peer = PeerAddress(*ctx);
  if (!accounts_) {
    p->user_id = -1;
    p->role = Role::kAdmin;
    auto md = ctx->client_metadata().find("x-sf-user");
    if (md != ctx->client_metadata().end())
      p->username.assign(md->second.data(), md->second.size());
    return grpc::Status::OK;
  }
  const auto& [need, action] = rule->second;
  if (need == Need::kPublic) return grpc::Status::OK;
  auto md = ctx->client_metadata().find("authorization");
  if (md == ctx->client_metadata().end()) {
    return ToGrpc(
        Unauthenticated("log in first: no credentials (metadata authorization: Bearer TOKEN)"));
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
    if (field && field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64) {
      (need == Need::kTask ? r.task_id : r.experiment_id) =
          request.GetReflection()->GetInt64(request, field);
    }
  }
  // ... and the checkpoint, user, workspace or model one acts on in a string field of that name.
  auto text = [&](const char* name) {
    const auto* field = request.GetDescriptor()->FindFieldByName(name);
    return field && field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING &&
                   !field->is_repeated()
               ? request.GetReflection()->GetString(request, field)
               : std::string();
  };
  r.checkpoint_uuid = text("uuid");
  r.username = text("username");
  r.workspace = text("workspace");
  r.model = text("name");  // kModel: the model's name or id
  return ToGrpc(authorizer_->Check(*p, need, action, r));
}

void ApiGrpcService::Audit(const grpc::ServerContext& ctx, const std::string& method,
                           const pb::Message& request, const pb::Message* reply,
                           const grpc::Status& status, const Principal& who) const {
  const api::ApiRoute* route = api::FindApiRoute(method);
  if (!route) return;
  RecordApiCall(audit_, *route, &request, reply, who,
                {"GRPC", "", PeerAddress(ctx), static_cast<int>(status.error_code())});
}

// The followers poll the store until the trial has finished and everything is sent.

grpc::Status ApiGrpcService::FollowTrialMetrics(grpc::ServerContext* ctx,
                                                const pb::Message& request, const Principal&,
                                                grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  v1::GetTrialMetricsRequest req = dynamic_cast<const v1::GetTrialMetricsRequest&>(request);
  req.set_max_points(0);
  int64_t next = req.start_batches();
  while (!ctx->IsCancelled()) {
    bool finished = TrialFinished(handlers_, req.trial_id());
    req.set_start_batches(next);
    auto rows = handlers_->GetTrialMetrics(req);
    if (!rows.ok()) return ToGrpc(rows.status());
    for (const auto& m : rows->metrics()) {
      if (!writer->Write(Serialize(m))) return grpc::Status::OK;
      next = m.batches() + 1;
    }
    if (finished) return grpc::Status::OK;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return grpc::Status::OK;
}

grpc::Status ApiGrpcService::FollowTrialLogs(grpc::ServerContext* ctx, const pb::Message& request,
                                             const Principal&,
                                             grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  v1::GetTrialLogsRequest req = dynamic_cast<const v1::GetTrialLogsRequest&>(request);
  while (!ctx->IsCancelled()) {
    bool finished = TrialFinished(handlers_, req.trial_id());
    auto rows = handlers_->GetTrialLogs(req);
    if (!rows.ok()) return ToGrpc(rows.status());
    for (const auto& l : rows->logs()) {
      if (!writer->Write(Serialize(l))) return grpc::Status::OK;
      req.set_after_id(l.id());
    }
    if (finished && rows->logs().empty()) return grpc::Status::OK;
    if (rows->logs().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return grpc::Status::OK;
}

}  // namespace sf::master
