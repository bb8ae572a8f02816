#include "master/api/trial_link_service.h"

#include <algorithm>
#include <optional>

#include "common/sha256.h"
#include "master/api/grpc_services.h"
#include "master/db/database.h"

namespace sf::master {
namespace v1 = steadfast::v1;

namespace {
// A call that may write: its commits do not wait for the disk (the coordinator holds its lock
// for the statements only, and flushes are not queued behind it), then one wait for the disk
// outside the lock, before the caller hears OK (master/db/database.h, DeferredFlush). A failed
// wait is the call's error (kUnavailable: the caller retries, and these calls are idempotent).
template <class Call>
auto Durably(Cluster* cluster, Call&& call) -> decltype(call()) {
  std::optional<decltype(call())> result;
  bool wrote = false;
  {
    DeferredFlush deferred;
    result.emplace(call());
    wrote = deferred.committed();
  }
  if (wrote) {
    if (Status durable = cluster->WaitForDurability(); !durable.ok() && result->ok()) return durable;
  }
  return std::move(*result);
}
}  // namespace

Status TrialLinkGrpcService::Authenticate(const grpc::ServerContextBase& context, const v1::TrialIdentity& who) const {
  if (!tokens_) return Status::Ok();
  std::string_view token;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(TaskTokens::kMetadataKey); it != metadata.end()) {
    token = std::string_view(it->second.data(), it->second.size());
  }
  return tokens_->Verify(token, TaskClaims{who.trial_id(), who.rank(), who.restart(), who.task_id()});
}

grpc::Status TrialLinkGrpcService::GetNextOperation(grpc::ServerContext* context, const v1::GetNextOperationRequest* r,
                                                    v1::GetNextOperationResponse* out) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  auto res = Durably(cluster_, [&] { return cluster_->NextOperation(r->who(), std::chrono::seconds(20)); });
  if (!res.ok()) return ToGrpc(res.status());
  *out = std::move(res).value();
  return grpc::Status::OK;
}
grpc::ServerUnaryReactor* TrialLinkGrpcService::ReportMetrics(grpc::CallbackServerContext* context,
                                                               const v1::ReportMetricsRequest* r,
                                                               v1::ReportMetricsResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) {
    reactor->Finish(ToGrpc(auth));
    return reactor;
  }
  cluster_->ReportMetricsAsync(*r, [reactor](Status st) { reactor->Finish(ToGrpc(st)); });
  return reactor;
}
grpc::Status TrialLinkGrpcService::CompleteOperation(grpc::ServerContext* context, const v1::CompleteOperationRequest* r,
                                                     v1::CompleteOperationResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->CompleteOperation(*r); }));
}
grpc::Status TrialLinkGrpcService::ReportCheckpoint(grpc::ServerContext* context, const v1::ReportCheckpointRequest* r,
                                                    v1::ReportCheckpointResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->ReportCheckpoint(*r); }));
}
grpc::Status TrialLinkGrpcService::ShouldStop(grpc::ServerContext* context, const v1::ShouldStopRequest* r,
                                              v1::ShouldStopResponse* out) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  auto res = cluster_->ShouldStop(*r);
  if (!res.ok()) return ToGrpc(res.status());
  *out = std::move(res).value();
  return grpc::Status::OK;
}
grpc::Status TrialLinkGrpcService::Rendezvous(grpc::ServerContext* context, const v1::RendezvousRequest* r,
                                              v1::RendezvousResponse* out) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  const int seconds = r->timeout_seconds() > 0 ? std::min(r->timeout_seconds(), 3600) : 300;
  auto res = cluster_->Rendezvous(*r, std::chrono::seconds(seconds));
  if (!res.ok()) return ToGrpc(res.status());
  *out = std::move(res).value();
  return grpc::Status::OK;
}
grpc::Status TrialLinkGrpcService::GetContext(grpc::ServerContext* context, const v1::GetContextRequest* r,
                                              grpc::ServerWriter<v1::ContextChunk>* writer) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  auto archive = cluster_->Context(r->who());
  if (!archive.ok()) return ToGrpc(archive.status());
  constexpr size_t kChunk = size_t{1} << 20;
  const std::string& bytes = *archive;
  for (size_t offset = 0; offset < bytes.size() || offset == 0; offset += kChunk) {
    v1::ContextChunk chunk;
    chunk.set_data(bytes.substr(offset, kChunk));
    if (offset == 0) {
      chunk.set_sha256(Sha256Hex(bytes));
      chunk.set_total_bytes(static_cast<int64_t>(bytes.size()));
    }
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "the agent went away");
    if (bytes.empty()) break;
  }
  return grpc::Status::OK;
}
grpc::Status TrialLinkGrpcService::ReportProgress(grpc::ServerContext* context, const v1::ReportProgressRequest* r,
                                                  v1::ReportProgressResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->ReportProgress(*r); }));
}
grpc::Status TrialLinkGrpcService::EndTrial(grpc::ServerContext* context, const v1::EndTrialRequest* r,
                                            v1::EndTrialResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->EndTrial(*r); }));
}
grpc::Status TrialLinkGrpcService::ReportEndpoint(grpc::ServerContext* context, const v1::ReportEndpointRequest* r,
                                                  v1::ReportEndpointResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->ReportEndpoint(*r); }));
}
grpc::Status TrialLinkGrpcService::ReportLogs(grpc::ServerContext* context, const v1::ReportLogsRequest* r,
                                              v1::ReportLogsResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(cluster_->ReportLogs(*r));
}
grpc::Status TrialLinkGrpcService::ReportExit(grpc::ServerContext* context, const v1::ReportExitRequest* r,
                                              v1::ReportExitResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->ReportExit(*r); }));
}
grpc::Status TrialLinkGrpcService::ReportEarlyExit(grpc::ServerContext* context, const v1::ReportEarlyExitRequest* r,
                                                   v1::ReportEarlyExitResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->ReportEarlyExit(*r); }));
}
grpc::Status TrialLinkGrpcService::GetExperimentBestValidation(grpc::ServerContext* context,
                                                               const v1::GetExperimentBestValidationRequest* r,
                                                               v1::GetExperimentBestValidationResponse* out) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  auto best = cluster_->ExperimentBestValidation(r->who());
  if (!best.ok()) return ToGrpc(best.status());
  if (*best) out->set_best(**best);
  return grpc::Status::OK;
}
grpc::Status TrialLinkGrpcService::DeleteCheckpoint(grpc::ServerContext* context,
                                                    const v1::TrialDeleteCheckpointRequest* r,
                                                    v1::TrialDeleteCheckpointResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->DeleteTrialCheckpoint(r->who(), r->uuid()); }));
}
grpc::Status TrialLinkGrpcService::AcknowledgePreemption(grpc::ServerContext* context,
                                                         const v1::AcknowledgePreemptionRequest* r,
                                                         v1::AcknowledgePreemptionResponse*) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  return ToGrpc(Durably(cluster_, [&] { return cluster_->AcknowledgePreemption(r->who()); }));
}
grpc::Status TrialLinkGrpcService::ReportCheckpointUnusable(grpc::ServerContext* context,
                                                            const v1::ReportCheckpointUnusableRequest* r,
                                                            v1::ReportCheckpointUnusableResponse* out) {
  if (Status auth = Authenticate(*context, r->who()); !auth.ok()) return ToGrpc(auth);
  auto latest = Durably(cluster_, [&] { return cluster_->ReportCheckpointUnusable(r->who(), r->uuid(), r->reason()); });
  if (!latest.ok()) return ToGrpc(latest.status());
  out->set_latest_uuid(*latest);
  return grpc::Status::OK;
}

}  // namespace sf::master
