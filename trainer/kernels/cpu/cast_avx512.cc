// AVX512_BF16 conversion; compiled with AVX-512 flags, called only after a run-time CPU check.
#include <immintrin.h>

#include <algorithm>

#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf::avx512 {

void CastF32ToBf16Serial(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), reinterpret_cast<const __m256i&>(v));
  }
  for (; i < n; ++i) y[i] = FloatToBf16(x[i]);
}

void CastF32ToBf16(const float* x, uint16_t* y, int64_t n) {
  constexpr int64_t kBlock = 1 << 14;  // elements per work item (a multiple of 16)
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t b = 0; b < blocks; ++b)
    CastF32ToBf16Serial(x + b * kBlock, y + b * kBlock, std::min(kBlock, n - b * kBlock));
}

}  // namespace sf::avx512
