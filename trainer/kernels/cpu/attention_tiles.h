// The fused attention algorithm (contract: attention_kernels.h), written once over a "products"
// policy that owns the operand layouts and the tile products, and compiled per instruction set:
// sf::portable and sf::avx512 instantiate it with Fp32Products (below), sf::amx with AmxProducts
// (attention_amx.cc). Define SF_KERNEL_NS before including.
//
// Per (batch entry, head), in one thread's scratch (fp32, row-major; W = simd::kWidth lanes;
// padded rows are rounded up to a multiple of W and their extra columns hold zeros):
//   s, dpm, dsr [query block][key block padded]: S then P' (rounded as the compute dtype holds
//       it), dP' then dP, and dS — the only [tq, tk]-shaped data, one block at a time;
//   o [query block][D padded], m, l [query block]: the forward's running output, max and sum;
//   gq [tq][D padded], gk, gv [tk][D padded]: the backward's fp32 gradient accumulators;
//   key_bias [tk padded]: 0, or -inf for a padding key (and past the last key);
//   factors [query block][tk]: the block's dropout factors, one Philox call.
// A Products policy packs a head's operands once and computes, on a query block i0..i0+mq and a
// key block j0..j0+nj:
//   Scores:       s = Q K^T            ScoreGrads: dpm = dO V^T
//   Output:       o (+)= P' V          ValueGrads: gv (+)= P'^T dO
//   KeyGrads:     gk (+)= dS^T Q       QueryGrads: gq (+)= dS K
// taking P' and dS as fp32 tiles (already rounded to the compute dtype) and writing fp32.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "trainer/core/dtype.h"
#include "trainer/kernels/cpu/attention_kernels.h"
#include "trainer/kernels/cpu/attention_parts.h"
#include "trainer/kernels/cpu/hot_kernels.h"
#include "trainer/kernels/cpu/simd.h"

namespace sf::SF_KERNEL_NS {
namespace {
// The fp32 products: operands widened into fp32 tiles, register-blocked FMA kernels (simd.h).
// Layouts: kt, vt [D padded][tk padded] (K^T, V^T: B of S and of dP), kr, vr [tk][D padded] and
// qa, doa [tq][D padded] (rows: B of dQ, O, dK, dV; and A of S, dP); pt, dst [key block padded]
// [query block]: P'^T and dS^T (A of dV and dK).
class Fp32Products {
 public:
  static size_t Floats(const Shape& s, bool backward) {
    Carver c(nullptr);
    Fp32Products p(s, backward, c);
    return c.used();
  }
  Fp32Products(const Shape& s, bool backward, Carver& c) : s_(s) {
    const int64_t rows_q = backward ? s.tq : s.mqb;
    qa_ = c.Take(rows_q * s.dp);
    kt_ = c.Take(s.dp * s.tkp);
    if (backward) {
      doa_ = c.Take(s.tq * s.dp);
      vt_ = c.Take(s.dp * s.tkp);
      kr_ = c.Take(s.tk * s.dp);
      pt_ = c.Take(s.nkp * s.mqb);
      dst_ = c.Take(s.nkp * s.mqb);
    } else {
      vr_ = c.Take(s.tk * s.dp);
    }
    block_ = c.Take(W * s.dp);
  }

