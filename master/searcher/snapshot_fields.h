// Reading searcher snapshots back: typed field access on a Value map with errors that name the
// field ("searcher snapshot: field created: expected an integer"). Internal to the searchers.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/value.h"

namespace sf::master::snapshot {

Status Int(const Value& map, const std::string& key, int64_t& out);
Status Double(const Value& map, const std::string& key, double& out);  // "inf"/"nan" strings too
Status Bool(const Value& map, const std::string& key, bool& out);
Status String(const Value& map, const std::string& key, std::string& out);
// The field itself, which must be a list.
Result<const Value*> List(const Value& map, const std::string& key);
// Doubles as Values: finite numbers as numbers, infinities and NaN as strings (JSON has none).
Value FromDouble(double d);

}  // namespace sf::master::snapshot
