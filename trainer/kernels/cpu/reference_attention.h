// The fused attention of backend.h (AttentionArgs) by its definition, one (batch entry, head) at
// a time in double: ReferenceBackend's implementation, and the meaning the fast kernels are
// checked against. P' and dS enter their products as the compute dtype holds them (rounded when
// the dtype is bf16 / f16), as every backend's kernels do; D_i is sum_j P_ij dP_ij.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/reference_values.h"

namespace sf::reference {

// Row r of the (b, h) block of a [B, T, H*D] operand, element d.
inline double HeadAt(const void* x, DType t, int64_t ld, int64_t b, int64_t time, int64_t r,
                     int64_t h, int64_t dim, int64_t d) {
  return Load(x, t, (b * time + r) * ld + h * dim + d);
}

// The softmax P of one (b, h), [tq][tk] (masked keys 0; a row without keys all 0), and lse.
inline void ReferenceProbs(const AttentionArgs& a, const void* q, const void* k, int64_t b,
                           int64_t h, std::vector<double>* probs, std::vector<double>* lse) {
  const int64_t D = a.head_dim;
  probs->assign(static_cast<size_t>(a.tq * a.tk), 0.0);
  lse->assign(static_cast<size_t>(a.tq), -std::numeric_limits<double>::infinity());
  std::vector<double> s(static_cast<size_t>(a.tk));
  for (int64_t i = 0; i < a.tq; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < a.tk; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d)
        acc += HeadAt(q, a.dtype, a.ldq, b, a.tq, i, h, D, d) *
               HeadAt(k, a.dtype, a.ldk, b, a.tk, j, h, D, d);
      s[j] = a.scale * acc;
      if (!Masked(a.key_padding, b, i, j, a.tk, a.causal)) mx = std::max(mx, s[j]);
    }
    if (mx == -std::numeric_limits<double>::infinity()) continue;  // every key masked
    double sum = 0;
    for (int64_t j = 0; j < a.tk; ++j)
      if (!Masked(a.key_padding, b, i, j, a.tk, a.causal)) sum += std::exp(s[j] - mx);
    (*lse)[i] = mx + std::log(sum);
    for (int64_t j = 0; j < a.tk; ++j)
      if (!Masked(a.key_padding, b, i, j, a.tk, a.causal))
        (*probs)[i * a.tk + j] = std::exp(s[j] - mx) / sum;
  }
}

// Philox element of (query i, key j) of (b, h): SoftmaxForward's index in [B, H, Tq, Tk].
inline int64_t DropIndex(const AttentionArgs& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  return ((b * a.heads + h) * a.tq + i) * a.tk + j;
}

template <typename T>
void ReferenceAttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                               void* out, float* lse) {
  std::vector<double> probs, l;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      ReferenceProbs(a, q, k, b, h, &probs, &l);
      for (int64_t i = 0; i < a.tq; ++i) {
        lse[(b * a.heads + h) * a.tq + i] = static_cast<float>(l[i]);
        for (int64_t d = 0; d < a.head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < a.tk; ++j) {
            const double f = DropoutFactor<double>(a.key, DropIndex(a, b, h, i, j), a.dropout);
            const double pd = RoundedTo(a.dtype, probs[i * a.tk + j] * f);
            acc += pd * HeadAt(v, a.dtype, a.ldv, b, a.tk, j, h, a.head_dim, d);
          }
          Store(out, a.dtype, (b * a.tq + i) * a.ldo + h * a.head_dim + d, acc);
        }
      }
    }
}

template <typename T>
void ReferenceAttentionBackward(const AttentionArgs& a, const void* q, const void* k,
                                const void* v, const void* out, const void* dout,
                                const float* lse_unused, const AttentionGrads<T>& g) {
  (void)out;
  (void)lse_unused;
  const int64_t D = a.head_dim, tq = a.tq, tk = a.tk;
  std::vector<double> probs, l, ds(static_cast<size_t>(tq * tk)), pd(static_cast<size_t>(tq * tk));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      ReferenceProbs(a, q, k, b, h, &probs, &l);
      for (int64_t i = 0; i < tq; ++i) {
        // dP' = dO V^T; dP = mask * dP' / (1-p); D_i = <P_i, dP_i>; dS = scale P (dP - D_i).
        std::vector<double> dp(static_cast<size_t>(tk));
        double dot = 0;
        for (int64_t j = 0; j < tk; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += HeadAt(dout, a.dtype, a.ldo, b, tq, i, h, D, d) *
                   HeadAt(v, a.dtype, a.ldv, b, tk, j, h, D, d);
          const double f = DropoutFactor<double>(a.key, DropIndex(a, b, h, i, j), a.dropout);
          dp[j] = acc * f;
          pd[i * tk + j] = RoundedTo(a.dtype, probs[i * tk + j] * f);
          dot += probs[i * tk + j] * dp[j];
        }
        for (int64_t j = 0; j < tk; ++j)
          ds[i * tk + j] = RoundedTo(a.dtype, a.scale * probs[i * tk + j] * (dp[j] - dot));
      }
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < tk; ++j)
            acc += ds[i * tk + j] * HeadAt(k, a.dtype, a.ldk, b, tk, j, h, D, d);
          Store(g.dq, g.dtype, (b * tq + i) * a.ldq + h * D + d, acc);
          if (g.dbias) g.dbias[h * D + d] += static_cast<T>(acc);
        }
      for (int64_t j = 0; j < tk; ++j)
        for (int64_t d = 0; d < D; ++d) {
          double gk = 0, gv = 0;
          for (int64_t i = 0; i < tq; ++i) {
            gk += ds[i * tk + j] * HeadAt(q, a.dtype, a.ldq, b, tq, i, h, D, d);
            gv += pd[i * tk + j] * HeadAt(dout, a.dtype, a.ldo, b, tq, i, h, D, d);
          }
          Store(g.dk, g.dtype, (b * tk + j) * a.ldk + h * D + d, gk);
          Store(g.dv, g.dtype, (b * tk + j) * a.ldv + h * D + d, gv);
          if (g.dbias) {
            g.dbias[a.heads * D + h * D + d] += static_cast<T>(gk);
            g.dbias[2 * a.heads * D + h * D + d] += static_cast<T>(gv);
          }
        }
    }
}

}  // namespace sf::reference
