// sf-task (launcher/task_launcher.h) against a real master: a program run as an unmanaged trial's
// task gets its stdout and stderr into the trial's logs with no agent in the way, each line once,
// and sf-task exits with the program's status; ReportLogs stores a re-sent batch once and
// refuses bad input and a foreign token.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/subprocess.h"
#include "steadfast/v1/trial_link.grpc.pb.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {

namespace v1 = steadfast::v1;
using namespace std::chrono_literals;

struct Unmanaged {
  int64_t trial_id = 0;
  std::string task_id, token, address, checkpoint_dir;
};

Unmanaged CreateUnmanaged(Cluster& c) {
  const std::string yaml =
      "name: launched\nentrypoint: ./run.sh\nsearcher: {name: single, metric: loss, max_length: {batches: 10}}\n";
  auto [status, reply] = c.Post("/api/v1/unmanaged-trials", Value(Value::Map{{"configYaml", yaml}}).ToJson());
  EXPECT_EQ(status, 200) << reply.ToJson();
  Unmanaged u;
  if (status != 200) return u;
  u.trial_id = Id(*reply.Find("trial"));
  u.task_id = reply.Find("taskId")->as_string();
  u.token = reply.Find("taskToken")->as_string();
  u.address = reply.Find("trialLinkAddress")->as_string();
  u.checkpoint_dir = reply.Find("checkpointDir")->as_string();
  return u;
}

std::map<std::string, std::string> TaskEnv(const Unmanaged& u) {
  return {{"SF_MASTER_ADDRESS", u.address},         {"SF_TRIAL_ID", std::to_string(u.trial_id)},
          {"SF_TASK_ID", u.task_id},                {"SF_TASK_TOKEN", u.token},
          {"SF_RANK", "0"},                         {"SF_WORLD_SIZE", "1"},
          {"SF_RESTART", "0"},                      {"SF_CHECKPOINT_DIR", u.checkpoint_dir},
          {"SF_HPARAMS", "{}"}};
}

// The trial's log lines as "stream: message".
std::vector<std::string> Logs(Cluster& c, int64_t trial_id) {
  auto [status, reply] = c.Get("/api/v1/trials/" + std::to_string(trial_id) + "/logs");
  std::vector<std::string> out;
  if (status != 200 || !reply.Find("logs")) return out;
  for (const Value& l : reply.Find("logs")->as_list()) {
    out.push_back(l.Find("stream")->as_string() + ": " + l.Find("message")->as_string());
  }
  return out;
}

TEST(TaskLauncher, AProgramsOutputReachesTheTrialsLogsOnceAndItsStatusIsSfTasks) {
  Cluster c(0, 1);
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  const Unmanaged u = CreateUnmanaged(c);
  ASSERT_GT(u.trial_id, 0);

  CommandOptions o;
  o.env = TaskEnv(u);
  o.timeout = 60s;
  auto run = RunCommand({Cluster::Binary("sf-task"), "--", "/bin/sh", "-c",
                         "echo first; echo 'oops: it failed' >&2; for i in 1 2 3; do echo line $i; done; "
                         "printf 'no newline'; exit 3"},
                        o);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->exit_code, 3) << run->output;
  EXPECT_NE(run->output.find("line 2"), std::string::npos) << "the output is echoed: " << run->output;
  const std::vector<std::string> want = {"stdout: first", "stderr: oops: it failed", "stdout: line 1",
                                         "stdout: line 2", "stdout: line 3", "stdout: no newline"};
  std::vector<std::string> got;
  ASSERT_TRUE(c.WaitFor([&] { return (got = Logs(c, u.trial_id)).size() >= want.size(); }, 20s));
  std::sort(got.begin(), got.end());
  std::vector<std::string> sorted = want;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(got, sorted);

  // A killed program: sf-task passes the signal on and exits 128 + N.
  auto killed = RunCommand({Cluster::Binary("sf-task"), "--", "/bin/sh", "-c", "echo bye; kill -9 $$"}, o);
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->exit_code, 137) << killed->output;

  // Without the task's environment nothing runs; a program that does not exist is 127.
  CommandOptions bare;
  bare.env = {{"SF_TRIAL_ID", ""}, {"SF_MASTER_ADDRESS", ""}};
  auto refused = RunCommand({Cluster::Binary("sf-task"), "--", "/bin/echo", "never"}, bare);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit_code, 2) << refused->output;
  EXPECT_NE(refused->output.find("SF_"), std::string::npos) << refused->output;
  EXPECT_EQ(refused->output.find("never"), std::string::npos) << refused->output;
  auto missing = RunCommand({Cluster::Binary("sf-task"), "--", "/no/such/program"}, o);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 127) << missing->output;
}

TEST(TaskLauncher, ReportLogsStoresABatchOnceAndRefusesBadInputAndForeignTokens) {
  Cluster c(0, 1);
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  const Unmanaged u = CreateUnmanaged(c);
  ASSERT_GT(u.trial_id, 0);
  auto stub = v1::TrialLink::NewStub(grpc::CreateChannel(u.address, grpc::InsecureChannelCredentials()));
  auto call = [&](const v1::ReportLogsRequest& r, const std::string& token) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-sf-task-token", token);
    v1::ReportLogsResponse out;
    return stub->ReportLogs(&ctx, r, &out);
  };
  v1::ReportLogsRequest r;
  r.mutable_who()->set_trial_id(u.trial_id);
  r.mutable_who()->set_task_id(u.task_id);
  r.set_incarnation("test-1");
  r.set_sequence(1);
  auto* line = r.add_lines();
  line->set_stream("stdout");
  line->set_message("sent twice, stored once");
  ASSERT_TRUE(call(r, u.token).ok());
  ASSERT_TRUE(call(r, u.token).ok());  // a retry of the same batch
  r.set_sequence(2);
  r.mutable_lines(0)->set_message("the next batch");
  ASSERT_TRUE(call(r, u.token).ok());
  // Another incarnation (a new sf-task process) starts its own numbering.
  r.set_incarnation("test-2");
  r.set_sequence(1);
  r.mutable_lines(0)->set_message("a new process");
  ASSERT_TRUE(call(r, u.token).ok());
  EXPECT_EQ(Logs(c, u.trial_id),
            (std::vector<std::string>{"stdout: sent twice, stored once", "stdout: the next batch", "stdout: a new process"}));

  v1::ReportLogsRequest bad = r;
  bad.set_sequence(5);
  bad.mutable_lines(0)->set_stream("stdin");
  grpc::Status st = call(bad, u.token);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("lines[0].stream"), std::string::npos) << st.error_message();
  bad = r;
  bad.set_incarnation("");
  EXPECT_EQ(call(bad, u.token).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  bad = r;
  bad.set_sequence(6);
  EXPECT_EQ(call(bad, "sft1_" + std::string(64, '0')).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Logs(c, u.trial_id).size(), 3u) << "a refused batch stored nothing";
}

}  // namespace
}  // namespace sf::testing
