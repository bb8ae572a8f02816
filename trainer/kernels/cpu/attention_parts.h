// The pieces of the fused attention kernels that are not the algorithm (attention_tiles.h):
// row conversions, the register-blocked fp32 tile product, scratch carving, a head's rows in a
// [B, T, H*D] operand, the work split over batch entries and heads, and the packing of a head's
// operands into fp32 tiles. Compiled once per instruction set like attention_tiles.h, which
// includes it: define SF_KERNEL_NS first. Everything here is internal (anonymous namespace).
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "trainer/core/dtype.h"
#include "trainer/kernels/cpu/attention_kernels.h"
#include "trainer/kernels/cpu/simd.h"

namespace sf::SF_KERNEL_NS {
namespace {

constexpr int W = simd::kWidth;
constexpr int kRows = 4;                 // rows of C per register block
constexpr int kVecs = W == 16 ? 4 : 2;   // vectors of C per register block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
static_assert(kAttentionQueryBlock % 32 == 0, "query blocks are whole tiles and K-chunks");

inline int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
inline int64_t Padded(int64_t n) { return RoundUp(n, W); }

// n values of dtype dt at src, widened exactly into dst.
inline void WidenRow(const void* src, DType dt, int64_t n, float* dst) {
  int64_t i = 0;
  if (dt == DType::kBF16 || dt == DType::kF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    const bool bf = dt == DType::kBF16;
    for (; i + W <= n; i += W) simd::Store(dst + i, bf ? simd::LoadBf16(s + i) : simd::LoadF16(s + i));
    if (i < n) {
      const int t = static_cast<int>(n - i);
      simd::StoreN(dst + i, bf ? simd::LoadBf16N(s + i, t) : simd::LoadF16N(s + i, t), t);
    }
    return;
  }
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// dst (dtype dt) = src, rounded to nearest even.
inline void NarrowRow(const float* src, DType dt, int64_t n, void* dst) {
  int64_t i = 0;
  if (dt == DType::kBF16 || dt == DType::kF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    const bool bf = dt == DType::kBF16;
    for (; i + W <= n; i += W) {
      if (bf) simd::StoreBf16(d + i, simd::Load(src + i));
      else simd::StoreF16(d + i, simd::Load(src + i));
    }
    if (i < n) {
      const int t = static_cast<int>(n - i);
      if (bf) simd::StoreBf16N(d + i, simd::LoadN(src + i, t), t);
      else simd::StoreF16N(d + i, simd::LoadN(src + i, t), t);
    }
    return;
  }
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// x as the compute dtype holds it (a no-op for fp32).
inline simd::F AsStored(simd::F x, DType dt) {
  if (dt == DType::kBF16) return simd::RoundTripBf16(x);
  if (dt == DType::kF16) return simd::RoundTripF16(x);
  return x;
}

// C block [R rows][V vectors] (+)= A[R][k] . B[k][V*W].
template <int R, int V>
inline void TileBlock(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float* c, int64_t ldc, bool accumulate) {
  simd::F acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = accumulate ? simd::Load(c + r * ldc + v * W) : simd::Zero();
  for (int64_t p = 0; p < k; ++p) {
    simd::F bv[V];
    for (int v = 0; v < V; ++v) bv[v] = simd::Load(b + p * ldb + v * W);
    for (int r = 0; r < R; ++r) {
      const simd::F av = simd::Set1(a[r * lda + p]);
      for (int v = 0; v < V; ++v) acc[r][v] = simd::Fma(av, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) simd::Store(c + r * ldc + v * W, acc[r][v]);
}

template <int R>
inline void TileRowBlock(int vecs, int64_t k, const float* a, int64_t lda, const float* b,
                         int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (vecs == 1) return TileBlock<R, 1>(k, a, lda, b, ldb, c, ldc, accumulate);
  if (vecs == 2) return TileBlock<R, 2>(k, a, lda, b, ldb, c, ldc, accumulate);
  if constexpr (kVecs >= 4) {
    if (vecs == 3) return TileBlock<R, 3>(k, a, lda, b, ldb, c, ldc, accumulate);
    if (vecs == 4) return TileBlock<R, 4>(k, a, lda, b, ldb, c, ldc, accumulate);
  }
}

// C[m][n] (+)= A[m][k] . B[k][n], fp32, register-blocked; n a multiple of W (B and C rows hold
// n floats at least).
void TileGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; i += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, m - i));
    for (int64_t j = 0; j < n; j += int64_t{kVecs} * W) {
      const int vecs = static_cast<int>(std::min<int64_t>(kVecs, (n - j) / W));
      const float* ai = a + i * lda;
      const float* bj = b + j;
      float* cij = c + i * ldc + j;
      switch (rows) {
        case 1: TileRowBlock<1>(vecs, k, ai, lda, bj, ldb, cij, ldc, accumulate); break;
        case 2: TileRowBlock<2>(vecs, k, ai, lda, bj, ldb, cij, ldc, accumulate); break;
        case 3: TileRowBlock<3>(vecs, k, ai, lda, bj, ldb, cij, ldc, accumulate); break;
        default: TileRowBlock<4>(vecs, k, ai, lda, bj, ldb, cij, ldc, accumulate); break;
      }
    }
  }
}

// A per-thread buffer that only grows (no allocation once it fits the shape).
float* ThreadBuffer(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Consecutive regions of one buffer, each 64-byte aligned relative to its start. Sized first
// (Sizer: Take returns null and counts), then carved (Carver).
class Carver {
 public:
  static size_t Round(size_t n) { return (n + 15) / 16 * 16; }
  explicit Carver(float* base) : at_(base) {}
  float* Take(size_t n) {
    float* p = at_ ? at_ + used_ : nullptr;
    used_ += Round(n);
    return p;
  }
  size_t used() const { return used_; }

 private:
  float* at_;
  size_t used_ = 0;
};

// One thread's workspace in its ThreadBuffer: the regions `carve_own` takes (sized by a dry run
// on a Sizer), followed by `extra` floats (a products policy's). Returns the carvers of the two
// parts: carve_own(first) then hands out the same regions for real.
template <class CarveOwn>
std::pair<Carver, Carver> ThreadWorkspace(CarveOwn& carve_own, size_t extra) {
  Carver sizer(nullptr);
  carve_own(sizer);
  float* base = ThreadBuffer(sizer.used() + extra);
  return {Carver(base), Carver(base + sizer.used())};
}

// The head's rows of a [B, T, H*D] operand.
struct HeadRows {
  const char* base;
  int64_t ld;  // elements
  size_t esize;
  int64_t first_row, head_offset;
  const void* Row(int64_t r) const {
    return base + ((first_row + r) * ld + head_offset) * static_cast<int64_t>(esize);
  }
};

// How the (batch entry, head) pairs are shared out. With enough batch entries each thread takes
// whole entries: it reads an entry's rows as one sequential stream (prefetching the next entry's
// while it computes; a single head's rows lie a whole projection row apart, a stride no hardware
// prefetcher follows) and writes its outputs from a staging block, whole rows at a time, with
// non-temporal stores. Otherwise (few entries, long sequences) each unit is one head.
struct Units {
  int64_t batch, heads;
  bool by_entry;
  static Units For(int64_t batch, int64_t heads) {
    return {batch, heads, heads > 1 && batch >= 2 * omp_get_max_threads()};
  }
  int64_t count() const { return by_entry ? batch : batch * heads; }
  int64_t entry(int64_t u) const { return by_entry ? u : u / heads; }
  int64_t first_head(int64_t u) const { return by_entry ? 0 : u % heads; }
  int64_t end_head(int64_t u) const { return by_entry ? heads : u % heads + 1; }
};

// Rows [0, rows) of an operand of `row_bytes` used bytes each, asked into the cache.
inline void PrefetchRows(const char* first_row, int64_t ld_bytes, int64_t rows, int64_t row_bytes) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < row_bytes; b += 64) _mm_prefetch(first_row + r * ld_bytes + b, _MM_HINT_T0);
}

// Rows [entry*rows, (entry+1)*rows) of a [B*T, ld] operand (`es` bytes an element), prefetched.
inline void PrefetchEntry(const void* x, int64_t ld, int64_t es, int64_t entry, int64_t rows,
                          int64_t row_bytes) {
  PrefetchRows(static_cast<const char*>(x) + entry * rows * ld * es, ld * es, rows, row_bytes);
}

// rows x row_bytes from a staging block (rows packed) to dst rows ld_bytes apart.
inline void FlushRows(const char* stage, int64_t rows, int64_t row_bytes, char* dst, int64_t ld_bytes) {
  for (int64_t r = 0; r < rows; ++r) simd::StreamCopy(dst + r * ld_bytes, stage + r * row_bytes, row_bytes);
}

// What the products need to know of the problem.
struct Shape {
  int64_t tq = 0, tk = 0, d = 0;
  int64_t dp = 0, tkp = 0;  // D and tk padded to W
  int64_t nk = 0, nkp = 0;  // keys per block, padded
  int64_t mqb = kAttentionQueryBlock;
  DType dtype = DType::kF32;
};

// rows x d values into dst with row stride ld (>= d), zero-padded to ld.
void PackRows(const HeadRows& src, DType dt, int64_t rows, int64_t d, float* dst, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = dst + r * ld;
    WidenRow(src.Row(r), dt, d, row);
    std::fill(row + d, row + ld, 0.0f);
  }
}

