#include "common/config/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <regex>

namespace sf::config {
namespace {

bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

bool LooksNull(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> ParseBoolScalar(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

std::optional<int64_t> ParseIntScalar(const std::string& s) {
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kHex("0x[0-9a-fA-F]+");
  if (std::regex_match(s, kHex)) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
    if (ec == std::errc() && p == s.data() + s.size()) return v;
    return std::nullopt;
  }
  if (!std::regex_match(s, kInt)) return std::nullopt;
  const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

bool LooksLikeInt(const std::string& s) {
  static const std::regex kInt("[-+]?[0-9]+");
  return std::regex_match(s, kInt);
}

std::optional<double> ParseDoubleScalar(const std::string& s) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf")
    return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (!std::regex_match(s, kFloat)) return std::nullopt;
  const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
  double v = 0;
  auto [p, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    if (ec == std::errc::result_out_of_range) return std::nullopt;
    return std::nullopt;
  }
  return v;
}

// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent
// transpositions ("max_trails" -> "max_trials" is one edit) each cost one.
size_t EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string FormatNumber(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

}  // namespace

void ErrorSink::Add(const std::string& path, const YAML::Node& at, std::string message) {
  if (at.IsDefined()) {
    Add(path, at.Mark(), std::move(message));
  } else {
    AddNoLocation(path, std::move(message));
  }
}

void ErrorSink::Add(const std::string& path, const YAML::Mark& mark, std::string message) {
  ConfigError e{path, std::move(message), 0, 0};
  if (!mark.is_null()) {
    e.line = mark.line + 1;
    e.column = mark.column + 1;
  }
  errors_.push_back(std::move(e));
}

void ErrorSink::AddNoLocation(const std::string& path, std::string message) {
  errors_.push_back(ConfigError{path, std::move(message), 0, 0});
}

std::string JoinPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string IndexPath(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  size_t limit = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3));
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best_distance <= limit ? best : "";
}

std::string DescribeNode(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  const std::string& s = node.Scalar();
  if (IsQuoted(node)) return "\"" + s + "\"";
  std::string shown = s.size() > 60 ? s.substr(0, 57) + "..." : s;
  if (ParseIntScalar(s) || ParseDoubleScalar(s) || ParseBoolScalar(s)) return shown;
  return "\"" + shown + "\"";
}

Value NodeToValue(const YAML::Node& node, const std::string& path, ErrorSink* sink) {
  if (!node.IsDefined() || node.IsNull()) return Value();
  if (node.IsSequence()) {
    Value::List list;
    size_t i = 0;
    for (const auto& e : node) list.push_back(NodeToValue(e, IndexPath(path, i++), sink));
    return Value(std::move(list));
  }
  if (node.IsMap()) {
    Value::Map map;
    for (const auto& kv : node) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (map.count(key) && sink) {
        sink->Add(JoinPath(path, key), kv.first, "duplicate key");
        continue;
      }
      map[key] = NodeToValue(kv.second, JoinPath(path, key), sink);
    }
    return Value(std::move(map));
  }
  const std::string& s = node.Scalar();
  if (IsQuoted(node)) return Value(s);
  if (LooksNull(s)) return Value();
  if (auto b = ParseBoolScalar(s)) return Value(*b);
  if (auto i = ParseIntScalar(s)) return Value(*i);
  if (auto d = ParseDoubleScalar(s)) return Value(*d);
  return Value(s);
}

MapReader::MapReader(ErrorSink& sink, const YAML::Node& node, std::string path)
    : sink_(sink), node_(node), path_(std::move(path)) {
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      sink_.Add(path_.empty() ? "<document>" : path_, kv.first, "keys must be plain names");
      continue;
    }
    const std::string& key = kv.first.Scalar();
    bool duplicate = false;
    for (const auto& [k, v] : members_) {
      if (k == key) {
        duplicate = true;
        int first_line = v.Mark().is_null() ? 0 : v.Mark().line + 1;
        sink_.Add(Child(key), kv.first,
                  "duplicate key (first given at line " + std::to_string(first_line) + ")");
        break;
      }
    }
    if (!duplicate) members_.emplace_back(key, kv.second);
  }
}

