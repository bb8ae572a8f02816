#include "task/line_splitter.h"

namespace sf::task {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is invalid.
size_t ValidSequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  if (c == 0) {
    return 0;  // NUL: valid UTF-8, but not text PostgreSQL stores
  }
  if (c < 0x80) {
    return 1;
  }
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) {
      lo = 0xA0;
    }
    if (c == 0xED) {
      hi = 0x9F;  // no surrogates
    }
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) {
      lo = 0x90;
    }
    if (c == 0xF4) {
      hi = 0x8F;
    }
  } else {
    return 0;
  }
  if (i + n > text.size()) {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) {
    return 0;
  }
  for (size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      return 0;
    }
  }
  return n;
}

}  // namespace

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t n = ValidSequenceLength(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

size_t Utf8CutPoint(std::string_view text, size_t limit) {
  if (limit >= text.size()) {
    return text.size();
  }
  size_t cut = limit;
  // Step back over continuation bytes (at most 3) so the cut lands on a character start.
  size_t steps = 0;
  while (cut > 0 && steps < 3 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
    ++steps;
  }
  if (cut == 0) {
    cut = limit;  // not UTF-8 anyway: cut where asked
  }
  return cut;
}

LineSplitter::LineSplitter(size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

void LineSplitter::Emit(std::string_view line, std::vector<std::string>* lines) {
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  lines->push_back(SanitizeUtf8(line));
}

void LineSplitter::Append(std::string_view data, std::vector<std::string>* lines) {
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      data = {};
    } else {
      pending_.append(data.substr(0, newline));
      data.remove_prefix(newline + 1);
      // A complete line: emit it, in pieces when it is too long.
      std::string_view rest = pending_;
      while (rest.size() > max_line_bytes_) {
        size_t cut = Utf8CutPoint(rest, max_line_bytes_);
        Emit(rest.substr(0, cut), lines);
        rest.remove_prefix(cut);
      }
      Emit(rest, lines);
      pending_.clear();
      continue;
    }
    // No newline yet: hand out full-size pieces so memory stays bounded.
    while (pending_.size() > max_line_bytes_) {
      size_t cut = Utf8CutPoint(pending_, max_line_bytes_);
      Emit(std::string_view(pending_).substr(0, cut), lines);
      pending_.erase(0, cut);
    }
  }
}

void LineSplitter::Flush(std::vector<std::string>* lines) {
  if (pending_.empty()) {
    return;
  }
  Emit(pending_, lines);
  pending_.clear();
}

}  // namespace sf::task
