// The hottest elementwise loops (dropout masks, the vocabulary-wide loss rows), written once and
// compiled twice: in namespace sf::portable by cpu_backend.cc (x86-64-v3) and in sf::avx512 by
// hot_kernels_avx512.cc (AVX-512, 512-bit vectors). Define SF_KERNEL_NS before including.
// See hot_kernels.h for the contracts.
#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include "trainer/core/philox.h"
#include "trainer/kernels/cpu/hot_kernels.h"
#include "trainer/kernels/cpu/simd.h"
#include "trainer/kernels/cpu/vector_math.h"

namespace sf::SF_KERNEL_NS {

using vmath::FastExp;

#if defined(__AVX512F__) && defined(__AVX512BW__)
namespace {

// The 32x32->64 products of Philox for 16 lanes at once: lo and hi halves of m * c.
inline void MulHiLo16(__m512i c, __m512i m, __m512i* lo, __m512i* hi) {
  const __m512i even = _mm512_mul_epu32(c, m);                         // lanes 0,2,..: 64-bit
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);   // lanes 1,3,..
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

// Philox-4x32-10 of blocks first, first+1, ..., first+15, written as the 128 uniforms of
// those blocks in element order (block j's four words, little-endian halves: the philox.h
// layout), i.e. u16[8*j + e] is the uniform of element 8*(first+j) + e.
inline void Philox16Blocks(const DropoutKey& key, uint64_t first, uint16_t* u16) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i base_lo = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(first)));
  __m512i c0 = _mm512_add_epi32(base_lo, iota);
  // Carry into the high word where the low word wrapped around.
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, base_lo);
  const __m512i base_hi = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(first >> 32)));
  __m512i c1 = _mm512_mask_add_epi32(base_hi, carry, base_hi, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream)));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream >> 32)));
  uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  for (int r = 0; r < 10; ++r) {
    __m512i lo0, hi0, lo1, hi1;
    MulHiLo16(c0, m0, &lo0, &hi0);
    MulHiLo16(c2, m1, &lo1, &hi1);
    const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1),
                                        _mm512_set1_epi32(static_cast<int>(k0)));
    const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3),
                                        _mm512_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Transpose words [4][16] -> blocks [16][4]. After the unpacks, u_k's 128-bit lane l holds
  // block 4l+k; the 128-bit shuffles then gather blocks 4m..4m+3 into vector m.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i a = _mm512_shuffle_i32x4(u0, u1, 0x44), b = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i c = _mm512_shuffle_i32x4(u0, u1, 0xEE), d = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(u16, _mm512_shuffle_i32x4(a, b, 0x88));
  _mm512_storeu_si512(u16 + 32, _mm512_shuffle_i32x4(a, b, 0xDD));
  _mm512_storeu_si512(u16 + 64, _mm512_shuffle_i32x4(c, d, 0x88));
  _mm512_storeu_si512(u16 + 96, _mm512_shuffle_i32x4(c, d, 0xDD));
}

// 32 factors from 32 uniforms: keep_scale where u >= threshold (threshold < 65536), else 0.
inline void Factors32(const uint16_t* u16, __m512i threshold, __m512 keep_scale, float* out) {
  const __mmask32 keep = _mm512_cmpge_epu16_mask(_mm512_loadu_si512(u16), threshold);
  _mm512_storeu_ps(out, _mm512_maskz_mov_ps(static_cast<__mmask16>(keep), keep_scale));
  _mm512_storeu_ps(out + 16, _mm512_maskz_mov_ps(static_cast<__mmask16>(keep >> 16), keep_scale));
}

}  // namespace
#endif

