// The OpenAPI 3 description of the REST routes served by HttpServer. The Api methods' routes,
// parameters and schemas are generated from the proto (each method's route options, its request
// and reply messages in protobuf's JSON mapping: lowerCamelCase names, int64 as strings, enums
// by name); only the REST-only routes (health, this document, accounts) are described by hand.
#include <google/protobuf/descriptor.h>

#include <cctype>
#include <set>

#include "common/api/route_table.h"
#include "master/api/http_server.h"
#include "master/auth/access_policy.h"

namespace sf::master {
namespace {

namespace pb = google::protobuf;

Value Ref(const std::string& name) { return Value(Value::Map{{"$ref", "#/components/schemas/" + name}}); }

Value JsonSchemaResponse(Value schema, const std::string& description) {
  return Value(Value::Map{{"description", description},
                          {"content", Value::Map{{"application/json", Value::Map{{"schema", std::move(schema)}}}}}});
}
Value JsonResponse(const std::string& schema, const std::string& description) {
  return JsonSchemaResponse(Ref(schema), description);
}

// The answers every route may give: `ok` (its schema) and the errors.
Value::Map Responses(Value ok) {
  return Value::Map{{"200", JsonSchemaResponse(std::move(ok), "OK")},
                       {"400", JsonResponse("Error", "bad request (field paths in errors)")},
                       {"401", JsonResponse("Error", "no, malformed, unknown, expired or revoked credentials "
                                                     "(Authorization: Bearer TOKEN)")},
                       {"403", JsonResponse("Error", "the caller's role or ownership does not allow it "
                                                     "(docs/security.md, the access policy)")},
                       {"404", JsonResponse("Error", "not found")},
                       {"409", JsonResponse("Error", "illegal state transition")},
                       {"503", JsonResponse("Error",
                                            "the master is at its connection cap (http_max_connections) "
                                            "or its database is unreachable; retry after Retry-After seconds")},
                    {"405", JsonResponse("Error", "the route does not take this method (Allow lists those it takes)")},
                    {"413", JsonResponse("Error", "the request body is over the route's limit")}};
}

// A GET of the server's own (no parameters, no body) answering with schema `response`.
Value Op(const std::string& summary, const std::string& op_id, const std::string& response) {
  return Value(Value::Map{{"summary", summary},
                          {"operationId", op_id},
                          {"parameters", Value::List{}},
                          {"responses", Responses(Ref(response))}});
}

Value Object(Value::Map properties) {
  return Value(Value::Map{{"type", "object"}, {"properties", std::move(properties)}});
}
Value Type(const std::string& t) { return Value(Value::Map{{"type", t}}); }
Value ArrayOf(const std::string& schema) { return Value(Value::Map{{"type", "array"}, {"items", Ref(schema)}}); }
// Schema of one field in protobuf's JSON mapping.
Value FieldSchema(const pb::FieldDescriptor* f, Value::Map& schemas);

// Adds message `d`'s schema (and those it refers to) to `schemas`; answers its $ref.
Value MessageSchema(const pb::Descriptor* d, Value::Map& schemas) {
  const std::string& full = d->full_name();
  if (full == "google.protobuf.Timestamp") return Value(Value::Map{{"type", "string"}, {"format", "date-time"}});
  if (full == "google.protobuf.Duration") return Value(Value::Map{{"type", "string"}, {"description", "seconds, \"1.5s\""}});
  if (full == "google.protobuf.Struct") return Value(Value::Map{{"type", "object"}});
  if (full == "google.protobuf.Value") return Value(Value::Map{{"description", "any JSON value"}});
  if (!schemas.count(d->name())) {
    schemas[d->name()] = Value::Map{};  // placeholder: recursive messages end here
    Value::Map properties;
    for (int i = 0; i < d->field_count(); ++i) {
      properties[d->field(i)->json_name()] = FieldSchema(d->field(i), schemas);
    }
    schemas[d->name()] = Object(std::move(properties));
  }
  return Ref(d->name());
}

Value ScalarSchema(const pb::FieldDescriptor* f, Value::Map& schemas) {
  using FD = pb::FieldDescriptor;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT64:
    case FD::CPPTYPE_UINT64:
      return Value(Value::Map{{"type", "string"}, {"format", "int64"}});
    case FD::CPPTYPE_INT32:
    case FD::CPPTYPE_UINT32:
      return Value(Value::Map{{"type", "integer"}, {"format", "int32"}});
    case FD::CPPTYPE_DOUBLE:
    case FD::CPPTYPE_FLOAT:
      return Type("number");
    case FD::CPPTYPE_BOOL:
      return Type("boolean");
    case FD::CPPTYPE_ENUM: {
      Value::List names;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) names.push_back(f->enum_type()->value(i)->name());
      return Value(Value::Map{{"type", "string"}, {"enum", std::move(names)}});
    }
    case FD::CPPTYPE_STRING:
      return f->type() == FD::TYPE_BYTES ? Value(Value::Map{{"type", "string"}, {"format", "byte"}}) : Type("string");
    case FD::CPPTYPE_MESSAGE:
      return MessageSchema(f->message_type(), schemas);
  }
  return Type("string");
}

