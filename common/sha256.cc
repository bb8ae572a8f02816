#include "common/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstdlib>

namespace sf {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  // Allocation or init failure leaves nothing sensible to hash with: a broken OpenSSL.
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(ctx_, data, size);
}

void Sha256::UpdateField(std::string_view s) {
  uint8_t len[8];
  const uint64_t n = s.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  Update(len, 8);
  Update(s);
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_, digest, &n);
  static const char kHex[] = "0123456789abcdef";
  std::string hex(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 15];
  }
  return hex;
}

std::string HmacSha256(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), mac, &n);
  return std::string(reinterpret_cast<const char*>(mac), n);
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.HexDigest();
}

Result<std::string> Sha256File(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open " + path + " to hash it");
  Sha256 h;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) h.Update(buf, n);
  bool error = std::ferror(f);
  std::fclose(f);
  if (error) return DataLoss("read error while hashing " + path);
  return h.HexDigest();
}

}  // namespace sf
