// The route table: every steadfast.v1.Api method with its REST binding and its access rule, as
// the proto declares them (proto/steadfast/v1/route_options.proto, docs/api.md). One source for
// the REST server's routes (master/api/routes/rest_transcoder.h), the access policy of REST and
// gRPC (master/auth/access_policy.h), the OpenAPI document (master/api/openapi.h) and the
// client's requests (common/api/rest_request.h). Needs only the generated protos: the CLI links
// it (sf_api_routes) without the master.
//
// Contract:
// - ApiRoutes() lists every Api method in declaration order, read once from the generated
//   descriptors; immutable afterwards, so thread-safe.
// - A method whose options are missing or malformed (no access rule, no binding and no
//   grpc_only reason, two verbs, a {param} that names no field, a body on GET; a REST mutation
//   not audited or a GET audited; an audit field that does not exist) is listed by
//   RouteTableProblems() and served by neither server; tests/master/api/route_table_test.cc
//   fails on any problem, so such a method cannot land.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "steadfast/v1/route_options.pb.h"

namespace sf::api {

struct ApiRoute {
  const google::protobuf::MethodDescriptor* method = nullptr;
  // Empty http_method: not on REST (grpc_only says why).
  std::string http_method;  // "GET", "POST", "PUT", "DELETE"
  std::string path;         // template: "/api/v1/experiments/{id}/kill"
  bool body = false;        // the request is the JSON body
  // {param} -> the request field it fills (its own name unless bound otherwise).
  std::map<std::string, const google::protobuf::FieldDescriptor*> params;
  std::string follow_query;  // see HttpRoute.follow_query
  std::string grpc_only;
  steadfast::v1::AccessNeed need = steadfast::v1::ACCESS_NEED_UNSPECIFIED;
  std::string action;
  // The audit log (AccessRule.audit, audit_target, audit_actor): whether calls are recorded,
  // the fields (each a path of fields from the request, or the reply when `reply`) whose values
  // name what a call acts on, and the request field naming an actor who is not signed in.
  bool audit = false;
  struct FieldPath {
    bool reply = false;
    std::vector<const google::protobuf::FieldDescriptor*> fields;
  };
  std::vector<FieldPath> audit_target;
  const google::protobuf::FieldDescriptor* audit_actor = nullptr;
  bool ok = false;  // false: see RouteTableProblems()
};

const std::vector<ApiRoute>& ApiRoutes();
// The route of Api method `name` ("KillExperiment"); null when there is none or it is not ok.
const ApiRoute* FindApiRoute(const std::string& name);
// One line per problem, naming the method: empty when every method is declared properly.
const std::vector<std::string>& RouteTableProblems();

}  // namespace sf::api
