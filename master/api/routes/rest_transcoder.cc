#include "master/api/routes/rest_transcoder.h"

#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <limits>
#include <sstream>

namespace sf::master {
namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

// "ExperimentState" -> "EXPERIMENT_STATE_"
std::string EnumPrefix(const pb::EnumDescriptor* e) {
  std::string out;
  for (char c : e->name()) {
    if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out + "_";
}

// Sets (or adds, for a repeated field) one scalar `value` of field `f` on `m`.
Status SetScalar(pb::Message& m, const FD* f, const std::string& key, const std::string& value) {
  const pb::Reflection* r = m.GetReflection();
  auto integer = [&]() -> Result<int64_t> {
    std::optional<int64_t> v = ParseDecimal(value);
    if (v) return *v;
    return InvalidArgument(key + ": \"" + value + "\" is not an integer");
  };
  switch (f->cpp_type()) {
    case FD::CPPTYPE_STRING:
      f->is_repeated() ? r->AddString(&m, f, value) : r->SetString(&m, f, value);
      return Status::Ok();
    case FD::CPPTYPE_INT64:
    case FD::CPPTYPE_INT32: {
      if (value.empty() && !f->is_repeated()) return Status::Ok();
      SF_ASSIGN_OR_RETURN(int64_t v, integer());
      if (f->cpp_type() == FD::CPPTYPE_INT64) {
        f->is_repeated() ? r->AddInt64(&m, f, v) : r->SetInt64(&m, f, v);
        return Status::Ok();
      }
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return InvalidArgument(key + ": " + value + " is out of range");
      }
      f->is_repeated() ? r->AddInt32(&m, f, static_cast<int32_t>(v)) : r->SetInt32(&m, f, static_cast<int32_t>(v));
      return Status::Ok();
    }
    case FD::CPPTYPE_BOOL: {
      bool v;
      if (value.empty() || value == "false" || value == "0") {
        v = false;
      } else if (value == "true" || value == "1") {
        v = true;
      } else {
        return InvalidArgument(key + ": \"" + value + "\" is not true or false");
      }
      f->is_repeated() ? r->AddBool(&m, f, v) : r->SetBool(&m, f, v);
      return Status::Ok();
    }
    case FD::CPPTYPE_ENUM: {
      const pb::EnumDescriptor* e = f->enum_type();
      std::string upper;
      for (char c : value) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      const pb::EnumValueDescriptor* v = e->FindValueByName(upper);
      if (!v) v = e->FindValueByName(EnumPrefix(e) + upper);
      if (!v || v->number() == 0) {
        std::string names;
        for (int i = 1; i < e->value_count(); ++i) {
          std::string n = e->value(i)->name();
          if (n.rfind(EnumPrefix(e), 0) == 0) n = n.substr(EnumPrefix(e).size());
          names += (names.empty() ? "" : ", ") + n;
        }
        return InvalidArgument(key + ": \"" + value + "\" is not one of " + names);
      }
      f->is_repeated() ? r->AddEnumValue(&m, f, v->number()) : r->SetEnumValue(&m, f, v->number());
      return Status::Ok();
    }
    default:
      return InvalidArgument(key + ": not settable from the query string");
  }
}

Status SetFromQuery(pb::Message& m, const Query& query) {
  const pb::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    auto [begin, end] = query.params.equal_range(f->name());
    if (begin == end) continue;
    if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
      if (f->message_type()->full_name() != "google.protobuf.Timestamp" || f->is_repeated()) {
        return InvalidArgument(f->name() + ": not settable from the query string");
      }
      SF_ASSIGN_OR_RETURN(auto ts, query.Time(f->name()));
      if (ts) m.GetReflection()->MutableMessage(&m, f)->CopyFrom(*ts);
      continue;
    }
    if (!f->is_repeated()) {
      SF_RETURN_IF_ERROR(SetScalar(m, f, f->name(), begin->second));
      continue;
    }
    for (auto it = begin; it != end; ++it) {
      std::stringstream ss(it->second);
      for (std::string part; std::getline(ss, part, ',');) {
        if (!part.empty()) SF_RETURN_IF_ERROR(SetScalar(m, f, f->name(), part));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<pb::Message>> DecodeRestRequest(const ApiRoute& route,
                                                       const std::map<std::string, std::string>& path_params,
                                                       const Query& query, const std::string& body) {
  const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(route.method->input_type());
  std::unique_ptr<pb::Message> m(prototype->New());
  if (route.body) {
    if (!body.empty()) {
      pb::util::JsonParseOptions o;
      o.ignore_unknown_fields = false;
      auto st = pb::util::JsonStringToMessage(body, m.get(), o);
      if (!st.ok()) return InvalidArgument("request body is not a valid " + m->GetTypeName() + ": " + st.ToString());
    }
  } else {
    SF_RETURN_IF_ERROR(SetFromQuery(*m, query));
  }
  for (const auto& [param, field] : route.params) {
    auto it = path_params.find(param);
    if (it == path_params.end()) return InvalidArgument("path parameter {" + param + "} is missing");
    m->GetReflection()->ClearField(m.get(), field);
    SF_RETURN_IF_ERROR(SetScalar(*m, field, param, it->second));
  }
  return m;
}

std::string MessageJson(const pb::Message& m) {
  std::string out;
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = false;
  (void)pb::util::MessageToJsonString(m, &out, o);
  return out;
}

}  // namespace sf::master
