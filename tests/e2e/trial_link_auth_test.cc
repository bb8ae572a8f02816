// End to end, with real processes (docs/security.md): TrialLink answers only the task token the
// master issued for the identity a call claims (master/auth/task_tokens.h), real trainers train
// with theirs, and the token shows up in no log and no process listing; agents join only with
// the cluster's join token, and cannot take the id of an agent that is connected.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <grpcpp/grpcpp.h>

#include "common/secret_file.h"
#include "common/subprocess.h"
#include "common/tls_files.h"
#include "master/auth/task_tokens.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "steadfast/v1/trial_link.grpc.pb.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
namespace v1 = steadfast::v1;

std::string Scalar(const std::string& db, const std::string& sql) {
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  return tx.exec1(sql)[0].as<std::string>();
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Over TLS, as a deployed cluster runs (ClusterLayout.tls).
std::shared_ptr<grpc::ChannelCredentials> TrustingCa(const std::string& ca_file) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = LoadCaCertificates(ca_file).value();
  return grpc::SslCredentials(ssl);
}

ClusterLayout Tls() {
  ClusterLayout layout;
  layout.tls = true;
  return layout;
}

TEST(TrialLinkAuth, OnlyTheTokenIssuedForACallsIdentityIsAcceptedAndItIsNeverLogged) {
  Cluster cluster(1, 1, Tls());
  int64_t id = cluster.Submit(TinyExperiment(1, 100000, 10, "auth-e2e"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        Value trials = cluster.Trials(id);
        return !trials.as_list().empty() && std::stoll(trials.as_list()[0].Find("totalBatches")->as_string()) >= 20;
      },
      std::chrono::seconds(120)))
      << "the trainer (with its token) never reported";
  const int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  const std::string task_id =
      Scalar(cluster.db(), "SELECT id FROM allocations WHERE trial_id = " + std::to_string(tid) +
                               " ORDER BY start_time DESC LIMIT 1") +
      ".0";
  auto tokens = master::TaskTokens::FromHexSecret(
      Scalar(cluster.db(), "SELECT secret_hex FROM cluster_secrets WHERE name = 'task_tokens'"));
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  const master::TaskClaims claims{tid, 0, 0, task_id};
  const std::string token = tokens->Issue(claims);

  auto stub = v1::TrialLink::NewStub(grpc::CreateChannel(cluster.grpc_address(), TrustingCa(cluster.ca_file())));
  auto should_stop = [&](const std::string& presented, const master::TaskClaims& as) {
    v1::ShouldStopRequest req;
    req.mutable_who()->set_trial_id(as.trial_id);
    req.mutable_who()->set_rank(as.rank);
    req.mutable_who()->set_restart(as.restart);
    req.mutable_who()->set_task_id(as.task_id);
    v1::ShouldStopResponse resp;
    grpc::ClientContext ctx;
    if (!presented.empty()) ctx.AddMetadata(master::TaskTokens::kMetadataKey, presented);
    return stub->ShouldStop(&ctx, req, &resp);
  };
  grpc::Status none = should_stop("", claims);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(none.error_message().find("no task token"), std::string::npos) << none.error_message();
  // The token of one identity does not open another: not another trial, rank or restart.
  for (const master::TaskClaims& other : {master::TaskClaims{tid + 1000, 0, 0, task_id}, master::TaskClaims{tid, 1, 0, task_id},
                                          master::TaskClaims{tid, 0, 1, task_id}}) {
    EXPECT_EQ(should_stop(token, other).error_code(), grpc::StatusCode::UNAUTHENTICATED) << other.trial_id;
  }
  EXPECT_EQ(should_stop("sft1_" + std::string(64, '0'), claims).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(should_stop(token, claims).ok());

  // A metric report without the token stores nothing.
  {
    v1::ReportMetricsRequest req;
    req.mutable_who()->set_trial_id(tid);
    req.mutable_who()->set_task_id(task_id);
    auto* m = req.add_reports();
    m->set_kind("training");
    m->set_batches(987654);
    (*m->mutable_values()->mutable_fields())["loss"].set_number_value(1.0);
    v1::ReportMetricsResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(stub->ReportMetrics(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE batches = 987654"), 0);
  }

  // The trainer got its token in the environment, not on its command line.
  std::vector<pid_t> pids = cluster.TrainerPids(tid);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(ReadAll("/proc/" + std::to_string(pids[0]) + "/cmdline").find(token), std::string::npos);
  EXPECT_NE(ReadAll("/proc/" + std::to_string(pids[0]) + "/environ").find("SF_TASK_TOKEN=" + token), std::string::npos);

  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/kill", "").first, 200);
  ASSERT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_CANCELED", std::chrono::seconds(60)));
  // No log of the master, the agent or the trainer holds the token.
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cluster.dir())) {
    if (!entry.is_regular_file() || entry.path().extension() != ".log") continue;
    ++files;
    EXPECT_EQ(ReadAll(entry.path()).find(token.substr(5)), std::string::npos) << entry.path();
  }
  EXPECT_GE(files, 4) << "master, agent, trainer stdout and stderr logs";
}