// dst[e][r] = src row r, element e, for e < Padded(d) (rows d.. are zeros): rows of stride ld (a
// multiple of W, >= rows), zero-padded to ld. Blocks of W x W go through registers.
void PackTransposed(const HeadRows& src, DType dt, int64_t rows, int64_t d, float* block,
                    float* dst, int64_t ld) {
  const int64_t dp = Padded(d);
  for (int64_t r0 = 0; r0 < ld; r0 += W) {
    for (int64_t r = 0; r < W; ++r) {
      float* row = block + r * dp;
      if (r0 + r < rows) {
        WidenRow(src.Row(r0 + r), dt, d, row);
        std::fill(row + d, row + dp, 0.0f);
      } else {
        std::fill(row, row + dp, 0.0f);
      }
    }
    for (int64_t e0 = 0; e0 < dp; e0 += W) simd::TransposeBlock(block + e0, dp, dst + e0 * ld + r0, ld);
  }
}

// dst[c][r] = tile[r][c] for r < rows, c < cols (both rounded up to W; tile and dst have room).
inline void TransposeTile(const float* tile, int64_t ldt, int64_t rows, int64_t cols, float* dst,
                          int64_t ldd) {
  for (int64_t r0 = 0; r0 < rows; r0 += W)
    for (int64_t c0 = 0; c0 < cols; c0 += W)
      simd::TransposeBlock(tile + r0 * ldt + c0, ldt, dst + c0 * ldd + r0, ldd);
}

}  // namespace
}  // namespace sf::SF_KERNEL_NS
