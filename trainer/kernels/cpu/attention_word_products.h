// The fused attention's products on bf16 operands in word layouts (bf16 pairs along the product's
// K, "VNNI"), shared by the two bf16 builds: AMX tile registers (attention_amx.cc) and AVX512-BF16
// vdpbf16ps (attention_avx512_bf16.cc). Include after attention_tiles.h (SF_KERNEL_NS defined).
//
// WordProducts<Kernel> is a Products policy of attention_tiles.h. Its operands:
//   A operands are bf16 rows with K padded to 32: the queries Qb and dOb [rows][D32], and from the
//     algorithm's fp32 tiles P' (Pb), dS (dSb) [32][NK32] and their transposes P'^T (PTb),
//     dS^T (dSTb) [NK32][32];
//   B operands are word matrices [K/2][N]: K^T and V^T (Kt, Vt [D32/2][TK32]: word (p, j) holds
//     elements 2p, 2p+1 of row j, a 32-bit transpose of the rows) for S and dP'; V, K, Q, dO
//     with row pairs interleaved (Vw, Kw [TK32/2][D32], Qw, dOw [TQ32/2][D32]) for O, dQ, dK, dV.
// Padding is zeros, so whole 16 x 16 blocks are always multiplied; C is read from and written to
// the algorithm's fp32 buffers, which have rows and columns for whole blocks.
//
// Kernel provides:
//   static void Begin();  // once per thread before its first product (AMX: the tile configuration)
//   static void Gemm(int64_t rows, int64_t cols, int64_t k, const uint16_t* a, int64_t lda,
//                    const uint32_t* b, int64_t ldb, float* c, int64_t ldc, int64_t accumulate_rows);
//       C[rows][cols] (fp32, ldc floats) (+)= A[rows][k] (bf16, lda elements) . B[k/2][cols]
//       (words, ldb words); k a multiple of 32; rows and cols rounded up to multiples of 16 (the
//       buffers have room). The first `accumulate_rows` rows of C are added to, the rest
//       overwritten.
//   static void End();    // once per thread after its last product
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace sf::SF_KERNEL_NS {
namespace {

int64_t Up16(int64_t n) { return RoundUp(n, 16); }
int64_t Up32(int64_t n) { return RoundUp(n, 32); }

// Row r of a head's bf16 operand into dst[0..width) (width a multiple of 32): its d elements,
// then zeros; 32 elements per masked vector move.
inline void CopyRow(const HeadRows& src, int64_t rows, int64_t r, int64_t d, int64_t width,
                    uint16_t* dst) {
  const uint16_t* s = r < rows ? static_cast<const uint16_t*>(src.Row(r)) : nullptr;
  for (int64_t e = 0; e < width; e += 32) {
    const int64_t n = s ? std::clamp<int64_t>(d - e, 0, 32) : 0;
    const __mmask32 m = n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u);
    _mm512_storeu_si512(dst + e, n ? _mm512_maskz_loadu_epi16(m, s + e) : _mm512_setzero_si512());
  }
}

// A operand: rows [first, first + count) (zeros past `rows`) as [count][d32] bf16.
void PackA(const HeadRows& src, int64_t rows, int64_t first, int64_t count, int64_t d, int64_t d32,
           uint16_t* dst) {
  for (int64_t r = 0; r < count; ++r) CopyRow(src, rows, first + r, d, d32, dst + r * d32);
}

// B operand for a product over d: words [d32/2][ld] with word (p, j) = elements 2p, 2p+1 of row
// j, for j < ld (a multiple of 16; zeros past `rows`). 16 x 16 word blocks through registers.
void PackWordsTransposed(const HeadRows& src, int64_t rows, int64_t d, int64_t d32, uint16_t* block,
                         uint32_t* dst, int64_t ld) {
  for (int64_t r0 = 0; r0 < ld; r0 += 16) {
    for (int64_t r = 0; r < 16; ++r) CopyRow(src, rows, r0 + r, d, d32, block + r * d32);
    const float* words = reinterpret_cast<const float*>(block);
    for (int64_t w0 = 0; w0 < d32 / 2; w0 += 16)
      simd::TransposeBlock(words + w0, d32 / 2, reinterpret_cast<float*>(dst) + w0 * ld + r0, ld);
  }
}

// B operand for a product over the rows: words [rows32/2][d32] with word (p, e) = elements e of
// rows 2p and 2p+1 (zeros past `rows`).
void PackWordsInterleaved(const HeadRows& src, int64_t rows, int64_t rows32, int64_t d, int64_t d32,
                          uint16_t* pair, uint32_t* dst) {
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                      39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24,
                                      55, 23, 54, 22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  for (int64_t p = 0; p < rows32 / 2; ++p) {
    CopyRow(src, rows, 2 * p, d, d32, pair);
    CopyRow(src, rows, 2 * p + 1, d, d32, pair + d32);
    uint32_t* out = dst + p * d32;
    for (int64_t e = 0; e < d32; e += 32) {
      const __m512i x = _mm512_loadu_si512(pair + e), y = _mm512_loadu_si512(pair + d32 + e);
      _mm512_storeu_si512(out + e, _mm512_permutex2var_epi16(x, lo, y));
      _mm512_storeu_si512(out + e + 16, _mm512_permutex2var_epi16(x, hi, y));
    }
  }
}

// tile [32][ldt] fp32 (rows >= valid_rows ignored, columns >= valid_cols ignored) as bf16
// [32][width]: the values are already rounded to bf16, so this is exact; zeros elsewhere.
void ToBf16Rows(const float* tile, int64_t ldt, int64_t valid_rows, int64_t valid_cols,
                int64_t width, uint16_t* dst) {
  for (int64_t r = 0; r < 32; ++r) {
    uint16_t* row = dst + r * width;
    if (r >= valid_rows) {
      std::fill(row, row + width, uint16_t{0});
      continue;
    }
    const int64_t full = valid_cols / 16 * 16;
    for (int64_t c = 0; c < full; c += 16) simd::StoreBf16(row + c, simd::Load(tile + r * ldt + c));
    if (full < valid_cols)
      simd::StoreBf16N(row + full, simd::LoadN(tile + r * ldt + full, static_cast<int>(valid_cols - full)),
                       static_cast<int>(valid_cols - full));
    std::fill(row + valid_cols, row + width, uint16_t{0});
  }
}

template <class Kernel>
class WordProducts {
 public:
  static size_t Floats(const Shape& s, bool backward) {
    Carver c(nullptr);
    WordProducts p(s, backward, c);
    return c.used();
  }

  WordProducts(const Shape& s, bool backward, Carver& c)
      : s_(s), d32_(Up32(s.d)), tk32_(Up32(s.tk)), tq32_(Up32(s.tq)), nk32_(Up32(s.nk)) {
    auto take16 = [&](int64_t n) { return reinterpret_cast<uint16_t*>(c.Take(static_cast<size_t>((n + 1) / 2))); };
    auto take32 = [&](int64_t n) { return reinterpret_cast<uint32_t*>(c.Take(static_cast<size_t>(n))); };
    qb_ = take16((backward ? tq32_ : 32) * d32_);
    kt_ = take32(d32_ / 2 * tk32_);
    block_ = take16(16 * d32_);
    ab_ = take16(32 * nk32_);
    if (backward) {
      dob_ = take16(tq32_ * d32_);
      vt_ = take32(d32_ / 2 * tk32_);
      kw_ = take32(tk32_ / 2 * d32_);
      qw_ = take32(tq32_ / 2 * d32_);
      dow_ = take32(tq32_ / 2 * d32_);
      at_ = take16(nk32_ * 32);
      ft_ = c.Take(static_cast<size_t>(s.nkp * 32));
    } else {
      vw_ = take32(tk32_ / 2 * d32_);
    }
    if (qb_) Kernel::Begin();  // not a sizing pass: this thread's products start
  }

  void BeginForwardHead(const HeadRows& k, const HeadRows& v) {
    PackWordsTransposed(k, s_.tk, s_.d, d32_, block_, kt_, tk32_);
    PackWordsInterleaved(v, s_.tk, tk32_, s_.d, d32_, block_, vw_);
  }
  void BeginQueryBlock(const HeadRows& q, int64_t i0, int64_t mq) {
    PackA(q, i0 + mq, i0, 32, s_.d, d32_, qb_);
  }
  void BeginBackwardHead(const HeadRows& q, const HeadRows& k, const HeadRows& v, const HeadRows& dout) {
    PackA(q, s_.tq, 0, tq32_, s_.d, d32_, qb_);
    PackA(dout, s_.tq, 0, tq32_, s_.d, d32_, dob_);
    PackWordsTransposed(k, s_.tk, s_.d, d32_, block_, kt_, tk32_);
    PackWordsTransposed(v, s_.tk, s_.d, d32_, block_, vt_, tk32_);
    PackWordsInterleaved(k, s_.tk, tk32_, s_.d, d32_, block_, kw_);
    PackWordsInterleaved(q, s_.tq, tq32_, s_.d, d32_, block_, qw_);
    PackWordsInterleaved(dout, s_.tq, tq32_, s_.d, d32_, block_, dow_);
  }
  // Forward: the block's queries are rows 0.. of qb; backward: rows i0.. .
  void Scores(int64_t i0, int64_t mq, int64_t j0, int64_t nj, float* s) {
    Kernel::Gemm(mq, Padded(nj), d32_, qb_ + i0 * d32_, d32_, kt_ + j0, tk32_, s, s_.nkp, 0);
  }
  void ScoreGrads(int64_t i0, int64_t mq, int64_t j0, int64_t nj, float* dp) {
    Kernel::Gemm(mq, Padded(nj), d32_, dob_ + i0 * d32_, d32_, vt_ + j0, tk32_, dp, s_.nkp, 0);
  }
  void Output(const float* p, int64_t mq, int64_t j0, int64_t nj, float* o, bool accumulate) {
    ToBf16Rows(p, s_.nkp, mq, nj, nk32_, ab_);
    Kernel::Gemm(mq, s_.dp, Up32(nj), ab_, nk32_, vw_ + (j0 / 2) * d32_, d32_, o, s_.dp, accumulate ? mq : 0);
  }
  void ValueGrads(const float* pd, int64_t i0, int64_t mq, int64_t j0, int64_t nj, int64_t split, float* gv) {
    Transposed(pd, mq, nj);
    Kernel::Gemm(nj, s_.dp, 32, at_, 32, dow_ + (i0 / 2) * d32_, d32_, gv + j0 * s_.dp, s_.dp, split);
  }
  void KeyGrads(const float* ds, int64_t i0, int64_t mq, int64_t j0, int64_t nj, int64_t split, float* gk) {
    Transposed(ds, mq, nj);
    Kernel::Gemm(nj, s_.dp, 32, at_, 32, qw_ + (i0 / 2) * d32_, d32_, gk + j0 * s_.dp, s_.dp, split);
  }
  void QueryGrads(const float* ds, int64_t i0, int64_t mq, int64_t j0, int64_t nj, float* gq, bool accumulate) {
    ToBf16Rows(ds, s_.nkp, mq, nj, nk32_, ab_);
    Kernel::Gemm(mq, s_.dp, Up32(nj), ab_, nk32_, kw_ + (j0 / 2) * d32_, d32_, gq + i0 * s_.dp, s_.dp,
            accumulate ? mq : 0);
  }
  void End() { Kernel::End(); }

 private:
  // at_ [nk32][32] bf16 = the fp32 tile [mq][nj]'s transpose (queries past mq zero).
  void Transposed(const float* tile, int64_t mq, int64_t nj) {
    TransposeTile(tile, s_.nkp, 32, Padded(nj), ft_, 32);
    ToBf16Rows32(nj, mq);
  }
  void ToBf16Rows32(int64_t nj, int64_t mq) {
    for (int64_t r = 0; r < Up16(nj); ++r) {
      uint16_t* row = at_ + r * 32;
      if (r >= nj) {
        std::fill(row, row + 32, uint16_t{0});
        continue;
      }
      const float* src = ft_ + r * 32;
      for (int64_t c = 0; c < 32; c += 16) {
        const int valid = static_cast<int>(std::clamp<int64_t>(mq - c, 0, 16));
        simd::StoreBf16(row + c, valid == 16 ? simd::Load(src + c) : simd::LoadN(src + c, valid));
      }
    }
  }

  Shape s_;
  int64_t d32_, tk32_, tq32_, nk32_;
  uint16_t* qb_ = nullptr;
  uint16_t* dob_ = nullptr;
  uint16_t* block_ = nullptr;
  uint16_t* ab_ = nullptr;
  uint16_t* at_ = nullptr;
  float* ft_ = nullptr;
  uint32_t* kt_ = nullptr;
  uint32_t* vt_ = nullptr;
  uint32_t* vw_ = nullptr;
  uint32_t* kw_ = nullptr;
  uint32_t* qw_ = nullptr;
  uint32_t* dow_ = nullptr;
};

}  // namespace
}  // namespace sf::SF_KERNEL_NS
