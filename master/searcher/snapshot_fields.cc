#include "master/searcher/snapshot_fields.h"

#include <cmath>
#include <limits>

namespace sf::master::snapshot {
namespace {

Status Bad(const std::string& key, const char* what) {
  return InvalidArgument("searcher snapshot: field " + key + ": expected " + what);
}

const Value* Field(const Value& map, const std::string& key) {
  return map.is_map() ? map.Find(key) : nullptr;
}

}  // namespace

Status Int(const Value& map, const std::string& key, int64_t& out) {
  const Value* v = Field(map, key);
  if (!v || !v->is_int()) return Bad(key, "an integer");
  out = v->as_int();
  return Status::Ok();
}

Status Double(const Value& map, const std::string& key, double& out) {
  const Value* v = Field(map, key);
  if (v && v->is_number()) {
    out = v->as_double();
    return Status::Ok();
  }
  if (v && v->is_string()) {
    const std::string& s = v->as_string();
    if (s == "inf")
      out = std::numeric_limits<double>::infinity();
    else if (s == "-inf")
      out = -std::numeric_limits<double>::infinity();
    else if (s == "nan")
      out = std::numeric_limits<double>::quiet_NaN();
    else
      return Bad(key, "a number");
    return Status::Ok();
  }
  return Bad(key, "a number");
}

Status Bool(const Value& map, const std::string& key, bool& out) {
  const Value* v = Field(map, key);
  if (!v || !v->is_bool()) return Bad(key, "a boolean");
  out = v->as_bool();
  return Status::Ok();
}

Status String(const Value& map, const std::string& key, std::string& out) {
  const Value* v = Field(map, key);
  if (!v || !v->is_string()) return Bad(key, "a string");
  out = v->as_string();
  return Status::Ok();
}

Result<const Value*> List(const Value& map, const std::string& key) {
  const Value* v = Field(map, key);
  if (!v || !v->is_list()) return Bad(key, "a list");
  return v;
}

Value FromDouble(double d) {
  if (std::isnan(d)) return Value("nan");
  if (std::isinf(d)) return Value(d > 0 ? "inf" : "-inf");
  return Value(d);
}

}  // namespace sf::master::snapshot
