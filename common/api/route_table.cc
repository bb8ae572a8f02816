#include "common/api/route_table.h"

#include <algorithm>

#include "steadfast/v1/api.pb.h"

namespace sf::api {
namespace {

namespace pb = google::protobuf;
namespace v1 = steadfast::v1;

struct Table {
  std::vector<ApiRoute> routes;
  std::vector<std::string> problems;
};

// Reads one method's options into `r`; false (with `problems` appended) when they are unusable.
bool Read(const pb::MethodDescriptor* m, ApiRoute& r, std::vector<std::string>& problems) {
  const std::string who = "steadfast.v1.Api." + m->name() + ": ";
  const size_t before = problems.size();
  const pb::MethodOptions& o = m->options();
  if (!o.HasExtension(v1::access) || o.GetExtension(v1::access).need() == v1::ACCESS_NEED_UNSPECIFIED) {
    problems.push_back(who + "no (steadfast.v1.access) option with a need");
  } else {
    const v1::AccessRule& rule = o.GetExtension(v1::access);
    r.need = rule.need();
    r.action = rule.action();
    if (r.action.empty()) problems.push_back(who + "the access option names no action");
    r.audit = rule.audit();
    for (const std::string& target : rule.audit_target()) {
      ApiRoute::FieldPath path;
      std::string rest = target;
      const pb::Descriptor* type = m->input_type();
      if (rest.rfind("reply.", 0) == 0) {
        path.reply = true;
        rest = rest.substr(6);
        type = m->output_type();
      }
      size_t parts = 0;
      for (size_t start = 0; start <= rest.size(); ++parts) {
        const size_t dot = std::min(rest.find('.', start), rest.size());
        const pb::FieldDescriptor* f = type ? type->FindFieldByName(rest.substr(start, dot - start)) : nullptr;
        if (f && !f->is_repeated()) path.fields.push_back(f);
        type = f && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE ? f->message_type() : nullptr;
        start = dot + 1;
      }
      if (path.fields.empty() || path.fields.size() != parts ||
          path.fields.back()->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        problems.push_back(who + "audit_target \"" + target + "\" names no scalar field");
      } else {
        r.audit_target.push_back(std::move(path));
      }
    }
    if (!rule.audit_actor().empty()) {
      r.audit_actor = m->input_type()->FindFieldByName(rule.audit_actor());
      if (!r.audit_actor || r.audit_actor->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) {
        problems.push_back(who + "audit_actor \"" + rule.audit_actor() + "\" names no string field of " +
                           m->input_type()->name());
      }
    }
  }
  if (!o.HasExtension(v1::http)) {
    problems.push_back(who + "no (steadfast.v1.http) option (a REST binding, or grpc_only with the reason)");
    return false;
  }
  const v1::HttpRoute& h = o.GetExtension(v1::http);
  int verbs = 0;
  for (const auto& [verb, path] : {std::pair<const char*, const std::string&>{"GET", h.get()},
                                   {"POST", h.post()}, {"PUT", h.put()}, {"DELETE", h.delete_()}}) {
    if (path.empty()) continue;
    ++verbs;
    r.http_method = verb;
    r.path = path;
  }
  r.grpc_only = h.grpc_only();
  r.follow_query = h.follow_query();
  if (!r.grpc_only.empty()) {
    if (verbs != 0) problems.push_back(who + "grpc_only and a REST path at once");
    return problems.size() == before;
  }
  if (verbs != 1) problems.push_back(who + "the http option needs exactly one of get, post, put, delete");
  // What REST changes is on record, what it reads is not.
  if (verbs == 1 && r.audit != (r.http_method != "GET")) {
    problems.push_back(who + (r.audit ? "a GET is audited" : "a " + r.http_method + " is not audited (audit: true)"));
  }
  if (m->server_streaming()) problems.push_back(who + "a server stream on REST: mark it grpc_only");
  if (h.body() != "" && h.body() != "*") problems.push_back(who + "body must be \"*\" or empty");
  r.body = h.body() == "*";
  if (r.body && r.http_method == "GET") problems.push_back(who + "a GET takes no body");
  if (r.path.rfind("/api/v1/", 0) != 0) problems.push_back(who + "the path must start with /api/v1/");
  std::map<std::string, std::string> bound;
  for (const std::string& b : h.bind()) {
    const size_t eq = b.find('=');
    if (eq == std::string::npos) {
      problems.push_back(who + "bind \"" + b + "\" is not param=field");
      continue;
    }
    bound[b.substr(0, eq)] = b.substr(eq + 1);
  }
  for (size_t i = 0; (i = r.path.find('{', i)) != std::string::npos;) {
    const size_t end = r.path.find('}', i);
    if (end == std::string::npos) {
      problems.push_back(who + "unclosed { in " + r.path);
      break;
    }
    const std::string param = r.path.substr(i + 1, end - i - 1);
    auto b = bound.find(param);
    const std::string field_name = b == bound.end() ? param : b->second;
    if (b != bound.end()) bound.erase(b);
    const pb::FieldDescriptor* f = m->input_type()->FindFieldByName(field_name);
    if (!f || f->is_repeated() || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      problems.push_back(who + "{" + param + "} names no scalar field \"" + field_name + "\" of " +
                         m->input_type()->name());
    } else {
      r.params[param] = f;
    }
    i = end + 1;
  }
  for (const auto& [param, field] : bound) problems.push_back(who + "bind names {" + param + "}, not in the path");
  if (!r.follow_query.empty() && !m->input_type()->FindFieldByName(r.follow_query)) {
    problems.push_back(who + "follow_query \"" + r.follow_query + "\" is no field of " + m->input_type()->name());
  }
  return problems.size() == before;
}

const Table& TheTable() {
  static const Table kTable = [] {
    Table t;
    // Through a message of api.proto, so its descriptors are surely registered.
    const pb::ServiceDescriptor* api = v1::CreateExperimentRequest::descriptor()->file()->FindServiceByName("Api");
    for (int i = 0; i < api->method_count(); ++i) {
      ApiRoute r;
      r.method = api->method(i);
      r.ok = Read(r.method, r, t.problems);
      t.routes.push_back(std::move(r));
    }
    return t;
  }();
  return kTable;
}

}  // namespace

const std::vector<ApiRoute>& ApiRoutes() { return TheTable().routes; }

const ApiRoute* FindApiRoute(const std::string& name) {
  // Asked per call (the audit record of every gRPC call): a map built once.
  static const auto* by_name = [] {
    auto* m = new std::map<std::string, const ApiRoute*>;
    for (const ApiRoute& r : ApiRoutes()) (*m)[r.method->name()] = r.ok ? &r : nullptr;
    return m;
  }();
  auto it = by_name->find(name);
  return it == by_name->end() ? nullptr : it->second;
}

const std::vector<std::string>& RouteTableProblems() { return TheTable().problems; }

}  // namespace sf::api
