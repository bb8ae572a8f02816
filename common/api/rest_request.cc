#include "common/api/rest_request.h"

#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <cctype>
#include <cstdio>
#include <memory>

namespace sf::api {
namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

// Field `f` of `m` (element `index` when repeated) as DecodeRestRequest's SetScalar reads it.
Result<std::string> ScalarText(const pb::Message& m, const FD* f, int index) {
  const pb::Reflection* r = m.GetReflection();
  const bool repeated = f->is_repeated();
  switch (f->cpp_type()) {
    case FD::CPPTYPE_STRING: {
      std::string s = repeated ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (repeated && s.find(',') != std::string::npos) {
        return InvalidArgument(f->name() + ": \"" + s +
                               "\" holds a comma, which the query string splits on");
      }
      return s;
    }
    case FD::CPPTYPE_INT64:
      return std::to_string(repeated ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FD::CPPTYPE_INT32:
      return std::to_string(repeated ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FD::CPPTYPE_BOOL:
      return std::string((repeated ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true"
                                                                                         : "false");
    case FD::CPPTYPE_ENUM:
      return (repeated ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
    case FD::CPPTYPE_MESSAGE:
      if (f->message_type()->full_name() == "google.protobuf.Timestamp" && !repeated) {
        const auto& ts = static_cast<const pb::Timestamp&>(r->GetMessage(m, f));
        return pb::util::TimeUtil::ToString(ts);
      }
      break;
    default:
      break;
  }
  return InvalidArgument(f->name() + ": a " + f->cpp_type_name() +
                         " field cannot be sent in a REST request");
}

// "/api/v1/trials/{id}/logs" with {id} from its field.
Result<std::string> ExpandPath(const ApiRoute& route, const pb::Message& request) {
  std::string out;
  for (size_t i = 0; i < route.path.size();) {
    const size_t open = route.path.find('{', i);
    if (open == std::string::npos) {
      out += route.path.substr(i);
      break;
    }
    const size_t close = route.path.find('}', open);
    out += route.path.substr(i, open - i);
    auto field = route.params.find(route.path.substr(open + 1, close - open - 1));
    if (close == std::string::npos || field == route.params.end()) {
      return InvalidArgument(route.method->name() + ": bad path template " + route.path);
    }
    SF_ASSIGN_OR_RETURN(std::string value, ScalarText(request, field->second, -1));
    out += PercentEncode(value);
    i = close + 1;
  }
  return out;
}

bool IsPathField(const ApiRoute& route, const FD* f) {
  for (const auto& [param, field] : route.params) {
    if (field == f) return true;
  }
  return false;
}

// "?key=value&..." of the fields that are set and not in the path; "" when none is.
Result<std::string> Query(const ApiRoute& route, const pb::Message& request) {
  const pb::Descriptor* d = request.GetDescriptor();
  const pb::Reflection* r = request.GetReflection();
  std::string query;
  auto add = [&](const FD* f, int index) -> Status {
    SF_ASSIGN_OR_RETURN(std::string value, ScalarText(request, f, index));
    query += (query.empty() ? "?" : "&") + f->name() + "=" + PercentEncode(value);
    return Status::Ok();
  };
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    if (IsPathField(route, f)) continue;
    if (f->is_repeated()) {
      for (int j = 0; j < r->FieldSize(request, f); ++j) SF_RETURN_IF_ERROR(add(f, j));
    } else if (r->HasField(request, f)) {  // proto3 scalars: not their default
      SF_RETURN_IF_ERROR(add(f, -1));
    }
  }
  return query;
}

}  // namespace

std::string PercentEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

Result<RestRequest> EncodeRestRequest(const ApiRoute& route, const pb::Message& request) {
  if (!route.ok || route.http_method.empty()) {
    return InvalidArgument(route.method->name() + " has no REST route");
  }
  if (request.GetDescriptor() != route.method->input_type()) {
    return InvalidArgument(route.method->name() + " takes a " +
                           route.method->input_type()->full_name() + ", not a " +
                           request.GetDescriptor()->full_name());
  }
  RestRequest out;
  out.method = route.http_method;
  SF_ASSIGN_OR_RETURN(out.target, ExpandPath(route, request));
  if (!route.body) {
    SF_ASSIGN_OR_RETURN(std::string query, Query(route, request));
    out.target += query;
    return out;
  }
  std::unique_ptr<pb::Message> body(request.New());
  body->CopyFrom(request);
  for (const auto& [param, field] : route.params)
    body->GetReflection()->ClearField(body.get(), field);
  auto st = pb::util::MessageToJsonString(*body, &out.body);
  if (!st.ok()) return InvalidArgument(route.method->name() + ": " + st.ToString());
  return out;
}

Result<RestRequest> EncodeRestRequest(const std::string& method, const pb::Message& request) {
  const ApiRoute* route = FindApiRoute(method);
  if (!route)
    return InvalidArgument("steadfast.v1.Api has no method " + method + " with a REST route");
  return EncodeRestRequest(*route, request);
}

Status DecodeRestResponse(const std::string& json, pb::Message* response) {
  response->Clear();
  pb::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  auto st = pb::util::JsonStringToMessage(json, response, o);
  if (!st.ok())
    return InvalidArgument("not a valid " + response->GetTypeName() + ": " + st.ToString());
  return Status::Ok();
}

}  // namespace sf::api
