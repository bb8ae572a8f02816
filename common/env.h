// An environment variable's value, or `def` when it is not set.
#pragma once

#include <cstdlib>
#include <string>

namespace sf {

inline std::string Env(const char* name, const std::string& def = "") {
  const char* v = std::getenv(name);
  return v ? v : def;
}

}  // namespace sf
