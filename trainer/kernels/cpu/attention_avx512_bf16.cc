// The fused attention's products for bf16 operands on AVX512-BF16 (vdpbf16ps; AMD Zen 4/5, Intel
// Cooper Lake and later without AMX): the algorithm of attention_tiles.h with WordProducts
// (attention_word_products.h), the operands kept in bf16 and multiplied as bf16 pairs into fp32,
// as the AMX build does, instead of widened to fp32 tiles first (attention_avx512.cc). Called
// only for bf16 inputs on a CPU with AVX512_BF16 (cpu::HasAvx512Bf16()) and no usable AMX.
#include <immintrin.h>

#include <cstring>

#include "trainer/kernels/cpu/hot_kernels.h"

// Runs on AVX-512 CPUs only: it shares their dropout masks.
namespace sf::avx512_bf16 {
using avx512::DropoutFactors;
}

#define SF_KERNEL_NS avx512_bf16
#include "trainer/kernels/cpu/attention_tiles.h"
#include "trainer/kernels/cpu/attention_word_products.h"

namespace sf::avx512_bf16 {
namespace {

// R rows x V vectors of 16 columns of C (+)= A . B: R*V accumulators in registers, one
// broadcast A word per row and V loaded B vectors per pair of K. Rows below `load_rows` start
// from C, the others from zero.
template <int R, int V>
inline void DotBlock(int64_t pairs, const uint16_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                     float* c, int64_t ldc, int64_t load_rows) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      acc[r][v] = r < load_rows ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[V];
    for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + p * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      int32_t word;
      std::memcpy(&word, a + r * lda + 2 * p, sizeof word);
      const __m512bh aw = (__m512bh)_mm512_set1_epi32(word);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], aw, bv[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}

template <int R>
inline void DotRows(int64_t cols16, int64_t pairs, const uint16_t* a, int64_t lda,
                    const uint32_t* b, int64_t ldb, float* c, int64_t ldc, int64_t load_rows) {
  int64_t c0 = 0;
  for (; c0 + 64 <= cols16; c0 += 64)
    DotBlock<R, 4>(pairs, a, lda, b + c0, ldb, c + c0, ldc, load_rows);
  switch ((cols16 - c0) / 16) {
    case 3:
      return DotBlock<R, 3>(pairs, a, lda, b + c0, ldb, c + c0, ldc, load_rows);
    case 2:
      return DotBlock<R, 2>(pairs, a, lda, b + c0, ldb, c + c0, ldc, load_rows);
    case 1:
      return DotBlock<R, 1>(pairs, a, lda, b + c0, ldb, c + c0, ldc, load_rows);
    default:
      return;
  }
}

struct DotTiles {
  static void Begin() {}
  static void Gemm(int64_t rows, int64_t cols, int64_t k, const uint16_t* a, int64_t lda,
                   const uint32_t* b, int64_t ldb, float* c, int64_t ldc, int64_t accumulate_rows) {
    const int64_t rows16 = Up16(rows), cols16 = Up16(cols), pairs = k / 2;
    for (int64_t r0 = 0; r0 < rows16; r0 += 4) {
      DotRows<4>(cols16, pairs, a + r0 * lda, lda, b, ldb, c + r0 * ldc, ldc,
                 std::clamp<int64_t>(accumulate_rows - r0, 0, 4));
    }
  }
  static void End() {}
};

}  // namespace

SF_ATTENTION_ENTRY_POINTS(WordProducts<DotTiles>)

}  // namespace sf::avx512_bf16
