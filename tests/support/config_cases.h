// The table of good and bad experiment documents, shared by every test that feeds configs to
// a parser: the config unit tests, the CLI tests, and the master's API tests.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace sf::testing {

struct ConfigCase {
  std::string name;
  std::string yaml;
  std::vector<std::string> paths;  // empty: the document is valid
  std::string message = "";        // when set: the first error's exact "path: message"
};

// At least 40 documents: valid ones, typos, wrong types, out-of-range values, missing and
// conflicting fields, YAML syntax errors, empty and binary documents.
std::vector<ConfigCase> ConfigCases();

// A document as named top-level sections, in order, one section's text each.
using ConfigSections = std::vector<std::pair<std::string, std::string>>;

// `base` with sections replaced ("" drops one) or added at the end, as YAML text.
std::string WithSections(ConfigSections base, const ConfigSections& changes);

// A valid base document with top-level sections replaced ("" drops one) or added.
std::string With(std::vector<std::pair<std::string, std::string>> changes);

}  // namespace sf::testing

namespace sf::testing {
// Test names print instead of byte dumps.
inline void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.name; }
}  // namespace sf::testing
