// Explicit float vectors for the CPU kernels: one source, two widths. A translation unit
// compiled with AVX-512 (F/BW/DQ/VL) gets 16 lanes on __m512; any other (the x86-64-v3 baseline:
// AVX2 + FMA) gets 8 lanes on __m256. Kernels written with these types vectorise by
// construction: GCC 12 left several `#pragma omp simd` loops scalar (the loss rows ran one
// element at a time), which is what this header exists to prevent.
//
// Partial vectors (the tail of a row) go through LoadN / StoreN with a lane count n < kWidth;
// lanes >= n read as `fill` and are never written. bf16 loads widen exactly; bf16 stores round
// to nearest even with NaN kept quiet, exactly as FloatToBf16 (trainer/core/dtype.h).
// Exp is vmath::FastExp's polynomial lane by lane (same clamp, same result to the last bit for
// the same inputs when both are compiled with FMA contraction).
//
// The two widths live in different inline namespaces (simd::w16, simd::w8): the same header is
// compiled into translation units of both widths, and an inline function of one name with two
// bodies would be merged by the linker (an ODR violation that silently ran 8-lane code on
// 16-lane data).
#pragma once

#include <immintrin.h>

#include <cstdint>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define SF_SIMD_WIDTH_NS w16
#else
#define SF_SIMD_WIDTH_NS w8
#endif

namespace sf::simd {
inline namespace SF_SIMD_WIDTH_NS {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)

inline constexpr int kWidth = 16;
struct F {
  __m512 v;
};
using Mask = __mmask16;

inline F Set1(float x) { return {_mm512_set1_ps(x)}; }
inline F Zero() { return {_mm512_setzero_ps()}; }
inline F Load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void Store(float* p, F x) { _mm512_storeu_ps(p, x.v); }
inline Mask FirstN(int n) { return static_cast<Mask>((1u << n) - 1u); }
inline F LoadN(const float* p, int n, float fill = 0.0f) {
  return {_mm512_mask_loadu_ps(_mm512_set1_ps(fill), FirstN(n), p)};
}
inline void StoreN(float* p, F x, int n) { _mm512_mask_storeu_ps(p, FirstN(n), x.v); }

inline F operator+(F a, F b) { return {_mm512_add_ps(a.v, b.v)}; }
inline F operator-(F a, F b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline F operator*(F a, F b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline F operator/(F a, F b) { return {_mm512_div_ps(a.v, b.v)}; }
inline F Fma(F a, F b, F c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }  // a*b + c
inline F Max(F a, F b) { return {_mm512_max_ps(a.v, b.v)}; }
inline F Min(F a, F b) { return {_mm512_min_ps(a.v, b.v)}; }
// (Not _mm512_reduce_*_ps: GCC 12 warns inside them about an "uninitialized" undefined vector.)
inline __m128 Fold512(__m512 a, __m512 (*op)(__m512, __m512)) {
  a = op(a, _mm512_shuffle_f32x4(a, a, 0xEE));  // lanes 0..7 += lanes 8..15
  a = op(a, _mm512_shuffle_f32x4(a, a, 0x55));  // lanes 0..3 += lanes 4..7
  return _mm512_castps512_ps128(a);
}
inline float ReduceAdd(F a) {
  __m128 s = Fold512(a.v, [](__m512 x, __m512 y) { return _mm512_add_ps(x, y); });
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float ReduceMax(F a) {
  __m128 s = Fold512(a.v, [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); });
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Lanes where a > b (ordered: false for NaN).
inline Mask Greater(F a, F b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ); }
inline F Select(Mask m, F if_true, F if_false) {
  return {_mm512_mask_blend_ps(m, if_false.v, if_true.v)};
}

inline F Floor(F a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)}; }
// 2^n for integral n in [-126, 127] held as floats.
inline F Exp2Int(F n) {
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n.v), _mm512_set1_epi32(127)), 23);
  return {_mm512_castsi512_ps(bits)};
}

