// A jsonb column as a Value: Value() for NULL or text that is not JSON.
#pragma once

#include <pqxx/pqxx>

#include "common/value.h"

namespace sf::master {

inline Value JsonbToValue(const pqxx::field& f) {
  if (f.is_null()) return Value();
  auto v = Value::FromJson(f.c_str());
  return v.ok() ? *v : Value();
}

}  // namespace sf::master
