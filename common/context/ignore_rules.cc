#include "common/context/ignore_rules.h"

namespace sf::context {
namespace {

// `[...]` at p[i] against c. Sets `end` past the closing `]`; false in `valid` when there is
// none (the `[` is then an ordinary character).
bool MatchClass(std::string_view p, size_t i, char c, size_t& end, bool& valid) {
  size_t j = i + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  for (; j < p.size(); ++j) {
    if (p[j] == ']' && !first) {
      end = j + 1;
      valid = true;
      return matched != negate;
    }
    first = false;
    char lo = p[j];
    if (lo == '\\' && j + 1 < p.size()) lo = p[++j];
    char hi = lo;
    if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
      hi = p[j + 2];
      j += 2;
    }
    if (lo <= c && c <= hi) matched = true;
  }
  valid = false;
  return false;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool GlobMatch(std::string_view p, std::string_view t) {
  size_t pi = 0, ti = 0;
  while (pi < p.size()) {
    // `**` as a whole segment: any number of directories.
    if (p.compare(pi, 2, "**") == 0) {
      const bool starts_segment = pi == 0 || p[pi - 1] == '/';
      const size_t after = pi + 2;
      const bool ends_segment = after == p.size() || p[after] == '/';
      if (starts_segment && ends_segment) {
        if (after == p.size()) return true;  // `a/**`: everything under a/
        std::string_view rest = p.substr(after + 1);
        if (GlobMatch(rest, t.substr(ti))) return true;
        for (size_t k = ti; k < t.size(); ++k) {
          if (t[k] == '/' && GlobMatch(rest, t.substr(k + 1))) return true;
        }
        return false;
      }
    }
    const char c = p[pi];
    if (c == '*') {
      while (pi < p.size() && p[pi] == '*') ++pi;
      std::string_view rest = p.substr(pi);
      for (size_t k = ti;; ++k) {
        if (GlobMatch(rest, t.substr(k))) return true;
        if (k >= t.size() || t[k] == '/') return false;
      }
    }
    if (ti >= t.size()) return false;
    if (c == '?') {
      if (t[ti] == '/') return false;
      ++pi;
      ++ti;
      continue;
    }
    if (c == '[') {
      size_t end = 0;
      bool valid = false;
      bool matched = MatchClass(p, pi, t[ti], end, valid);
      if (valid) {
        if (!matched || t[ti] == '/') return false;
        pi = end;
        ++ti;
        continue;
      }
    }
    char literal = c;
    if (c == '\\' && pi + 1 < p.size()) literal = p[++pi];
    if (t[ti] != literal) return false;
    ++pi;
    ++ti;
  }
  return ti == t.size();
}

IgnoreRules IgnoreRules::Parse(std::string_view text) {
  IgnoreRules rules;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    Rule r;
    if (line[0] == '!') {
      r.negated = true;
      line.remove_prefix(1);
    } else if (line.size() > 1 && line[0] == '\\' && (line[1] == '!' || line[1] == '#')) {
      line.remove_prefix(1);
    }
    if (!line.empty() && line.back() == '/') {
      r.directory_only = true;
      line.remove_suffix(1);
    }
    if (line.find('/') != std::string_view::npos) {
      r.anchored = true;
      if (line[0] == '/') line.remove_prefix(1);
    }
    if (line.empty()) continue;
    r.pattern = std::string(line);
    rules.rules_.push_back(std::move(r));
  }
  return rules;
}

bool IgnoreRules::Excluded(std::string_view path, bool is_directory) const {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  bool excluded = false;
  for (const Rule& r : rules_) {
    if (r.directory_only && !is_directory) continue;
    if (GlobMatch(r.pattern, r.anchored ? path : name)) excluded = !r.negated;
  }
  return excluded;
}

}  // namespace sf::context
