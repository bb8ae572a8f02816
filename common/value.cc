#include "common/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/utf8.h"

namespace sf {
namespace {

void AppendJsonString(std::string_view s, std::string& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string DoubleToString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);  // shortest round-trip form
  std::string s(buf, end);
  // Keep doubles recognisable as doubles ("1.0", not "1").
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

void AppendJson(const Value& v, std::string& out) {
  switch (v.type()) {
    case Value::Type::kNull: out += "null"; break;
    case Value::Type::kBool: out += v.as_bool() ? "true" : "false"; break;
    case Value::Type::kInt: out += std::to_string(v.as_int()); break;
    case Value::Type::kDouble: {
      double d = v.as_double();
      // JSON has no NaN/Infinity: emit them as strings so the document stays valid.
      if (std::isfinite(d)) out += DoubleToString(d);
      else AppendJsonString(DoubleToString(d), out);
      break;
    }
    case Value::Type::kString: AppendJsonString(v.as_string(), out); break;
    case Value::Type::kList: {
      out.push_back('[');
      bool first = true;
      for (const Value& e : v.as_list()) {
        if (!first) out.push_back(',');
        first = false;
        AppendJson(e, out);
      }
      out.push_back(']');
      break;
    }
    case Value::Type::kMap: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.as_map()) {
        if (!first) out.push_back(',');
        first = false;
        AppendJsonString(k, out);
        out.push_back(':');
        AppendJson(e, out);
      }
      out.push_back('}');
      break;
    }
  }
}

// A small recursive-descent JSON parser with a depth limit.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Result<Value> ParseDocument() {
    Value v;
    SF_RETURN_IF_ERROR(ParseValue(v, 0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  Status Error(const std::string& what) const {
    return InvalidArgument("JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  Status ParseValue(Value& out, int depth) {
    if (depth > kMaxDepth) return Error("nesting deeper than 256 levels");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    char c = text_[pos_];
    if (c == '{') return ParseObject(out, depth);
    if (c == '[') return ParseArray(out, depth);
    if (c == '"') {
      std::string s;
      SF_RETURN_IF_ERROR(ParseString(s));
      out = Value(std::move(s));
      return Status::Ok();
    }
    if (Consume("true")) { out = Value(true); return Status::Ok(); }
    if (Consume("false")) { out = Value(false); return Status::Ok(); }
    if (Consume("null")) { out = Value(); return Status::Ok(); }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    return Error(std::string("unexpected character '") + c + "'");
  }

  Status ParseNumber(Value& out) {
    size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    bool is_double = false;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c >= '0' && c <= '9') { ++pos_; continue; }
      if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') { is_double = true; ++pos_; continue; }
      break;
    }
    std::string_view num = text_.substr(start, pos_ - start);
    if (!is_double) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (ec == std::errc() && p == num.data() + num.size()) {
        out = Value(v);
        return Status::Ok();
      }
      if (ec != std::errc::result_out_of_range) return Error("bad number");
    }
    double d = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), d);
    if (ec != std::errc() || p != num.data() + num.size()) return Error("bad number");
    out = Value(d);
    return Status::Ok();
  }

  Status ParseHex4(uint32_t& cp) {
    if (pos_ + 4 > text_.size()) return Error("short \\u escape");
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= c - '0';
      else if (c >= 'a' && c <= 'f') cp |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') cp |= c - 'A' + 10;
      else return Error("bad \\u escape");
    }
    return Status::Ok();
  }

  Status ParseString(std::string& s) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return Status::Ok();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        s.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"': s.push_back('"'); break;
        case '\\': s.push_back('\\'); break;
        case '/': s.push_back('/'); break;
        case 'b': s.push_back('\b'); break;
        case 'f': s.push_back('\f'); break;
        case 'n': s.push_back('\n'); break;
        case 'r': s.push_back('\r'); break;
        case 't': s.push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          SF_RETURN_IF_ERROR(ParseHex4(cp));
          if (cp >= 0xD800 && cp <= 0xDBFF && Consume("\\u")) {
            uint32_t lo = 0;
            SF_RETURN_IF_ERROR(ParseHex4(lo));
            if (lo < 0xDC00 || lo > 0xDFFF) return Error("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, s);
          break;
        }
        default: return Error(std::string("bad escape \\") + e);
      }
    }
  }

  Status ParseArray(Value& out, int depth) {
    ++pos_;
    Value::List list;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      out = Value(std::move(list));
      return Status::Ok();
    }
    while (true) {
      Value e;
      SF_RETURN_IF_ERROR(ParseValue(e, depth + 1));
      list.push_back(std::move(e));
      SkipSpace();
      if (pos_ >= text_.size()) return Error("unterminated array");
      if (text_[pos_] == ',') { ++pos_; continue; }
      if (text_[pos_] == ']') { ++pos_; break; }
      return Error("expected ',' or ']'");
    }
    out = Value(std::move(list));
    return Status::Ok();
  }

  Status ParseObject(Value& out, int depth) {
    ++pos_;
    Value::Map map;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      out = Value(std::move(map));
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a string key");
      std::string key;
      SF_RETURN_IF_ERROR(ParseString(key));
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      Value e;
      SF_RETURN_IF_ERROR(ParseValue(e, depth + 1));
      map[key] = std::move(e);
      SkipSpace();
      if (pos_ >= text_.size()) return Error("unterminated object");
      if (text_[pos_] == ',') { ++pos_; continue; }
      if (text_[pos_] == '}') { ++pos_; break; }
      return Error("expected ',' or '}'");
    }
    out = Value(std::move(map));
    return Status::Ok();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const Value* Value::Find(const std::string& key) const {
  if (!is_map()) return nullptr;
  auto it = as_map().find(key);
  return it == as_map().end() ? nullptr : &it->second;
}

std::string Value::ToJson() const {
  std::string out;
  AppendJson(*this, out);
  return out;
}

Result<Value> Value::FromJson(std::string_view text) { return JsonParser(text).ParseDocument(); }

std::string Value::ToDisplay() const {
  if (is_double()) return DoubleToString(as_double());
  return ToJson();
}

const char* Value::TypeName(Type type) {
  switch (type) {
    case Type::kNull: return "null";
    case Type::kBool: return "bool";
    case Type::kInt: return "integer";
    case Type::kDouble: return "number";
    case Type::kString: return "string";
    case Type::kList: return "list";
    case Type::kMap: return "map";
  }
  return "?";
}

std::string JsonQuoted(std::string_view s) {
  std::string out;
  AppendJsonString(s, out);
  return out;
}

}  // namespace sf
