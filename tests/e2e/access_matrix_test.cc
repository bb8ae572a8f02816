// Every REST route and every gRPC Api method, called by every kind of caller, against the one
// written policy (master/auth/access_policy.h; docs/security.md has it in words), on a real
// master and PostgreSQL:
//   no credentials, a made-up token, an expired token, a revoked token, a viewer, another user,
//   the experiment's owner, an editor of its workspace, an admin.
// A route or method with no policy entry fails here (and the servers refuse it), and so does a
// route the OpenAPI document lists without an entry. Each mutation gets a fresh experiment, so
// one caller's kill does not change what the next one meets.
#include <grpcpp/grpcpp.h>

#include <boost/asio.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "common/value.h"
#include "master/auth/access_policy.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {

// An unmanaged trial's config (POST /api/v1/unmanaged-trials, Api.CreateUnmanagedTrial).
const char* const kUnmanagedConfig =
    "name: matrix-unmanaged\n"
    "entrypoint: python3 train.py\n"
    "searcher: {name: single, metric: validation_loss, max_length: {batches: 10}}\n";
namespace v1 = steadfast::v1;
using master::Need;

enum class Want { kAllowed, k401, k403 };

const char* WantName(Want w) {
  return w == Want::kAllowed ? "allowed" : w == Want::k401 ? "401" : "403";
}

struct Caller {
  std::string name, token;
};

// What the policy says `caller` meets for `need` (the roles are set up in the test below).
Want Expected(Need need, const std::string& caller) {
  if (need == Need::kPublic) return Want::kAllowed;
  if (caller == "none" || caller == "bad" || caller == "expired" || caller == "revoked")
    return Want::k401;
  if (caller == "admin") return Want::kAllowed;
  switch (need) {
    case Need::kPublic:
    case Need::kSignedIn:
      return Want::kAllowed;
    case Need::kCreator:
      return caller == "viewer" ? Want::k403 : Want::kAllowed;
    case Need::kExperiment:
    case Need::kExperiments:
    case Need::kCheckpoint:
    case Need::kModel:  // the model's owner, or an editor of its workspace ("team")
    case Need::kTask:   // the server's owner, or an editor of its workspace ("team")
      return caller == "owner" || caller == "member" ? Want::kAllowed : Want::k403;
    case Need::kSelf:
      return caller == "owner" ? Want::kAllowed : Want::k403;  // path user: owner
    case Need::kWorkspace:
      return caller == "owner" ? Want::kAllowed : Want::k403;  // owner admins "team"
    case Need::kAdmin:
      return Want::k403;
  }
  return Want::k403;
}

class AccessMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster(0, 1);
    auto admin = [&](const std::string& method, const std::string& path, const std::string& body) {
      return Call(cluster_->admin_token(), method, path, body);
    };
    for (const auto& [user, role] :
         std::vector<std::pair<std::string, std::string>>{{"viewer", "viewer"},
                                                          {"other", "user"},
                                                          {"owner", "user"},
                                                          {"member", "user"},
                                                          {"target", "user"}}) {
      auto [code, body] = admin(
          "POST", "/api/v1/users",
          Value(Value::Map{{"username", user}, {"password", user + "-password"}, {"role", role}})
              .ToJson());
      ASSERT_EQ(code, 200) << body.ToJson();
    }
    // Each caller acts with an API token made from its own session.
    auto token_of = [&](const std::string& user, int64_t expires) {
      const std::string session = cluster_->Login(user, user + "-password");
      EXPECT_FALSE(session.empty()) << user;
      auto [code, body] =
          Call(session, "POST", "/api/v1/tokens",
               Value(Value::Map{{"name", "matrix"}, {"expiresInSeconds", expires}}).ToJson());
      EXPECT_EQ(code, 200) << body.ToJson();
      return std::make_pair(code == 200 ? body.Find("token")->as_string() : "",
                            code == 200 ? body.Find("id")->as_string() : "");
    };
    std::map<std::string, std::string> tokens;
    for (const char* user : {"viewer", "other", "owner", "member"})
      tokens[user] = token_of(user, 0).first;
    // The admin acts with an API token too: the matrix logs out as every caller.
    tokens["admin"] = [&] {
      auto [code, body] =
          Call(cluster_->admin_token(), "POST", "/api/v1/tokens", R"({"name":"matrix"})");
      EXPECT_EQ(code, 200) << body.ToJson();
      return code == 200 ? body.Find("token")->as_string() : std::string();
    }();
    tokens["expired"] = token_of("owner", 1).first;
    auto [revoked, revoked_id] = token_of("owner", 0);
    tokens["revoked"] = revoked;
    EXPECT_EQ(Call(tokens["owner"], "DELETE", "/api/v1/tokens/" + revoked_id, "").first, 200);
    tokens["bad"] = "sfa_" + std::string(64, '0');
    tokens["none"] = "";
    // "team": owner created it (its admin); member is an editor there.
    ASSERT_EQ(Call(tokens["owner"], "POST", "/api/v1/workspaces", R"({"name":"team"})").first, 200);
    ASSERT_EQ(Call(tokens["owner"], "PUT", "/api/v1/workspaces/team/members/member",
                   R"({"role":"editor"})")
                  .first,
              200);
    for (const char* c :
         {"none", "bad", "expired", "revoked", "viewer", "other", "owner", "member", "admin"}) {
      callers_.push_back(Caller{c, tokens[c]});
    }
    owner_token_ = tokens["owner"];
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the 1-second token expires
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static std::pair<int, Value> Call(const std::string& token, const std::string& method,
                                    const std::string& path, const std::string& body) {
    auto client = api::MasterClient::Create(cluster_->url());
    client->set_token(token);
    auto r = method == "GET"      ? client->Get(path)
             : method == "DELETE" ? client->Delete(path)
             : method == "PUT"    ? client->Put(path, body)
                                  : client->Post(path, body);
    if (!r.ok()) return {0, Value(r.status().message())};
    auto v = Value::FromJson(r->body);
    return {r->status, v.ok() ? *v : Value(r->body)};
  }

  // A fresh paused experiment of owner's in workspace "team", with one trial and one checkpoint
  // (rows written straight to the database: nothing trains here).
  static std::pair<int64_t, std::string> FreshExperiment() {
    auto [code, body] = Call(owner_token_, "POST", "/api/v1/experiments",
                             Value(Value::Map{{"configYaml", TinyExperiment(1, 100, 50, "matrix")},
                                              {"activate", false},
                                              {"workspace", "team"}})
                                 .ToJson());
    EXPECT_EQ(code, 200) << body.ToJson();
    if (code != 200) return {0, ""};
    const int64_t id = Id(*body.Find("experiment"));
    const std::string uuid = "matrix-" + std::to_string(id);
    pqxx::connection conn(cluster_->db());
    pqxx::work tx(conn);
    const int64_t trial = tx.exec_params1(
                                "INSERT INTO trials (experiment_id, request_id, state, hparams) "
                                "VALUES ($1, 1000 + (SELECT count(*) FROM trials WHERE "
                                "experiment_id = $1), 'COMPLETED', '{}') "
                                "RETURNING id",
                                id)[0]
                              .as<int64_t>();
    tx.exec_params(
        "INSERT INTO checkpoints (uuid, trial_id, batches, path, size) VALUES ($1, $2, 50, "
        "'/nonexistent', 0)",
        uuid, trial);
    tx.commit();
    return {id, uuid};
  }

  // A fresh server of owner's in workspace "team": its task and servings rows, written straight
  // to the database STOPPED (nothing runs; stopping it again is harmless).
  static int64_t FreshServer() {
    pqxx::connection conn(cluster_->db());
    pqxx::work tx(conn);
    const int64_t id = tx.exec1(
                             "INSERT INTO tasks (kind, state, owner, workspace_id, end_time) "
                             "SELECT 'SERVER', 'STOPPED', 'owner', id, now() FROM workspaces WHERE name = 'team' "
                             "RETURNING id")[0]
                           .as<int64_t>();
    tx.exec_params(
        "INSERT INTO servings (task_id, model_id, model_name, model_version, checkpoint_uuid, slots, resource_pool) "
        "VALUES ($1, 0, 'matrix-served', 1, 'none', 1, 'default')",
        id);
    tx.commit();
    return id;
  }

  // A fresh model of owner's in workspace "team" whose version 1 is a fresh experiment's
  // checkpoint (docs/registry.md).
  static std::string FreshModel() {
    static int made = 0;
    const std::string name = "matrix-model-" + std::to_string(++made);
    const std::string uuid = FreshExperiment().second;
    auto [code, body] = Call(owner_token_, "POST", "/api/v1/models",
                             Value(Value::Map{{"name", name}, {"workspace", "team"}}).ToJson());
    EXPECT_EQ(code, 200) << body.ToJson();
    auto [registered, reply] = Call(owner_token_, "POST", "/api/v1/models/" + name + "/versions",
                                    Value(Value::Map{{"checkpointUuid", uuid}}).ToJson());
    EXPECT_EQ(registered, 200) << reply.ToJson();
    return name;
  }

  static Cluster* cluster_;
  static std::vector<Caller> callers_;
  static std::string owner_token_;
};
Cluster* AccessMatrix::cluster_ = nullptr;
std::vector<Caller> AccessMatrix::callers_;
std::string AccessMatrix::owner_token_;

