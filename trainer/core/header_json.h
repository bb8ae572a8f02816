// A small strict JSON reader (RFC 8259), enough for safetensors headers (safetensors.h). Not
// common/value.h's: header validation needs a hard nesting limit, so hostile input never
// recurses deeply, and integers read exactly up to uint64 (data offsets).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sf::safetensors {

struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  bool is_uint = false;  // a non-negative integer that fits uint64 (then `uint` holds it)
  uint64_t uint = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // in file order
};

// Parses `text` whole into *out: kDataLoss ("invalid JSON header at byte N: ...") for anything
// RFC 8259 does not allow, for text after the value and for nesting deeper than 16.
Status ParseHeaderJson(std::string_view text, Json* out);

}  // namespace sf::safetensors
