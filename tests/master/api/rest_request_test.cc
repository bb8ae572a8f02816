// The client's REST encoding (common/api/rest_request.h) and the master's decoding
// (master/api/routes/rest_transcoder.h) agree: for every Api method with a REST route, a request
// with every field set, encoded by the client and decoded by the server from the path, query and
// body, is the request that was sent.
#include "common/api/rest_request.h"

#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <sstream>

#include "master/api/routes/rest_query.h"
#include "master/api/routes/rest_transcoder.h"
#include "steadfast/v1/api.pb.h"

namespace sf::master {
namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;
namespace v1 = steadfast::v1;

// Sets every field of `m` that a REST request can carry to a value other than its default:
// strings with characters that need encoding, two elements in repeated fields, Timestamps; other
// messages only in a body (`in_body`).
void Fill(pb::Message& m, bool in_body) {
  const pb::Reflection* r = m.GetReflection();
  const pb::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FD::CPPTYPE_STRING: {
          const std::string s = f->type() == FD::TYPE_BYTES ? std::string("\x01\xff", 2)
                                                            : "a b+c%d&e=f?é" + std::to_string(k);
          rep ? r->AddString(&m, f, s) : r->SetString(&m, f, s);
          break;
        }
        case FD::CPPTYPE_INT64:
          rep ? r->AddInt64(&m, f, -1234567890123 + k) : r->SetInt64(&m, f, 1234567890123);
          break;
        case FD::CPPTYPE_INT32:
          rep ? r->AddInt32(&m, f, 42 + k) : r->SetInt32(&m, f, -42);
          break;
        case FD::CPPTYPE_BOOL:
          rep ? r->AddBool(&m, f, true) : r->SetBool(&m, f, true);
          break;
        case FD::CPPTYPE_ENUM: {
          const int v =
              f->enum_type()->value(1 + k % (f->enum_type()->value_count() - 1))->number();
          rep ? r->AddEnumValue(&m, f, v) : r->SetEnumValue(&m, f, v);
          break;
        }
        case FD::CPPTYPE_MESSAGE:
          if (f->message_type() == pb::Timestamp::descriptor() && !rep) {
            auto* ts = static_cast<pb::Timestamp*>(r->MutableMessage(&m, f));
            ts->set_seconds(1795536060);
            ts->set_nanos(500000000);
          } else if (in_body && f->message_type()->file()->package() == "steadfast.v1") {
            Fill(rep ? *r->AddMessage(&m, f) : *r->MutableMessage(&m, f), in_body);
          }
          break;
        default:
          ADD_FAILURE() << f->full_name() << ": a field type this test does not fill";
      }
    }
  }
}

// The path parameters of `path` by `route`'s template, percent-decoded.
std::map<std::string, std::string> PathParams(const ApiRoute& route, const std::string& path) {
  std::map<std::string, std::string> params;
  std::stringstream t(route.path), p(path);
  for (std::string ts, ps; std::getline(t, ts, '/') && std::getline(p, ps, '/');) {
    if (!ts.empty() && ts.front() == '{') params[ts.substr(1, ts.size() - 2)] = UrlDecode(ps);
  }
  return params;
}

