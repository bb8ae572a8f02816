// The route table (common/api/route_table.h): every Api method is declared once, in the proto, and
// the REST routes, the access policy of both servers, the method table and the OpenAPI document
// all follow from that declaration.
#include "common/api/route_table.h"

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <set>

#include "common/value.h"
#include "master/api/api_audit.h"
#include "master/api/api_methods.h"
#include "master/api/http_server.h"
#include "master/api/routes/rest_transcoder.h"
#include "master/auth/access_policy.h"
#include "steadfast/v1/api.pb.h"

namespace sf::master {
namespace {

namespace pb = google::protobuf;
namespace v1 = steadfast::v1;

TEST(RouteTableTest, EveryApiMethodIsDeclaredProperly) {
  for (const std::string& problem : RouteTableProblems()) ADD_FAILURE() << problem;
  const pb::ServiceDescriptor* api = v1::CreateExperimentRequest::descriptor()->file()->FindServiceByName("Api");
  ASSERT_NE(api, nullptr);
  ASSERT_EQ(ApiRoutes().size(), static_cast<size_t>(api->method_count()));
  for (const ApiRoute& r : ApiRoutes()) {
    EXPECT_TRUE(r.ok) << r.method->name();
    EXPECT_NE(r.need, v1::ACCESS_NEED_UNSPECIFIED) << r.method->name();
    EXPECT_NE(r.http_method.empty(), r.grpc_only.empty()) << r.method->name() << ": REST path or grpc_only, one";
  }
}

// The audit log's rules come from the proto (AccessRule.audit, audit_target, audit_actor): what
// REST changes is audited and what it reads is not (checked with the other declarations above),
// and a record's target is read from the request or the reply by the declared field paths.
TEST(RouteTableTest, AuditTargetsAndActorsAreReadAsTheProtoDeclares) {
  size_t audited = 0;
  for (const ApiRoute& r : ApiRoutes()) {
    audited += r.audit;
    if (!r.http_method.empty()) {
      EXPECT_EQ(r.audit, r.http_method != "GET") << r.method->name();
    }
  }
  EXPECT_GE(audited, 40u);
  const ApiRoute* member = FindApiRoute("SetWorkspaceMember");
  ASSERT_NE(member, nullptr);
  v1::SetWorkspaceMemberRequest m;
  m.set_workspace("vision");
  m.set_username("bob");
  EXPECT_EQ(AuditTarget(*member, &m, nullptr), "vision/bob");
  const ApiRoute* version = FindApiRoute("DeleteModelVersion");
  ASSERT_NE(version, nullptr);
  v1::ModelVersionRequest mv;
  mv.set_name("de-en");
  mv.set_version(3);
  EXPECT_EQ(AuditTarget(*version, &mv, nullptr), "de-en/3");
  // CreateExperiment names the experiment it made, from the reply; none when it made none.
  const ApiRoute* create = FindApiRoute("CreateExperiment");
  ASSERT_NE(create, nullptr);
  v1::CreateExperimentRequest cr;
  v1::CreateExperimentResponse made;
  EXPECT_EQ(AuditTarget(*create, &cr, &made), "");
  made.mutable_experiment()->set_id(42);
  EXPECT_EQ(AuditTarget(*create, &cr, &made), "42");
  EXPECT_EQ(AuditTarget(*create, &cr, nullptr), "");
  // Reads are not audited; a login is, under the name it gave when no one is signed in.
  EXPECT_FALSE(FindApiRoute("GetExperiments")->audit);
  const ApiRoute* login = FindApiRoute("Login");
  ASSERT_NE(login, nullptr);
  EXPECT_TRUE(login->audit);
  ASSERT_NE(login->audit_actor, nullptr);
  EXPECT_EQ(login->audit_actor->name(), "username");
}

TEST(RouteTableTest, EveryMethodIsServedAndHeldToItsPolicy) {
  ApiMethods methods(ApiDependencies{});
  const std::vector<std::string> names = methods.Names();
  const std::set<std::string> served(names.begin(), names.end());
  std::set<std::pair<std::string, std::string>> rest;
  for (const RestRule& rule : RestPolicy()) {
    if (rule.api) rest.insert({rule.method, rule.route});
  }
  for (const ApiRoute& r : ApiRoutes()) {
    const std::string name = r.method->name();
    // gRPC: a policy entry equal to the declaration.
    auto g = GrpcPolicy().find(name);
    ASSERT_NE(g, GrpcPolicy().end()) << name;
    EXPECT_EQ(g->second.first, *NeedFromProto(r.need)) << name;
    EXPECT_EQ(g->second.second, r.action) << name;
    if (r.method->server_streaming()) continue;  // streamed by the transports themselves
    EXPECT_TRUE(served.count(name)) << name << " is declared but not in the method table (api_methods.cc)";
    if (r.http_method.empty()) continue;
    // REST: the route, matched by its own template with the method's need.
    EXPECT_TRUE(rest.count({r.http_method, r.path})) << name;
    std::string concrete = r.path;
    for (size_t i; (i = concrete.find('{')) != std::string::npos;) {
      concrete.replace(i, concrete.find('}', i) - i + 1, "7");
    }
    auto m = MatchRest(r.http_method, concrete);
    ASSERT_TRUE(m) << name << " " << concrete;
    ASSERT_NE(m->rule->api, nullptr) << name;
    EXPECT_EQ(m->rule->api->method, r.method) << concrete;
    EXPECT_EQ(m->rule->need, *NeedFromProto(r.need)) << name;
  }
  for (const std::string& name : names) {
    EXPECT_NE(FindApiRoute(name), nullptr) << name << " is in the method table but not declared in api.proto";
  }
}

TEST(RouteTableTest, OpenApiListsEveryRouteWithSchemasFromTheProto) {
  auto doc = Value::FromJson(OpenApiDocument());
  ASSERT_TRUE(doc.ok());
  const Value* paths = doc->Find("paths");
  const Value* schemas = doc->Find("components")->Find("schemas");
  ASSERT_TRUE(paths && schemas);
  for (const ApiRoute& r : ApiRoutes()) {
    if (r.http_method.empty()) continue;
    std::string verb = r.http_method;
    for (char& c : verb) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const Value* op = paths->Find(r.path) ? paths->Find(r.path)->Find(verb) : nullptr;
    ASSERT_TRUE(op) << r.http_method << " " << r.path;
    EXPECT_EQ(op->Find("operationId")->as_string(), r.method->name());
    const std::string out = r.method->output_type()->name();
    ASSERT_TRUE(schemas->Find(out)) << out;
    // Every field of the reply, by its JSON name.
    for (int i = 0; i < r.method->output_type()->field_count(); ++i) {
      EXPECT_TRUE(schemas->Find(out)->Find("properties")->Find(r.method->output_type()->field(i)->json_name()))
          << out << "." << r.method->output_type()->field(i)->name();
    }
    for (const char* code : {"200", "400", "401", "403", "404", "405", "413"}) {
      EXPECT_TRUE(op->Find("responses")->Find(code)) << r.path << " " << code;
    }
    EXPECT_EQ(op->Find("requestBody") != nullptr, r.body) << r.path;
  }
  // Enums are listed by name; 64-bit integers are strings, as protobuf's JSON mapping prints them.
  const Value* list = paths->Find("/api/v1/experiments")->Find("get");
  bool states = false;
  for (const Value& p : list->Find("parameters")->as_list()) {
    if (p.Find("name")->as_string() != "states") continue;
    states = true;
    EXPECT_EQ(p.Find("schema")->Find("type")->as_string(), "array");
  }
  EXPECT_TRUE(states);
  EXPECT_EQ(schemas->Find("Experiment")->Find("properties")->Find("id")->Find("type")->as_string(), "string");
}

Query QueryOf(const std::string& s) { return Query::Parse(s); }

TEST(RestTranscoderTest, QueryFillsFieldsByTypeAndPathParamsWin) {
  const ApiRoute* list = FindApiRoute("GetExperiments");
  ASSERT_NE(list, nullptr);
  auto m = DecodeRestRequest(*list, {}, QueryOf("states=ACTIVE,paused&states=EXPERIMENT_STATE_COMPLETED&limit=5"
                                                 "&sortBy=name&descending=true&unknown=1"),
                             "");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const auto& r = static_cast<const v1::GetExperimentsRequest&>(**m);
  ASSERT_EQ(r.states_size(), 3);
  EXPECT_EQ(r.states(0), v1::EXPERIMENT_STATE_ACTIVE);
  EXPECT_EQ(r.states(1), v1::EXPERIMENT_STATE_PAUSED);
  EXPECT_EQ(r.states(2), v1::EXPERIMENT_STATE_COMPLETED);
  EXPECT_EQ(r.limit(), 5);
  EXPECT_EQ(r.sort_by(), "name");
  EXPECT_TRUE(r.descending());

  for (const auto& [query, error] : std::vector<std::pair<std::string, std::string>>{
           {"limit=five", "limit: \"five\" is not an integer"},
           {"limit=99999999999", "limit: 99999999999 is out of range"},
           {"descending=maybe", "descending: \"maybe\" is not true or false"},
           {"states=RUNNING", "states: \"RUNNING\" is not one of"}}) {
    auto bad = DecodeRestRequest(*list, {}, QueryOf(query), "");
    ASSERT_FALSE(bad.ok()) << query;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(error), std::string::npos) << bad.status().message();
  }

