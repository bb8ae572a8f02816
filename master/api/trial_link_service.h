// TrialLink's gRPC service: what trainers and user trials call (proto/steadfast/v1/
// trial_link.proto). Every call must carry the task token the master issued for the identity
// it claims (master/auth/task_tokens.h, metadata `x-sf-task-token`); the coordinator then
// checks that identity is current. Errors map to gRPC codes as everywhere (ToGrpc).
#pragma once

#include <grpcpp/grpcpp.h>

#include "master/auth/task_tokens.h"
#include "master/core/cluster.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::master {

// ReportMetrics, the hot path, is a callback (reactor) method: its handler queues the rows and
// returns, and the metric writer answers the call after the commit, so no thread waits per
// report (with a sync handler each report cost a blocked thread and two context switches; most
// of the master's CPU per report went to switching). The other methods are sync.
class TrialLinkGrpcService final
    : public steadfast::v1::TrialLink::WithCallbackMethod_ReportMetrics<steadfast::v1::TrialLink::Service> {
 public:
  // `tokens` null: calls are not authenticated (tests that drive the coordinator alone).
  TrialLinkGrpcService(Cluster* cluster, const TaskTokens* tokens) : cluster_(cluster), tokens_(tokens) {}
  grpc::Status GetNextOperation(grpc::ServerContext*, const steadfast::v1::GetNextOperationRequest*,
                                steadfast::v1::GetNextOperationResponse*) override;
  grpc::ServerUnaryReactor* ReportMetrics(grpc::CallbackServerContext* context,
                                          const steadfast::v1::ReportMetricsRequest* request,
                                          steadfast::v1::ReportMetricsResponse* response) override;
  grpc::Status CompleteOperation(grpc::ServerContext*, const steadfast::v1::CompleteOperationRequest*,
                                 steadfast::v1::CompleteOperationResponse*) override;
  grpc::Status ReportCheckpoint(grpc::ServerContext*, const steadfast::v1::ReportCheckpointRequest*,
                                steadfast::v1::ReportCheckpointResponse*) override;
  grpc::Status ShouldStop(grpc::ServerContext*, const steadfast::v1::ShouldStopRequest*,
                          steadfast::v1::ShouldStopResponse*) override;
  grpc::Status Rendezvous(grpc::ServerContext*, const steadfast::v1::RendezvousRequest*,
                          steadfast::v1::RendezvousResponse*) override;
  // The context archive in chunks of at most 1 MiB (the first carries digest and size).
  grpc::Status GetContext(grpc::ServerContext*, const steadfast::v1::GetContextRequest*,
                          grpc::ServerWriter<steadfast::v1::ContextChunk>*) override;
  grpc::Status ReportProgress(grpc::ServerContext*, const steadfast::v1::ReportProgressRequest*,
                              steadfast::v1::ReportProgressResponse*) override;
  grpc::Status EndTrial(grpc::ServerContext*, const steadfast::v1::EndTrialRequest*,
                        steadfast::v1::EndTrialResponse*) override;
  grpc::Status ReportEndpoint(grpc::ServerContext*, const steadfast::v1::ReportEndpointRequest*,
                              steadfast::v1::ReportEndpointResponse*) override;
  grpc::Status ReportLogs(grpc::ServerContext*, const steadfast::v1::ReportLogsRequest*,
                          steadfast::v1::ReportLogsResponse*) override;
  grpc::Status ReportExit(grpc::ServerContext*, const steadfast::v1::ReportExitRequest*,
                          steadfast::v1::ReportExitResponse*) override;
  grpc::Status ReportEarlyExit(grpc::ServerContext*, const steadfast::v1::ReportEarlyExitRequest*,
                               steadfast::v1::ReportEarlyExitResponse*) override;
  grpc::Status GetExperimentBestValidation(grpc::ServerContext*,
                                           const steadfast::v1::GetExperimentBestValidationRequest*,
                                           steadfast::v1::GetExperimentBestValidationResponse*) override;
  grpc::Status DeleteCheckpoint(grpc::ServerContext*, const steadfast::v1::TrialDeleteCheckpointRequest*,
                                steadfast::v1::TrialDeleteCheckpointResponse*) override;
  grpc::Status AcknowledgePreemption(grpc::ServerContext*, const steadfast::v1::AcknowledgePreemptionRequest*,
                                     steadfast::v1::AcknowledgePreemptionResponse*) override;
  grpc::Status ReportCheckpointUnusable(grpc::ServerContext*, const steadfast::v1::ReportCheckpointUnusableRequest*,
                                        steadfast::v1::ReportCheckpointUnusableResponse*) override;

 private:
  // OK when the call carries the task token issued for `who`; kUnauthenticated otherwise.
  Status Authenticate(const grpc::ServerContextBase& context, const steadfast::v1::TrialIdentity& who) const;
  Cluster* cluster_;
  const TaskTokens* tokens_;
};

}  // namespace sf::master
