// Reading a weights file's __metadata__ (string -> string) back into a model configuration:
// each reader names the key and the file's value in its error ("__metadata__ heads: 'x' is not
// an integer", "__metadata__ has no 'd_model'").
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace sf {

using Metadata = std::map<std::string, std::string>;

Result<int64_t> MetaInt(const Metadata& m, const std::string& key);
Result<bool> MetaBool(const Metadata& m, const std::string& key);  // "true" / "false"
Result<float> MetaFloat(const Metadata& m, const std::string& key);
// The value of `key`, or `def` when the file has none (keys added after files were written).
Result<float> MetaFloatOr(const Metadata& m, const std::string& key, float def);

// Formats a float for __metadata__ so that MetaFloat reads back the same float.
std::string MetaText(float v);

}  // namespace sf