  void BeginForwardHead(const HeadRows& k, const HeadRows& v) {
    PackTransposed(k, s_.dtype, s_.tk, s_.d, block_, kt_, s_.tkp);
    PackRows(v, s_.dtype, s_.tk, s_.d, vr_, s_.dp);
  }
  void BeginQueryBlock(const HeadRows& q, int64_t i0, int64_t mq) {
    for (int64_t r = 0; r < mq; ++r) {
      WidenRow(q.Row(i0 + r), s_.dtype, s_.d, qa_ + r * s_.dp);
      std::fill(qa_ + r * s_.dp + s_.d, qa_ + (r + 1) * s_.dp, 0.0f);
    }
  }
  void BeginBackwardHead(const HeadRows& q, const HeadRows& k, const HeadRows& v, const HeadRows& dout) {
    PackRows(q, s_.dtype, s_.tq, s_.d, qa_, s_.dp);
    PackRows(dout, s_.dtype, s_.tq, s_.d, doa_, s_.dp);
    PackTransposed(k, s_.dtype, s_.tk, s_.d, block_, kt_, s_.tkp);
    PackTransposed(v, s_.dtype, s_.tk, s_.d, block_, vt_, s_.tkp);
    PackRows(k, s_.dtype, s_.tk, s_.d, kr_, s_.dp);
  }
  // Forward: the block's queries are rows 0.. of qa; backward: rows i0.. .
  void Scores(int64_t i0, int64_t mq, int64_t j0, int64_t nj, float* s) {
    TileGemm(mq, Padded(nj), s_.d, qa_ + i0 * s_.dp, s_.dp, kt_ + j0, s_.tkp, s, s_.nkp, false);
  }
  void ScoreGrads(int64_t i0, int64_t mq, int64_t j0, int64_t nj, float* dp) {
    TileGemm(mq, Padded(nj), s_.d, doa_ + i0 * s_.dp, s_.dp, vt_ + j0, s_.tkp, dp, s_.nkp, false);
  }
  void Output(const float* p, int64_t mq, int64_t j0, int64_t nj, float* o, bool accumulate) {
    TileGemm(mq, s_.dp, nj, p, s_.nkp, vr_ + j0 * s_.dp, s_.dp, o, s_.dp, accumulate);
  }
  // Gradients of key rows j0 + [first, nj): rows below `first` of the block accumulate, the rest
  // are written (AccumulateKeyRows passes split = rows already written).
  void ValueGrads(const float* pd, int64_t i0, int64_t mq, int64_t j0, int64_t nj, int64_t split, float* gv) {
    TransposeTile(pd, s_.nkp, mq, Padded(nj), pt_, s_.mqb);
    KeyRows(pt_, doa_ + i0 * s_.dp, mq, j0, nj, split, gv);
  }
  void KeyGrads(const float* ds, int64_t i0, int64_t mq, int64_t j0, int64_t nj, int64_t split, float* gk) {
    TransposeTile(ds, s_.nkp, mq, Padded(nj), dst_, s_.mqb);
    KeyRows(dst_, qa_ + i0 * s_.dp, mq, j0, nj, split, gk);
  }
  void QueryGrads(const float* ds, int64_t i0, int64_t mq, int64_t j0, int64_t nj, float* gq, bool accumulate) {
    TileGemm(mq, s_.dp, nj, ds, s_.nkp, kr_ + j0 * s_.dp, s_.dp, gq + i0 * s_.dp, s_.dp, accumulate);
  }
  void End() {}

 private:
  void KeyRows(const float* at, const float* b, int64_t kdim, int64_t j0, int64_t nj, int64_t split,
               float* c) {
    if (split > 0) TileGemm(split, s_.dp, kdim, at, s_.mqb, b, s_.dp, c + j0 * s_.dp, s_.dp, true);
    if (split < nj)
      TileGemm(nj - split, s_.dp, kdim, at + split * s_.mqb, s_.mqb, b, s_.dp, c + (j0 + split) * s_.dp,
               s_.dp, false);
  }

