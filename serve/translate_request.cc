#include "serve/translate_request.h"

#include <cmath>
#include <limits>

#include "common/utf8.h"
#include "common/value.h"

namespace sf::serve {
namespace {

std::string TypeOf(const Value& v) { return Value::TypeName(v.type()); }

// A client's key, quoted back safely (valid UTF-8, bounded).
std::string Quoted(const std::string& key) {
  std::string k = ReplaceInvalidUtf8(key.substr(0, 64));
  return "\"" + k + (key.size() > 64 ? "...\"" : "\"");
}

Status CheckText(const Value& v, size_t index, const RequestLimits& limits) {
  const std::string field = "text[" + std::to_string(index) + "]";
  if (!v.is_string()) return InvalidArgument(field + ": expected a string, got " + TypeOf(v));
  const std::string& s = v.as_string();
  if (!IsText(s)) return InvalidArgument(field + ": not UTF-8 text (invalid bytes or NUL)");
  size_t characters = 0;
  for (size_t i = 0; i < s.size(); i += Utf8SequenceAt(s, i)) ++characters;
  if (characters > limits.max_text_characters) {
    return InvalidArgument(field + ": " + std::to_string(characters) + " characters; at most " +
                           std::to_string(limits.max_text_characters) + " per sentence");
  }
  return Status::Ok();
}

// An integer field in [lo, hi].
Status ReadInt(const Value& v, const char* field, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_int() || v.as_int() < lo || v.as_int() > hi) {
    return InvalidArgument(std::string(field) + ": must be an integer from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", not " + v.ToJson());
  }
  *out = v.as_int();
  return Status::Ok();
}

// A finite number field, at least `lo`.
Status ReadNumber(const Value& v, const char* field, double lo, float* out) {
  if (!v.is_number() || !std::isfinite(v.as_double()) || v.as_double() < lo || v.as_double() > 1e6) {
    return InvalidArgument(std::string(field) + ": must be a number from " + Value(lo).ToJson() +
                           " to 1000000, not " + v.ToJson());
  }
  *out = static_cast<float>(v.as_double());
  return Status::Ok();
}

}  // namespace

Result<TranslateRequest> ParseTranslateRequest(std::string_view body, const BeamOptions& defaults,
                                               const RequestLimits& limits) {
  auto parsed = Value::FromJson(body);
  if (!parsed.ok()) return InvalidArgument("malformed JSON body: " + parsed.status().message());
  if (!parsed->is_map()) return InvalidArgument("the body must be a JSON object, not " + TypeOf(*parsed));
  TranslateRequest r;
  r.beam = defaults;
  bool have_text = false;
  for (const auto& [key, v] : parsed->as_map()) {
    if (key == "text") {
      if (!v.is_list()) return InvalidArgument("text: expected a list of strings, got " + TypeOf(v));
      const auto& list = v.as_list();
      if (list.empty()) return InvalidArgument("text: empty list; give at least one sentence");
      if (list.size() > limits.max_sentences) {
        return InvalidArgument("text: " + std::to_string(list.size()) + " sentences; at most " +
                               std::to_string(limits.max_sentences) + " per request");
      }
      r.texts.reserve(list.size());
      for (size_t i = 0; i < list.size(); ++i) {
        SF_RETURN_IF_ERROR(CheckText(list[i], i, limits));
        r.texts.push_back(list[i].as_string());
      }
      have_text = true;
    } else if (key == "beam") {
      int64_t beam = 0;
      SF_RETURN_IF_ERROR(ReadInt(v, "beam", 1, limits.max_beam, &beam));
      r.beam.beam = static_cast<int>(beam);
    } else if (key == "max_len_b") {
      SF_RETURN_IF_ERROR(ReadInt(v, "max_len_b", 0, std::numeric_limits<int32_t>::max(), &r.beam.max_len_b));
    } else if (key == "max_len_a") {
      SF_RETURN_IF_ERROR(ReadNumber(v, "max_len_a", 0, &r.beam.max_len_a));
    } else if (key == "lenpen") {
      SF_RETURN_IF_ERROR(ReadNumber(v, "lenpen", -1e6, &r.beam.lenpen));
    } else {
      return InvalidArgument("unknown field " + Quoted(key) +
                             "; the fields are text, beam, max_len_a, max_len_b and lenpen");
    }
  }
  if (!have_text) return InvalidArgument("text: missing; give a list of sentences to translate");
  return r;
}

Status SourceTooLong(size_t index, int64_t tokens, int64_t limit) {
  return InvalidArgument("text[" + std::to_string(index) + "]: " + std::to_string(tokens) +
                         " source tokens; this model takes at most " + std::to_string(limit));
}

std::string TranslationsJson(const std::vector<Translation>& translations) {
  Value::List list;
  list.reserve(translations.size());
  for (const Translation& t : translations) {
    list.emplace_back(Value::Map{{"text", t.text}, {"score", static_cast<double>(t.score)}, {"tokens", t.tokens}});
  }
  return Value(Value::Map{{"translations", std::move(list)}}).ToJson();
}

std::string ErrorJson(int http_status, const std::string& message) {
  return Value(Value::Map{{"code", http_status}, {"message", ReplaceInvalidUtf8(message)}}).ToJson();
}

}  // namespace sf::serve