bool LogHas(const std::string& file, const std::string& a, const std::string& b) {
  const std::string text = ReadAll(file);
  for (size_t at = text.find(a); at != std::string::npos; at = text.find(a, at + 1)) {
    const size_t eol = text.find('\n', at);
    if (text.substr(at, eol == std::string::npos ? std::string::npos : eol - at).find(b) != std::string::npos) return true;
  }
  return false;
}

TEST(AgentJoin, OnlyAgentsWithTheJoinTokenJoinAndNoneTakesAConnectedAgentsId) {
  Cluster cluster(1, 1, Tls());
  TempDir work;
  const std::string wrong = work.path() + "/wrong-token";
  ASSERT_TRUE(EnsureSecretFile(wrong, "join token").ok());
  auto agent = [&](const std::string& id, const std::vector<std::string>& extra) {
    std::vector<std::string> argv{Cluster::Binary("sf-agent"), "--master", cluster.grpc_address(), "--agent-id", id,
                                  "--slots", "cpu:1", "--work-dir", work.path() + "/" + id, "--master-ca-file",
                                  cluster.ca_file()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto d = std::make_unique<Daemon>(argv, work.path() + "/" + id + ".log");
    EXPECT_TRUE(d->Start());
    return d;
  };
  auto with_wrong = agent("intruder-wrong", {"--join-token-file", wrong});
  auto with_none = agent("intruder-none", {});
  auto same_id = agent("e2e-agent-0", {"--join-token-file", cluster.join_token_file()});
  const std::string master_log = cluster.dir() + "/master-0.log";
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        return LogHas(work.path() + "/intruder-wrong.log", "event=refused", "wrong join token") &&
               LogHas(work.path() + "/intruder-none.log", "event=refused", "no join token") &&
               LogHas(work.path() + "/e2e-agent-0.log", "event=refused", "belongs to another agent process");
      },
      std::chrono::seconds(60)))
      << ReadAll(work.path() + "/intruder-wrong.log") << ReadAll(work.path() + "/e2e-agent-0.log");
  EXPECT_TRUE(LogHas(master_log, "intruder-wrong", "wrong join token")) << ReadAll(master_log);
  EXPECT_TRUE(LogHas(master_log, "intruder-none", "no join token"));
  EXPECT_TRUE(LogHas(master_log, "event=refused", "belongs to another agent process"));
  // Only the real agent is known, and it is still connected.
  auto [code, agents] = cluster.Get("/api/v1/agents");
  ASSERT_EQ(code, 200);
  ASSERT_EQ(agents.Find("agents")->as_list().size(), 1u) << agents.ToJson();
  EXPECT_EQ(agents.Find("agents")->as_list()[0].Find("id")->as_string(), "e2e-agent-0");
  EXPECT_TRUE(cluster.WaitForAgents(1, std::chrono::seconds(5)));
  // It still runs trials.
  int64_t id = cluster.Submit(TinyExperiment(1, 20, 10, "join-e2e"));
  ASSERT_GT(id, 0);
  EXPECT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", std::chrono::seconds(120)));
  // The join tokens are in no log.
  const std::string right = ReadAll(cluster.join_token_file()).substr(0, 64), bad = ReadAll(wrong).substr(0, 64);
  for (const std::string& dir : {cluster.dir(), work.path()}) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".log") continue;
      const std::string text = ReadAll(entry.path());
      EXPECT_EQ(text.find(right), std::string::npos) << entry.path();
      EXPECT_EQ(text.find(bad), std::string::npos) << entry.path();
    }
  }
}

