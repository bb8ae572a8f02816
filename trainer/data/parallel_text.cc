#include "trainer/data/parallel_text.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sf::data {

int64_t FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return int64_t(i);
    }
    if (i + len > n) return int64_t(i);
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return int64_t(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return int64_t(i);
    }
    i += len;
  }
  return -1;
}

Result<std::vector<std::string>> ReadTextLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return NotFound("file " + path + ": does not exist");
    return InvalidArgument("file " + path + ": can't read: " + std::strerror(err));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return InvalidArgument("file " + path + ": read error");
  std::string text = std::move(buf).str();
  if (text.empty()) return InvalidArgument("file " + path + ": is empty");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    int64_t bad = FindInvalidUtf8(line);
    if (bad >= 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", unsigned(static_cast<unsigned char>(line[bad])));
      return InvalidArgument("file " + path + ": line " + std::to_string(lines.size() + 1) +
                             ": invalid UTF-8 (byte " + byte + " at column " +
                             std::to_string(bad + 1) + ")");
    }
    lines.emplace_back(line);
    start = end + 1;
  }
  return lines;
}

Result<ParallelText> ReadParallelText(const std::string& src_path, const std::string& tgt_path) {
  ParallelText out;
  SF_ASSIGN_OR_RETURN(out.src, ReadTextLines(src_path));
  SF_ASSIGN_OR_RETURN(out.tgt, ReadTextLines(tgt_path));
  if (out.src.size() != out.tgt.size()) {
    return InvalidArgument("line counts differ: " + src_path + " has " +
                           std::to_string(out.src.size()) + " lines, " + tgt_path + " has " +
                           std::to_string(out.tgt.size()));
  }
  return out;
}

bool IsBlankLine(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

bool IsMarkerOnlyLine(std::string_view line) {
  bool any = false;
  size_t i = 0;
  while (i < line.size()) {
    char c = line[i];
    if (c == ' ' || c == '\t') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (line.substr(i, j - i) != "@@") return false;
    any = true;
    i = j;
  }
  return any;
}

}  // namespace sf::data
