#include "master/api/routes/rest_query.h"

#include <google/protobuf/util/time_util.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace sf::master {

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(s[i + 1]) && std::isxdigit(s[i + 2])) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Query Query::Parse(const std::string& q) {
  Query out;
  std::stringstream ss(q);
  for (std::string part; std::getline(ss, part, '&');) {
    if (part.empty()) continue;
    size_t eq = part.find('=');
    std::string key = UrlDecode(part.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : UrlDecode(part.substr(eq + 1));
    std::string snake;
    for (char c : key) {
      if (std::isupper(static_cast<unsigned char>(c))) {
        snake += '_';
        snake += static_cast<char>(std::tolower(c));
      } else {
        snake += c;
      }
    }
    out.params.emplace(snake, value);
  }
  return out;
}

std::string Query::Get(const std::string& k, const std::string& def) const {
  auto it = params.find(k);
  return it == params.end() ? def : it->second;
}

Result<int64_t> Query::Int(const std::string& k, int64_t def) const {
  auto it = params.find(k);
  if (it == params.end() || it->second.empty()) return def;
  std::optional<int64_t> v = ParseDecimal(it->second);
  if (!v) return InvalidArgument(k + ": \"" + it->second + "\" is not an integer");
  return *v;
}

std::optional<int64_t> ParseDecimal(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return v;
}

Result<bool> Query::Bool(const std::string& k) const {
  auto v = Get(k);
  if (v.empty() || v == "false" || v == "0") return false;
  if (v == "true" || v == "1") return true;
  return InvalidArgument(k + ": \"" + v + "\" is not true or false");
}

Result<std::optional<google::protobuf::Timestamp>> Query::Time(const std::string& k) const {
  using google::protobuf::util::TimeUtil;
  auto it = params.find(k);
  if (it == params.end() || it->second.empty()) return std::optional<google::protobuf::Timestamp>();
  const std::string& raw = it->second;
  google::protobuf::Timestamp ts;
  static const std::regex kSeconds("^-?[0-9]{1,12}(\\.[0-9]*)?$");
  if (std::regex_match(raw, kSeconds)) {
    const double seconds = std::stod(raw);
    if (seconds >= static_cast<double>(TimeUtil::kTimestampMinSeconds) &&
        seconds <= static_cast<double>(TimeUtil::kTimestampMaxSeconds)) {
      ts.set_seconds(static_cast<int64_t>(std::floor(seconds)));
      return std::optional<google::protobuf::Timestamp>(ts);
    }
  } else {
    std::string text = raw;
    if (text.size() > 6 && text[text.size() - 6] == ' ') text[text.size() - 6] = '+';
    if (TimeUtil::FromString(text, &ts)) return std::optional<google::protobuf::Timestamp>(ts);
  }
  return InvalidArgument(k + ": \"" + raw +
                         "\" is not an RFC 3339 time (2026-11-24T16:01:00Z) or seconds since the epoch");
}

}  // namespace sf::master