// The outcome an answer shows: 401, 403, or allowed (anything else: the handler ran). A bulk
// answer refuses per item: its item's PERMISSION_DENIED counts as 403.
Want Outcome(int code, const Value& body) {
  if (code == 401) return Want::k401;
  if (code == 403) return Want::k403;
  const Value* results = body.is_map() ? body.Find("results") : nullptr;
  if (code == 200 && results && results->is_list() && !results->as_list().empty()) {
    const Value* c = results->as_list()[0].Find("code");
    if (c && c->is_int() && c->as_int() == 7) return Want::k403;
  }
  return Want::kAllowed;
}

TEST_F(AccessMatrix, EveryRestRouteAnswersEveryCallerAsThePolicySays) {
  ASSERT_NE(cluster_, nullptr);
  int checked = 0;
  for (const master::RestRule& rule : master::RestPolicy()) {
    for (const Caller& caller : callers_) {
      const bool mutates = rule.method != "GET";
      auto [experiment, uuid] = mutates || rule.route.find("{id}") != std::string::npos ||
                                        rule.route.find("{uuid}") != std::string::npos
                                    ? FreshExperiment()
                                    : std::make_pair(int64_t{0}, std::string());
      std::string path = rule.route;
      auto fill = [&](const std::string& name, const std::string& value) {
        for (size_t at; (at = path.find(name)) != std::string::npos;)
          path.replace(at, name.size(), value);
      };
      fill("{uuid}", uuid);
      fill("{workspace}", "team");
      fill("{agent}", "matrix-agent");
      // {username}: "owner" for a password (kSelf), else the spare user "target".
      fill("{username}", rule.route.find("/password") != std::string::npos ? "owner" : "target");
      // Tokens and webhooks: one that does not exist (the handler answers 404 to whoever passes).
      // Servers: a fresh one of owner's.
      fill("{id}", rule.route.rfind("/api/v1/tokens/", 0) == 0 || rule.route.rfind("/api/v1/webhooks/", 0) == 0
                       ? "999999"
                   : rule.route.rfind("/api/v1/servings/", 0) == 0 || rule.route.rfind("/api/v1/tasks/", 0) == 0
                       ? std::to_string(FreshServer())
                                                                    : std::to_string(experiment));
      // Models: a fresh one of owner's in "team", with version 1.
      if (rule.route.find("{name}") != std::string::npos) fill("{name}", FreshModel());
      fill("{version}", "1");
      std::string body;
      if (rule.route == "/api/v1/auth/login") {
        body = Value(Value::Map{{"username", "admin"}, {"password", cluster_->admin_password()}})
                   .ToJson();
      } else if (rule.route == "/api/v1/experiments") {
        body = Value(Value::Map{{"configYaml", TinyExperiment(1, 100, 50, "matrix")},
                                {"activate", false}})
                   .ToJson();
      } else if (rule.route == "/api/v1/models") {
        body = Value(Value::Map{{"name", "made-by-" + caller.name}}).ToJson();
      } else if (rule.route == "/api/v1/models/{name}/versions") {
        body = Value(Value::Map{{"checkpointUuid", uuid}}).ToJson();
      } else if (rule.route == "/api/v1/servings") {
        body = R"({"model":"matrix-no-such-model"})";  // 404 to whoever passes: nothing is scheduled
      } else if (rule.route == "/api/v1/commands") {
        body = R"({"entrypoint":[]})";  // 400 to whoever passes: nothing is scheduled
      } else if (rule.route == "/api/v1/notebooks" || rule.route == "/api/v1/shells") {
        body = R"({"idleTimeoutSeconds":1})";  // 400 to whoever passes: nothing is scheduled
      } else if (rule.route == "/api/v1/models/{name}") {
        body = R"({"description":"edited in the matrix"})";
      } else if (rule.route == "/api/v1/unmanaged-trials") {
        body = Value(Value::Map{{"configYaml", kUnmanagedConfig}}).ToJson();
      } else if (rule.route == "/api/v1/checkpoints/delete") {
        body = Value(Value::Map{{"uuids", Value(Value::List{Value(uuid)})}}).ToJson();
      } else if (rule.route.rfind("/api/v1/experiments/", 0) == 0 &&
                 rule.need == Need::kExperiments) {
        body = Value(Value::Map{{"ids", Value(Value::List{Value(std::to_string(experiment))})}})
                   .ToJson();
      } else if (rule.route == "/api/v1/experiments/{id}/continue") {
        body = R"({"maxLength": "500"})";
      } else if (rule.route == "/api/v1/users") {
        body =
            Value(Value::Map{{"username", "made-by-" + caller.name}, {"password", "long-enough-1"}})
                .ToJson();
      } else if (rule.route.find("/role") != std::string::npos) {
        body = R"({"role":"user"})";
      } else if (rule.route.find("/password") != std::string::npos) {
        body = R"({"password":"owner-password"})";
      } else if (rule.route == "/api/v1/tokens") {
        body = R"({"name":"made-in-matrix"})";
      } else if (rule.route == "/api/v1/workspaces") {
        body = Value(Value::Map{{"name", "ws-" + caller.name}}).ToJson();
      } else if (rule.route.find("/members/") != std::string::npos) {
        body = R"({"role":"viewer"})";
      }
      auto [code, answer] = Call(caller.token, rule.method, path, body);
      const Want want = Expected(rule.need, caller.name);
      const Want got = Outcome(code, answer);
      EXPECT_EQ(WantName(got), std::string(WantName(want)))
          << rule.method << " " << rule.route << " as " << caller.name << " (need "
          << master::NeedName(rule.need) << "): HTTP " << code << " " << answer.ToJson();
      if (code == 401 || code == 403) {
        // Each refusal says why, in one line, and never echoes the token it was given.
        const Value* message = answer.is_map() ? answer.Find("message") : nullptr;
        EXPECT_TRUE(message && message->is_string() && !message->as_string().empty() &&
                    message->as_string().find('\n') == std::string::npos)
            << rule.route << " as " << caller.name;
        if (!caller.token.empty()) {
          EXPECT_EQ(answer.ToJson().find(caller.token), std::string::npos);
        }
      }
      if (rule.route.find("/deactivate") != std::string::npos && got == Want::kAllowed) {
        Call(callers_.back().token, "POST", "/api/v1/users/target/activate", "");
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(master::RestPolicy().size() * callers_.size()));
}

// The policy as docs/security.md writes it, pinned here: the matrix above holds the servers to
// access_policy.h, and this holds access_policy.h to the documented table, so loosening a
// route's rule fails a test until the document and this copy say so too.
TEST(AccessPolicyTable, IsTheDocumentedOne) {
  std::map<std::string, std::string> documented = {
      {"GET /health", "public"},
      {"GET /api/v1/openapi.json", "public"},
      {"POST /api/v1/auth/login", "public"},
      {"POST /api/v1/auth/logout", "signed-in"},
      {"GET /api/v1/auth/me", "signed-in"},
      {"GET /api/v1/experiments", "signed-in"},
      {"POST /api/v1/experiments", "creator"},
      {"POST /api/v1/unmanaged-trials", "creator"},
      {"GET /api/v1/experiments/{id}", "signed-in"},
      {"DELETE /api/v1/experiments/{id}", "experiment"},
      {"POST /api/v1/experiments/{id}/continue", "experiment"},
      {"GET /api/v1/experiments/{id}/trials", "signed-in"},
      {"GET /api/v1/experiments/{id}/checkpoints", "signed-in"},
      {"GET /api/v1/experiments/{id}/searcher", "signed-in"},
      {"GET /api/v1/experiments/{id}/context", "signed-in"},
      {"POST /api/v1/checkpoints/delete", "experiments"},
      {"GET /api/v1/checkpoints/{uuid}", "signed-in"},
      {"DELETE /api/v1/checkpoints/{uuid}", "checkpoint"},
      {"GET /api/v1/trials/{id}", "signed-in"},
      {"GET /api/v1/trials/{id}/metrics", "signed-in"},
      {"GET /api/v1/trials/{id}/logs", "signed-in"},
      {"GET /api/v1/agents", "signed-in"},
      {"POST /api/v1/agents/{agent}/revoke", "admin"},
      {"POST /api/v1/agents/{agent}/restore", "admin"},
      {"GET /api/v1/resource-pools", "signed-in"},
      {"GET /api/v1/cluster/utilization", "signed-in"},
      {"GET /api/v1/master", "signed-in"},
      {"GET /api/v1/audit", "admin"},
      {"GET /api/v1/users", "admin"},
      {"POST /api/v1/users", "admin"},
      {"POST /api/v1/users/{username}/role", "admin"},
      {"POST /api/v1/users/{username}/activate", "admin"},
      {"POST /api/v1/users/{username}/deactivate", "admin"},
      {"POST /api/v1/users/{username}/password", "self"},
      {"GET /api/v1/tokens", "signed-in"},
      {"POST /api/v1/tokens", "signed-in"},
      {"DELETE /api/v1/tokens/{id}", "signed-in"},
      {"GET /api/v1/workspaces", "signed-in"},
      {"POST /api/v1/workspaces", "creator"},
      {"PUT /api/v1/workspaces/{workspace}/members/{username}", "workspace"},
      {"DELETE /api/v1/workspaces/{workspace}/members/{username}", "workspace"},
      // The model registry (docs/registry.md).
      {"POST /api/v1/models", "creator"},
      {"GET /api/v1/models", "signed-in"},
      {"GET /api/v1/models/{name}", "signed-in"},
      {"PUT /api/v1/models/{name}", "model"},
      {"DELETE /api/v1/models/{name}", "model"},
      {"POST /api/v1/models/{name}/archive", "model"},
      {"POST /api/v1/models/{name}/unarchive", "model"},
      {"POST /api/v1/models/{name}/versions", "model"},
      {"GET /api/v1/models/{name}/versions/{version}", "signed-in"},
      {"DELETE /api/v1/models/{name}/versions/{version}", "model"},
      // Webhooks (docs/webhooks.md): the handler adds the per-object rules (acting on the
      // experiment named, admins for every experiment, the owner or an admin for the rest).
      {"POST /api/v1/webhooks", "creator"},
      {"GET /api/v1/webhooks", "signed-in"},
      {"DELETE /api/v1/webhooks/{id}", "signed-in"},
      {"GET /api/v1/webhooks/{id}/deliveries", "signed-in"},
      {"POST /api/v1/webhooks/{id}/test", "signed-in"},
      // Servers on the cluster (docs/serving.md): {id} is the server's task.
      {"POST /api/v1/servings", "creator"},
      {"GET /api/v1/servings", "signed-in"},
      {"GET /api/v1/servings/{id}", "signed-in"},
      {"POST /api/v1/servings/{id}/stop", "task"},
      // Tasks (docs/tasks.md): {id} is the task's.
      {"POST /api/v1/commands", "creator"},
      {"POST /api/v1/notebooks", "creator"},
      {"POST /api/v1/shells", "creator"},
      {"GET /api/v1/tasks", "signed-in"},
      {"GET /api/v1/tasks/{id}", "signed-in"},
      {"POST /api/v1/tasks/{id}/kill", "task"},
      {"GET /api/v1/tasks/{id}/logs", "signed-in"},
  };
  for (const char* a : {"pause", "activate", "kill", "archive", "unarchive"}) {
    documented[std::string("POST /api/v1/experiments/{id}/") + a] = "experiment";
  }
  for (const char* a : {"pause", "activate", "kill", "archive", "unarchive", "delete"}) {
    documented[std::string("POST /api/v1/experiments/") + a] = "experiments";
  }
  std::map<std::string, std::string> actual;
  for (const master::RestRule& r : master::RestPolicy()) actual[r.method + " " + r.route] = master::NeedName(r.need);
  EXPECT_EQ(actual, documented);
  // gRPC: reads need a signed-in caller (the audit log an admin); each mutation the same as its
  // REST twin.
  for (const auto& [method, rule] : master::GrpcPolicy()) {
    const bool read = method.rfind("Get", 0) == 0 || method.rfind("Follow", 0) == 0;
    // The account methods: as their REST twins above.
    static const std::map<std::string, std::string> kAccounts = {
        {"Login", "public"},           {"Logout", "signed-in"},       {"GetMe", "signed-in"},
        {"ListUsers", "admin"},        {"CreateUser", "admin"},       {"SetUserRole", "admin"},
        {"ActivateUser", "admin"},     {"DeactivateUser", "admin"},   {"SetUserPassword", "self"},
        {"ListTokens", "signed-in"},   {"CreateToken", "signed-in"},  {"RevokeToken", "signed-in"},
        {"ListWorkspaces", "signed-in"}, {"CreateWorkspace", "creator"}, {"SetWorkspaceMember", "workspace"},
        {"RemoveWorkspaceMember", "workspace"},
        // Webhooks: as their REST twins above.
        {"CreateWebhook", "creator"},  {"ListWebhooks", "signed-in"}, {"DeleteWebhook", "signed-in"},
        {"ListWebhookDeliveries", "signed-in"}, {"TestWebhook", "signed-in"}};
    if (auto a = kAccounts.find(method); a != kAccounts.end()) {
      EXPECT_EQ(master::NeedName(rule.first), a->second) << method;
      continue;
    }
    // The model registry: as their REST twins above.
    static const std::map<std::string, std::string> kModels = {
        {"CreateModel", "creator"},     {"ListModels", "signed-in"},  {"GetModel", "signed-in"},
        {"UpdateModel", "model"},       {"ArchiveModel", "model"},    {"UnarchiveModel", "model"},
        {"DeleteModel", "model"},       {"RegisterModelVersion", "model"}, {"GetModelVersion", "signed-in"},
        {"DeleteModelVersion", "model"}};
    if (auto m = kModels.find(method); m != kModels.end()) {
      EXPECT_EQ(master::NeedName(rule.first), m->second) << method;
      continue;
    }
    // Servers: as their REST twins above.
    static const std::map<std::string, std::string> kServing = {
        {"StartServing", "creator"}, {"ListServings", "signed-in"}, {"GetServing", "signed-in"},
        {"StopServing", "task"},
        {"CreateCommand", "creator"}, {"CreateNotebook", "creator"}, {"CreateShell", "creator"}, {"ListTasks", "signed-in"}, {"GetTask", "signed-in"},
        {"KillTask", "task"}, {"GetTaskLogs", "signed-in"}};
    if (auto s = kServing.find(method); s != kServing.end()) {
      EXPECT_EQ(master::NeedName(rule.first), s->second) << method;
      continue;
    }
    const std::string want = method == "GetAuditLog" || method == "RevokeAgent" || method == "RestoreAgent"
                                 ? "admin"
                             : method == "DeleteCheckpoint"         ? "checkpoint"
                             : read                                 ? "signed-in"
                             : method == "CreateExperiment"         ? "creator"
                             : method == "CreateUnmanagedTrial"     ? "creator"
                             : method == "DeleteCheckpoints"        ? "experiments"
                             : method.back() == 's'                 ? "experiments"
                                                                    : "experiment";
    EXPECT_EQ(master::NeedName(rule.first), want) << method;
  }
}

// The proxy to a task's service (/proxy/TASK_ID/..., master/proxy/task_proxy.h) holds every
// caller to the task rule: its owner, an editor of its workspace and admins reach the task (a
// stopped server: 503, no service to reach), everyone else is refused before it, reading or
// writing alike.
TEST_F(AccessMatrix, TheProxyAnswersEveryCallerAsTheTaskRuleSays) {
  ASSERT_NE(cluster_, nullptr);
  const std::string server = std::to_string(FreshServer());
  for (const Caller& caller : callers_) {
    for (const char* method : {"GET", "POST"}) {
      auto [code, answer] = Call(caller.token, method, "/proxy/" + server + "/v1/translate", "{}");
      const Want want = Expected(Need::kTask, caller.name);
      EXPECT_EQ(WantName(Outcome(code, answer)), std::string(WantName(want)))
          << method << " /proxy/" << server << " as " << caller.name << ": HTTP " << code << " " << answer.ToJson();
      if (want == Want::kAllowed) {
        EXPECT_EQ(code, 503) << caller.name << ": " << answer.ToJson();
      }
    }
  }
}

TEST_F(AccessMatrix, EveryRouteTheApiDescribesHasAPolicyEntry) {
  auto [code, doc] = Call("", "GET", "/api/v1/openapi.json", "");
  ASSERT_EQ(code, 200);
  std::set<std::pair<std::string, std::string>> policy;
  for (const master::RestRule& r : master::RestPolicy()) policy.insert({r.method, r.route});
  int described = 0;
  for (const auto& [route, ops] : doc.Find("paths")->as_map()) {
    for (const auto& [method, op] : ops.as_map()) {
      std::string m = method;
      for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      EXPECT_TRUE(policy.count({m, route}))
          << m << " " << route << " is described but has no policy entry";
      ++described;
    }
  }
  EXPECT_GE(described, 30);
  // And the other way: every route the policy names is described.
  for (const master::RestRule& r : master::RestPolicy()) {
    if (r.route == "/health") continue;
    std::string m = r.method;
    for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const Value* ops = doc.Find("paths")->Find(r.route);
    EXPECT_TRUE(ops && ops->Find(m)) << r.method << " " << r.route << " is in the policy but not in openapi.json";
  }
  // And a route no entry names is not served, whatever the caller.
  for (const Caller& caller : callers_) {
    EXPECT_EQ(Call(caller.token, "GET", "/api/v1/not-a-route", "").first, 404) << caller.name;
  }
}

// Calls one Api method by name with a request naming `experiment` (and its checkpoint).
// `model` is a fresh model of owner's with version 1 (for the model registry's methods);
// `server` a fresh stopped server of owner's (for the servers' methods).
grpc::Status CallGrpc(v1::Api::Stub& stub, const std::string& method, const std::string& token,
                      int64_t experiment, const std::string& uuid, const std::string& admin_password,
                      const std::string& model = "", int64_t server = 0) {
  static int made = 0;  // names for what a call creates, unique per call
  const std::string unique = "grpc-" + std::to_string(++made);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::ExperimentActionRequest action;
  action.set_id(experiment);
  v1::BulkExperimentActionRequest bulk;
  bulk.add_ids(experiment);
  v1::CreateExperimentResponse created;
  v1::ExperimentActionResponse acted;
  v1::BulkExperimentActionResponse bulked;
  auto bulk_status = [&](grpc::Status st) {
    if (st.ok() && bulked.results_size() > 0 &&
        bulked.results(0).code() == grpc::StatusCode::PERMISSION_DENIED) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, bulked.results(0).error());
    }
    return st;
  };
  if (method == "CreateExperiment") {
    v1::CreateExperimentRequest r;
    r.set_config_yaml(TinyExperiment(1, 100, 50, "matrix"));
    r.set_activate(false);
    return stub.CreateExperiment(&ctx, r, &created);
  }
  if (method == "CreateUnmanagedTrial") {
    v1::CreateUnmanagedTrialRequest r;
    r.set_config_yaml(kUnmanagedConfig);
    v1::CreateUnmanagedTrialResponse out;
    return stub.CreateUnmanagedTrial(&ctx, r, &out);
  }
  if (method == "GetExperiments") {
    v1::GetExperimentsResponse out;
    return stub.GetExperiments(&ctx, v1::GetExperimentsRequest(), &out);
  }
  if (method == "GetExperiment") {
    v1::GetExperimentRequest r;
    r.set_experiment_id(experiment);
    v1::GetExperimentResponse out;
    return stub.GetExperiment(&ctx, r, &out);
  }
  if (method == "KillExperiment") return stub.KillExperiment(&ctx, action, &acted);
  if (method == "PauseExperiment") return stub.PauseExperiment(&ctx, action, &acted);
  if (method == "ActivateExperiment") return stub.ActivateExperiment(&ctx, action, &acted);
  if (method == "ArchiveExperiment") return stub.ArchiveExperiment(&ctx, action, &acted);
  if (method == "UnarchiveExperiment") return stub.UnarchiveExperiment(&ctx, action, &acted);
  if (method == "DeleteExperiment") {
    v1::DeleteExperimentResponse out;
    return stub.DeleteExperiment(&ctx, action, &out);
  }
  if (method == "KillExperiments") return bulk_status(stub.KillExperiments(&ctx, bulk, &bulked));
  if (method == "PauseExperiments") return bulk_status(stub.PauseExperiments(&ctx, bulk, &bulked));
  if (method == "ActivateExperiments")
    return bulk_status(stub.ActivateExperiments(&ctx, bulk, &bulked));
  if (method == "ArchiveExperiments")
    return bulk_status(stub.ArchiveExperiments(&ctx, bulk, &bulked));
  if (method == "UnarchiveExperiments")
    return bulk_status(stub.UnarchiveExperiments(&ctx, bulk, &bulked));
  if (method == "DeleteExperiments")
    return bulk_status(stub.DeleteExperiments(&ctx, bulk, &bulked));
  if (method == "DeleteCheckpoints") {
    v1::DeleteCheckpointsRequest r;
    r.add_uuids(uuid);
    v1::DeleteCheckpointsResponse out;
    grpc::Status st = stub.DeleteCheckpoints(&ctx, r, &out);
    if (st.ok() && out.results_size() > 0 &&
        out.results(0).code() == grpc::StatusCode::PERMISSION_DENIED) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, out.results(0).error());
    }
    return st;
  }
  if (method == "GetResourcePools") {
    v1::GetResourcePoolsResponse out;
    return stub.GetResourcePools(&ctx, v1::GetResourcePoolsRequest(), &out);
  }
  if (method == "ContinueExperiment") {
    v1::ContinueExperimentRequest r;
    r.set_id(experiment);
    r.set_max_length(500);
    return stub.ContinueExperiment(&ctx, r, &created);
  }
  if (method == "GetExperimentTrials") {
    v1::GetExperimentTrialsRequest r;
    r.set_experiment_id(experiment);
    v1::GetExperimentTrialsResponse out;
    return stub.GetExperimentTrials(&ctx, r, &out);
  }
  if (method == "GetCheckpoint") {
    v1::GetCheckpointRequest r;
    r.set_uuid("no-such-checkpoint");
    v1::GetCheckpointResponse out;
    return stub.GetCheckpoint(&ctx, r, &out);
  }
  if (method == "GetExperimentCheckpoints") {
    v1::GetExperimentCheckpointsRequest r;
    r.set_id(experiment);
    v1::GetExperimentCheckpointsResponse out;
    return stub.GetExperimentCheckpoints(&ctx, r, &out);
  }
  v1::GetTrialMetricsRequest metrics;
  metrics.set_trial_id(999999);
  v1::GetTrialLogsRequest logs;
  logs.set_trial_id(999999);
  if (method == "GetTrial") {
    v1::GetTrialRequest r;
    r.set_trial_id(999999);
    v1::GetTrialResponse out;
    return stub.GetTrial(&ctx, r, &out);
  }
  if (method == "GetTrialMetrics") {
    v1::GetTrialMetricsResponse out;
    return stub.GetTrialMetrics(&ctx, metrics, &out);
  }
  if (method == "FollowTrialMetrics") {
    auto reader = stub.FollowTrialMetrics(&ctx, metrics);
    v1::MetricReport m;
    while (reader->Read(&m)) {
    }
    return reader->Finish();
  }
  if (method == "GetTrialLogs") {
    v1::GetTrialLogsResponse out;
    return stub.GetTrialLogs(&ctx, logs, &out);
  }
  if (method == "FollowTrialLogs") {
    auto reader = stub.FollowTrialLogs(&ctx, logs);
    v1::LogLine l;
    while (reader->Read(&l)) {
    }
    return reader->Finish();
  }
  if (method == "GetAgents") {
    v1::GetAgentsResponse out;
    return stub.GetAgents(&ctx, v1::GetAgentsRequest(), &out);
  }
  if (method == "GetMaster") {
    v1::GetMasterResponse out;
    return stub.GetMaster(&ctx, v1::GetMasterRequest(), &out);
  }
  if (method == "GetClusterUtilization") {
    v1::GetClusterUtilizationResponse out;
    return stub.GetClusterUtilization(&ctx, v1::GetClusterUtilizationRequest(), &out);
  }
  if (method == "GetExperimentSearcher") {
    v1::GetExperimentSearcherRequest r;
    r.set_id(experiment);
    v1::GetExperimentSearcherResponse out;
    return stub.GetExperimentSearcher(&ctx, r, &out);
  }
  if (method == "GetExperimentContext") {  // a native experiment: NOT_FOUND to whoever passes
    v1::GetExperimentContextRequest r;
    r.set_id(experiment);
    v1::GetExperimentContextResponse out;
    return stub.GetExperimentContext(&ctx, r, &out);
  }
  if (method == "DeleteCheckpoint") {
    v1::DeleteCheckpointRequest r;
    r.set_uuid(uuid);
    v1::DeleteCheckpointResponse out;
    return stub.DeleteCheckpoint(&ctx, r, &out);
  }
  if (method == "RevokeAgent" || method == "RestoreAgent") {
    // An agent that does not exist: the cluster's own keeps working whoever is let through.
    v1::AgentRevocationRequest r;
    r.set_agent_id("matrix-no-such-agent");
    v1::AgentRevocationResponse out;
    return method == "RevokeAgent" ? stub.RevokeAgent(&ctx, r, &out) : stub.RestoreAgent(&ctx, r, &out);
  }
  if (method == "GetAuditLog") {
    v1::GetAuditLogResponse out;
    return stub.GetAuditLog(&ctx, v1::GetAuditLogRequest(), &out);
  }
  // Accounts: the same requests as the REST matrix sends.
