#include "core_api/trial_link_call.h"

#include <utility>

namespace sf::core {
namespace v1 = steadfast::v1;

Status FromGrpc(const char* what, const grpc::Status& status) {
  StatusCode code = StatusCode::kInternal;
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::CANCELLED:
      code = StatusCode::kCancelled;
      break;
    case grpc::StatusCode::UNKNOWN:
      code = StatusCode::kInternal;
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = StatusCode::kInvalidArgument;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = StatusCode::kUnavailable;
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = StatusCode::kNotFound;
      break;
    case grpc::StatusCode::ALREADY_EXISTS:
      code = StatusCode::kAlreadyExists;
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
      code = StatusCode::kPermissionDenied;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      code = StatusCode::kResourceExhausted;
      break;
    case grpc::StatusCode::FAILED_PRECONDITION:
      code = StatusCode::kFailedPrecondition;
      break;
    case grpc::StatusCode::ABORTED:
      code = StatusCode::kUnavailable;
      break;
    case grpc::StatusCode::OUT_OF_RANGE:
      code = StatusCode::kOutOfRange;
      break;
    case grpc::StatusCode::UNIMPLEMENTED:
      code = StatusCode::kFailedPrecondition;
      break;
    case grpc::StatusCode::INTERNAL:
      code = StatusCode::kInternal;
      break;
    case grpc::StatusCode::UNAVAILABLE:
      code = StatusCode::kUnavailable;
      break;
    case grpc::StatusCode::DATA_LOSS:
      code = StatusCode::kDataLoss;
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      code = StatusCode::kUnauthenticated;
      break;
    default:
      break;
  }
  return Status(code, std::string(what) + ": " + status.error_message() + " (gRPC code " +
                          std::to_string(status.error_code()) + ")");
}

MetricReporter::Send TrialLinkMetricSender(v1::TrialLink::Stub* stub, v1::TrialIdentity who,
                                           std::string token, std::chrono::seconds timeout) {
  return [stub, who = std::move(who), token = std::move(token),
          timeout](const std::vector<v1::MetricReport>& rows) {
    v1::ReportMetricsRequest req;
    *req.mutable_who() = who;
    req.mutable_reports()->Reserve(static_cast<int>(rows.size()));
    for (const auto& row : rows) *req.add_reports() = row;
    v1::ReportMetricsResponse resp;
    return FromGrpc("ReportMetrics", CallTrialLinkOnce(*stub, &v1::TrialLink::Stub::ReportMetrics,
                                                       token, req, &resp, timeout));
  };
}

}  // namespace sf::core
