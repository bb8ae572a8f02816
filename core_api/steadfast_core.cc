#include "core_api/steadfast_core.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>

#include "common/env.h"
#include "common/log.h"
#include "common/tls_files.h"
#include "common/utf8.h"
#include "core_api/metric_reporter.h"
#include "core_api/trial_link_call.h"
#include "master/ingest/metric_groups.h"  // the master's rule for a group's name (header only)
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::core {
namespace v1 = steadfast::v1;

namespace {

Result<int64_t> EnvInt(const char* name, int64_t def) {
  const std::string v = Env(name);
  if (v.empty()) return def;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0') {
    return InvalidArgument(std::string(name) + "=\"" + v + "\" is not an integer");
  }
  return static_cast<int64_t>(n);
}

google::protobuf::Struct ToStruct(const Train::Values& values) {
  google::protobuf::Struct s;
  for (const auto& [k, v] : values) (*s.mutable_fields())[k].set_number_value(v);
  return s;
}

}  // namespace

Result<Info> InfoFromEnvironment() {
  Info info;
  info.master_address = Env("SF_MASTER_ADDRESS");
  info.ca_file = Env("SF_MASTER_CA_FILE");
  SF_ASSIGN_OR_RETURN(info.trial_id, EnvInt("SF_TRIAL_ID", 0));
  SF_ASSIGN_OR_RETURN(info.experiment_id, EnvInt("SF_EXPERIMENT_ID", 0));
  info.task_id = Env("SF_TASK_ID");
  SF_ASSIGN_OR_RETURN(int64_t restart, EnvInt("SF_RESTART", 0));
  SF_ASSIGN_OR_RETURN(int64_t rank, EnvInt("SF_RANK", 0));
  SF_ASSIGN_OR_RETURN(int64_t world, EnvInt("SF_WORLD_SIZE", 1));
  SF_ASSIGN_OR_RETURN(int64_t local_rank, EnvInt("SF_LOCAL_RANK", 0));
  SF_ASSIGN_OR_RETURN(int64_t local_size, EnvInt("SF_LOCAL_SIZE", 1));
  info.restart = static_cast<int>(restart);
  info.rank = static_cast<int>(rank);
  info.world_size = static_cast<int>(world);
  info.local_rank = static_cast<int>(local_rank);
  info.local_size = static_cast<int>(local_size);
  info.checkpoint_dir = Env("SF_CHECKPOINT_DIR");
  info.restore_checkpoint = Env("SF_RESTORE_CHECKPOINT");
  info.latest_checkpoint = Env("SF_LATEST_CHECKPOINT");
  if (const std::string fallbacks = Env("SF_RESTORE_FALLBACKS"); !fallbacks.empty()) {
    auto list = Value::FromJson(fallbacks);
    if (!list.ok() || !list->is_list()) return InvalidArgument("SF_RESTORE_FALLBACKS is not a JSON list");
    for (const Value& f : list->as_list()) {
      const Value* uuid = f.is_map() ? f.Find("uuid") : nullptr;
      const Value* dir = f.is_map() ? f.Find("path") : nullptr;
      if (!uuid || !dir || !uuid->is_string() || !dir->is_string()) {
        return InvalidArgument("SF_RESTORE_FALLBACKS: every entry needs a string uuid and path");
      }
      info.restore_fallbacks.push_back({uuid->as_string(), dir->as_string()});
    }
  }
  info.config_file = Env("SF_CONFIG_FILE");
  info.agent_id = Env("SF_AGENT_ID");
  info.slot_ids = Env("SF_SLOT_IDS");
  info.task_dir = Env("SF_TASK_DIR");
  info.token = Env("SF_TASK_TOKEN");
  // A task that is not a trial's (a server: master/tasks/task_coordinator.h) has no trial and no
  // checkpoints; its task id names it.
  const bool task_of_its_own = info.trial_id == 0 && !info.task_id.empty();
  if (info.master_address.empty() || (!task_of_its_own && (info.trial_id == 0 || info.checkpoint_dir.empty()))) {
    return InvalidArgument("SF_MASTER_ADDRESS, SF_TRIAL_ID and SF_CHECKPOINT_DIR must be set (the agent sets them)");
  }
  if (info.world_size < 1 || info.rank < 0 || info.rank >= info.world_size) {
    return InvalidArgument("SF_RANK " + std::to_string(info.rank) + " is not in [0, SF_WORLD_SIZE " +
                           std::to_string(info.world_size) + ")");
  }
  auto hparams = Value::FromJson(Env("SF_HPARAMS", "{}"));
  if (!hparams.ok()) return InvalidArgument("SF_HPARAMS is not JSON: " + hparams.status().message());
  if (!hparams->is_map()) return InvalidArgument("SF_HPARAMS is not a JSON object");
  info.hparams = std::move(hparams).value();
  return info;
}

