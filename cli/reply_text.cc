#include "cli/reply_text.h"

#include <google/protobuf/stubs/strutil.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/value.h"

namespace sf::cli {
namespace {

namespace pb = google::protobuf;

// `m`'s JSON (protobuf's mapping, every primitive field printed, as the master's MessageJson) read
// back as a Value.
Value JsonValue(const pb::Message& m) {
  std::string json;
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  (void)pb::util::MessageToJsonString(m, &json, o);
  auto v = Value::FromJson(json);
  return v.ok() ? *v : Value();
}

}  // namespace

std::string NumberText(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // The JSON mapping writes the shortest text that reads back (SimpleDtoa); when that is an
  // integer, a JSON reader takes it for one.
  const std::string json = pb::SimpleDtoa(v);
  if (json.find_first_not_of("-0123456789") == std::string::npos) {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(json.data(), json.data() + json.size(), n);
    if (ec == std::errc() && end == json.data() + json.size()) return std::to_string(n);
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

std::string NumberText(bool present, double v) { return present ? NumberText(v) : ""; }

std::string TimeText(bool present, const pb::Timestamp& t) {
  return present ? pb::util::TimeUtil::ToString(t) : "";
}

std::string BoolText(bool b) { return b ? "true" : "false"; }

std::string EnumText(const pb::EnumDescriptor* type, int value) {
  const pb::EnumValueDescriptor* v = type->FindValueByNumber(value);
  if (!v) return std::to_string(value);
  std::string prefix;  // "TrialState" -> "TRIAL_STATE_"
  for (char c : type->name()) {
    if (std::isupper(static_cast<unsigned char>(c)) && !prefix.empty()) prefix += '_';
    prefix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  prefix += '_';
  return v->name().rfind(prefix, 0) == 0 ? v->name().substr(prefix.size()) : v->name();
}

std::string StructJson(const pb::Struct& s) { return JsonValue(s).ToJson(); }

std::string StructValueText(const pb::Value& v) {
  switch (v.kind_case()) {
    case pb::Value::kNumberValue:
      return NumberText(v.number_value());
    case pb::Value::kStringValue:
      return v.string_value();
    case pb::Value::kBoolValue:
      return BoolText(v.bool_value());
    case pb::Value::kStructValue:
    case pb::Value::kListValue:
      return JsonValue(v).ToJson();
    default:
      return "";
  }
}

std::string MessageJson(const pb::Message& m) { return JsonValue(m).ToJson(); }

std::string FieldText(const pb::Message& m, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = m.GetReflection();
  using FD = pb::FieldDescriptor;
  if (f->has_presence() && !r->HasField(m, f)) return "";  // absent from the JSON
  switch (f->cpp_type()) {
    case FD::CPPTYPE_STRING:
      return r->GetString(m, f);
    case FD::CPPTYPE_INT32:
      return std::to_string(r->GetInt32(m, f));
    case FD::CPPTYPE_INT64:
      return std::to_string(r->GetInt64(m, f));
    case FD::CPPTYPE_UINT32:
      return std::to_string(r->GetUInt32(m, f));
    case FD::CPPTYPE_UINT64:
      return std::to_string(r->GetUInt64(m, f));
    case FD::CPPTYPE_DOUBLE:
      return NumberText(r->GetDouble(m, f));
    case FD::CPPTYPE_FLOAT:
      return NumberText(r->GetFloat(m, f));
    case FD::CPPTYPE_BOOL:
      return BoolText(r->GetBool(m, f));
    case FD::CPPTYPE_ENUM:
      return r->GetEnum(m, f)->name();
    case FD::CPPTYPE_MESSAGE:
      if (f->message_type() == pb::Timestamp::descriptor()) {
        return TimeText(true, static_cast<const pb::Timestamp&>(r->GetMessage(m, f)));
      }
      return MessageJson(r->GetMessage(m, f));
  }
  return "";
}

}  // namespace sf::cli
