#include "master/util/proto_value.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cmath>

namespace sf::master {
namespace {

Value FromProtoValue(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue: return Value();
    case google::protobuf::Value::kBoolValue: return Value(v.bool_value());
    case google::protobuf::Value::kNumberValue: {
      double d = v.number_value();
      if (d == std::floor(d) && std::abs(d) < 9e15) return Value(static_cast<int64_t>(d));
      return Value(d);
    }
    case google::protobuf::Value::kStringValue: return Value(v.string_value());
    case google::protobuf::Value::kListValue: {
      Value::List list;
      for (const auto& e : v.list_value().values()) list.push_back(FromProtoValue(e));
      return Value(std::move(list));
    }
    case google::protobuf::Value::kStructValue: return StructToValue(v.struct_value());
    default: return Value();
  }
}

void ToProtoValue(const Value& v, google::protobuf::Value* out) {
  switch (v.type()) {
    case Value::Type::kNull: out->set_null_value(google::protobuf::NULL_VALUE); break;
    case Value::Type::kBool: out->set_bool_value(v.as_bool()); break;
    case Value::Type::kInt:
    case Value::Type::kDouble: out->set_number_value(v.as_double()); break;
    case Value::Type::kString: out->set_string_value(v.as_string()); break;
    case Value::Type::kList: {
      auto* list = out->mutable_list_value();
      for (const auto& e : v.as_list()) ToProtoValue(e, list->add_values());
      break;
    }
    case Value::Type::kMap: *out->mutable_struct_value() = ValueToStruct(v); break;
  }
}

}  // namespace

google::protobuf::Struct ValueToStruct(const Value& v) {
  google::protobuf::Struct s;
  if (!v.is_map()) return s;
  for (const auto& [k, e] : v.as_map()) ToProtoValue(e, &(*s.mutable_fields())[k]);
  return s;
}

Value StructToValue(const google::protobuf::Struct& s) {
  Value::Map m;
  for (const auto& [k, e] : s.fields()) m[k] = FromProtoValue(e);
  return Value(std::move(m));
}

google::protobuf::Timestamp SecondsToTimestamp(double seconds) {
  google::protobuf::Timestamp t;
  double whole = std::floor(seconds);
  t.set_seconds(static_cast<int64_t>(whole));
  t.set_nanos(static_cast<int32_t>((seconds - whole) * 1e9));
  return t;
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace sf::master
