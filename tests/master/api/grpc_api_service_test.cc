// The gRPC Api service generated from the route table (master/api/grpc_api_service.h), in-process
// on loopback against a real PostgreSQL: it serves every declared method (none left unserved),
// the generated stubs call it unchanged (unary and streaming), replies with config errors are
// INVALID_ARGUMENT carrying the reply, audited methods are put on the audit log, and malformed
// requests or unknown methods get a clear refusal.
#include "master/api/grpc_api_service.h"

#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "common/api/route_table.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;

class GrpcApiServiceTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<Store>(db_.get());
    // No coordinator: the methods called here read the store only, or answer before using it.
    handlers_ = std::make_unique<ApiHandlers>(store_.get(), nullptr, MasterInfo{"test", "m", "c"});
    audit_ = std::make_unique<AuditLog>(db_.get());
    service_ = std::make_unique<ApiGrpcService>(
        handlers_.get(), [this](const std::string& route, double, int code) {
          std::lock_guard<std::mutex> lock(mu_);
          observed_.push_back(route + " " + std::to_string(code));
        });
    service_->SetAuditLog(audit_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Api::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  // A context that names the caller (no authentication configured) and gives up after 10 s.
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& user = "alice") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("x-sf-user", user);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }
  // Calls `method` with raw request bytes through a generic stub; the status.
  grpc::Status CallRaw(const std::string& method, const std::string& bytes) {
    grpc::GenericStub generic(channel_);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), reply;
    auto ctx = Context();
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(ctx.get(), method, grpc::StubOptions(), &request, &reply,
                      [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = std::move(s);
                        done = true;
                        cv.notify_one();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return status;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<ApiHandlers> handlers_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<ApiGrpcService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Api::Stub> stub_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> observed_;
};

TEST_F(GrpcApiServiceTest, ServesEveryDeclaredMethod) {
  for (const std::string& why : service_->Unserved()) ADD_FAILURE() << why;
  EXPECT_FALSE(api::ApiRoutes().empty());
}

TEST_F(GrpcApiServiceTest, GeneratedStubsCallItUnaryAndStreaming) {
  NewExperiment e;
  e.name = "listed";
  e.config_yaml = "name: listed\n";
  e.searcher = "single";
  e.metric = "validation_loss";
  e.state = "PAUSED";
  auto id = store_->CreateExperiment(e);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  v1::GetExperimentResponse got;
  v1::GetExperimentRequest get;
  get.set_experiment_id(*id);
  grpc::Status st = stub_->GetExperiment(Context().get(), get, &got);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(got.experiment().id(), *id);
  EXPECT_EQ(got.experiment().name(), "listed");

  // An error from the method table keeps its code and message.
  get.set_experiment_id(*id + 1000);
  st = stub_->GetExperiment(Context().get(), get, &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();

  // Streaming: a finished trial's logs, all of them, then the end of the stream.
  auto trial = store_->CreateTrial(*id, 1, Value(Value::Map{}), "COMPLETED");
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  for (const char* message : {"first", "second"}) {
    v1::LogLine line;
    line.set_trial_id(*trial);
    line.set_stream("stdout");
    line.set_message(message);
    line.set_agent_id("a");
    ASSERT_TRUE(store_->InsertLogs({line}).ok());
  }
  v1::GetTrialLogsRequest follow;
  follow.set_trial_id(*trial);
  auto ctx = Context();
  auto reader = stub_->FollowTrialLogs(ctx.get(), follow);
  std::vector<std::string> lines;
  for (v1::LogLine line; reader->Read(&line);) lines.push_back(line.message());
  st = reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(lines, (std::vector<std::string>{"first", "second"}));

  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(observed_.size(), 2u);  // the unary calls, by method and code
  if (observed_.size() == 2) {
    EXPECT_EQ(observed_[0], "grpc GetExperiment 0");
    EXPECT_EQ(observed_[1], "grpc GetExperiment 5");
  }
}

TEST_F(GrpcApiServiceTest, ConfigErrorsAreInvalidArgumentWithTheReplyAsDetails) {
  v1::CreateExperimentRequest create;  // no config: one field error, and nothing created
  v1::CreateExperimentResponse out;
  grpc::Status st = stub_->CreateExperiment(Context().get(), create, &out);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(st.error_message().empty());
  v1::CreateExperimentResponse details;
  ASSERT_TRUE(details.ParseFromString(st.error_details()));
  ASSERT_GT(details.errors_size(), 0);
  EXPECT_NE(st.error_message().find(details.errors(0).message()), std::string::npos)
      << st.error_message();
  EXPECT_EQ(details.experiment().id(), 0);
}

TEST_F(GrpcApiServiceTest, AuditedMethodsAreRecordedWithTheirTarget) {
  v1::AgentRevocationRequest revoke;  // no revocations configured: NOT_FOUND, and still on record
  revoke.set_agent_id("agent-7");
  v1::AgentRevocationResponse out;
  grpc::Status st = stub_->RevokeAgent(Context("bob").get(), revoke, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  // A read is not audited.
  v1::GetExperimentsResponse list;
  ASSERT_TRUE(stub_->GetExperiments(Context("bob").get(), v1::GetExperimentsRequest(), &list).ok());

  auto entries = audit_->List(AuditFilter{});
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 1u);
  const AuditEntry& e = entries->front();
  EXPECT_EQ(e.actor, "bob");
  EXPECT_EQ(e.method, "GRPC");
  EXPECT_EQ(e.path, "/steadfast.v1.Api/RevokeAgent/agent-7");
  EXPECT_EQ(e.status, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(e.peer, "127.0.0.1");
}

TEST_F(GrpcApiServiceTest, MalformedRequestsAndUnknownMethodsAreRefusedByName) {
  grpc::Status st = CallRaw("/steadfast.v1.Api/GetExperiment", std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find(
                "GetExperiment: the request is not a valid steadfast.v1.GetExperimentRequest"),
            std::string::npos)
      << st.error_message();
  st = CallRaw("/steadfast.v1.Api/NoSuchMethod", "");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED) << st.error_message();
  // The server is still up and answers.
  v1::GetExperimentsResponse list;
  EXPECT_TRUE(stub_->GetExperiments(Context().get(), v1::GetExperimentsRequest(), &list).ok());
}

}  // namespace
}  // namespace sf::master