std::optional<YAML::Node> MapReader::Take(const std::string& key) {
  for (const auto& [k, v] : members_) {
    if (k == key) {
      taken_.insert(key);
      if (!v.IsDefined() || v.IsNull()) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

bool MapReader::Has(const std::string& key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return v.IsDefined() && !v.IsNull();
  }
  return false;
}

void MapReader::Missing(const std::string& key) {
  sink_.Add(Child(key), node_, "required field is missing");
}

void MapReader::Finish(const std::vector<std::string>& known,
                       const std::vector<std::pair<std::string, std::string>>& not_applicable) {
  for (const auto& [key, value] : members_) {
    if (taken_.count(key)) continue;
    bool reported = false;
    for (const auto& [k, reason] : not_applicable) {
      if (k == key) {
        sink_.Add(Child(key), value, reason);
        reported = true;
        break;
      }
    }
    if (reported) continue;
    std::string message = "unknown field";
    std::string suggestion = ClosestMatch(key, known);
    if (!suggestion.empty()) message += " (did you mean \"" + suggestion + "\"?)";
    // The key's own position is more useful than the value's; yaml-cpp only exposes the
    // value's mark through the pair, which sits on the same line for block mappings.
    sink_.Add(Child(key), value, message);
  }
}

bool RequireMap(ErrorSink& sink, const YAML::Node& node, const std::string& path) {
  if (node.IsMap()) return true;
  sink.Add(path.empty() ? "<document>" : path, node,
           "expected a mapping, got " + DescribeNode(node));
  return false;
}

bool ReadBool(ErrorSink& sink, const YAML::Node& node, const std::string& path, bool& out) {
  if (node.IsScalar() && !IsQuoted(node)) {
    if (auto b = ParseBoolScalar(node.Scalar())) {
      out = *b;
      return true;
    }
  }
  sink.Add(path, node, DescribeNode(node) + " is not a boolean (true or false)");
  return false;
}

bool ReadString(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                std::string& out, bool allow_empty) {
  if (!node.IsScalar()) {
    sink.Add(path, node, "expected a string, got " + DescribeNode(node));
    return false;
  }
  if (!allow_empty && node.Scalar().empty()) {
    sink.Add(path, node, "must not be empty");
    return false;
  }
  if (node.Scalar().find('\0') != std::string::npos) {
    // A "\0" escape: the database and C strings would cut the value there.
    sink.Add(path, node, "must not contain a NUL character (\\0)");
    return false;
  }
  out = node.Scalar();
  return true;
}

bool ReadInt(ErrorSink& sink, const YAML::Node& node, const std::string& path, int64_t& out,
             std::optional<int64_t> min, std::optional<int64_t> max) {
  std::optional<int64_t> v;
  if (node.IsScalar() && !IsQuoted(node)) {
    v = ParseIntScalar(node.Scalar());
    if (!v && LooksLikeInt(node.Scalar())) {
      sink.Add(path, node, node.Scalar() + " is out of the 64-bit integer range");
      return false;
    }
  }
  if (!v) {
    sink.Add(path, node, DescribeNode(node) + " is not an integer");
    return false;
  }
  if (min && *v < *min) {
    sink.Add(path, node, node.Scalar() + " must be >= " + std::to_string(*min));
    return false;
  }
  if (max && *v > *max) {
    sink.Add(path, node, node.Scalar() + " must be <= " + std::to_string(*max));
    return false;
  }
  out = *v;
  return true;
}

bool ReadDouble(ErrorSink& sink, const YAML::Node& node, const std::string& path, double& out,
                std::optional<double> min, std::optional<double> max, bool min_exclusive,
                bool max_exclusive) {
  std::optional<double> v;
  if (node.IsScalar() && !IsQuoted(node)) v = ParseDoubleScalar(node.Scalar());
  if (!v) {
    sink.Add(path, node, DescribeNode(node) + " is not a number");
    return false;
  }
  if (!std::isfinite(*v)) {
    sink.Add(path, node, node.Scalar() + " must be a finite number");
    return false;
  }
  if (min && (min_exclusive ? *v <= *min : *v < *min)) {
    sink.Add(path, node,
             node.Scalar() + " must be " + (min_exclusive ? "> " : ">= ") + FormatNumber(*min));
    return false;
  }
  if (max && (max_exclusive ? *v >= *max : *v > *max)) {
    sink.Add(path, node,
             node.Scalar() + " must be " + (max_exclusive ? "< " : "<= ") + FormatNumber(*max));
    return false;
  }
  out = *v;
  return true;
}

bool ReadEnum(ErrorSink& sink, const YAML::Node& node, const std::string& path,
              const std::vector<std::string>& options, std::string& out) {
  std::string joined;
  for (const auto& o : options) joined += (joined.empty() ? "" : ", ") + o;
  if (node.IsScalar()) {
    for (const auto& o : options) {
      if (node.Scalar() == o) {
        out = o;
        return true;
      }
    }
  }
  std::string message = DescribeNode(node) + " must be one of " + joined;
  if (node.IsScalar()) {
    std::string suggestion = ClosestMatch(node.Scalar(), options);
    if (!suggestion.empty()) message += " (did you mean \"" + suggestion + "\"?)";
  }
  sink.Add(path, node, message);
  return false;
}

}  // namespace sf::config