#define SF_CALL(Method, Req, Resp, fill) \
  if (method == #Method) {               \
    v1::Req r;                           \
    fill;                                \
    v1::Resp out;                        \
    return stub.Method(&ctx, r, &out);   \
  }
  SF_CALL(Login, LoginRequest, LoginResponse, (r.set_username("admin"), r.set_password(admin_password)))
  SF_CALL(Logout, LogoutRequest, LogoutResponse, (void)0)
  SF_CALL(GetMe, GetMeRequest, GetMeResponse, (void)0)
  SF_CALL(ListUsers, ListUsersRequest, ListUsersResponse, (void)0)
  SF_CALL(CreateUser, CreateUserRequest, UserResponse, (r.set_username("made-by-" + unique), r.set_password("long-enough-1")))
  SF_CALL(SetUserRole, SetUserRoleRequest, UserResponse, (r.set_username("target"), r.set_role("user")))
  SF_CALL(ActivateUser, UserNameRequest, UserResponse, r.set_username("target"))
  SF_CALL(DeactivateUser, UserNameRequest, UserResponse, r.set_username("target"))
  SF_CALL(SetUserPassword, SetUserPasswordRequest, UserResponse, (r.set_username("owner"), r.set_password("owner-password")))
  SF_CALL(ListTokens, ListTokensRequest, ListTokensResponse, (void)0)
  SF_CALL(CreateToken, CreateTokenRequest, Token, r.set_name("made-in-matrix"))
  SF_CALL(RevokeToken, RevokeTokenRequest, RevokeTokenResponse, r.set_id(999999))
  SF_CALL(ListWorkspaces, ListWorkspacesRequest, ListWorkspacesResponse, (void)0)
  SF_CALL(CreateWorkspace, CreateWorkspaceRequest, Workspace, r.set_name("ws-" + unique))
  SF_CALL(SetWorkspaceMember, SetWorkspaceMemberRequest, WorkspaceMemberResponse,
          (r.set_workspace("team"), r.set_username("target"), r.set_role("viewer")))
  SF_CALL(RemoveWorkspaceMember, RemoveWorkspaceMemberRequest, WorkspaceMemberResponse,
          (r.set_workspace("team"), r.set_username("target")))
  // Webhooks: a creation the handler refuses as bad input (no URL), and ids that do not exist.
  SF_CALL(CreateWebhook, CreateWebhookRequest, Webhook, r.add_events("COMPLETED"))
  SF_CALL(ListWebhooks, ListWebhooksRequest, ListWebhooksResponse, (void)0)
  SF_CALL(DeleteWebhook, DeleteWebhookRequest, DeleteWebhookResponse, r.set_id(999999))
  SF_CALL(ListWebhookDeliveries, ListWebhookDeliveriesRequest, ListWebhookDeliveriesResponse, r.set_id(999999))
  SF_CALL(TestWebhook, TestWebhookRequest, TestWebhookResponse, r.set_id(999999))
  // The model registry: a fresh model, version 1, a fresh checkpoint to register.
  SF_CALL(CreateModel, CreateModelRequest, ModelResponse, r.set_name("made-by-" + unique))
  SF_CALL(ListModels, ListModelsRequest, ListModelsResponse, (void)0)
  SF_CALL(GetModel, GetModelRequest, GetModelResponse, r.set_name(model))
  SF_CALL(UpdateModel, UpdateModelRequest, ModelResponse, (r.set_name(model), r.set_description("edited")))
  SF_CALL(ArchiveModel, ModelActionRequest, ModelResponse, r.set_name(model))
  SF_CALL(UnarchiveModel, ModelActionRequest, ModelResponse, r.set_name(model))
  SF_CALL(DeleteModel, DeleteModelRequest, DeleteModelResponse, (r.set_name(model), r.set_force(true)))
  SF_CALL(RegisterModelVersion, RegisterModelVersionRequest, ModelVersionResponse,
          (r.set_name(model), r.set_checkpoint_uuid(uuid)))
  SF_CALL(GetModelVersion, ModelVersionRequest, GetModelVersionResponse, (r.set_name(model), r.set_version(1)))
  SF_CALL(DeleteModelVersion, ModelVersionRequest, DeleteModelVersionResponse, (r.set_name(model), r.set_version(1)))
  // Servers: a model that does not exist (nothing is scheduled), and a fresh stopped server of
  // owner's.
  SF_CALL(StartServing, StartServingRequest, ServingResponse, r.set_model("matrix-no-such-model"))
  SF_CALL(ListServings, ListServingsRequest, ListServingsResponse, (void)0)
  SF_CALL(GetServing, ServingRequest, ServingResponse, r.set_id(server))
  SF_CALL(StopServing, ServingRequest, ServingResponse, r.set_id(server))
  // Tasks: a command without a program (refused as bad input), and the fresh server's task.
  SF_CALL(CreateCommand, CreateCommandRequest, TaskResponse, (void)0)
  SF_CALL(CreateNotebook, InteractiveTaskRequest, TaskResponse, r.set_idle_timeout_seconds(1))
  SF_CALL(CreateShell, InteractiveTaskRequest, TaskResponse, r.set_idle_timeout_seconds(1))
  SF_CALL(ListTasks, ListTasksRequest, ListTasksResponse, (void)0)
  SF_CALL(GetTask, TaskRequest, TaskResponse, r.set_id(server))
  SF_CALL(KillTask, TaskRequest, TaskResponse, r.set_id(server))
  SF_CALL(GetTaskLogs, GetTaskLogsRequest, GetTrialLogsResponse, r.set_id(server))
