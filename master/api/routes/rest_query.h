// A REST request's query string, parsed: keys in snake_case (`sortBy` and `sort_by` are one key),
// values percent-decoded, in order (a key may repeat). Typed reads answer kInvalidArgument with a
// message that names the key and the value.
#pragma once

#include <google/protobuf/timestamp.pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sf::master {

// "%41+b" -> "A b".
std::string UrlDecode(const std::string& s);

struct Query {
  std::multimap<std::string, std::string> params;

  // `q`: what follows '?' in the target.
  static Query Parse(const std::string& q);

  std::string Get(const std::string& k, const std::string& def = "") const;
  // Absent or empty: `def`.
  Result<int64_t> Int(const std::string& k, int64_t def) const;
  // Absent, empty, "false" or "0": false; "true" or "1": true.
  Result<bool> Bool(const std::string& k) const;
  // A point in time: RFC 3339 ("2026-11-24T16:01:00Z", "2026-11-24T17:01:00+01:00") or seconds
  // since the epoch ("1795536060"). Absent or empty: nullopt. A '+' of an offset that the client
  // did not percent-encode arrives as a space and is taken back.
  Result<std::optional<google::protobuf::Timestamp>> Time(const std::string& k) const;
};

// A decimal integer as REST accepts it: an optional '-' and digits, nothing else (no spaces, no
// '+', no hex), within int64; nullopt otherwise. So "/experiments/%201" names no experiment.
std::optional<int64_t> ParseDecimal(std::string_view text);

}  // namespace sf::master
