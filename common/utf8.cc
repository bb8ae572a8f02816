#include "common/utf8.h"

#include <cstdint>

namespace sf {

size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    return 0;
  }
  uint32_t cp = n == 1 ? c : c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) {
      return 0;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

bool IsText(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    if (s[i] == '\0' || (n = Utf8SequenceAt(s, i)) == 0) {
      return false;
    }
  }
  return true;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    out += n ? s.substr(i, n) : std::string_view("\xef\xbf\xbd");
    i += n ? n : 1;
  }
  return out;
}

}  // namespace sf
