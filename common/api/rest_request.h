// Api request -> REST request, and REST reply -> Api response: the client's half of the REST
// mapping whose server half is master/api/routes/rest_transcoder.h. A client (the `sf` CLI)
// builds the request message of an Api method and gets the method, target and body to send, as
// the method's (steadfast.v1.http) option declares them (common/api/route_table.h,
// docs/api.md); no URL is written by hand.
//
// Contract:
// - The path template's {param} segments are filled from the request's fields (their bound
//   field, e.g. {id} -> trial_id), percent-encoded: strings as given, integers in decimal,
//   bools true/false, enums by value name.
// - With body "*", the rest of the request is the JSON body (protobuf's JSON mapping, default
//   values left out); the path parameters' fields are left out of it (the server sets them from
//   the path). Without a body, every other field that is set goes in the query string under its
//   proto name, as DecodeRestRequest reads it: a proto3 scalar when it is not its default, an
//   `optional` one when present, a repeated field as one key per element, enums by full value
//   name, google.protobuf.Timestamp as RFC 3339. A string holding ',' in a repeated field
//   cannot be sent (the server splits on commas); nor can another message-typed field: both are
//   kInvalidArgument naming the field.
// - DecodeRestResponse ignores fields it does not know, so a newer master's replies still read.
// - Stateless; thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "common/api/route_table.h"
#include "common/status.h"

namespace sf::api {

struct RestRequest {
  std::string method;  // "GET", "POST", "PUT", "DELETE"
  std::string target;  // path and query: "/api/v1/trials/7/logs?after_id=10&limit=100"
  std::string body;    // the JSON body for body "*" methods; empty otherwise
};

// The REST request for Api method `route` with `request`, which must be the method's input type.
Result<RestRequest> EncodeRestRequest(const ApiRoute& route,
                                      const google::protobuf::Message& request);
// The same for the Api method named `method` ("GetTrial"): kInvalidArgument when it has no REST
// route (none, or grpc_only) or `request` is not its input type.
Result<RestRequest> EncodeRestRequest(const std::string& method,
                                      const google::protobuf::Message& request);

// "a b/c" -> "a%20b%2Fc": every byte but RFC 3986's unreserved characters percent-encoded.
std::string PercentEncode(const std::string& s);

// Parses a reply's JSON into `response` (cleared first), ignoring unknown fields.
Status DecodeRestResponse(const std::string& json, google::protobuf::Message* response);

}  // namespace sf::api