// dst[c][r] = src[r][c] for a kWidth x kWidth block of floats (row strides in elements).
inline void TransposeBlock(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  // 32-bit interleave of row pairs, then 64-bit, then 128-bit lanes twice.
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

// bf16 <-> fp32.
inline F LoadBf16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline F LoadBf16N(const uint16_t* p, int n) {
  const __m256i h = _mm256_maskz_loadu_epi16(FirstN(n), p);
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline __m256i RoundToBf16(F x) {
  const __m512i u = _mm512_castps_si512(x.v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const Mask nan = _mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}
inline void StoreBf16(uint16_t* p, F x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), RoundToBf16(x));
}
inline void StoreBf16N(uint16_t* p, F x, int n) { _mm256_mask_storeu_epi16(p, FirstN(n), RoundToBf16(x)); }
// x rounded to bf16 and widened back (what a bf16 operand holds).
inline F RoundTripBf16(F x) {
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(RoundToBf16(x)), 16))};
}

// f16 <-> fp32 (round to nearest even).
inline F LoadF16(const uint16_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
inline F LoadF16N(const uint16_t* p, int n) { return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(FirstN(n), p))}; }
inline void StoreF16(uint16_t* p, F x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
}
inline void StoreF16N(uint16_t* p, F x, int n) {
  _mm256_mask_storeu_epi16(p, FirstN(n), _mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
}
inline F RoundTripF16(F x) { return {_mm512_cvtph_ps(_mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT))}; }

#else  // AVX2 + FMA

inline constexpr int kWidth = 8;
struct F {
  __m256 v;
};
using Mask = __m256;  // all-ones lanes are true

inline F Set1(float x) { return {_mm256_set1_ps(x)}; }
inline F Zero() { return {_mm256_setzero_ps()}; }
inline F Load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void Store(float* p, F x) { _mm256_storeu_ps(p, x.v); }
inline __m256i FirstNBits(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline Mask FirstN(int n) { return _mm256_castsi256_ps(FirstNBits(n)); }
inline F LoadN(const float* p, int n, float fill = 0.0f) {
  const __m256i m = FirstNBits(n);
  return {_mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m))};
}
inline void StoreN(float* p, F x, int n) { _mm256_maskstore_ps(p, FirstNBits(n), x.v); }

inline F operator+(F a, F b) { return {_mm256_add_ps(a.v, b.v)}; }
inline F operator-(F a, F b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline F operator*(F a, F b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline F operator/(F a, F b) { return {_mm256_div_ps(a.v, b.v)}; }
inline F Fma(F a, F b, F c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline F Max(F a, F b) { return {_mm256_max_ps(a.v, b.v)}; }
inline F Min(F a, F b) { return {_mm256_min_ps(a.v, b.v)}; }
inline float ReduceAdd(F a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float ReduceMax(F a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline Mask Greater(F a, F b) { return _mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ); }
inline F Select(Mask m, F if_true, F if_false) { return {_mm256_blendv_ps(if_false.v, if_true.v, m)}; }

inline F Floor(F a) { return {_mm256_floor_ps(a.v)}; }
inline F Exp2Int(F n) {
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n.v), _mm256_set1_epi32(127)), 23);
  return {_mm256_castsi256_ps(bits)};
}

inline void TransposeBlock(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd, t[i]);
}

inline F LoadBf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))};
}
inline F LoadBf16N(const uint16_t* p, int n) {
  alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) tmp[i] = p[i];
  return LoadBf16(tmp);
}
inline __m128i RoundToBf16(F x) {
  const __m256i u = _mm256_castps_si256(x.v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x.v, x.v, _CMP_UNORD_Q));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  // Pack the low halves of the eight 32-bit lanes (values < 65536: no saturation).
  const __m256i packed = _mm256_packus_epi32(r, r);  // per 128-bit half: 4 words, twice
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}
inline void StoreBf16(uint16_t* p, F x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), RoundToBf16(x));
}
inline void StoreBf16N(uint16_t* p, F x, int n) {
  alignas(16) uint16_t tmp[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), RoundToBf16(x));
  for (int i = 0; i < n; ++i) p[i] = tmp[i];
}
inline F RoundTripBf16(F x) {
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(RoundToBf16(x)), 16))};
}