// Dropout factors for flat element indices [start, start+n): 0 or 1/(1-p). Batches 16 Philox
// blocks (128 elements) so the rounds vectorise across blocks.
void DropoutFactors(const DropoutKey& key, int64_t start, int64_t n, float p, float* out) {
  if (p <= 0) {
    std::fill(out, out + n, 1.0f);
    return;
  }
  if (n <= 0) return;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (DropoutThreshold(p) >= 65536u) {  // p rounds to 1: nothing is kept
    std::fill(out, out + n, 0.0f);
    return;
  }
  {
    const __m512i thr = _mm512_set1_epi16(static_cast<short>(DropoutThreshold(p)));
    const __m512 keep = _mm512_set1_ps(static_cast<float>(1.0 / (1.0 - static_cast<double>(p))));
    alignas(64) uint16_t u16[128];
    alignas(64) float tmp[128];
    int64_t e = start / 128 * 128;  // first element of the current 16-block group
    const int64_t end = start + n;
    for (; e < end; e += 128) {
      Philox16Blocks(key, static_cast<uint64_t>(e / 8), u16);
      const int64_t lo = std::max(e, start), hi = std::min(e + 128, end);
      if (lo == e && hi == e + 128) {
        for (int q = 0; q < 4; ++q) Factors32(u16 + 32 * q, thr, keep, out + (e - start) + 32 * q);
      } else {
        for (int q = 0; q < 4; ++q) Factors32(u16 + 32 * q, thr, keep, tmp + 32 * q);
        std::copy(tmp + (lo - e), tmp + (hi - e), out + (lo - start));
      }
    }
    return;
  }
#endif
  const uint32_t threshold = DropoutThreshold(p);
  const float keep_scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
  const uint32_t k0i = static_cast<uint32_t>(key.seed), k1i = static_cast<uint32_t>(key.seed >> 32);
  const uint32_t s0 = static_cast<uint32_t>(key.stream), s1 = static_cast<uint32_t>(key.stream >> 32);
  int64_t first_block = start / 8;
  const int64_t last_block = (start + n - 1) / 8;
  while (first_block <= last_block) {
    constexpr int kBlocks = 16;
    uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];
    for (int j = 0; j < kBlocks; ++j) {
      const uint64_t blk = static_cast<uint64_t>(first_block + j);
      c0[j] = static_cast<uint32_t>(blk);
      c1[j] = static_cast<uint32_t>(blk >> 32);
      c2[j] = s0;
      c3[j] = s1;
    }
    uint32_t k0 = k0i, k1 = k1i;
    for (int r = 0; r < 10; ++r) {
#pragma omp simd
      for (int j = 0; j < kBlocks; ++j) {
        const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[j];
        const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[j];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
        c1[j] = static_cast<uint32_t>(p1);
        c3[j] = static_cast<uint32_t>(p0);
        c0[j] = n0;
        c2[j] = n2;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int j = 0; j < kBlocks && first_block + j <= last_block; ++j) {
      const uint32_t w[4] = {c0[j], c1[j], c2[j], c3[j]};
      const int64_t base = (first_block + j) * 8;
      for (int e = 0; e < 8; ++e) {
        const int64_t idx = base + e - start;
        if (idx < 0 || idx >= n) continue;
        const uint32_t u = (e & 1) ? (w[e / 2] >> 16) : (w[e / 2] & 0xffffu);
        out[idx] = u >= threshold ? keep_scale : 0.0f;
      }
    }
    first_block += kBlocks;
  }
}

// Explicit vectors (simd.h): GCC 12 left the `omp simd` versions of these two loops scalar.
void CeRowForward(const float* z, int64_t vocab, float* max_out, float* sumexp_out,
                  float* zsum_out) {
  using namespace simd;
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t full = vocab / kWidth * kWidth;
  const int tail = static_cast<int>(vocab - full);
  F mx = Set1(ninf);
  for (int64_t v = 0; v < full; v += kWidth) mx = Max(mx, Load(z + v));
  if (tail) mx = Max(mx, LoadN(z + full, tail, ninf));
  const float m = ReduceMax(mx);
  const F mv = Set1(m);
  F sum = Zero(), zsum = Zero();
  for (int64_t v = 0; v < full; v += kWidth) {
    const F x = Load(z + v);
    sum = sum + Exp(x - mv);
    zsum = zsum + x;
  }
  if (tail) {
    // Lanes past the row are dropped from the sum (exp never returns an exact 0).
    const F x = LoadN(z + full, tail, 0.0f);
    const F e = Exp(x - mv);
    sum = sum + Select(FirstN(tail), e, Zero());
    zsum = zsum + x;
  }
  *max_out = m;
  *sumexp_out = ReduceAdd(sum);
  *zsum_out = ReduceAdd(zsum);
}

void CeRowBackward(const float* z, float lse, int32_t target, float eps_i, float on_target,
                   float grad_scale, int64_t vocab, float* d) {
  using namespace simd;
  const F l = Set1(lse), e = Set1(eps_i), g = Set1(grad_scale);
  const int64_t full = vocab / kWidth * kWidth;
  for (int64_t v = 0; v < full; v += kWidth) Store(d + v, g * (Exp(Load(z + v) - l) - e));
  if (vocab > full) {
    const int tail = static_cast<int>(vocab - full);
    StoreN(d + full, g * (Exp(LoadN(z + full, tail) - l) - e), tail);
  }
  d[target] -= grad_scale * on_target;
}

namespace {

// x (one vector, n valid lanes) stored at element c of a row of dtype dt.
inline void StoreAs(void* row, DType dt, int64_t c, simd::F x, int64_t n) {
  if (dt == DType::kF32) simd::StorePart(static_cast<float*>(row) + c, x, n);
  else simd::StorePart16(static_cast<uint16_t*>(row) + c, x, n, dt == DType::kBF16);
}

}  // namespace

