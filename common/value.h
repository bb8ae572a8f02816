// A JSON-like value: null, bool, 64-bit integer, double, string, list, or map with string keys.
//
// Hyperparameter constants, sampled trial hyperparameters and small structured payloads are
// held as Values so that the config parser, the searchers, the master's API and the trainer
// agree on one representation. Maps keep their keys sorted, so a Value prints the same way
// every time (searchers depend on this for deterministic snapshots).
//
// A Value is a plain value type: copyable, movable, not synchronised.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace sf {

class Value {
 public:
  using List = std::vector<Value>;
  using Map = std::map<std::string, Value>;
  enum class Type { kNull, kBool, kInt, kDouble, kString, kList, kMap };

  Value() = default;
  Value(std::nullptr_t) {}                             // NOLINT
  Value(bool b) : data_(b) {}                          // NOLINT
  Value(int v) : data_(static_cast<int64_t>(v)) {}     // NOLINT
  Value(int64_t v) : data_(v) {}                       // NOLINT
  Value(double v) : data_(v) {}                        // NOLINT
  Value(const char* s) : data_(std::string(s)) {}      // NOLINT
  Value(std::string s) : data_(std::move(s)) {}        // NOLINT
  Value(List l) : data_(std::move(l)) {}               // NOLINT
  Value(Map m) : data_(std::move(m)) {}                // NOLINT

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_double() const { return type() == Type::kDouble; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_map() const { return type() == Type::kMap; }

  // Accessors assert the type; check it first.
  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  // An integer reads as a double too.
  double as_double() const {
    return is_int() ? static_cast<double>(std::get<int64_t>(data_)) : std::get<double>(data_);
  }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return std::get<List>(data_); }
  List& as_list() { return std::get<List>(data_); }
  const Map& as_map() const { return std::get<Map>(data_); }
  Map& as_map() { return std::get<Map>(data_); }

  // Map lookup: nullptr when this is not a map or has no such key.
  const Value* Find(const std::string& key) const;

  // Compact JSON (doubles printed with enough digits to round-trip).
  std::string ToJson() const;
  // Parses JSON text (RFC 8259). Errors name the byte offset.
  static Result<Value> FromJson(std::string_view text);

  // Human form for error messages and tables: strings quoted, numbers as typed.
  std::string ToDisplay() const;

  // "null", "bool", "integer", "number", "string", "list", "map".
  static const char* TypeName(Type type);

  friend bool operator==(const Value& a, const Value& b) { return a.data_ == b.data_; }

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, List, Map> data_;
};

// `s` as a JSON string literal: quoted, with '"', '\\' and control characters escaped, as ToJson
// writes strings. For documents whose layout is fixed elsewhere (a safetensors header, sacreBLEU's
// JSON), built around Value's own string escaping rather than a second copy of it.
std::string JsonQuoted(std::string_view s);

}  // namespace sf