inline F LoadF16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
inline F LoadF16N(const uint16_t* p, int n) {
  alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) tmp[i] = p[i];
  return LoadF16(tmp);
}
inline void StoreF16(uint16_t* p, F x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
}
inline void StoreF16N(uint16_t* p, F x, int n) {
  alignas(16) uint16_t tmp[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), _mm256_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
  for (int i = 0; i < n; ++i) p[i] = tmp[i];
}
inline F RoundTripF16(F x) { return {_mm256_cvtph_ps(_mm256_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT))}; }

#endif

// The first min(n, kWidth) lanes of p (the rest: fill) / stored to p: whole vectors or a tail.
inline F LoadPart(const float* p, int64_t n, float fill = 0.0f) {
  return n >= kWidth ? Load(p) : LoadN(p, static_cast<int>(n), fill);
}
inline void StorePart(float* p, F x, int64_t n) {
  if (n >= kWidth) Store(p, x);
  else StoreN(p, x, static_cast<int>(n));
}
// dst[0..bytes) = src[0..bytes) with non-temporal stores where dst is 64-byte aligned (no read
// for ownership of lines about to be overwritten whole), plain copies elsewhere. Callers issue
// _mm_sfence() before other threads read dst.
inline void StreamCopy(void* dst, const void* src, int64_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if ((reinterpret_cast<uintptr_t>(d) & 63) != 0) {
    for (int64_t i = 0; i < bytes; ++i) d[i] = s[i];
    return;
  }
  int64_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
#else
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32)));
#endif
  }
  for (; i < bytes; ++i) d[i] = s[i];
}

// x stored to p as bf16 or f16 (round to nearest even), whole vector or tail.
inline void StorePart16(uint16_t* p, F x, int64_t n, bool bf16) {
  if (n >= kWidth) {
    if (bf16) StoreBf16(p, x);
    else StoreF16(p, x);
  } else {
    if (bf16) StoreBf16N(p, x, static_cast<int>(n));
    else StoreF16N(p, x, static_cast<int>(n));
  }
}

// exp(x) lane by lane: vmath::FastExp (2^n e^r, Cody-Waite split of ln 2, degree-6 Taylor
// polynomial; inputs clamped to [-87.3, 88.7], so exp(-inf) = exp(-87.3) ~ 1.2e-38, not 0 —
// callers that need exact zeros for masked lanes select them).
inline F Exp(F x) {
  x = Min(Max(x, Set1(-87.3f)), Set1(88.7f));
  const F n = Floor(Fma(x, Set1(1.44269504088896341f), Set1(0.5f)));
  F r = Fma(n, Set1(-0.693145751953125f), x);
  r = Fma(n, Set1(-1.428606765330187e-06f), r);
  F p = Set1(1.0f / 720);
  p = Fma(p, r, Set1(1.0f / 120));
  p = Fma(p, r, Set1(1.0f / 24));
  p = Fma(p, r, Set1(1.0f / 6));
  p = Fma(p, r, Set1(0.5f));
  p = Fma(p, r, Set1(1.0f));
  p = Fma(p, r, Set1(1.0f));
  return p * Exp2Int(n);
}

// erf(x) lane by lane: vmath::FastErf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).
inline F Erf(F x) {
  const F sign = Select(Greater(Zero(), x), Set1(-1.0f), Set1(1.0f));
  const F a = x * sign;
  const F t = Set1(1.0f) / Fma(Set1(0.3275911f), a, Set1(1.0f));
  F poly = Fma(Set1(1.061405429f), t, Set1(-1.453152027f));
  poly = Fma(poly, t, Set1(1.421413741f));
  poly = Fma(poly, t, Set1(-0.284496736f));
  poly = Fma(poly, t, Set1(0.254829592f));
  return sign * (Set1(1.0f) - poly * t * Exp(Zero() - a * a));
}

}  // namespace SF_SIMD_WIDTH_NS
}  // namespace sf::simd

#undef SF_SIMD_WIDTH_NS