void ResidualNormRow(const float* x, const float* bias, const float* residual,
                     const float* factor, float* h, const float* gamma, const float* beta,
                     float eps, int64_t cols, float* y, void* y_low, DType low_dtype, float* mean,
                     float* rstd) {
  using namespace simd;
  F sum = Zero();
  for (int64_t c = 0; c < cols; c += kWidth) {
    const int64_t n = cols - c;
    F v;
    if (x) {
      v = LoadPart(x + c, n);
      if (bias) v = v + LoadPart(bias + c, n);
      if (factor) v = v * LoadPart(factor + c, n);
      if (residual) v = v + LoadPart(residual + c, n);
      StorePart(h + c, v, n);
    } else {
      v = LoadPart(h + c, n);
    }
    sum = sum + v;
  }
  const float mu = ReduceAdd(sum) / static_cast<float>(cols);
  const F muv = Set1(mu);
  F var = Zero();
  for (int64_t c = 0; c < cols; c += kWidth) {
    const int64_t n = cols - c;
    // Lanes past the row read mu: they add nothing.
    const F d = LoadPart(h + c, n, mu) - muv;
    var = Fma(d, d, var);
  }
  const float rs = 1.0f / std::sqrt(ReduceAdd(var) / static_cast<float>(cols) + eps);
  const F rsv = Set1(rs);
  for (int64_t c = 0; c < cols; c += kWidth) {
    const int64_t n = cols - c;
    const F out = Fma((LoadPart(h + c, n) - muv) * rsv, LoadPart(gamma + c, n), LoadPart(beta + c, n));
    StorePart(y + c, out, n);
    if (y_low) StoreAs(y_low, low_dtype, c, out, n);
  }
  *mean = mu;
  *rstd = rs;
}

void ResidualNormRowBackward(const float* dy, const float* h, const float* gamma, float mean,
                             float rstd, const float* factor, int64_t cols, float* dh,
                             void* branch, DType branch_dtype, float* dbias, float* dgamma,
                             float* dbeta) {
  using namespace simd;
  const F muv = Set1(mean), rsv = Set1(rstd);
  F mg = Zero(), mgx = Zero();
  for (int64_t c = 0; c < cols; c += kWidth) {
    const int64_t n = cols - c;
    const F d = LoadPart(dy + c, n);
    const F xh = (LoadPart(h + c, n) - muv) * rsv;
    const F g = d * LoadPart(gamma + c, n);
    mg = mg + g;
    mgx = Fma(g, xh, mgx);
    StorePart(dgamma + c, Fma(d, xh, LoadPart(dgamma + c, n)), n);
    StorePart(dbeta + c, LoadPart(dbeta + c, n) + d, n);
  }
  const F mgv = Set1(ReduceAdd(mg) / static_cast<float>(cols));
  const F mgxv = Set1(ReduceAdd(mgx) / static_cast<float>(cols));
  for (int64_t c = 0; c < cols; c += kWidth) {
    const int64_t n = cols - c;
    const F xh = (LoadPart(h + c, n) - muv) * rsv;
    const F g = LoadPart(dy + c, n) * LoadPart(gamma + c, n);
    const F d = rsv * (g - mgv - xh * mgxv);
    StorePart(dh + c, d, n);
    const F b = factor ? d * LoadPart(factor + c, n) : d;
    if (dbias) StorePart(dbias + c, LoadPart(dbias + c, n) + b, n);
    StoreAs(branch, branch_dtype, c, b, n);
  }
}

void ActivationGradRow(const float* dout, const float* saved, Activation act, int64_t cols,
                       void* dpre, DType dpre_dtype, float* dbias) {
  using namespace simd;
  for (int64_t c = 0; c < cols; c += kWidth) {
    const int64_t n = cols - c;
    const F d = LoadPart(dout + c, n), s = LoadPart(saved + c, n);
    F g;
    if (act == Activation::kRelu) {
      g = Select(Greater(s, Zero()), d, Zero());
    } else if (act == Activation::kTanh) {
      const F t = Set1(2.0f) / (Set1(1.0f) + Exp(s * Set1(-2.0f))) - Set1(1.0f);
      g = d * (Set1(1.0f) - t * t);
    } else {  // exact GELU: Phi(x) + x phi(x)
      const F cdf = Set1(0.5f) * (Set1(1.0f) + Erf(s * Set1(0.70710678118654752f)));
      const F pdf = Set1(0.3989422804014327f) * Exp(Set1(-0.5f) * s * s);
      g = d * Fma(s, pdf, cdf);
    }
    if (dbias) StorePart(dbias + c, LoadPart(dbias + c, n) + g, n);
    StoreAs(dpre, dpre_dtype, c, g, n);
  }
}

}  // namespace sf::SF_KERNEL_NS
