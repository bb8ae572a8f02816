// SHA-256 (FIPS 180-4), for naming cached data by the content of its inputs.
//
// Sha256 is a streaming hasher: Update() any number of times, then HexDigest() once.
// Not thread-safe; cheap to create.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sf::data {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Adds a length-prefixed field, so ("ab","c") and ("a","bc") hash differently.
  void UpdateField(std::string_view s);
  // Finishes and returns the 64-hex-digit digest. Call once.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_;
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// Feeds the bytes of the file at `path` (length-prefixed) into `hasher`. kNotFound / an I/O
// error naming the file when it can't be read.
Status HashFileInto(const std::string& path, Sha256& hasher);

}  // namespace sf::data
