// Compiled with AVX-512, AVX512_BF16 and AMX (sf_enable_avx512, -mamx-tile -mamx-bf16); the
// contract is gemm_tn.h.
//
// Layout. A tile register holds 16 rows of 64 bytes. Per block of kBlockK tokens (chunks of 32
// tokens = 16 pairs):
//   A's tiles: 16 rows of C (columns i of A) by the 16 pairs of one chunk, word (r, p) =
//     (a[2p][i0 + r], a[2p + 1][i0 + r]); tile (rt, c) at a_tiles + (rt * chunks + c) * 256 words.
//     Packed kBlockM rows at a time: the row-pair interleave (as the vdpbf16ps build packs B),
//     then each 16 x 16 block of words transposed in registers.
//   B's tiles: the 16 pairs of one chunk by 16 columns of C, word (p, j) = (b[2p][j0 + j],
//     b[2p + 1][j0 + j]); tile (ct, c) at b_tiles + (ct * chunks + c) * 256 words: the
//     row-pair interleave, no transpose.
// Every tile is 1 KB contiguous (stride 64 bytes). Padding (rows past m, columns past n, tokens
// past k) is zeros, so whole 2 x 2 blocks of tiles are always multiplied; C blocks that reach past
// m or n go through a 32 x 32 scratch block.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "trainer/kernels/cpu/amx_tiles.h"
#include "trainer/kernels/cpu/gemm_tn.h"
#include "trainer/kernels/cpu/gemm_tn_pack.h"
#include "trainer/kernels/cpu/simd.h"

namespace sf::cpu_internal::amx {
namespace {

constexpr int64_t kChunk = 32;       // tokens per tile product (16 pairs)
constexpr int64_t kTileWords = 256;  // 16 x 16 words, 1 KB
// Cache blocks: kBlockK tokens per pass over C (1,024 ran 0-10% faster than 512 on the AMX host of
// 2026-12-02, 2,048 and 4,096 no faster); A packed kBlockM rows at a time (kBlockM x kBlockK
// bf16 = 256 KB, L2), B all of the thread's columns per block of tokens (at most 2 MB for the
// model's widths on two threads).
constexpr int64_t kBlockK = 1024;
constexpr int64_t kBlockM = 128;
static_assert(kBlockK % kChunk == 0 && kBlockM % 32 == 0);

int64_t Up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// The token pair p of chunk c of the block (tokens k0.., kc of them): its two rows of a matrix
// stored [k][ld] from column `col`, null past kc.
inline void PairRows(const uint16_t* x, int64_t ld, int64_t k0, int64_t kc, int64_t c, int64_t p,
                     int64_t col, const uint16_t** r0, const uint16_t** r1) {
  const int64_t t = c * kChunk + 2 * p;
  *r0 = t < kc ? x + (k0 + t) * ld + col : nullptr;
  *r1 = t + 1 < kc ? x + (k0 + t + 1) * ld + col : nullptr;
}

// A's columns i0..i0+mc (mc <= kBlockM) over the block's tokens as tiles of 16 rows; rows past
// mc up to a whole 32 are zero.
void PackA(const uint16_t* a, int64_t lda, int64_t k0, int64_t kc, int64_t i0, int64_t mc,
           uint32_t* out) {
  const int64_t chunks = Up(kc, kChunk) / kChunk, rows = Up(mc, 32);
  alignas(64) uint32_t words[16][kBlockM];  // the chunk's 16 pairs by the block's columns
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t p = 0; p < 16; ++p) {
      const uint16_t *r0, *r1;
      PairRows(a, lda, k0, kc, c, p, i0, &r0, &r1);
      InterleaveRows(r0, r1, mc, words[p]);
      std::fill(words[p] + mc, words[p] + rows, 0u);
    }
    for (int64_t rt = 0; rt < rows / 16; ++rt)
      simd::TransposeBlock(reinterpret_cast<const float*>(&words[0][rt * 16]), kBlockM,
                           reinterpret_cast<float*>(out + (rt * chunks + c) * kTileWords), 16);
  }
}

// B's columns j0..j0+nc over the block's tokens as tiles of 16 columns; columns past nc up to a
// whole 32 are zero.
void PackB(const uint16_t* b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
           uint32_t* out) {
  const int64_t chunks = Up(kc, kChunk) / kChunk, cts = Up(nc, 32) / 16;
  for (int64_t ct = 0; ct < cts; ++ct) {
    const int64_t w = std::clamp<int64_t>(nc - ct * 16, 0, 16);
    for (int64_t c = 0; c < chunks; ++c) {
      uint32_t* tile = out + (ct * chunks + c) * kTileWords;
      for (int64_t p = 0; p < 16; ++p) {
        const uint16_t *r0 = nullptr, *r1 = nullptr;
        if (w > 0) PairRows(b, ldb, k0, kc, c, p, j0 + ct * 16, &r0, &r1);
        InterleaveRows(r0, r1, w, tile + p * 16);
        std::fill(tile + p * 16 + w, tile + p * 16 + 16, 0u);
      }
    }
  }
}

