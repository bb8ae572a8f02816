// SHA-256 (FIPS 180-4), for checkpoint manifests and cache keys. Streaming and one-shot.
// Not thread-safe per instance; separate instances are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sf {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Adds a length-prefixed field (8-byte little-endian length, then the bytes), so ("ab","c")
  // and ("a","bc") hash differently.
  void UpdateField(std::string_view s);
  // Lower-case hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

std::string Sha256Hex(std::string_view data);
// Hashes a file by streaming it; errors name the file.
Result<std::string> Sha256File(const std::string& path);

}  // namespace sf