#undef SF_CALL
  ADD_FAILURE() << "Api." << method << " is not called by this test: add it to CallGrpc";
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, method);
}

TEST_F(AccessMatrix, EveryGrpcMethodAnswersEveryCallerAsThePolicySays) {
  ASSERT_NE(cluster_, nullptr);
  auto stub = v1::Api::NewStub(
      grpc::CreateChannel(cluster_->grpc_address(), grpc::InsecureChannelCredentials()));
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("steadfast.v1.Api");
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = service->method(i)->name();
    auto rule = master::GrpcPolicy().find(method);
    ASSERT_NE(rule, master::GrpcPolicy().end())
        << "Api." << method << " has no policy entry (access_policy.h)";
    for (const Caller& caller : callers_) {
      auto [experiment, uuid] = FreshExperiment();
      const std::string model = method.find("Model") != std::string::npos ? FreshModel() : "";
      const int64_t server =
          method.find("Serving") != std::string::npos || method.find("Task") != std::string::npos ? FreshServer() : 0;
      grpc::Status st =
          CallGrpc(*stub, method, caller.token, experiment, uuid, cluster_->admin_password(), model, server);
      if (method == "DeactivateUser" && st.ok()) Call(callers_.back().token, "POST", "/api/v1/users/target/activate", "");
      const Want got = st.error_code() == grpc::StatusCode::UNAUTHENTICATED     ? Want::k401
                       : st.error_code() == grpc::StatusCode::PERMISSION_DENIED ? Want::k403
                                                                                : Want::kAllowed;
      EXPECT_EQ(WantName(got), std::string(WantName(Expected(rule->second.first, caller.name))))
          << "Api." << method << " as " << caller.name << ": " << st.error_code() << " "
          << st.error_message();
    }
  }
}