// The channel, the task's identity and token, and the retry policy.
struct Context::Link {
  std::unique_ptr<v1::TrialLink::Stub> stub;
  v1::TrialIdentity who;
  std::string token;

  // One call, retried while the master is unreachable (or restarting) for up to `retry_for`;
  // `transient`, when given, is set when the last failure was one of those (the master away),
  // not a refusal.
  template <typename Req, typename Resp, typename Method>
  Status Call(const char* what, Method method, Req req, Resp* resp,
              std::chrono::seconds timeout = std::chrono::seconds(60),
              std::chrono::seconds retry_for = std::chrono::minutes(5), bool* transient = nullptr) {
    *req.mutable_who() = who;
    auto deadline = std::chrono::steady_clock::now() + retry_for;
    int delay_ms = 200;
    while (true) {
      grpc::Status st = CallTrialLinkOnce(*stub, method, token, req, resp, timeout);
      if (st.ok()) return Status::Ok();
      // A master going down cancels calls in flight; one coming up may not know the trial for
      // a moment. Both are waited out.
      const bool retry = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                         st.error_code() == grpc::StatusCode::CANCELLED ||
                         st.error_code() == grpc::StatusCode::ABORTED;
      if (transient) *transient = retry;
      if (!retry || std::chrono::steady_clock::now() >= deadline) {
        return Unavailable(std::string(what) + ": " + st.error_message() + " (gRPC code " +
                           std::to_string(st.error_code()) + ")");
      }
      log::Warn("trial_link", {{"event", "retry"}, {"call", what}, {"error", st.error_message()}});
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      delay_ms = std::min(delay_ms * 2, 5000);
    }
  }
};

Result<std::unique_ptr<Context>> Context::FromEnvironment() {
  SF_ASSIGN_OR_RETURN(Info info, InfoFromEnvironment());
  return Connect(std::move(info));
}

Result<std::unique_ptr<Context>> Context::Connect(Info info) {
  std::string ca_pem;
  if (!info.ca_file.empty()) {
    SF_ASSIGN_OR_RETURN(ca_pem, LoadCaCertificates(info.ca_file, "SF_MASTER_CA_FILE"));
  }
  // HTTP/2 pings (as the agent's link does) so a call across a cut network fails within ~10 s
  // and is retried, instead of waiting out its whole deadline.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(info.master_address, credentials, args);
  return Connect(std::move(info), std::move(channel));
}

std::unique_ptr<Context> Context::Connect(Info info, std::shared_ptr<grpc::Channel> channel) {
  auto link = std::make_unique<Link>();
  link->stub = v1::TrialLink::NewStub(std::move(channel));
  link->who.set_trial_id(info.trial_id);
  link->who.set_rank(info.rank);
  link->who.set_task_id(info.task_id);
  link->who.set_restart(info.restart);
  link->token = info.token;
  return std::unique_ptr<Context>(new Context(std::move(info), std::move(link)));
}

Context::Context(Info info, std::unique_ptr<Link> link)
    : info_(std::move(info)), link_(std::move(link)) {
  // Only the chief reports metrics; other ranks need no sender thread.
  if (info_.chief()) {
    reporter_ = std::make_unique<MetricReporter>(
        TrialLinkMetricSender(link_->stub.get(), link_->who, link_->token));
  }
}

// The reporter goes first: its sender uses the link. Its destructor sends what is still queued.
Context::~Context() { reporter_.reset(); }

Result<std::optional<Operation>> Searcher::Next() {
  if (!ctx_->info().chief()) {
    return FailedPrecondition("searcher operations are the chief's (rank 0) to ask for; rank " +
                              std::to_string(ctx_->info().rank) + " gets them from it");
  }
  SF_RETURN_IF_ERROR(ctx_->train_.Flush());
  while (true) {
    v1::GetNextOperationRequest req;
    v1::GetNextOperationResponse resp;
    SF_RETURN_IF_ERROR(ctx_->link_->Call("GetNextOperation", &v1::TrialLink::Stub::GetNextOperation, req, &resp,
                                         std::chrono::seconds(30)));
    if (resp.has_train()) return std::optional<Operation>(Operation{resp.train().target_length(), resp.train().unit()});
    if (resp.has_complete() && resp.complete()) return std::optional<Operation>();
    // Neither: the master had nothing yet; ask again.
  }
}

