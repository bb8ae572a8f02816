// Cutting a byte stream (a trainer's stdout or stderr) into log lines.
//
// Lines end at '\n' (a '\r' before it is dropped). A line longer than `max_line_bytes` is cut
// into pieces of at most that many bytes (never inside a UTF-8 character). Every line comes
// out as valid UTF-8 without NUL (protobuf `string` fields must be UTF-8; PostgreSQL text has no
// NUL): invalid bytes and NUL become U+FFFD.
// Flush() hands out a partial last line (a stream that ended without '\n').
//
// Not thread-safe; one splitter per stream.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sf::task {

inline constexpr size_t kMaxLogLineBytes = 16 * 1024;

class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line_bytes = kMaxLogLineBytes);

  // Appends bytes; complete lines are appended to `lines`.
  void Append(std::string_view data, std::vector<std::string>* lines);
  // Emits the pending partial line, if any.
  void Flush(std::vector<std::string>* lines);
  // Bytes held back waiting for the end of their line.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  void Emit(std::string_view line, std::vector<std::string>* lines);
  size_t max_line_bytes_;
  std::string pending_;
};

// `text` with every invalid UTF-8 sequence, and every NUL byte, replaced by U+FFFD: text
// PostgreSQL stores (it refuses NUL in text, which would fail the whole batch of log lines).
std::string SanitizeUtf8(std::string_view text);

// The largest n <= limit such that text[0, n) does not end inside a UTF-8 character
// (counting from a character start); at least 1 when limit >= 1 and text is not empty.
size_t Utf8CutPoint(std::string_view text, size_t limit);

}  // namespace sf::task
