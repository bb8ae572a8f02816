#include "master/api/api_audit.h"

#include "common/log.h"
#include "common/utf8.h"
#include "master/auth/accounts.h"

namespace sf::master {
namespace pb = google::protobuf;

namespace {

// A scalar field's value as text ("" when unset or of a message type).
std::string FieldText(const pb::Message& m, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING: return r->GetString(m, f);
    case pb::FieldDescriptor::CPPTYPE_INT64: return std::to_string(r->GetInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_INT32: return std::to_string(r->GetInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(m, f) ? "true" : "false";
    case pb::FieldDescriptor::CPPTYPE_ENUM: return r->GetEnum(m, f)->name();
    default: return "";
  }
}

}  // namespace

std::string AuditTarget(const api::ApiRoute& route, const pb::Message* request, const pb::Message* reply) {
  std::string out;
  for (const api::ApiRoute::FieldPath& path : route.audit_target) {
    const pb::Message* m = path.reply ? reply : request;
    if (m == nullptr || m->GetDescriptor() != (path.reply ? route.method->output_type() : route.method->input_type())) {
      return "";
    }
    for (size_t i = 0; i + 1 < path.fields.size(); ++i) {
      if (!m->GetReflection()->HasField(*m, path.fields[i])) return "";
      m = &m->GetReflection()->GetMessage(*m, path.fields[i]);
    }
    out += (out.empty() ? "" : "/") + FieldText(*m, path.fields.back());
  }
  return out;
}

void RecordApiCall(AuditLog* audit, const api::ApiRoute& route, const pb::Message* request, const pb::Message* reply,
                   const Principal& who, const ApiCallOrigin& origin) {
  if (audit == nullptr || !route.audit) return;
  AuditEntry e;
  e.actor = who.username;
  if (e.actor.empty() && route.audit_actor && request && request->GetDescriptor() == route.method->input_type()) {
    // A call by no one signed in is on record under the name it gave (Login: never its password).
    const std::string named = request->GetReflection()->GetString(*request, route.audit_actor);
    if (Accounts::CheckUsername(named).ok()) e.actor = named;
  }
  if (e.actor.empty() || !IsText(e.actor) || e.actor.size() > 200) e.actor = "anonymous";
  e.peer = origin.peer;
  e.method = origin.method;
  if (origin.path.empty()) {
    const std::string target = AuditTarget(route, request, reply);
    e.path = "/steadfast.v1.Api/" + route.method->name() + (target.empty() ? "" : "/" + target);
  } else {
    e.path = origin.path;
  }
  if (!IsText(e.path) || e.path.size() > 2000) e.path = "(unprintable path)";
  e.status = origin.status;
  if (Status st = audit->Record(e); !st.ok()) {
    log::Error("audit", {{"event", "record_failed"}, {"method", e.method}, {"path", e.path}, {"error", st.message()}});
  }
}

}  // namespace sf::master
