// One TrialLink RPC attempt as the Core API makes it, shared by Context's link
// (core_api/steadfast_core.cc), which retries around it, and by MetricReporter senders (the
// Context's and bench/metric_ingest.cc's), whose retries are the reporter's.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "common/status.h"
#include "core_api/metric_reporter.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::core {

// The task token's gRPC metadata key (master/auth/task_tokens.h checks it).
inline constexpr const char* kTaskTokenMetadataKey = "x-sf-task-token";

// One call of `method` on `stub` with a deadline `timeout` from now and, when `token` is not
// empty, the task token. No retry.
template <typename Req, typename Resp, typename Method>
grpc::Status CallTrialLinkOnce(steadfast::v1::TrialLink::Stub& stub, Method method,
                               const std::string& token, const Req& req, Resp* resp,
                               std::chrono::seconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token.empty()) ctx.AddMetadata(kTaskTokenMetadataKey, token);
  return (stub.*method)(&ctx, req, resp);
}

// A failed call as a Status "<what>: <message> (gRPC code N)" with the matching code, so that
// MetricReporter::IsRetryable tells transient from permanent: DEADLINE_EXCEEDED and ABORTED
// become kUnavailable, UNKNOWN kInternal, UNIMPLEMENTED kFailedPrecondition.
Status FromGrpc(const char* what, const grpc::Status& status);

// A MetricReporter::Send making one ReportMetrics call per batch as `who`, with `token` and a
// per-call deadline. `stub` must outlive the reporter that uses it.
MetricReporter::Send TrialLinkMetricSender(steadfast::v1::TrialLink::Stub* stub,
                                           steadfast::v1::TrialIdentity who, std::string token,
                                           std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace sf::core