Value FieldSchema(const pb::FieldDescriptor* f, Value::Map& schemas) {
  if (f->is_map()) {
    return Value(Value::Map{{"type", "object"},
                            {"additionalProperties", ScalarSchema(f->message_type()->map_value(), schemas)}});
  }
  if (f->is_repeated()) return Value(Value::Map{{"type", "array"}, {"items", ScalarSchema(f, schemas)}});
  return ScalarSchema(f, schemas);
}

// "GetExperimentCheckpoints" -> "Get experiment checkpoints"
std::string Words(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) {
      out += ' ';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

// Every Api method with a REST binding, from its options (common/api/route_table.h).
void AddApiRoutes(Value::Map& paths, Value::Map& schemas) {
  for (const ApiRoute& r : ApiRoutes()) {
    if (!r.ok || r.http_method.empty()) continue;
    const pb::Descriptor* in = r.method->input_type();
    Value::List params;
    std::set<const pb::FieldDescriptor*> in_path;
    for (const auto& [param, field] : r.params) {
      in_path.insert(field);
      Value schema = ScalarSchema(field, schemas);
      params.push_back(Value(Value::Map{{"name", param},
                                        {"in", "path"},
                                        {"required", true},
                                        {"description", "the request's " + field->name()},
                                        {"schema", schema}}));
    }
    if (!r.body) {
      for (int i = 0; i < in->field_count(); ++i) {
        const pb::FieldDescriptor* f = in->field(i);
        if (in_path.count(f)) continue;
        Value schema = FieldSchema(f, schemas);
        if (f->is_repeated()) schema.as_map()["description"] = "repeat the key or separate values by commas";
        params.push_back(Value(Value::Map{{"name", f->name()}, {"in", "query"}, {"required", false}, {"schema", schema}}));
      }
    }
    if (!r.follow_query.empty()) {
      // The follow turns the answer into server-sent events (text/event-stream).
      for (Value& p : params) {
        if (p.Find("name")->as_string() == r.follow_query) {
          p.as_map()["description"] = "true: stream as server-sent events (text/event-stream) until the end";
        }
      }
    }
    Value::Map op{{"summary", Words(r.method->name())},
                  {"operationId", r.method->name()},
                  {"description", "Access: " + std::string(NeedName(*NeedFromProto(r.need))) + " (" + r.action +
                                      "); gRPC: steadfast.v1.Api/" + r.method->name() + "."},
                  {"parameters", std::move(params)},
                  {"responses", Responses(MessageSchema(r.method->output_type(), schemas))}};
    if (r.body) {
      op["requestBody"] = Value::Map{
          {"required", true},
          {"content", Value::Map{{"application/json", Value::Map{{"schema", MessageSchema(in, schemas)}}}}}};
    }
    std::string verb = r.http_method;
    for (char& c : verb) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!paths.count(r.path)) paths[r.path] = Value::Map{};
    paths[r.path].as_map()[verb] = Value(std::move(op));
  }
}

// The two REST routes that are not Api methods (the HTTP server's own), and the error body
// every route may answer with.
void AddRestOnlyRoutes(Value::Map& paths, Value::Map& schemas) {
  paths["/health"] = Value::Map{{"get", Op("Liveness and database health", "Health", "Health")}};
  paths["/api/v1/openapi.json"] = Value::Map{{"get", Op("This document (OpenAPI 3)", "OpenApi", "Empty")}};
  schemas["Empty"] = Object({});
  schemas["Health"] = Object({{"status", Type("string")}, {"database", Type("string")}});
  schemas["Error"] = Object({{"code", Type("integer")}, {"message", Type("string")}, {"errors", ArrayOf("ConfigError")}});
}

}  // namespace

std::string OpenApiDocument() {
  static const std::string kDocument = [] {
    Value::Map paths;
    Value::Map schemas;
    AddApiRoutes(paths, schemas);
    AddRestOnlyRoutes(paths, schemas);
    Value doc(Value::Map{
        {"openapi", "3.0.3"},
        {"info", Value::Map{{"title", "Steadfast API"},
                            {"version", "v1"},
                            {"description",
                             "The Api service of steadfast.v1 over HTTP/JSON (protobuf's JSON mapping: lowerCamelCase "
                             "names, 64-bit integers as strings, enums by name). Generated from the proto's route "
                             "options (docs/api.md)."}}},
        {"paths", paths},
        {"components", Value::Map{{"schemas", schemas}}}});
    return doc.ToJson();
  }();
  return kDocument;
}

}  // namespace sf::master
