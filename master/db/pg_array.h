// A list of texts as one PostgreSQL array parameter: `WHERE x = ANY($1::text[])` takes
// TextArray(list). Each element is quoted and escaped, so any text (a uuid, a state name, a
// user's string) travels as itself; an empty list is "{}".
#pragma once

#include <string>
#include <vector>

namespace sf::master {

inline std::string TextArray(const std::vector<std::string>& texts) {
  std::string out = "{";
  for (const std::string& t : texts) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : t) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

}  // namespace sf::master