Status Searcher::Complete(const Operation& op, double searcher_metric) {
  if (!ctx_->info().chief()) return Status::Ok();
  SF_RETURN_IF_ERROR(ctx_->train_.Flush());  // the searcher's metric after the rows it comes from
  v1::CompleteOperationRequest req;
  req.mutable_op()->set_target_length(op.length);
  req.mutable_op()->set_unit(op.unit);
  req.mutable_op()->set_validate_after(true);
  req.set_searcher_metric(searcher_metric);
  v1::CompleteOperationResponse resp;
  return ctx_->link_->Call("CompleteOperation", &v1::TrialLink::Stub::CompleteOperation, req, &resp);
}

Status Searcher::ReportProgress(int64_t steps) {
  if (!ctx_->info().chief()) return Status::Ok();
  SF_RETURN_IF_ERROR(ctx_->train_.Flush());
  v1::ReportProgressRequest req;
  req.set_batches(steps);
  v1::ReportProgressResponse resp;
  return ctx_->link_->Call("ReportProgress", &v1::TrialLink::Stub::ReportProgress, req, &resp);
}

Status Context::ReportExit(int exit_code, const std::string& reason) {
  v1::ReportExitRequest req;
  req.set_exit_code(exit_code);
  req.set_reason(reason);
  req.set_host(info_.agent_id);
  v1::ReportExitResponse resp;
  return link_->Call("ReportExit", &v1::TrialLink::Stub::ReportExit, req, &resp);
}

Status Context::ReportEndpoint(const std::string& url) {
  if (!info_.chief()) return Status::Ok();
  v1::ReportEndpointRequest req;
  req.set_url(url);
  v1::ReportEndpointResponse resp;
  return link_->Call("ReportEndpoint", &v1::TrialLink::Stub::ReportEndpoint, req, &resp);
}

Status Context::ReportLogs(const std::string& incarnation, int64_t sequence, const std::vector<LogLine>& lines) {
  v1::ReportLogsRequest req;
  req.set_host(info_.agent_id);
  req.set_incarnation(incarnation);
  req.set_sequence(sequence);
  for (const LogLine& l : lines) {
    v1::LogLine* out = req.add_lines();
    out->set_stream(l.stream);
    out->set_message(l.text);
    *out->mutable_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
        std::chrono::duration_cast<std::chrono::nanoseconds>(l.time.time_since_epoch()).count());
  }
  v1::ReportLogsResponse resp;
  return link_->Call("ReportLogs", &v1::TrialLink::Stub::ReportLogs, req, &resp);
}

Status Train::ReportTraining(int64_t steps, const Values& values) { return Report("training", steps, values); }
Status Train::ReportValidation(int64_t steps, const Values& values) { return Report("validation", steps, values); }

Status Train::ReportMetrics(const std::string& group, int64_t steps, const Value& values) {
  const std::string what = "metrics of group \"" + (IsText(group) ? group : "?") + "\"";
  if (steps < 0) return InvalidArgument(what + ": steps " + std::to_string(steps) + " < 0");
  if (std::string problem = master::MetricGroupProblem(group); !problem.empty()) {
    return InvalidArgument(what + ": the group " + problem);
  }
  if (group == "training" || group == "validation") {
    return InvalidArgument(what +
                           ": report it with ReportTraining or ReportValidation (numbers only)");
  }
  if (!values.is_map())
    return InvalidArgument(what + ": the values must be a map of names to values");
  if (!ctx_->info().chief()) return Status::Ok();
  v1::MetricReport row;
  row.set_kind(group);
  row.set_batches(steps);
  // Value's JSON is the Struct's JSON mapping: any nesting, text and numbers alike.
  if (auto st = google::protobuf::util::JsonStringToMessage(values.ToJson(), row.mutable_values());
      !st.ok()) {
    return InvalidArgument(what + ": " + std::string(st.message()));
  }
  return ctx_->reporter_->Add(std::move(row));
}

Status Train::Report(const char* kind, int64_t steps, const Values& values) {
  if (steps < 0) return InvalidArgument(std::string(kind) + " metrics: steps " + std::to_string(steps) + " < 0");
  for (const auto& [name, value] : values) {
    if (name.empty()) return InvalidArgument(std::string(kind) + " metrics: a metric without a name");
  }
  if (!ctx_->info().chief()) return Status::Ok();
  v1::MetricReport row;
  row.set_kind(kind);
  row.set_batches(steps);
  *row.mutable_values() = ToStruct(values);
  return ctx_->reporter_->Add(std::move(row));
}

