// What both weight-gradient kernels (gemm_tn.h) share: the empty cases and the token-pair
// interleave they pack with. Include only in translation units compiled with AVX-512
// (sf_enable_avx512).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace sf::cpu_internal {

// The calls with no products: nothing to do for an empty C, C = beta * C for k = 0. True when
// the call is done.
inline bool GemmTnHasNoProducts(int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
                                float beta) {
  if (m <= 0 || n <= 0) return true;
  if (k > 0) return false;
  if (beta == 0.0f)
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  return true;
}

// out[j] = (r0[j], r1[j]) as one 32-bit word, low half from r0, for j < w; a null row reads
// zeros (r1: the odd last token; r0: tokens past the block, padding).
inline void InterleaveRows(const uint16_t* r0, const uint16_t* r1, int64_t w, uint32_t* out) {
  int64_t j = 0;
  if (r0 == nullptr && r1 == nullptr) {
    for (; j < w; ++j) out[j] = 0;
    return;
  }
  for (; j + 16 <= w; j += 16) {
    const __m256i x0 =
        r0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + j)) : _mm256_setzero_si256();
    const __m256i x1 =
        r1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + j)) : _mm256_setzero_si256();
    // unpack works within 128-bit lanes: lo holds columns 0-3 and 8-11, hi 4-7 and 12-15.
    const __m256i lo = _mm256_unpacklo_epi16(x0, x1), hi = _mm256_unpackhi_epi16(x0, x1);
    const __m512i z =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(lo, hi, 0x20)),
                           _mm256_permute2x128_si256(lo, hi, 0x31), 1);
    _mm512_storeu_si512(out + j, z);
  }
  for (; j < w; ++j) out[j] = (r0 ? uint32_t{r0[j]} : 0u) | (r1 ? uint32_t{r1[j]} << 16 : 0u);
}

}  // namespace sf::cpu_internal