// C[32][32] (ldc floats) (+)= the products of two A row tiles and two B column tiles over
// `chunks` chunks; `load` adds to C's values, else overwrites.
inline void Block(const uint32_t* a0, const uint32_t* a1, const uint32_t* b0, const uint32_t* b1,
                  int64_t chunks, float* c, int64_t ldc, bool load) {
  const int64_t sc = ldc * 4;
  if (load) {
    _tile_loadd(kC00, c, sc);
    _tile_loadd(kC01, c + 16, sc);
    _tile_loadd(kC10, c + 16 * ldc, sc);
    _tile_loadd(kC11, c + 16 * ldc + 16, sc);
  } else {
    _tile_zero(kC00);
    _tile_zero(kC01);
    _tile_zero(kC10);
    _tile_zero(kC11);
  }
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t at = ch * kTileWords;
    _tile_loadd(kA0, a0 + at, 64);
    _tile_loadd(kB0, b0 + at, 64);
    _tile_dpbf16ps(kC00, kA0, kB0);
    _tile_loadd(kB1, b1 + at, 64);
    _tile_dpbf16ps(kC01, kA0, kB1);
    _tile_loadd(kA1, a1 + at, 64);
    _tile_dpbf16ps(kC10, kA1, kB0);
    _tile_dpbf16ps(kC11, kA1, kB1);
  }
  _tile_stored(kC00, c, sc);
  _tile_stored(kC01, c + 16, sc);
  _tile_stored(kC10, c + 16 * ldc, sc);
  _tile_stored(kC11, c + 16 * ldc + 16, sc);
}

}  // namespace

void GemmTn(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
            int64_t ldb, float* c, int64_t ldc, float beta) {
  if (GemmTnHasNoProducts(m, n, k, c, ldc, beta)) return;
  const int threads = std::max(1, omp_get_max_threads());
  // One thread's share, in whole 32-wide blocks: rows unless B is much the wider operand. Each
  // thread packs all of the other operand, and A's packing (a transpose) costs about twice B's
  // (an interleave) per byte.
  const bool split_n = n >= 2 * m || m < 32 * threads;
  const int64_t extent = split_n ? n : m;
  const int64_t share = Up((extent + threads - 1) / threads, 32);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t lo = std::min(extent, t * share), hi = std::min(extent, lo + share);
    const int64_t m0 = split_n ? 0 : lo, m1 = split_n ? m : hi;
    const int64_t n0 = split_n ? lo : 0, n1 = split_n ? hi : n;
    if (m1 > m0 && n1 > n0) {  // else more threads than 32-wide blocks: this one idles
      const int64_t nc = n1 - n0, cts = Up(nc, 32) / 16;
      thread_local std::vector<uint32_t> a_tiles, b_tiles;
      a_tiles.resize(static_cast<size_t>(kBlockM / 16 * (kBlockK / kChunk) * kTileWords));
      b_tiles.resize(static_cast<size_t>(cts * (kBlockK / kChunk) * kTileWords));
      ConfigureTiles16x64();
      alignas(64) float edge[32 * 32];
      for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
        const int64_t kc = std::min(kBlockK, k - k0), chunks = Up(kc, kChunk) / kChunk;
        const bool load = k0 > 0 || beta != 0.0f;
        PackB(b, ldb, k0, kc, n0, nc, b_tiles.data());
        for (int64_t mb = m0; mb < m1; mb += kBlockM) {
          const int64_t mc = std::min(kBlockM, m1 - mb);
          PackA(a, lda, k0, kc, mb, mc, a_tiles.data());
          // A pair of B's column tiles stays in L1 while the block's row tiles (L2) pass.
          for (int64_t cp = 0; cp < cts / 2; ++cp) {
            const uint32_t* b0 = b_tiles.data() + (2 * cp) * chunks * kTileWords;
            const uint32_t* b1 = b0 + chunks * kTileWords;
            const int64_t j = n0 + 32 * cp, cols = std::min<int64_t>(32, n1 - j);
            for (int64_t rp = 0; rp < Up(mc, 32) / 32; ++rp) {
              const uint32_t* a0 = a_tiles.data() + (2 * rp) * chunks * kTileWords;
              const uint32_t* a1 = a0 + chunks * kTileWords;
              const int64_t i = mb + 32 * rp, rows = std::min<int64_t>(32, mb + mc - i);
              float* cb = c + i * ldc + j;
              if (rows == 32 && cols == 32) {
                Block(a0, a1, b0, b1, chunks, cb, ldc, load);
                continue;
              }
              // A block reaching past m or n: through the scratch block.
              if (load) {
                std::fill(edge, edge + 32 * 32, 0.0f);
                for (int64_t r = 0; r < rows; ++r)
                  std::memcpy(edge + r * 32, cb + r * ldc, cols * sizeof(float));
              }
              Block(a0, a1, b0, b1, chunks, edge, 32, load);
              for (int64_t r = 0; r < rows; ++r)
                std::memcpy(cb + r * ldc, edge + r * 32, cols * sizeof(float));
            }
          }
        }
      }
      _tile_release();
    }
  }
}

}  // namespace sf::cpu_internal::amx
