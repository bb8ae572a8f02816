// The body of POST /v1/translate and of its answer (docs/serving.md):
//
//   {"text": ["...", ...], "beam": 5, "max_len_a": 0, "max_len_b": 200, "lenpen": 1.0}
//   -> {"translations": [{"text": "...", "score": -1.23, "tokens": N}, ...]}   (request order)
//
// Every field but `text` is optional; an absent one takes the checkpoint's value, as
// `sf-trainer translate` does without the flag. Parsing is pure (no model): a body that is not
// what the contract says gets kInvalidArgument with a message naming the field and, for a
// sentence, its index ("text[3]: ..."). The source-token limit needs the tokenizer and is the
// server's to check (SourceTooLong).
//
// Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainer/decoding/beam_search.h"

namespace sf::serve {

struct RequestLimits {
  size_t max_text_characters = 4096;  // per sentence, Unicode characters
  size_t max_sentences = 1024;        // per request
  int max_beam = 64;
};

struct TranslateRequest {
  std::vector<std::string> texts;
  BeamOptions beam;  // the defaults with the request's fields applied
};

// Parses and checks a request body. `defaults` are the checkpoint's beam options.
Result<TranslateRequest> ParseTranslateRequest(std::string_view body, const BeamOptions& defaults,
                                               const RequestLimits& limits);

// The error for sentence `index` with `tokens` source tokens where the model takes `limit`.
Status SourceTooLong(size_t index, int64_t tokens, int64_t limit);

struct Translation {
  std::string text;
  float score = 0;      // length-normalised log-probability of the hypothesis
  int64_t tokens = 0;   // target tokens, EOS not counted
};

// {"translations": [...]} in the given order.
std::string TranslationsJson(const std::vector<Translation>& translations);

// {"code": http_status, "message": message}.
std::string ErrorJson(int http_status, const std::string& message);

}  // namespace sf::serve
