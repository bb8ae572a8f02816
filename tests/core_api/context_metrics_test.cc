// sf::core::Context's metric reports against an in-process fake TrialLink server: reports are
// queued and batched, carry the task's identity and token, reach the master before the searcher
// metric and checkpoint that follow them, a group of the trial's own carries text and lists as
// given, a refusal surfaces from the next flushing call, and through a master outage the trial
// trains on (stop checks answer "continue", reports queue and drain in order once it is back, and
// a stop decided meanwhile is heard at the next check).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core_api/steadfast_core.h"
#include "core_api/trial_link_call.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::core {
namespace {
namespace v1 = steadfast::v1;

constexpr auto kPatience = std::chrono::seconds(30);

// Records what arrives, in order: "metrics:<kind>:<batches>", "complete", "checkpoint",
// "should_stop:<batches>".
class FakeTrialLink final : public v1::TrialLink::Service {
 public:
  // The status of the n-th ReportMetrics call (0-based).
  std::function<grpc::Status(int call)> metrics_status = [](int) { return grpc::Status::OK; };
  std::promise<void> first_metrics_entered, release_first_metrics;
  bool block_first_metrics = false;

  grpc::Status ReportMetrics(grpc::ServerContext* ctx, const v1::ReportMetricsRequest* req,
                             v1::ReportMetricsResponse*) override {
    int call = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      call = metric_calls_++;
      Check(*ctx, req->who());
    }
    if (call == 0 && block_first_metrics) {
      first_metrics_entered.set_value();
      release_first_metrics.get_future().wait();
    }
    grpc::Status st = metrics_status(call);
    if (!st.ok()) return st;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& r : req->reports()) {
      events_.push_back("metrics:" + r.kind() + ":" + std::to_string(r.batches()));
      reports_.push_back(r);
    }
    largest_call_ = std::max(largest_call_, req->reports_size());
    return grpc::Status::OK;
  }
  grpc::Status CompleteOperation(grpc::ServerContext* ctx, const v1::CompleteOperationRequest* req,
                                 v1::CompleteOperationResponse*) override {
    return Record(*ctx, req->who(), "complete");
  }
  grpc::Status ReportCheckpoint(grpc::ServerContext* ctx, const v1::ReportCheckpointRequest* req,
                                v1::ReportCheckpointResponse*) override {
    return Record(*ctx, req->who(), "checkpoint");
  }
  std::atomic<int> stop_action{v1::ShouldStopResponse::ACTION_CONTINUE};
  grpc::Status ShouldStop(grpc::ServerContext* ctx, const v1::ShouldStopRequest* req,
                          v1::ShouldStopResponse* resp) override {
    resp->set_action(static_cast<v1::ShouldStopResponse::Action>(stop_action.load()));
    return Record(*ctx, req->who(), "should_stop:" + std::to_string(req->batches()));
  }

  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  int largest_call() {
    std::lock_guard<std::mutex> lock(mu_);
    return largest_call_;
  }
  int metric_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return metric_calls_;
  }
  std::vector<v1::MetricReport> reports() {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_;
  }

 private:
  grpc::Status Record(const grpc::ServerContext& ctx, const v1::TrialIdentity& who,
                      const std::string& event) {
    std::lock_guard<std::mutex> lock(mu_);
    Check(ctx, who);
    events_.push_back(event);
    return grpc::Status::OK;
  }
  void Check(const grpc::ServerContext& ctx, const v1::TrialIdentity& who) {
    auto token = ctx.client_metadata().find(kTaskTokenMetadataKey);
    const std::string seen = token == ctx.client_metadata().end()
                                 ? "(none)"
                                 : std::string(token->second.data(), token->second.size());
    EXPECT_EQ(seen, "tok");
    EXPECT_EQ(who.trial_id(), 7);
    EXPECT_EQ(who.task_id(), "task-7");
  }

  std::mutex mu_;
  std::vector<std::string> events_;
  std::vector<v1::MetricReport> reports_;
  int metric_calls_ = 0;
  int largest_call_ = 0;
};

class ContextMetrics : public ::testing::Test {
 protected:
  void SetUp() override { Serve("127.0.0.1:0"); }
  // Starts the fake master on `address` (port 0: any free one); address_ names where it listens.
  void Serve(const std::string& address) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<Context> Connect(int rank = 0, int world_size = 1) {
    Info info;
    info.master_address = address_;
    info.trial_id = 7;
    info.task_id = "task-7";
    info.rank = rank;
    info.world_size = world_size;
    info.checkpoint_dir = "/nonexistent";
    info.token = "tok";  // InfoFromEnvironment's, from SF_TASK_TOKEN
    auto ctx = Context::Connect(info);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? std::move(ctx).value() : nullptr;
  }

