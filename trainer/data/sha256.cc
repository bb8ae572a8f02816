#include "trainer/data/sha256.h"
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace sf::data {

Status HashFileInto(const std::string& path, Sha256& hasher) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    int err = errno;
    if (err == ENOENT) return NotFound("file " + path + ": does not exist");
    return InvalidArgument("file " + path + ": can't read: " + std::strerror(err));
  }
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  uint64_t n = size < 0 ? 0 : uint64_t(size);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(n >> (8 * i));
  hasher.Update(len, 8);
  std::vector<char> buf(1 << 16);
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) hasher.Update(buf.data(), got);
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return Internal("file " + path + ": read error");
  return Status::Ok();
}

}  // namespace sf::data
