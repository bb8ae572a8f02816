// REST -> Api request: builds the request message of an Api method from a REST request, as the
// method's (steadfast.v1.http) option says (common/api/route_table.h, docs/api.md).
//
// Contract:
// - With body "*", the body is the request in protobuf's JSON mapping (unknown fields refused;
//   an empty body is the empty message). Without, the body is ignored and the query fills the
//   request's fields by name: strings as given; integers in decimal; bools true/false/1/0;
//   enums by value name, with or without the enum's prefix ("ACTIVE" or
//   "EXPERIMENT_STATE_ACTIVE"); repeated fields from repeated keys and comma-separated values;
//   google.protobuf.Timestamp as Query::Time reads it. Keys that name no field are ignored
//   (browsers add their own); a value of the wrong type, or a message-typed field other than a
//   Timestamp, is kInvalidArgument naming the key.
// - Path parameters are set last, so a body cannot override them: "{id}" with "abc" in an
//   integer field is kInvalidArgument ("id: \"abc\" is not an integer").
// - Stateless; thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <map>
#include <memory>
#include <string>

#include "common/api/route_table.h"
#include "common/status.h"
#include "master/api/routes/rest_query.h"

namespace sf::master {

// The route table lives in common/api (the CLI reads it too); the master names it as its own.
using api::ApiRoute;
using api::ApiRoutes;
using api::FindApiRoute;
using api::RouteTableProblems;

Result<std::unique_ptr<google::protobuf::Message>> DecodeRestRequest(
    const ApiRoute& route, const std::map<std::string, std::string>& path_params, const Query& query,
    const std::string& body);

// protobuf's JSON mapping as the API answers with it (lowerCamelCase names, every primitive
// field printed, int64 as strings, enums by name).
std::string MessageJson(const google::protobuf::Message& m);

}  // namespace sf::master