  FakeTrialLink service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

std::vector<std::string> TrainingEvents(int from, int to) {
  std::vector<std::string> v;
  for (int i = from; i <= to; ++i) v.push_back("metrics:training:" + std::to_string(i));
  return v;
}

TEST_F(ContextMetrics, ReportsReturnBeforeTheMasterAnswersAndArriveBeforeCompleteAndCheckpoint) {
  service_.block_first_metrics = true;
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  ASSERT_TRUE(ctx->train().ReportTraining(1, {{"loss", 1.0}}).ok());
  ASSERT_EQ(service_.first_metrics_entered.get_future().wait_for(kPatience),
            std::future_status::ready);
  // The master holds the first call; the training loop goes on.
  for (int i = 2; i <= 200; ++i)
    ASSERT_TRUE(ctx->train().ReportTraining(i, {{"loss", 1.0 / i}}).ok());
  ASSERT_TRUE(ctx->train().ReportValidation(200, {{"validation_loss", 0.5}}).ok());
  service_.release_first_metrics.set_value();
  v1::Checkpoint ck;
  ck.set_uuid("u");
  ASSERT_TRUE(ctx->checkpoint().Report(ck).ok());
  ASSERT_TRUE(ctx->searcher().Complete({200, "batches"}, 0.5).ok());
  std::vector<std::string> want = TrainingEvents(1, 200);
  want.push_back("metrics:validation:200");
  want.push_back("checkpoint");
  want.push_back("complete");
  EXPECT_EQ(service_.events(), want);
  EXPECT_EQ(service_.largest_call(), 200);  // rows 2..200 and the validation row, in one call
}

TEST_F(ContextMetrics, ShouldStopIsAskedOnlyAfterTheMetricsBeforeItAreStored) {
  service_.block_first_metrics = true;
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  ASSERT_TRUE(ctx->train().ReportTraining(10, {{"loss", 1.0}}).ok());
  ASSERT_EQ(service_.first_metrics_entered.get_future().wait_for(kPatience),
            std::future_status::ready);
  ASSERT_TRUE(ctx->train().ReportTraining(20, {{"loss", 0.5}}).ok());
  // The master holds the first report: ShouldStop waits for both rows, then asks.
  auto asked = std::async(std::launch::async, [&] { return ctx->preempt().ShouldStop(20); });
  EXPECT_EQ(asked.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  service_.release_first_metrics.set_value();
  ASSERT_EQ(asked.wait_for(kPatience), std::future_status::ready);
  auto action = asked.get();
  ASSERT_TRUE(action.ok()) << action.status().ToString();
  EXPECT_EQ(*action, sf::core::Preempt::Action::kContinue);
  EXPECT_EQ(service_.events(),
            (std::vector<std::string>{"metrics:training:10", "metrics:training:20", "should_stop:20"}));
}

TEST_F(ContextMetrics, ArgumentsAreCheckedAtTheCall) {
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  EXPECT_EQ(ctx->train().ReportTraining(-1, {{"loss", 1.0}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->train().ReportValidation(3, {{"", 1.0}}).code(), StatusCode::kInvalidArgument);
  ctx.reset();
  EXPECT_EQ(service_.metric_calls(), 0);
}

TEST_F(ContextMetrics, AGroupOfTheTrialsOwnCarriesTextAndListsAsGiven) {
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  const Value transcripts(Value::Map{
      {"utterances", Value(Value::List{Value(Value::Map{{"id", "utt-1"},
                                                        {"reference", "Zwei H\xc3\xbcnde."},
                                                        {"hypothesis", "zwei hunde"},
                                                        {"word_errors", 1}})})}});
  ASSERT_TRUE(ctx->train().ReportValidation(8, {{"wer", 50.0}}).ok());
  ASSERT_TRUE(ctx->train().ReportMetrics("validation_transcripts", 8, transcripts).ok());
  ASSERT_TRUE(ctx->searcher().Complete({8, "batches"}, 50.0).ok());
  EXPECT_EQ(service_.events(),
            (std::vector<std::string>{"metrics:validation:8", "metrics:validation_transcripts:8",
                                      "complete"}));
  const std::vector<v1::MetricReport> rows = service_.reports();
  ASSERT_EQ(rows.size(), 2u);
  const auto& fields = rows[1].values().fields();
  ASSERT_EQ(fields.count("utterances"), 1u);
  const auto& list = fields.at("utterances").list_value();
  ASSERT_EQ(list.values_size(), 1);
  const auto& u = list.values(0).struct_value().fields();
  EXPECT_EQ(u.at("id").string_value(), "utt-1");
  EXPECT_EQ(u.at("reference").string_value(), "Zwei H\xc3\xbcnde.");
  EXPECT_EQ(u.at("hypothesis").string_value(), "zwei hunde");
  EXPECT_EQ(u.at("word_errors").number_value(), 1.0);
}

TEST_F(ContextMetrics, AGroupsNameAndValuesAreCheckedAtTheCall) {
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  const Value values(Value::Map{{"n", 1}});
  for (const char* group : {"", "Inference", "9lives", "has-dash", "training", "validation"}) {
    EXPECT_EQ(ctx->train().ReportMetrics(group, 1, values).code(), StatusCode::kInvalidArgument)
        << group;
  }
  EXPECT_EQ(ctx->train().ReportMetrics(std::string(65, 'a'), 1, values).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->train().ReportMetrics("inference", -1, values).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->train().ReportMetrics("inference", 1, Value("text")).code(),
            StatusCode::kInvalidArgument);
  ctx.reset();
  EXPECT_EQ(service_.metric_calls(), 0);
}

TEST_F(ContextMetrics, ARefusedReportFailsTheNextFlushingCallAndTheNextReport) {
  service_.metrics_status = [](int) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "stale restart");
  };
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  ASSERT_TRUE(ctx->train().ReportTraining(1, {{"loss", 1.0}}).ok());  // queued
  Status st = ctx->searcher().Complete({1, "batches"}, 0.5);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("ReportMetrics: stale restart"), std::string::npos) << st.message();
  EXPECT_EQ(ctx->train().ReportTraining(2, {{"loss", 1.0}}).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(service_.events().empty());  // Complete never reached the master
}

TEST_F(ContextMetrics, TransientErrorsAreRetriedAndTheDestructorDeliversWhatIsQueued) {
  service_.metrics_status = [](int call) {
    return call < 2 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting") : grpc::Status::OK;
  };
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  for (int i = 1; i <= 20; ++i) ASSERT_TRUE(ctx->train().ReportTraining(i, {{"loss", 1.0}}).ok());
  ctx.reset();
  EXPECT_EQ(service_.events(), TrainingEvents(1, 20));
}

TEST_F(ContextMetrics, TheTrialTrainsOnThroughAMasterOutageAndItsReportsDrainInOrderAfterIt) {
  auto ctx = Connect();
  ASSERT_TRUE(ctx);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(ctx->train().ReportTraining(i, {{"loss", 1.0}}).ok());
  auto action = ctx->preempt().ShouldStop(5);
  ASSERT_TRUE(action.ok()) << action.status().ToString();
  EXPECT_EQ(*action, Preempt::Action::kContinue);

  server_->Shutdown();  // the master dies
  server_->Wait();
  for (int i = 6; i <= 10; ++i) ASSERT_TRUE(ctx->train().ReportTraining(i, {{"loss", 1.0}}).ok());
  const auto asked = std::chrono::steady_clock::now();
  action = ctx->preempt().ShouldStop(10);
  const auto waited = std::chrono::steady_clock::now() - asked;
  ASSERT_TRUE(action.ok()) << action.status().ToString();
  EXPECT_EQ(*action, Preempt::Action::kContinue) << "the trial trains on while the master is away";
  EXPECT_LT(waited, Preempt::kStopCheckPatience * 2 + std::chrono::seconds(5));
  for (int i = 11; i <= 15; ++i) ASSERT_TRUE(ctx->train().ReportTraining(i, {{"loss", 1.0}}).ok());

  // The master comes back on its address, having decided meanwhile that the trial stops.
  service_.stop_action = v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP;
  const std::string port = address_.substr(address_.rfind(':') + 1);
  Serve("127.0.0.1:" + port);
  action = ctx->preempt().ShouldStop(15);
  ASSERT_TRUE(action.ok()) << action.status().ToString();
  EXPECT_EQ(*action, Preempt::Action::kCheckpointAndStop) << "the stop is heard once the master answers";
  std::vector<std::string> expected = TrainingEvents(1, 5);
  expected.push_back("should_stop:5");
  for (const std::string& e : TrainingEvents(6, 15)) expected.push_back(e);
  expected.push_back("should_stop:15");
  EXPECT_EQ(service_.events(), expected) << "every row once, in order; the outage's check never arrived";
}

TEST_F(ContextMetrics, OtherRanksReportNothing) {
  auto ctx = Connect(/*rank=*/1, /*world_size=*/2);
  ASSERT_TRUE(ctx);
  EXPECT_TRUE(ctx->train().ReportTraining(1, {{"loss", 1.0}}).ok());
  EXPECT_TRUE(ctx->searcher().Complete({1, "batches"}, 0.5).ok());
  ctx.reset();
  EXPECT_EQ(service_.metric_calls(), 0);
}

TEST(TrialLinkCall, GrpcCodesKeepTheirRetryability) {
  for (auto code : {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED,
                    grpc::StatusCode::ABORTED, grpc::StatusCode::CANCELLED,
                    grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::INTERNAL}) {
    EXPECT_TRUE(MetricReporter::IsRetryable(FromGrpc("X", grpc::Status(code, "m")).code())) << code;
  }
  for (auto code : {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::PERMISSION_DENIED,
                    grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::NOT_FOUND,
                    grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::UNIMPLEMENTED}) {
    EXPECT_FALSE(MetricReporter::IsRetryable(FromGrpc("X", grpc::Status(code, "m")).code()))
        << code;
  }
  EXPECT_EQ(
      FromGrpc("ReportMetrics", grpc::Status(grpc::StatusCode::NOT_FOUND, "no trial")).message(),
      "ReportMetrics: no trial (gRPC code 5)");
  EXPECT_TRUE(FromGrpc("X", grpc::Status::OK).ok());
}

}  // namespace
}  // namespace sf::core