Status Train::Flush(std::chrono::steady_clock::duration timeout) {
  if (!ctx_->reporter_) return Status::Ok();  // not the chief: nothing is queued
  return ctx_->reporter_->Flush(std::chrono::steady_clock::now() + timeout);
}

Result<std::string> CheckpointStore::ReportUnusable(const std::string& uuid, const std::string& reason) {
  v1::ReportCheckpointUnusableRequest req;
  req.set_uuid(uuid);
  req.set_reason(reason);
  v1::ReportCheckpointUnusableResponse resp;
  SF_RETURN_IF_ERROR(ctx_->link_->Call("ReportCheckpointUnusable",
                                       &v1::TrialLink::Stub::ReportCheckpointUnusable, req, &resp));
  return resp.latest_uuid();
}

Status CheckpointStore::Report(const v1::Checkpoint& checkpoint) {
  if (!ctx_->info().chief()) return Status::Ok();
  SF_RETURN_IF_ERROR(ctx_->train_.Flush());  // a checkpoint at step N after the metrics up to N
  v1::ReportCheckpointRequest req;
  *req.mutable_checkpoint() = checkpoint;
  v1::ReportCheckpointResponse resp;
  return ctx_->link_->Call("ReportCheckpoint", &v1::TrialLink::Stub::ReportCheckpoint, req, &resp);
}

Result<Preempt::Action> Preempt::ShouldStop(int64_t steps) {
  // The answer is about the position the master knows: the metrics reported up to `steps` are
  // stored first, so a trial told to stop here has its rows in (and a preemption asked after
  // the master saw step N stops by N + one report window, as before the reporter). A master that
  // does not answer within kStopCheckPatience is away (down, restarting, cut off): the trial
  // trains on to the end of its operation, its reports queue in the reporter (bounded; they
  // drain in order when the master is back), and a stop decided meanwhile is heard at the first
  // check the master answers.
  auto away = [&](const Status& why) -> Result<Action> {
    if (!ctx_->master_away_) {
      log::Warn("trial_link", {{"event", "master_away"}, {"steps", std::to_string(steps)},
                               {"error", why.message()}, {"then", "training on; reports queue"}});
    }
    ctx_->master_away_ = true;
    return Action::kContinue;
  };
  Status flushed = ctx_->train_.Flush(kStopCheckPatience);
  if (flushed.code() == StatusCode::kUnavailable) return away(flushed);
  SF_RETURN_IF_ERROR(flushed);
  v1::ShouldStopRequest req;
  req.set_batches(steps);
  v1::ShouldStopResponse resp;
  bool transient = false;
  Status asked = ctx_->link_->Call("ShouldStop", &v1::TrialLink::Stub::ShouldStop, req, &resp,
                                   std::chrono::duration_cast<std::chrono::seconds>(kStopCheckPatience),
                                   std::chrono::seconds(0), &transient);
  if (!asked.ok() && transient) return away(asked);
  SF_RETURN_IF_ERROR(asked);
  if (ctx_->master_away_) {
    log::Info("trial_link", {{"event", "master_back"}, {"steps", std::to_string(steps)}});
    ctx_->master_away_ = false;
  }
  switch (resp.action()) {
    case v1::ShouldStopResponse::ACTION_STOP_NOW: return Action::kStopNow;
    case v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP: return Action::kCheckpointAndStop;
    default: return Action::kContinue;
  }
}

Result<std::vector<std::string>> Distributed::Gather(const std::string& round, const std::string& payload,
                                                     std::chrono::seconds timeout, std::vector<std::string>* agents) {
  v1::RendezvousRequest req;
  req.set_world_size(ctx_->info().world_size);
  req.set_round(round);
  req.set_payload(payload);
  req.set_timeout_seconds(static_cast<int32_t>(timeout.count()));
  v1::RendezvousResponse resp;
  SF_RETURN_IF_ERROR(ctx_->link_->Call("Rendezvous", &v1::TrialLink::Stub::Rendezvous, req, &resp,
                                       timeout + std::chrono::seconds(30)));
  if (agents) agents->assign(resp.addresses().begin(), resp.addresses().end());
  return std::vector<std::string>(resp.payloads().begin(), resp.payloads().end());
}

}  // namespace sf::core