// Raw requests, for what HttpClient would never send.
std::pair<int, std::string> Raw(const std::string& host, int port, const std::string& request) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address(host), static_cast<uint16_t>(port)});
  asio::write(s, asio::buffer(request));
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (size_t n; (n = s.read_some(asio::buffer(buf), ec)) > 0 && !ec;) out.append(buf, n);
  const int code = out.size() > 12 ? std::atoi(out.c_str() + 9) : 0;
  return {code, out};
}

TEST_F(AccessMatrix, BadCredentialsAndAFloodOfWrongPasswordsGetCleanAnswers) {
  ASSERT_NE(cluster_, nullptr);
  const std::string host = "127.0.0.1";
  const int port = std::stoi(cluster_->url().substr(cluster_->url().rfind(':') + 1));
  auto get = [&](const std::string& headers) {
    return Raw(
        host, port,
        "GET /api/v1/experiments HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + "\r\n");
  };
  for (const std::string& h :
       {std::string("Authorization: Basic YWRtaW46YWRtaW4=\r\n"),
        std::string("Authorization: Bearer\r\n"), std::string("Authorization: Bearer \r\n"),
        std::string("Authorization: bearer sfa_x\r\n"),
        "Authorization: Bearer " + std::string(5000, 'a') + "\r\n",
        std::string("Authorization: Bearer \xff\xfe\r\n"), std::string("Cookie: sf_session=\r\n"),
        std::string("Cookie: sf_session=sfs_nope; other=1\r\n")}) {
    auto [code, text] = get(h);
    EXPECT_EQ(code, 401) << h.substr(0, 60) << "\n" << text.substr(0, 300);
    EXPECT_NE(text.find("WWW-Authenticate: Bearer"), std::string::npos) << text.substr(0, 300);
  }
  // A cookie session may not mutate without the dashboard's header (CSRF).
  const std::string session = cluster_->Login("admin", cluster_->admin_password());
  auto [csrf, csrf_text] = Raw(
      host, port,
      "POST /api/v1/workspaces HTTP/1.1\r\nHost: x\r\nConnection: close\r\nCookie: sf_session=" +
          session +
          "\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"name\":\"csrf\"}");
  EXPECT_EQ(csrf, 403) << csrf_text;
  // Non-UTF-8 and overlong user names are wrong logins, not errors.
  for (const std::string& user :
       {std::string("\xff\xfe"), std::string(300, 'u'), std::string("a\"b")}) {
    std::string body = "{\"username\":\"" + (user == "a\"b" ? std::string("a\\\"b") : user) +
                       "\",\"password\":\"x\"}";
    auto [code, text] =
        Raw(host, port,
            "POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
            "application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_TRUE(code == 400 || code == 401 || code == 429) << code << " " << text.substr(0, 300);
  }
  // 1,000 wrong passwords in a row: a few are checked, the rest refused with 429 and a wait;
  // the master stays up and still answers the right password from another user's address
  // only after the wait (same address here), while other callers' tokens keep working.
  int wrong = 0, limited = 0, other = 0;
  for (int i = 0; i < 1000; ++i) {
    auto [code, body] =
        Call("", "POST", "/api/v1/auth/login", R"({"username":"victim","password":"guess"})");
    if (code == 401)
      ++wrong;
    else if (code == 429)
      ++limited;
    else
      ++other;
  }
  EXPECT_EQ(other, 0);
  EXPECT_LE(wrong, 10);
  EXPECT_GE(limited, 990);
  EXPECT_EQ(cluster_->Get("/health").first, 200);
  EXPECT_EQ(Call(callers_.back().token, "GET", "/api/v1/experiments?limit=1", "").first, 200);
  auto [limited_code, limited_body] =
      Call("", "POST", "/api/v1/auth/login", R"({"username":"victim","password":"guess"})");
  EXPECT_EQ(limited_code, 429);
  EXPECT_NE(limited_body.ToJson().find("retry in"), std::string::npos) << limited_body.ToJson();
}

}  // namespace
}  // namespace sf::testing

namespace sf::testing {
namespace {

// Last (gtest runs a file's tests in order): after every caller's token has been sent, and
// every password checked, none of them is in any log the master wrote.
TEST_F(AccessMatrix, NoTokenOrPasswordAppearsInAnyLog) {
  ASSERT_NE(cluster_, nullptr);
  std::vector<std::string> secrets = {cluster_->admin_password(), cluster_->admin_token()};
  for (const Caller& c : callers_) {
    if (c.token.size() > 8) secrets.push_back(c.token.substr(4));  // the random part
  }
  for (const char* user : {"viewer", "other", "owner", "member", "target"}) secrets.push_back(std::string(user) + "-password");
  int logs = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cluster_->dir())) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++logs;
    for (const std::string& secret : secrets) {
      if (secret.empty()) continue;
      EXPECT_EQ(text.find(secret), std::string::npos) << entry.path() << " holds a secret";
    }
    EXPECT_NE(text.find("login"), std::string::npos) << entry.path() << ": the logins are on record (by name)";
  }
  EXPECT_GE(logs, 1);
  // The password file the master was started with is gone.
  EXPECT_FALSE(std::filesystem::exists(cluster_->dir() + "/admin-password"));
}

}  // namespace
}  // namespace sf::testing