  Shape s_;
  float* qa_ = nullptr;
  float* doa_ = nullptr;
  float* kt_ = nullptr;
  float* vt_ = nullptr;
  float* kr_ = nullptr;
  float* vr_ = nullptr;
  float* pt_ = nullptr;
  float* dst_ = nullptr;
  float* block_ = nullptr;
};

// key_bias[j] = 0 for a key that may be attended, -inf for padding and for j >= tk.
void KeyBias(const uint8_t* key_padding, int64_t b, int64_t tk, int64_t padded, float* out) {
  for (int64_t j = 0; j < padded; ++j)
    out[j] = j >= tk || (key_padding && key_padding[b * tk + j]) ? kNegInf : 0.0f;
}

// Scores of one query row in a key block, scaled and masked in place: s = scale*s + bias, and
// -inf from `limit` on (causal). Returns the row's max over [0, np). One pass.
inline float ScaleMaskRow(float* s, const float* bias, float scale, int64_t limit, int64_t np) {
  const simd::F sc = simd::Set1(scale), ninf = simd::Set1(kNegInf);
  simd::F mx = ninf;
  int64_t c = 0;
  for (; c + W <= limit; c += W) {  // whole vectors before the causal limit
    const simd::F x = simd::Fma(simd::Load(s + c), sc, simd::Load(bias + c));
    simd::Store(s + c, x);
    mx = simd::Max(mx, x);
  }
  if (c < np && c < limit) {  // the vector the limit falls in
    const simd::F x = simd::Fma(simd::Load(s + c), sc, simd::Load(bias + c));
    const simd::F kept = simd::Select(simd::FirstN(static_cast<int>(limit - c)), x, ninf);
    simd::Store(s + c, kept);
    mx = simd::Max(mx, kept);
    c += W;
  }
  for (; c < np; c += W) simd::Store(s + c, ninf);
  return simd::ReduceMax(mx);
}

// e = exp(s - m), exactly 0 where s = -inf.
inline simd::F ExpShifted(simd::F s, simd::F m) {
  return simd::Select(simd::Greater(s, simd::Set1(kNegInf)), simd::Exp(s - m), simd::Zero());
}

Shape MakeShape(const AttentionArgs& a) {
  Shape s;
  s.tq = a.tq, s.tk = a.tk, s.d = a.head_dim, s.dtype = a.dtype;
  s.dp = Padded(a.head_dim);
  s.tkp = Padded(a.tk);
  s.nk = std::max<int64_t>(1, std::min(a.tk, kAttentionKeyBlock));
  s.nkp = Padded(s.nk);
  return s;
}

template <class Products>
void AttentionForwardImpl(const AttentionArgs& a, const void* q, const void* k, const void* v,
                          void* out, float* lse) {
  const int64_t B = a.batch, H = a.heads, tq = a.tq, tk = a.tk, D = a.head_dim;
  if (B == 0 || H == 0 || tq == 0) return;
  const Shape sh = MakeShape(a);
  const size_t es = DTypeSize(a.dtype);
  const int64_t dp = sh.dp, tkp = sh.tkp, nk = sh.nk, nkp = sh.nkp, mqb = sh.mqb;
  const bool dropout = a.dropout > 0;
  const Units units = Units::For(B, H);
  const int64_t stage_bytes = units.by_entry ? tq * H * D * static_cast<int64_t>(es) : 0;
#pragma omp parallel if (B * H > 1)
  {
    auto carve_all = [&](Carver& c) {
      char* stage = reinterpret_cast<char*>(c.Take(static_cast<size_t>((stage_bytes + 3) / 4)));
      float* s = c.Take(mqb * nkp);
      float* o = c.Take(mqb * dp);
      float* m = c.Take(mqb);
      float* l = c.Take(mqb);
      float* factors = c.Take(mqb * tk + W);  // the query block's dropout factors [mq][tk]
      float* key_bias = c.Take(tkp);
      return std::make_tuple(stage, s, o, m, l, factors, key_bias);
    };
    auto [carve, pcarve] = ThreadWorkspace(carve_all, Products::Floats(sh, false));
    auto [stage, s, o, m, l, factors, key_bias] = carve_all(carve);
    Products products(sh, false, pcarve);
    const int64_t row_bytes = H * D * static_cast<int64_t>(es);
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units.count(); ++u) {
     const int64_t b = units.entry(u);
     if (units.by_entry && u + 1 < units.count()) {  // the next entry's rows, as streams
       const int64_t e = static_cast<int64_t>(es);
       PrefetchEntry(q, a.ldq, e, b + 1, tq, row_bytes);
       PrefetchEntry(k, a.ldk, e, b + 1, tk, row_bytes);
       PrefetchEntry(v, a.ldv, e, b + 1, tk, row_bytes);
     }
     for (int64_t h = units.first_head(u); h < units.end_head(u); ++h) {
      const int64_t bh = b * H + h;
      const HeadRows qrows{static_cast<const char*>(q), a.ldq, es, b * tq, h * D};
      const HeadRows krows{static_cast<const char*>(k), a.ldk, es, b * tk, h * D};
      const HeadRows vrows{static_cast<const char*>(v), a.ldv, es, b * tk, h * D};
      products.BeginForwardHead(krows, vrows);
      KeyBias(a.key_padding, b, tk, tkp, key_bias);
      for (int64_t i0 = 0; i0 < tq; i0 += mqb) {
        const int64_t mq = std::min(mqb, tq - i0);
        products.BeginQueryBlock(qrows, i0, mq);
        std::fill(m, m + mq, kNegInf);
        std::fill(l, l + mq, 0.0f);
        // Keys past the block's last query are masked for all of its rows.
        const int64_t jend = a.causal ? std::min(tk, i0 + mq) : tk;
        if (dropout) {  // rows i0.. of this head are consecutive Philox elements: one call
          DropoutFactors(a.key, (bh * tq + i0) * tk, mq * tk, a.dropout, factors);
          std::fill(factors + mq * tk, factors + mq * tk + W, 0.0f);
        }
        for (int64_t j0 = 0; j0 < jend; j0 += nk) {
          const int64_t nj = std::min(nk, jend - j0), njp = Padded(nj);
          products.Scores(0, mq, j0, nj, s);
          for (int64_t r = 0; r < mq; ++r) {
            const int64_t i = i0 + r;
            float* srow = s + r * nkp;
            const int64_t limit = a.causal ? std::min(nj, i - j0 + 1) : nj;
            const float mx = ScaleMaskRow(srow, key_bias + j0, a.scale, limit, njp);
            const float mnew = std::max(m[r], mx);
            if (mnew == kNegInf) {  // no key of this row so far: P stays 0
              std::fill(srow, srow + njp, 0.0f);
              continue;
            }
            if (m[r] != mnew && m[r] != kNegInf) {
              // The running max grew: rescale what the earlier blocks summed.
              const float alpha = std::exp(m[r] - mnew);
              l[r] *= alpha;
              const simd::F av = simd::Set1(alpha);
              for (int64_t d = 0; d < dp; d += W) simd::Store(o + r * dp + d, simd::Load(o + r * dp + d) * av);
            }
            m[r] = mnew;
            // Lanes past the block's keys read the next row's factors: their e is 0 anyway.
            const float* frow = factors + r * tk + j0;
            const simd::F mv = simd::Set1(mnew);
            simd::F sum = simd::Zero();
            for (int64_t c = 0; c < njp; c += W) {
              simd::F e = ExpShifted(simd::Load(srow + c), mv);
              sum = sum + e;
              if (dropout) e = e * simd::Load(frow + c);
              simd::Store(srow + c, AsStored(e, a.dtype));
            }
            l[r] += simd::ReduceAdd(sum);
          }
          // The first block writes O (nothing to rescale yet), later ones add to it.
          products.Output(s, mq, j0, nj, o, j0 > 0);
        }
        for (int64_t r = 0; r < mq; ++r) {
          const int64_t i = i0 + r;
          const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
          const simd::F iv = simd::Set1(inv);
          for (int64_t d = 0; d < dp; d += W) simd::Store(o + r * dp + d, simd::Load(o + r * dp + d) * iv);
          char* dst = units.by_entry
                          ? stage + (i * H + h) * D * static_cast<int64_t>(es)
                          : static_cast<char*>(out) + ((b * tq + i) * a.ldo + h * D) * static_cast<int64_t>(es);
          NarrowRow(o + r * dp, a.dtype, D, dst);
          lse[bh * tq + i] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
        }
      }
     }
     if (units.by_entry)
       FlushRows(stage, tq, row_bytes, static_cast<char*>(out) + b * tq * a.ldo * es, a.ldo * es);
    }
    _mm_sfence();
    products.End();
  }
}

template <class Products>
void AttentionBackwardImpl(const AttentionArgs& a, const void* q, const void* k, const void* v,
                           const void* out, const void* dout, const float* lse,
                           const AttentionGrads<float>& g) {
  const int64_t B = a.batch, H = a.heads, tq = a.tq, tk = a.tk, D = a.head_dim;
  if (B == 0 || H == 0 || tq == 0 || tk == 0) return;
  const Shape sh = MakeShape(a);
  const size_t es = DTypeSize(a.dtype);
  const int64_t dp = sh.dp, tkp = sh.tkp, nk = sh.nk, nkp = sh.nkp, mqb = sh.mqb;
  // One key block holds every key of a row: D_i straight from P and dP, as SoftmaxBackward.
  const bool exact_rows = tk <= kAttentionKeyBlock;
  const bool dropout = a.dropout > 0;
  const size_t ges = DTypeSize(g.dtype);
  // The bias gradient's column sums: one row of 3*H*D per thread, added in thread order after
  // the loop (the same static schedule gives the same sums every run).
  const int threads = B * H > 1 ? omp_get_max_threads() : 1;
  thread_local std::vector<float> partial_sums;
  if (g.dbias) partial_sums.assign(static_cast<size_t>(threads) * 3 * H * D, 0.0f);
  float* const partials = partial_sums.data();
  // Accumulator rows are padded to whole 32-row tiles (the AMX products store whole tiles).
  const int64_t tq32 = RoundUp(tq, 32), tk32 = RoundUp(tk, 32);
  const Units units = Units::For(B, H);
  const int64_t grow = H * D * static_cast<int64_t>(ges);  // a staged gradient row
  const int64_t stage_bytes = units.by_entry ? (tq + 2 * tk) * grow : 0;
#pragma omp parallel if (B * H > 1)
  {
    float* const my_sums = g.dbias ? partials + static_cast<int64_t>(omp_get_thread_num()) * 3 * H * D : nullptr;
    auto carve_all = [&](Carver& c) {
      char* stage = reinterpret_cast<char*>(c.Take(static_cast<size_t>((stage_bytes + 3) / 4)));
      float* gq = c.Take(tq32 * dp);
      float* gk = c.Take(tk32 * dp);
      float* gv = c.Take(tk32 * dp);
      float* drow = c.Take(tq);
      float* s = c.Take(mqb * nkp);
      float* dpm = c.Take(mqb * nkp);
      float* dsr = c.Take(mqb * nkp);
      float* factors = c.Take(mqb * tk + W);
      float* key_bias = c.Take(tkp);
      float* tmp = c.Take(dp);
      return std::make_tuple(stage, gq, gk, gv, drow, s, dpm, dsr, factors, key_bias, tmp);
    };
    auto [carve, pcarve] = ThreadWorkspace(carve_all, Products::Floats(sh, true));
    auto [stage, gq, gk, gv, drow, s, dpm, dsr, factors, key_bias, tmp] = carve_all(carve);
    Products products(sh, true, pcarve);
    const int64_t row_bytes = H * D * static_cast<int64_t>(es);
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units.count(); ++u) {
     const int64_t b = units.entry(u);
     if (units.by_entry && u + 1 < units.count()) {  // the next entry's rows, as streams
       const int64_t e = static_cast<int64_t>(es);
       PrefetchEntry(q, a.ldq, e, b + 1, tq, row_bytes);
       PrefetchEntry(k, a.ldk, e, b + 1, tk, row_bytes);
       PrefetchEntry(v, a.ldv, e, b + 1, tk, row_bytes);
       PrefetchEntry(dout, a.ldo, e, b + 1, tq, row_bytes);
       if (!exact_rows) PrefetchEntry(out, a.ldo, e, b + 1, tq, row_bytes);
     }
     for (int64_t h = units.first_head(u); h < units.end_head(u); ++h) {
      const int64_t bh = b * H + h;
      const HeadRows qrows{static_cast<const char*>(q), a.ldq, es, b * tq, h * D};
      const HeadRows krows{static_cast<const char*>(k), a.ldk, es, b * tk, h * D};
      const HeadRows vrows{static_cast<const char*>(v), a.ldv, es, b * tk, h * D};
      const HeadRows orows{static_cast<const char*>(out), a.ldo, es, b * tq, h * D};
      const HeadRows dorows{static_cast<const char*>(dout), a.ldo, es, b * tq, h * D};
      products.BeginBackwardHead(qrows, krows, vrows, dorows);
      KeyBias(a.key_padding, b, tk, tkp, key_bias);
      if (!exact_rows) {
        // D_i = dO_i . O_i (O as stored), the identity flash attention uses for long rows.
        for (int64_t i = 0; i < tq; ++i) {
          WidenRow(orows.Row(i), a.dtype, D, tmp);
          std::fill(tmp + D, tmp + dp, 0.0f);
          float* dorow = s;  // free until the first block
          WidenRow(dorows.Row(i), a.dtype, D, dorow);
          std::fill(dorow + D, dorow + dp, 0.0f);
          simd::F acc = simd::Zero();
          for (int64_t d = 0; d < dp; d += W) acc = simd::Fma(simd::Load(tmp + d), simd::Load(dorow + d), acc);
          drow[i] = simd::ReduceAdd(acc);
        }
      }
      // dK and dV rows below kinit have been written: the first product to reach a row writes
      // it, later ones add (no zero fill of the accumulators).
      int64_t kinit = 0;
      const simd::F scale = simd::Set1(a.scale);
      for (int64_t i0 = 0; i0 < tq; i0 += mqb) {
        const int64_t mq = std::min(mqb, tq - i0);
        const int64_t jend = a.causal ? std::min(tk, i0 + mq) : tk;
        if (dropout) {
          DropoutFactors(a.key, (bh * tq + i0) * tk, mq * tk, a.dropout, factors);
          std::fill(factors + mq * tk, factors + mq * tk + W, 0.0f);
        }
        for (int64_t j0 = 0; j0 < jend; j0 += nk) {
          const int64_t nj = std::min(nk, jend - j0), njp = Padded(nj);
          products.Scores(i0, mq, j0, nj, s);
          products.ScoreGrads(i0, mq, j0, nj, dpm);
          for (int64_t r = 0; r < mq; ++r) {
            const int64_t i = i0 + r;
            float* srow = s + r * nkp;
            float* dprow = dpm + r * nkp;
            float* dsrow = dsr + r * nkp;
            const float row_lse = lse[bh * tq + i];
            const int64_t limit = a.causal ? std::min(nj, i - j0 + 1) : nj;
            if (row_lse == kNegInf) {  // every key masked: no gradient through this row
              std::fill(dsrow, dsrow + njp, 0.0f);
              std::fill(srow, srow + njp, 0.0f);
              continue;
            }
            ScaleMaskRow(srow, key_bias + j0, a.scale, limit, njp);
            const float* frow = factors + r * tk + j0;
            // P = exp(S - lse) (into srow); dP = mask * dP' / (1-p) (into dprow); D_i.
            const simd::F lv = simd::Set1(row_lse);
            simd::F dot = simd::Zero();
            for (int64_t c = 0; c < njp; c += W) {
              const simd::F p = ExpShifted(simd::Load(srow + c), lv);
              simd::F gr = simd::Load(dprow + c);
              if (dropout) gr = gr * simd::Load(frow + c);
              simd::Store(srow + c, p);
              simd::Store(dprow + c, gr);
              dot = simd::Fma(p, gr, dot);
            }
            const simd::F di = simd::Set1(exact_rows ? simd::ReduceAdd(dot) : drow[i]);
            for (int64_t c = 0; c < njp; c += W) {
              const simd::F p = simd::Load(srow + c);
              simd::Store(dsrow + c, AsStored(scale * p * (simd::Load(dprow + c) - di), a.dtype));
              simd::F pd = p;
              if (dropout) pd = pd * simd::Load(frow + c);
              simd::Store(srow + c, AsStored(pd, a.dtype));  // P' as its product reads it
            }
          }
          const int64_t split = std::clamp<int64_t>(kinit - j0, 0, nj);
          products.ValueGrads(s, i0, mq, j0, nj, split, gv);
          products.KeyGrads(dsr, i0, mq, j0, nj, split, gk);
          kinit = std::max(kinit, j0 + nj);
          products.QueryGrads(dsr, i0, mq, j0, nj, gq, j0 > 0);
        }
      }
      // Keys no query reached (causal, tk > tq) have zero gradients.
      std::fill(gk + kinit * dp, gk + tk * dp, 0.0f);
      std::fill(gv + kinit * dp, gv + tk * dp, 0.0f);
      // Stored in the gradients' dtype; their column sums (before rounding) into this
      // thread's row of the bias gradient.
      // (Staged whole rows per entry: stage_rows is the entry's block of this gradient.)
      auto store = [&](const float* rows_src, int64_t rows, int64_t first, void* dst, int64_t ld,
                       char* stage_rows, float* sums) {
        for (int64_t d = 0; d < dp; ++d) tmp[d] = 0.0f;
        for (int64_t i = 0; i < rows; ++i) {
          const float* src = rows_src + i * dp;
          char* to = stage_rows ? stage_rows + i * grow + h * D * static_cast<int64_t>(ges)
                                : static_cast<char*>(dst) + ((first + i) * ld + h * D) * static_cast<int64_t>(ges);
          NarrowRow(src, g.dtype, D, to);
          for (int64_t d = 0; d < dp; d += W) simd::Store(tmp + d, simd::Load(tmp + d) + simd::Load(src + d));
        }
        if (sums) {
          for (int64_t d = 0; d < D; ++d) sums[h * D + d] += tmp[d];
        }
      };
      char* sq = units.by_entry ? stage : nullptr;
      char* sk = units.by_entry ? stage + tq * grow : nullptr;
      char* sv = units.by_entry ? stage + (tq + tk) * grow : nullptr;
      store(gq, tq, b * tq, g.dq, a.ldq, sq, my_sums);
      store(gk, tk, b * tk, g.dk, a.ldk, sk, my_sums ? my_sums + H * D : nullptr);
      store(gv, tk, b * tk, g.dv, a.ldv, sv, my_sums ? my_sums + 2 * H * D : nullptr);
     }
     if (units.by_entry) {
       const int64_t gs = static_cast<int64_t>(ges);
       FlushRows(stage, tq, grow, static_cast<char*>(g.dq) + b * tq * a.ldq * gs, a.ldq * gs);
       FlushRows(stage + tq * grow, tk, grow, static_cast<char*>(g.dk) + b * tk * a.ldk * gs, a.ldk * gs);
       FlushRows(stage + (tq + tk) * grow, tk, grow, static_cast<char*>(g.dv) + b * tk * a.ldv * gs, a.ldv * gs);
     }
    }
    _mm_sfence();
    products.End();
  }
  if (g.dbias) {
    for (int t = 0; t < threads; ++t)
      for (int64_t c = 0; c < 3 * H * D; ++c) g.dbias[c] += partials[t * 3 * H * D + c];
  }
}

}  // namespace
}  // namespace sf::SF_KERNEL_NS

// The contract's two entry points (attention_kernels.h) for one products policy, written inside
// namespace sf::<instruction set> by each build.
#define SF_ATTENTION_ENTRY_POINTS(Products)                                                    \
  void FusedAttentionForward(const AttentionArgs& a, const void* q, const void* k,             \
                             const void* v, void* out, float* lse) {                           \
    AttentionForwardImpl<Products>(a, q, k, v, out, lse);                                      \
  }                                                                                            \
  void FusedAttentionBackward(const AttentionArgs& a, const void* q, const void* k,            \
                              const void* v, const void* out, const void* dout,                \
                              const float* lse, const AttentionGrads<float>& g) {              \
    AttentionBackwardImpl<Products>(a, q, k, v, out, dout, lse, g);                            \
  }