  const ApiRoute* util = FindApiRoute("GetClusterUtilization");
  auto u = DecodeRestRequest(*util, {}, QueryOf("since=2026-11-24T16:01:00Z&pool=gpu"), "");
  ASSERT_TRUE(u.ok());
  const auto& ur = static_cast<const v1::GetClusterUtilizationRequest&>(**u);
  EXPECT_EQ(pb::util::TimeUtil::ToString(ur.since()), "2026-11-24T16:01:00Z");
  EXPECT_EQ(ur.pool(), "gpu");

  // {id} fills trial_id (bind), and a body cannot set what the path says.
  const ApiRoute* metrics = FindApiRoute("GetTrialMetrics");
  auto t = DecodeRestRequest(*metrics, {{"id", "42"}}, QueryOf("trial_id=7&kind=validation"), "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(static_cast<const v1::GetTrialMetricsRequest&>(**t).trial_id(), 42);
  EXPECT_EQ(static_cast<const v1::GetTrialMetricsRequest&>(**t).kind(), "validation");
  auto cont = DecodeRestRequest(*FindApiRoute("ContinueExperiment"), {{"id", "3"}}, {}, R"({"id": "9", "maxLength": 10})");
  ASSERT_TRUE(cont.ok()) << cont.status().message();
  EXPECT_EQ(static_cast<const v1::ContinueExperimentRequest&>(**cont).id(), 3);
  auto bad_id = DecodeRestRequest(*metrics, {{"id", "abc"}}, {}, "");
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.status().message().find("id: \"abc\" is not an integer"), std::string::npos);
  auto bad_body = DecodeRestRequest(*FindApiRoute("CreateExperiment"), {}, {}, R"({"configYaml": 1, "nope": 2})");
  ASSERT_FALSE(bad_body.ok());
  EXPECT_NE(bad_body.status().message().find("not a valid steadfast.v1.CreateExperimentRequest"), std::string::npos);
}

}  // namespace
}  // namespace sf::master
