// The hottest elementwise loops (dropout masks, the vocabulary-wide loss rows), written once and
// compiled twice: in namespace sf::portable by cpu_backend.cc (x86-64-v3) and in sf::avx512 by
// hot_kernels_avx512.cc (AVX-512, 512-bit vectors). Define SF_KERNEL_NS before including.
// See hot_kernels.h for the contracts.
#include <algorithm>
#include <cmath>
#include <limits>

#include "trainer/core/philox.h"
#include "trainer/kernels/cpu/hot_kernels.h"
#include "trainer/kernels/cpu/vector_math.h"

namespace sf::SF_KERNEL_NS {

using vmath::FastExp;

// Dropout factors for flat element indices [start, start+n): 0 or 1/(1-p). Batches 16 Philox
// blocks (128 elements) so the rounds vectorise across blocks.
void DropoutFactors(const DropoutKey& key, int64_t start, int64_t n, float p, float* out) {
  if (p <= 0) {
    std::fill(out, out + n, 1.0f);
    return;
  }
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

void CeRowForward(const float* z, int64_t vocab, float* max_out, float* sumexp_out,
                  float* zsum_out) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, z[v]);
  float sum = 0, zsum = 0;
#pragma omp simd reduction(+ : sum, zsum)
  for (int64_t v = 0; v < vocab; ++v) {
    sum += FastExp(z[v] - mx);
    zsum += z[v];
  }
  *max_out = mx;
  *sumexp_out = sum;
  *zsum_out = zsum;
}

void CeRowBackward(const float* z, float lse, int32_t target, float eps_i, float on_target,
                   float grad_scale, int64_t vocab, float* d) {
#pragma omp simd
  for (int64_t v = 0; v < vocab; ++v) d[v] = grad_scale * (FastExp(z[v] - lse) - eps_i);
  d[target] -= grad_scale * on_target;
}

}  // namespace sf::SF_KERNEL_NS
