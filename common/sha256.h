// SHA-256 (FIPS 180-4), for checkpoint manifests, context archives and cache keys; streaming
// and one-shot, computed by OpenSSL's EVP interface. Not thread-safe per instance; separate
// instances are independent. Non-copyable (it owns an OpenSSL digest context).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace sf {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Adds a length-prefixed field (8-byte little-endian length, then the bytes), so ("ab","c")
  // and ("a","bc") hash differently.
  void UpdateField(std::string_view s);
  // Lower-case hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  ::evp_md_ctx_st* ctx_;
};

std::string Sha256Hex(std::string_view data);
// HMAC-SHA256 of `message` keyed with `key`: the 32 raw bytes (OpenSSL's HMAC). For task and
// server tokens (master/auth/task_tokens.h) and webhook signatures.
std::string HmacSha256(std::string_view key, std::string_view message);
// Hashes a file by streaming it; errors name the file.
Result<std::string> Sha256File(const std::string& path);

}  // namespace sf