TEST(RestRequestTest, TheMastersDecodingOfEveryRouteReadsBackWhatTheClientEncoded) {
  int checked = 0;
  for (const ApiRoute& route : ApiRoutes()) {
    if (!route.ok || route.http_method.empty()) continue;
    SCOPED_TRACE(route.method->name());
    const pb::Message* prototype =
        pb::MessageFactory::generated_factory()->GetPrototype(route.method->input_type());
    std::unique_ptr<pb::Message> sent(prototype->New());
    Fill(*sent, route.body);
    auto rest = api::EncodeRestRequest(route.method->name(), *sent);
    ASSERT_TRUE(rest.ok()) << rest.status().message();
    EXPECT_EQ(rest->method, route.http_method);
    EXPECT_EQ(rest->body.empty(), !route.body);
    const size_t q = rest->target.find('?');
    const std::string path = rest->target.substr(0, q);
    EXPECT_EQ(path.find_first_of(" +&?"), std::string::npos) << path;
    auto decoded = DecodeRestRequest(
        route, PathParams(route, path),
        Query::Parse(q == std::string::npos ? "" : rest->target.substr(q + 1)), rest->body);
    ASSERT_TRUE(decoded.ok()) << rest->target << " " << rest->body << ": "
                              << decoded.status().message();
    std::string diff;
    pb::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differ.Compare(*sent, **decoded)) << rest->target << " " << rest->body << "\n"
                                                  << diff;
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(RestRequestTest, PathQueryAndBodyAsTheRouteDeclaresThem) {
  v1::GetTrialLogsRequest logs;
  logs.set_trial_id(7);
  logs.set_limit(100);
  logs.set_follow(true);
  auto get = api::EncodeRestRequest("GetTrialLogs", logs);
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->method, "GET");
  EXPECT_EQ(get->target, "/api/v1/trials/7/logs?limit=100&follow=true");  // defaults left out
  EXPECT_EQ(get->body, "");

  v1::GetAuditLogRequest audit;
  audit.set_limit(0);  // optional: present, so sent
  audit.set_actor("bob smith");
  EXPECT_EQ(api::EncodeRestRequest("GetAuditLog", audit)->target,
            "/api/v1/audit?limit=0&actor=bob%20smith");

  v1::GetExperimentsRequest list;
  list.add_states(v1::EXPERIMENT_STATE_ACTIVE);
  list.add_states(v1::EXPERIMENT_STATE_PAUSED);
  EXPECT_EQ(api::EncodeRestRequest("GetExperiments", list)->target,
            "/api/v1/experiments?states=EXPERIMENT_STATE_ACTIVE&states=EXPERIMENT_STATE_PAUSED");

  v1::ContinueExperimentRequest resume;
  resume.set_id(12);
  resume.set_max_length(5000);
  auto post = api::EncodeRestRequest("ContinueExperiment", resume);
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->method, "POST");
  EXPECT_EQ(post->target, "/api/v1/experiments/12/continue");
  EXPECT_EQ(post->body, "{\"maxLength\":\"5000\"}");  // the path's id is not repeated in the body

  v1::SetWorkspaceMemberRequest member;
  member.set_workspace("team a/b");
  member.set_username("x");
  member.set_role("editor");
  auto put = api::EncodeRestRequest("SetWorkspaceMember", member);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->target, "/api/v1/workspaces/team%20a%2Fb/members/x");
  EXPECT_EQ(put->body, "{\"role\":\"editor\"}");
}

TEST(RestRequestTest, WhatCannotBeSentIsRefusedByName) {
  EXPECT_FALSE(api::EncodeRestRequest("NoSuchMethod", v1::GetTrialRequest()).ok());
  EXPECT_FALSE(
      api::EncodeRestRequest("FollowTrialLogs", v1::GetTrialLogsRequest()).ok());  // grpc_only
  auto wrong = api::EncodeRestRequest("GetTrial", v1::GetExperimentRequest());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("steadfast.v1.GetTrialRequest"), std::string::npos);
  v1::GetExperimentsRequest comma;
  comma.add_fields("a,b");
  auto split = api::EncodeRestRequest("GetExperiments", comma);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("fields"), std::string::npos);
}

TEST(RestRequestTest, RepliesReadWithFieldsThisClientDoesNotKnow) {
  v1::GetTrialResponse reply;
  ASSERT_TRUE(
      api::DecodeRestResponse(
          R"({"trial":{"id":"7","state":"TRIAL_STATE_RUNNING","newField":1},"more":[]})", &reply)
          .ok());
  EXPECT_EQ(reply.trial().id(), 7);
  EXPECT_EQ(reply.trial().state(), v1::TRIAL_STATE_RUNNING);
  EXPECT_FALSE(api::DecodeRestResponse("{\"trial\": 3}", &reply).ok());
}

}  // namespace
}  // namespace sf::master
