// Compiled with AVX-512 and AVX512_BF16 (sf_enable_avx512); the contract is gemm_tn.h.
#include "trainer/kernels/cpu/gemm_tn.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "trainer/kernels/cpu/gemm_tn_pack.h"

namespace sf::cpu_internal::avx512bf16 {
namespace {

// Register tile: kMr rows of C by kNr columns (two vectors): 28 accumulators, two B vectors and
// a broadcast of A in the 32 registers.
constexpr int kMr = 14;
constexpr int kNr = 32;
// Cache blocks (measured on a Zen 5, docs/performance-cpu.md): kBlockK tokens per pass over C, a
// B block of kBlockK/2 pairs x kBlockN columns (1 MB, L2), A blocks of kBlockM columns.
constexpr int64_t kBlockK = 1024;
constexpr int64_t kBlockM = 56;
constexpr int64_t kBlockN = 512;
static_assert(kBlockK % 2 == 0 && kBlockM % kMr == 0 && kBlockN % kNr == 0);

// A's columns i0..i0+mc over tokens k0..k0+kc as panels of kMr columns: panel q, pair p holds
// kMr words at out[(q * pairs + p) * kMr]; columns past mc are zero.
void PackA(const uint16_t* a, int64_t lda, int64_t k0, int64_t kc, int64_t i0, int64_t mc,
           uint32_t* out) {
  alignas(64) uint32_t row[kBlockM + kMr];
  const int64_t pairs = (kc + 1) / 2, panels = (mc + kMr - 1) / kMr;
  for (int64_t j = mc; j < panels * kMr; ++j) row[j] = 0;
  for (int64_t p = 0; p < pairs; ++p) {
    const uint16_t* r0 = a + (k0 + 2 * p) * lda + i0;
    InterleaveRows(r0, 2 * p + 1 < kc ? r0 + lda : nullptr, mc, row);
    for (int64_t q = 0; q < panels; ++q)
      std::memcpy(out + (q * pairs + p) * kMr, row + q * kMr, kMr * sizeof(uint32_t));
  }
}

// B's columns j0..j0+nc over tokens k0..k0+kc as panels of kNr columns: panel q, pair p holds kNr
// words at out[(q * pairs + p) * kNr]; columns past nc are zero.
void PackB(const uint16_t* b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
           uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2, panels = (nc + kNr - 1) / kNr;
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t w = std::min<int64_t>(kNr, nc - q * kNr);
    for (int64_t p = 0; p < pairs; ++p) {
      const uint16_t* r0 = b + (k0 + 2 * p) * ldb + j0 + q * kNr;
      uint32_t* o = out + (q * pairs + p) * kNr;
      InterleaveRows(r0, 2 * p + 1 < kc ? r0 + ldb : nullptr, w, o);
      for (int64_t j = w; j < kNr; ++j) o[j] = 0;
    }
  }
}

// C[mr, nr] (+)= the tile's products over `pairs` token pairs; `add` keeps C's old value.
inline void Tile(int64_t pairs, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
                 int mr, int nr, bool add) {
  __m512 acc[kMr][2];
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + p * kNr));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + p * kNr + 16));
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512bh av =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(ap[p * kMr + i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
  }
  if (mr == kMr && nr == kNr) {
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      float* row = c + i * ldc;
      if (add) {
        acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(row));
        acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(row + 16));
      }
      _mm512_storeu_ps(row, acc[i][0]);
      _mm512_storeu_ps(row + 16, acc[i][1]);
    }
    return;
  }
  alignas(64) float t[kMr][kNr];
  for (int i = 0; i < kMr; ++i) {
    _mm512_store_ps(t[i], acc[i][0]);
    _mm512_store_ps(t[i] + 16, acc[i][1]);
  }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = add ? c[i * ldc + j] + t[i][j] : t[i][j];
}

}  // namespace

void GemmTn(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
            int64_t ldb, float* c, int64_t ldc, float beta) {
  if (GemmTnHasNoProducts(m, n, k, c, ldc, beta)) return;
  const int threads = std::max(1, omp_get_max_threads());
  // One thread's share: columns when n >= m (each packs all of A, the smaller), else rows.
  const bool split_n = n >= m;
  const int64_t unit = split_n ? kNr : kMr, extent = split_n ? n : m;
  const int64_t share = ((extent + threads - 1) / threads + unit - 1) / unit * unit;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t lo = std::min(extent, t * share), hi = std::min(extent, lo + share);
    const int64_t m0 = split_n ? 0 : lo, m1 = split_n ? m : hi;
    const int64_t n0 = split_n ? lo : 0, n1 = split_n ? hi : n;
    const bool idle = m1 <= m0 || n1 <= n0;  // more threads than register tiles
    thread_local std::vector<uint32_t> a_block, b_block;
    b_block.resize(static_cast<size_t>(kBlockK / 2 * kBlockN));
    // A's panels for this thread's rows: all of them per block of tokens when the split is by
    // columns (A is the smaller operand, packed once per block instead of once per column block),
    // else kBlockM rows at a time.
    const int64_t a_rows = split_n ? (m1 - m0 + kMr - 1) / kMr * kMr : kBlockM;
    a_block.resize(static_cast<size_t>(kBlockK / 2 * a_rows));
    for (int64_t k0 = 0; k0 < (idle ? 0 : k); k0 += kBlockK) {
      const int64_t kc = std::min(kBlockK, k - k0), pairs = (kc + 1) / 2;
      const bool add = k0 > 0 || beta != 0.0f;
      if (split_n) {
        for (int64_t mc0 = m0; mc0 < m1; mc0 += kBlockM)
          PackA(a, lda, k0, kc, mc0, std::min(kBlockM, m1 - mc0),
                a_block.data() + (mc0 - m0) / kMr * pairs * kMr);
      }
      for (int64_t nc0 = n0; nc0 < n1; nc0 += kBlockN) {
        const int64_t nc = std::min(kBlockN, n1 - nc0);
        PackB(b, ldb, k0, kc, nc0, nc, b_block.data());
        for (int64_t mc0 = m0; mc0 < m1; mc0 += kBlockM) {
          const int64_t mc = std::min(kBlockM, m1 - mc0);
          const uint32_t* a_panels = a_block.data();
          if (split_n) {
            a_panels += (mc0 - m0) / kMr * pairs * kMr;
          } else {
            PackA(a, lda, k0, kc, mc0, mc, a_block.data());
          }
          for (int64_t jb = 0; jb < nc; jb += kNr)
            for (int64_t ib = 0; ib < mc; ib += kMr)
              Tile(pairs, a_panels + ib / kMr * pairs * kMr,
                   b_block.data() + jb / kNr * pairs * kNr, c + (mc0 + ib) * ldc + nc0 + jb, ldc,
                   static_cast<int>(std::min<int64_t>(kMr, mc - ib)),
                   static_cast<int>(std::min<int64_t>(kNr, nc - jb)), add);
        }
      }
    }
  }
}

}  // namespace sf::cpu_internal::avx512bf16
