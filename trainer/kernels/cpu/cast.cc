#include <immintrin.h>

#include <cstring>

#include "trainer/core/cpu_features.h"
#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf {

void CastF32ToBf16(const float* x, uint16_t* y, int64_t n) {
  if (cpu::HasAvx512Bf16()) return avx512::CastF32ToBf16(x, y, n);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) y[i] = FloatToBf16(x[i]);
}

void CastF32ToF16(const float* x, uint16_t* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n / 8 * 8; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (int64_t i = n / 8 * 8; i < n; ++i) y[i] = FloatToF16(x[i]);
}

void StoreFloats(const float* x, void* y, DType to, int64_t n) {
  if (to == DType::kBF16) {
    uint16_t* o = static_cast<uint16_t*>(y);
    if (cpu::HasAvx512Bf16()) return avx512::CastF32ToBf16Serial(x, o, n);
    for (int64_t i = 0; i < n; ++i) o[i] = FloatToBf16(x[i]);
  } else if (to == DType::kF16) {
    uint16_t* o = static_cast<uint16_t*>(y);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i) o[i] = FloatToF16(x[i]);
  } else if (static_cast<const void*>(x) != y) {
    std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
  }
}

void CastBf16ToF32(const uint16_t* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToFloat(x[i]);
}

void CastF16ToF32(const uint16_t* x, float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n / 8 * 8; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (int64_t i = n / 8 * 8; i < n; ++i) y[i] = F16ToFloat(x[i]);
}

}  // namespace sf