// Every mutation through the REST API is on record, refused ones included, with who (X-SF-User
// until users exist), from where, what and the status; reads are not recorded.
TEST(Audit, EveryMutationIsRecordedWithWhoWhatWhenAndWhere) {
  Cluster cluster(1, 1);
  // Who is the authenticated user: alice and bob act with their own sessions.
  for (const char* user : {"alice", "bob"}) {
    auto [code, body] = cluster.Post(
        "/api/v1/users",
        Value(Value::Map{{"username", user}, {"password", std::string(user) + "-password"}}).ToJson());
    ASSERT_EQ(code, 200) << body.ToJson();
  }
  std::map<std::string, std::string> tokens = {{"alice", cluster.Login("alice", "alice-password")},
                                               {"bob", cluster.Login("bob", "bob-password")},
                                               {"admin", cluster.admin_token()}};
  auto client = api::MasterClient::Create(cluster.url());
  ASSERT_TRUE(client.ok());
  auto call = [&](const std::string& method, const std::string& path, const std::string& body, const std::string& who) {
    client->set_token(tokens[who]);
    auto r = method == "POST" ? client->Post(path, body) : method == "DELETE" ? client->Delete(path) : client->Get(path);
    EXPECT_TRUE(r.ok()) << method << " " << path;
    return r.ok() ? r->status : 0;
  };
  const std::string yaml = TinyExperiment(1, 20, 10, "audit-e2e");
  ASSERT_EQ(call("POST", "/api/v1/experiments", Value(Value::Map{{"configYaml", yaml}, {"activate", false}}).ToJson(),
                 "alice"),
            200);
  const int64_t id = Id(cluster.Get("/api/v1/experiments?limit=1").second.Find("experiments")->as_list()[0]);
  const std::string e = "/api/v1/experiments/" + std::to_string(id);
  ASSERT_EQ(call("POST", e + "/kill", "", "bob"), 403);                          // not bob's: refused, on record
  ASSERT_EQ(call("POST", "/api/v1/experiments/987654/pause", "", "bob"), 404);  // no such: on record too
  ASSERT_EQ(call("POST", e + "/kill", "", "alice"), 200);
  ASSERT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_CANCELED", std::chrono::seconds(60)));
  ASSERT_EQ(call("POST", "/api/v1/experiments/archive", "{\"ids\": [\"" + std::to_string(id) + "\"]}", "admin"), 200);
  ASSERT_EQ(call("DELETE", e, "", "alice"), 200);
  ASSERT_EQ(call("GET", "/api/v1/experiments", "", "bob"), 200);  // a read: not recorded

  auto [code, log] = cluster.Get("/api/v1/audit?limit=50");
  ASSERT_EQ(code, 200) << log.ToJson();
  std::vector<std::string> seen;
  for (const Value& entry : log.Find("entries")->as_list()) {
    seen.push_back(entry.Find("actor")->as_string() + " " + entry.Find("method")->as_string() + " " +
                   entry.Find("path")->as_string() + " " + std::to_string(entry.Find("status")->as_int()));
    EXPECT_EQ(entry.Find("peer")->as_string(), "127.0.0.1");
    EXPECT_FALSE(entry.Find("time")->as_string().empty());
  }
  const std::vector<std::string> expected = {  // newest first
      "alice DELETE " + e + " 200",
      "admin POST /api/v1/experiments/archive 200",
      "alice POST " + e + "/kill 200",
      "bob POST /api/v1/experiments/987654/pause 404",
      "bob POST " + e + "/kill 403",
      "alice POST /api/v1/experiments 200",
      "bob POST /api/v1/auth/login 200",      // logins: by the name given
      "alice POST /api/v1/auth/login 200",
      "admin POST /api/v1/users 200",         // user changes
      "admin POST /api/v1/users 200",
  };
  ASSERT_GE(seen.size(), expected.size());
  EXPECT_EQ(std::vector<std::string>(seen.begin(), seen.begin() + static_cast<long>(expected.size())), expected);
  // Through the gRPC Api as well, with the actor its token authenticates and the gRPC code.
  {
    auto api = v1::Api::NewStub(grpc::CreateChannel(cluster.grpc_address(), grpc::InsecureChannelCredentials()));
    v1::ExperimentActionRequest req;
    req.set_id(987655);
    v1::ExperimentActionResponse resp;
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + tokens["bob"]);
    EXPECT_EQ(api->KillExperiment(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
    auto [code3, latest] = cluster.Get("/api/v1/audit?limit=1");
    ASSERT_EQ(code3, 200);
    ASSERT_EQ(latest.Find("entries")->as_list().size(), 1u) << latest.ToJson();
    const Value& entry = latest.Find("entries")->as_list()[0];
    EXPECT_EQ(entry.Find("actor")->as_string(), "bob");
    EXPECT_EQ(entry.Find("method")->as_string(), "GRPC");
    EXPECT_EQ(entry.Find("path")->as_string(), "/steadfast.v1.Api/KillExperiment/987655");
    EXPECT_EQ(entry.Find("status")->as_int(), static_cast<int64_t>(grpc::StatusCode::NOT_FOUND));
    EXPECT_EQ(entry.Find("peer")->as_string(), "127.0.0.1");
    // A login over gRPC is on record as over REST (the proto declares it audited): under the
    // name it gave, never its password.
    v1::LoginRequest login;
    login.set_username("bob");
    login.set_password("not-bobs-password");
    v1::LoginResponse session;
    grpc::ClientContext login_ctx;
    EXPECT_EQ(api->Login(&login_ctx, login, &session).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    auto [code4, after_login] = cluster.Get("/api/v1/audit?limit=1");
    ASSERT_EQ(code4, 200);
    const Value& logged = after_login.Find("entries")->as_list().at(0);
    EXPECT_EQ(logged.Find("actor")->as_string(), "bob");
    EXPECT_EQ(logged.Find("path")->as_string(), "/steadfast.v1.Api/Login");
    EXPECT_EQ(logged.Find("status")->as_int(), static_cast<int64_t>(grpc::StatusCode::UNAUTHENTICATED));
    EXPECT_EQ(after_login.ToJson().find("not-bobs-password"), std::string::npos);
  }
  // Filtered by actor; admins only; a bad limit refused with a clear error.
  auto [code2, bobs] = cluster.Get("/api/v1/audit?actor=bob");
  ASSERT_EQ(code2, 200);
  EXPECT_EQ(bobs.Find("entries")->as_list().size(), 5u) << bobs.ToJson();  // with the gRPC login
  client->set_token(tokens["alice"]);
  EXPECT_EQ(client->Get("/api/v1/audit")->status, 403);
  EXPECT_EQ(cluster.Get("/api/v1/audit?limit=0").first, 400);
  EXPECT_EQ(cluster.Get("/api/v1/audit?limit=x").first, 400);
  // The CLI shows it.
  auto sf = RunCommand({Cluster::Binary("sf"), "audit", "list", "--master", cluster.url(), "--actor", "alice"});
  ASSERT_TRUE(sf.ok());
  EXPECT_EQ(sf->exit_code, 0) << sf->output;
  EXPECT_NE(sf->output.find("DELETE " + e), std::string::npos) << sf->output;
  EXPECT_EQ(sf->output.find("bob"), std::string::npos) << sf->output;
}

// An admin shuts one agent out without rotating the join token: the connected agent is
// disconnected, refused at every retry (logged on both sides), and joins again once restored.
TEST(AgentJoin, ARevokedAgentIsDisconnectedAndRefusedUntilRestored) {
  Cluster cluster(1, 1);
  auto [code, body] = cluster.Post("/api/v1/agents/e2e-agent-0/revoke", "");
  ASSERT_EQ(code, 200) << body.ToJson();
  EXPECT_TRUE(cluster.WaitFor(
      [&] {
        auto [c, v] = cluster.Get("/api/v1/agents");
        for (const Value& a : v.Find("agents")->as_list()) {
          if (a.Find("connected") && a.Find("connected")->as_bool()) return false;
        }
        return true;
      },
      std::chrono::seconds(30)))
      << "the revoked agent is still connected";
  auto read_logs = [&] {
    std::string all;
    for (const auto& entry : fs::directory_iterator(cluster.dir())) {
      if (entry.path().extension() == ".log") all += ReadAll(entry.path());
    }
    return all;
  };
  EXPECT_TRUE(cluster.WaitFor([&] { return read_logs().find("is revoked; an admin restores it") != std::string::npos; },
                              std::chrono::seconds(30)))
      << "the agent's log does not say why it was refused";
  // sf agent restore lets it back in (the agent keeps retrying).
  auto sf = RunCommand({Cluster::Binary("sf"), "agent", "restore", "e2e-agent-0", "--master", cluster.url()});
  ASSERT_TRUE(sf.ok());
  EXPECT_EQ(sf->exit_code, 0) << sf->output;
  EXPECT_TRUE(cluster.WaitForAgents(1, std::chrono::seconds(60))) << "the restored agent did not join again";
  // A user who is not an admin may not revoke.
  ASSERT_EQ(cluster.Post("/api/v1/users", R"({"username":"u1","password":"u1-password"})").first, 200);
  auto client = api::MasterClient::Create(cluster.url());
  client->set_token(cluster.Login("u1", "u1-password"));
  EXPECT_EQ(client->Post("/api/v1/agents/e2e-agent-0/revoke", "")->status, 403);
}

}  // namespace
}  // namespace sf::testing
