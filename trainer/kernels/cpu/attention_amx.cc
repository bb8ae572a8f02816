// The fused attention's tile products on AMX (bf16 operands): the algorithm of attention_tiles.h
// with WordProducts (attention_word_products.h: the operand layouts) over AMX tile registers.
// Called only for bf16 inputs on a CPU with AMX-BF16 whose tile permission was granted
// (cpu::EnableAmx()).
// (amx_tiles.h: the tile configuration and register names.)
#include <immintrin.h>

#include "trainer/kernels/cpu/amx_tiles.h"
#include "trainer/kernels/cpu/hot_kernels.h"

// The AMX build runs on AVX-512 CPUs only: it shares their dropout masks.
namespace sf::amx {
using avx512::DropoutFactors;
}

#define SF_KERNEL_NS amx
#include "trainer/kernels/cpu/attention_tiles.h"
#include "trainer/kernels/cpu/attention_word_products.h"

namespace sf::amx {
namespace {

// C[rows][cols] (fp32, ldc floats) (+)= A[rows][k] (bf16, lda elements) . B[k/2][cols] (words,
// ldb words); k a multiple of 32; rows and cols rounded up to whole 16 x 16 tiles (the buffers have
// room). The first `accumulate_rows` rows of C are added to, the rest overwritten.
void AmxGemm(int64_t rows, int64_t cols, int64_t k, const uint16_t* a, int64_t lda,
             const uint32_t* b, int64_t ldb, float* c, int64_t ldc, int64_t accumulate_rows) {
  const int64_t sa = lda * 2, sb = ldb * 4, sc = ldc * 4;
  for (int64_t r0 = 0; r0 < rows; r0 += 32) {
    const bool r2 = rows - r0 > 16;
    // Rows that straddle the accumulate/overwrite boundary start from zero, then accumulate.
    for (int64_t r = std::max(r0, accumulate_rows); r < std::min(r0 + 32, Up16(accumulate_rows)); ++r)
      if (r < Up16(rows)) std::memset(c + r * ldc, 0, static_cast<size_t>(Up16(cols)) * sizeof(float));
    const bool load0 = r0 < accumulate_rows, load1 = r0 + 16 < accumulate_rows;
    for (int64_t c0 = 0; c0 < cols; c0 += 32) {
      const bool c2 = cols - c0 > 16;
      float* cp = c + r0 * ldc + c0;
      if (load0) _tile_loadd(kC00, cp, sc); else _tile_zero(kC00);
      if (c2) {
        if (load0) _tile_loadd(kC01, cp + 16, sc); else _tile_zero(kC01);
      }
      if (r2) {
        if (load1) _tile_loadd(kC10, cp + 16 * ldc, sc); else _tile_zero(kC10);
        if (c2) {
          if (load1) _tile_loadd(kC11, cp + 16 * ldc + 16, sc); else _tile_zero(kC11);
        }
      }
      for (int64_t kc = 0; kc < k; kc += 32) {
        const uint16_t* ap = a + r0 * lda + kc;
        const uint32_t* bp = b + (kc / 2) * ldb + c0;
        _tile_loadd(kA0, ap, sa);
        _tile_loadd(kB0, bp, sb);
        _tile_dpbf16ps(kC00, kA0, kB0);
        if (c2) {
          _tile_loadd(kB1, bp + 16, sb);
          _tile_dpbf16ps(kC01, kA0, kB1);
        }
        if (r2) {
          _tile_loadd(kA1, ap + 16 * lda, sa);
          _tile_dpbf16ps(kC10, kA1, kB0);
          if (c2) _tile_dpbf16ps(kC11, kA1, kB1);
        }
      }
      _tile_stored(kC00, cp, sc);
      if (c2) _tile_stored(kC01, cp + 16, sc);
      if (r2) {
        _tile_stored(kC10, cp + 16 * ldc, sc);
        if (c2) _tile_stored(kC11, cp + 16 * ldc + 16, sc);
      }
    }
  }
}

struct AmxTiles {
  static void Begin() { cpu_internal::ConfigureTiles16x64(); }
  static void Gemm(int64_t rows, int64_t cols, int64_t k, const uint16_t* a, int64_t lda, const uint32_t* b,
                   int64_t ldb, float* c, int64_t ldc, int64_t accumulate_rows) {
    AmxGemm(rows, cols, k, a, lda, b, ldb, c, ldc, accumulate_rows);
  }
  static void End() { _tile_release(); }
};

}  // namespace

SF_ATTENTION_ENTRY_POINTS(WordProducts<AmxTiles>)

}  // namespace sf::amx
