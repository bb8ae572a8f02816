// UTF-8 text checks shared by everything that takes text from outside (REST requests, user
// names, tokens) and hands it to PostgreSQL or quotes it back in JSON; and the conversions
// between UTF-8 and code points that the JSON, safetensors and metric code share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sf {

// The length of the well-formed UTF-8 sequence at s[i] (no overlong forms, surrogates or code
// points past U+10FFFF), or 0 when the bytes there are not one.
size_t Utf8SequenceAt(std::string_view s, size_t i);

// Whether `s` is well-formed UTF-8 without NUL: text PostgreSQL takes as a parameter whole (it
// refuses invalid UTF-8, and libpq would cut a value at its first NUL).
bool IsText(std::string_view s);

// `s` with each byte that does not start a well-formed UTF-8 sequence replaced by U+FFFD, so a
// message that quotes the client's input is still valid JSON text.
std::string ReplaceInvalidUtf8(std::string_view s);

// `cp` appended to `out` as UTF-8 (1 to 4 bytes; the caller passes a code point ≤ U+10FFFF).
void AppendUtf8(char32_t cp, std::string& out);

// The code points of `s`; each byte that does not start a well-formed sequence
// (Utf8SequenceAt) becomes U+FFFD.
std::u32string DecodeUtf8(std::string_view s);

}  // namespace sf
