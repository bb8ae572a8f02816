// ReferenceBackend<T>: the plain, scalar definition of every kernel in backend.h, for T = float
// or double. It is the f64 backend of the finite-difference gradient tests and the reference the
// fast CpuBackend is checked against. Written for clarity, not speed (no threads, std::exp).
// Stateless and thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/ctc_host.h"
#include "trainer/kernels/cpu/reference_attention.h"

namespace sf {

template <typename T>
class ReferenceBackend final : public Backend<T> {
 public:
  // fused_attention = false: report no fused attention, so layers take their per-head GEMM path
  // (what a backend without the fused kernel runs; the gradient tests check both).
  explicit ReferenceBackend(bool fused_attention = true) : fused_attention_(fused_attention) {}
  const char* name() const override { return "reference"; }
  Device device() const override { return Device::kCpu; }

  // f(c, a, b, row, col) for every input channel c and kernel tap (a, b) of output position
  // (i, j) that falls inside the image (taps on the zero padding contribute nothing).
  template <typename F>
  static void ConvTaps(const Conv2dShape& s, int64_t i, int64_t j, F f) {
    for (int64_t c = 0; c < s.cin; ++c) {
      for (int64_t a = 0; a < s.kh; ++a) {
        const int64_t hi = i * s.sh - s.ph + a;
        if (hi < 0 || hi >= s.h) continue;
        for (int64_t b = 0; b < s.kw; ++b) {
          const int64_t wj = j * s.sw - s.pw + b;
          if (wj >= 0 && wj < s.w) f(c, a, b, hi, wj);
        }
      }
    }
  }

  static double Load(const void* p, DType t, int64_t i) { return reference::Load(p, t, i); }
  static void Store(void* p, DType t, int64_t i, double v) { reference::Store(p, t, i, v); }
  static double At(const GemmOperand& x, int64_t b, int64_t i, int64_t p) {
    const int64_t off = b * x.batch_stride + (x.transposed ? p * x.ld + i : i * x.ld + p);
    return Load(x.data, x.dtype, off);
  }

  void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, T* c, int64_t ldc, int64_t stride_c, float alpha,
            float beta) override {
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += At(a, bi, i, p) * At(b, bi, p, j);
          T& out = c[bi * stride_c + i * ldc + j];
          out = static_cast<T>(alpha * acc + (beta == 0 ? 0.0 : beta * static_cast<double>(out)));
        }
  }

  void Cast(const T* x, void* y, DType to, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) Store(y, to, i, x[i]);
  }
  void Add(const T* x, T* y, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }

  static T DropoutFactor(const DropoutKey& key, int64_t index, float p) {
    return reference::DropoutFactor<T>(key, index, p);
  }

  void BiasDropoutResidualForward(const T* x, const T* bias, const T* residual, T* out,
                                  int64_t rows, int64_t cols, float p, DropoutKey key) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        T v = (x[i] + (bias ? bias[c] : T(0))) * DropoutFactor(key, i, p);
        out[i] = v + (residual ? residual[i] : T(0));
      }
  }
  void BiasDropoutResidualBackward(const T* dout, T* dx, T* dbias, int64_t rows, int64_t cols,
                                   float p, DropoutKey key) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        dx[i] = dout[i] * DropoutFactor(key, i, p);
        if (dbias) dbias[c] += dx[i];
      }
  }

  static double Act(double x, Activation a) {
    if (a == Activation::kRelu) return x > 0 ? x : 0;
    if (a == Activation::kTanh) return std::tanh(x);
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  }
  static double ActGrad(double x, Activation a) {
    if (a == Activation::kRelu) return x > 0 ? 1 : 0;
    if (a == Activation::kTanh) return 1 - std::tanh(x) * std::tanh(x);
    const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    return cdf + x * pdf;
  }
  static T* OnlyT(void* p, DType dtype) {
    assert(dtype == DTypeOf<T>::value);
    (void)dtype;
    return static_cast<T*>(p);
  }
  // Outputs here are T only (as for every reference op).
  void BiasActivationForward(const T* x, const T* bias, T* pre, void* out_v, DType out_dtype,
                             int64_t rows, int64_t cols, Activation act) override {
    T* out = OnlyT(out_v, out_dtype);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const T h = x[i] + (bias ? bias[c] : T(0));
        pre[i] = h;
        out[i] = static_cast<T>(Act(h, act));
      }
  }
  // saved must be T here.
  void BiasActivationBackward(const T* dout, const void* saved, DType saved_dtype, T* dpre,
                              T* dbias, int64_t rows, int64_t cols, Activation act) override {
    assert(saved_dtype == DTypeOf<T>::value);
    (void)saved_dtype;
    const T* pre = static_cast<const T*>(saved);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        dpre[i] = static_cast<T>(dout[i] * ActGrad(pre[i], act));
        if (dbias) dbias[c] += dpre[i];
      }
  }

  // Any dtype in and out (the definition the fast backends' low-precision variants match).
  void BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                DType saved_dtype, void* dpre, DType dpre_dtype, T* dbias,
                                int64_t rows, int64_t cols, Activation act) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const T g = static_cast<T>(Load(dout, dout_dtype, i) * ActGrad(Load(saved, saved_dtype, i), act));
        if (dbias) dbias[c] += g;
        Store(dpre, dpre_dtype, i, g);
      }
  }

  void LayerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                        int64_t rows, int64_t cols, float eps) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      double mu = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mu += xr[c];
      mu /= cols;
      for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
      var /= cols;
      const double rs = 1.0 / std::sqrt(var + eps);
      mean[r] = static_cast<T>(mu);
      rstd[r] = static_cast<T>(rs);
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] = static_cast<T>((xr[c] - mu) * rs * gamma[c] + beta[c]);
    }
  }
  // xhat = (x-mu)*rstd; g = dy*gamma; dx = rstd * (g - mean(g) - xhat*mean(g*xhat)).
  void LayerNormBackward(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd,
                         T* dx, T* dgamma, T* dbeta, int64_t rows, int64_t cols,
                         bool accumulate_dx) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      const T* dyr = dy + r * cols;
      double mg = 0, mgx = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xh = (xr[c] - mean[r]) * rstd[r];
        const double g = dyr[c] * gamma[c];
        mg += g;
        mgx += g * xh;
        dgamma[c] += static_cast<T>(dyr[c] * xh);
        dbeta[c] += dyr[c];
      }
      mg /= cols;
      mgx /= cols;
      for (int64_t c = 0; c < cols; ++c) {
        const double xh = (xr[c] - mean[r]) * rstd[r];
        const double v = rstd[r] * (dyr[c] * gamma[c] - mg - xh * mgx);
        if (accumulate_dx) dx[r * cols + c] += static_cast<T>(v);
        else dx[r * cols + c] = static_cast<T>(v);
      }
    }
  }

  static bool Masked(const uint8_t* key_padding, int64_t b, int64_t q, int64_t k, int64_t tk,
                     bool causal) {
    return reference::Masked(key_padding, b, q, k, tk, causal);
  }
  void SoftmaxForward(const T* scores, T* probs, void* dropped_v, DType dropped_dtype,
                      const uint8_t* key_padding, int64_t batch, int64_t heads, int64_t tq,
                      int64_t tk, float scale, bool causal, float p, DropoutKey key) override {
    T* dropped = OnlyT(dropped_v, dropped_dtype);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t q = 0; q < tq; ++q) {
          const int64_t row = ((b * heads + h) * tq + q) * tk;
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < tk; ++k)
            if (!Masked(key_padding, b, q, k, tk, causal))
              mx = std::max(mx, static_cast<double>(scale) * scores[row + k]);
          double sum = 0;
          for (int64_t k = 0; k < tk; ++k)
            if (!Masked(key_padding, b, q, k, tk, causal))
              sum += std::exp(static_cast<double>(scale) * scores[row + k] - mx);
          for (int64_t k = 0; k < tk; ++k) {
            const double pr = Masked(key_padding, b, q, k, tk, causal)
                                  ? 0.0
                                  : std::exp(static_cast<double>(scale) * scores[row + k] - mx) /
                                        sum;
            probs[row + k] = static_cast<T>(pr);
            if (dropped) dropped[row + k] = probs[row + k] * DropoutFactor(key, row + k, p);
          }
        }
  }
  void SoftmaxBackward(const T* d_dropped, const T* probs, void* dscores_v, DType dscores_dtype,
                       int64_t batch, int64_t heads, int64_t tq, int64_t tk, float scale,
                       float p, DropoutKey key) override {
    T* dscores = OnlyT(dscores_v, dscores_dtype);
    const int64_t rows = batch * heads * tq;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = r * tk;
      double dot = 0;
      for (int64_t k = 0; k < tk; ++k)
        dot += static_cast<double>(probs[row + k]) * d_dropped[row + k] *
               DropoutFactor(key, row + k, p);
      for (int64_t k = 0; k < tk; ++k) {
        const double dp = static_cast<double>(d_dropped[row + k]) * DropoutFactor(key, row + k, p);
        dscores[row + k] = static_cast<T>(scale * probs[row + k] * (dp - dot));
      }
    }
  }

  // Fused attention by its definition (reference_attention.h).
  bool has_fused_attention() const override { return fused_attention_; }
  void AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                        void* out, float* lse) override {
    reference::ReferenceAttentionForward<T>(a, q, k, v, out, lse);
  }
  void AttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse,
                         const AttentionGrads<T>& g) override {
    reference::ReferenceAttentionBackward<T>(a, q, k, v, out, dout, lse, g);
  }

  void EmbeddingForward(const int32_t* tokens, const T* table, const T* pos_table,
                        const int32_t* pos_ids, T* out, int64_t rows, int64_t cols,
                        float scale) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[r * cols + c] = static_cast<T>(
            scale * table[int64_t{tokens[r]} * cols + c] +
            (pos_ids ? pos_table[int64_t{pos_ids[r]} * cols + c] : T(0)));
  }
  void EmbeddingBackward(const int32_t* tokens, const T* dout, T* dtable, int64_t rows,
                         int64_t cols, float scale, int32_t pad) override {
    for (int64_t r = 0; r < rows; ++r) {
      if (tokens[r] == pad) continue;
      for (int64_t c = 0; c < cols; ++c)
        dtable[int64_t{tokens[r]} * cols + c] += static_cast<T>(scale * dout[r * cols + c]);
    }
  }

  void SplitHeads(const T* x, const T* bias, void* out_v, DType out_dtype, int64_t batch,
                  int64_t time, int64_t parts, int64_t heads, int64_t head_dim) override {
    T* out = OnlyT(out_v, out_dtype);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < time; ++t)
        for (int64_t p = 0; p < parts; ++p)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < head_dim; ++d) {
              const int64_t src = (((b * time + t) * parts + p) * heads + h) * head_dim + d;
              const int64_t dst = (((p * batch + b) * heads + h) * time + t) * head_dim + d;
              out[dst] = x[src] + (bias ? bias[(p * heads + h) * head_dim + d] : T(0));
            }
  }
  void MergeHeads(const T* in, void* x_v, DType x_dtype, int64_t batch, int64_t time,
                  int64_t parts, int64_t heads, int64_t head_dim) override {
    T* x = OnlyT(x_v, x_dtype);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < time; ++t)
        for (int64_t p = 0; p < parts; ++p)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < head_dim; ++d) {
              const int64_t dst = (((b * time + t) * parts + p) * heads + h) * head_dim + d;
              const int64_t src = (((p * batch + b) * heads + h) * time + t) * head_dim + d;
              x[dst] = in[src];
            }
  }
  void ColumnSum(const T* x, T* sum, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) sum[c] += x[r * cols + c];
  }

  void LstmCellForward(T* gates, const T* bias, const T* c_prev, T* c, T* h, int64_t rows,
                       int64_t hidden) override {
    const int64_t H = hidden;
    auto sigmoid = [](T v) { return static_cast<T>(1 / (1 + std::exp(-v))); };
    for (int64_t r = 0; r < rows; ++r) {
      T* z = gates + r * 4 * H;
      for (int64_t j = 0; j < H; ++j) {
        auto b = [&](int64_t k) { return bias ? bias[k * H + j] : T(0); };
        const T i = sigmoid(z[j] + b(0));
        const T f = sigmoid(z[H + j] + b(1));
        const T g = static_cast<T>(std::tanh(z[2 * H + j] + b(2)));
        const T o = sigmoid(z[3 * H + j] + b(3));
        z[j] = i;
        z[H + j] = f;
        z[2 * H + j] = g;
        z[3 * H + j] = o;
        const T cn = f * (c_prev ? c_prev[r * H + j] : T(0)) + i * g;
        c[r * H + j] = cn;
        h[r * H + j] = static_cast<T>(o * std::tanh(cn));
      }
    }
  }
  void LstmCellBackward(const T* gates, const T* c_prev, const T* c, const T* dh, const T* dc,
                        T* dgates, T* dc_prev, T* dbias, int64_t rows, int64_t hidden) override {
    const int64_t H = hidden;
    for (int64_t r = 0; r < rows; ++r) {
      const T* a = gates + r * 4 * H;
      T* dz = dgates + r * 4 * H;
      for (int64_t j = 0; j < H; ++j) {
        const int64_t e = r * H + j;
        const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
        const T tc = static_cast<T>(std::tanh(c[e]));
        const T cp = c_prev ? c_prev[e] : T(0);
        const T dct = (dc ? dc[e] : T(0)) + dh[e] * o * (1 - tc * tc);
        dz[j] = dct * g * i * (1 - i);
        dz[H + j] = dct * cp * f * (1 - f);
        dz[2 * H + j] = dct * i * (1 - g * g);
        dz[3 * H + j] = dh[e] * tc * o * (1 - o);
        if (dc_prev) dc_prev[e] = dct * f;
      }
    }
    if (dbias) ColumnSum(dgates, dbias, rows, 4 * H);
  }

  void GluForward(const T* x, T* y, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const T a = x[r * 2 * cols + c], b = x[r * 2 * cols + cols + c];
        y[r * cols + c] = static_cast<T>(a / (1 + std::exp(-b)));
      }
    }
  }
  void GluBackward(const T* x, const T* dy, T* dx, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const T a = x[r * 2 * cols + c], b = x[r * 2 * cols + cols + c], d = dy[r * cols + c];
        const T s = static_cast<T>(1 / (1 + std::exp(-b)));
        dx[r * 2 * cols + c] = d * s;
        dx[r * 2 * cols + cols + c] = d * a * s * (1 - s);
      }
    }
  }
  // An operand of a convolution's products as Conv2dShape::compute has it (bf16: rounded).
  static double ConvOperand(T v, const Conv2dShape& s) {
    if (s.compute != DType::kBF16) return static_cast<double>(v);
    return static_cast<double>(Bf16ToFloat(FloatToBf16(static_cast<float>(v))));
  }
  void Conv2dForward(const T* x, const T* w, const T* bias, T* y, const Conv2dShape& s) override {
    const int64_t OH = s.oh(), OW = s.ow();
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t o = 0; o < s.cout; ++o) {
        for (int64_t i = 0; i < OH; ++i) {
          for (int64_t j = 0; j < OW; ++j) {
            double acc = bias ? static_cast<double>(bias[o]) : 0.0;
            ConvTaps(s, i, j, [&](int64_t c, int64_t a, int64_t b, int64_t hi, int64_t wj) {
              acc += ConvOperand(x[((n * s.cin + c) * s.h + hi) * s.w + wj], s) *
                     ConvOperand(w[((o * s.cin + c) * s.kh + a) * s.kw + b], s);
            });
            y[((n * s.cout + o) * OH + i) * OW + j] = static_cast<T>(acc);
          }
        }
      }
    }
  }
  void Conv2dBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* dbias,
                      const Conv2dShape& s) override {
    const int64_t OH = s.oh(), OW = s.ow();
    if (dx) std::fill(dx, dx + s.n * s.cin * s.h * s.w, T(0));
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t o = 0; o < s.cout; ++o) {
        for (int64_t i = 0; i < OH; ++i) {
          for (int64_t j = 0; j < OW; ++j) {
            const T g = dy[((n * s.cout + o) * OH + i) * OW + j];
            if (dbias) dbias[o] += g;
            const double gc = ConvOperand(g, s);
            ConvTaps(s, i, j, [&](int64_t c, int64_t a, int64_t b, int64_t hi, int64_t wj) {
              const int64_t xi = ((n * s.cin + c) * s.h + hi) * s.w + wj, wi = ((o * s.cin + c) * s.kh + a) * s.kw + b;
              dw[wi] += static_cast<T>(gc * ConvOperand(x[xi], s));
              if (dx) dx[xi] += static_cast<T>(gc * ConvOperand(w[wi], s));
            });
          }
        }
      }
    }
  }
  void CtcLoss(const T* logits, const int32_t* input_lengths, const int32_t* targets,
               const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
               int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale,
               float* losses, T* dlogits) override {
    CtcWorkspace w;
    for (int64_t b = 0; b < batch; ++b) {
      losses[b] = static_cast<float>(CtcLossOneUtterance(logits, targets + b * max_target, input_lengths[b],
                                      target_lengths[b], frames, batch, b, classes, blank,
                                      zero_infinity, grad_scale, dlogits, w));
    }
  }
  void ScaleRowGroups(T* x, const float* factors, int64_t groups, int64_t rows_per_group,
                      int64_t cols) override {
    for (int64_t i = 0; i < groups * rows_per_group * cols; ++i) x[i] *= static_cast<T>(factors[i / (rows_per_group * cols)]);
  }
  void WeightNormForward(const T* v, const T* g, T* w, T* norms, int64_t n, int64_t d,
                         bool columns) override {
    for (int64_t i = 0; i < n; ++i) {
      auto at = [&](int64_t j) { return columns ? j * n + i : i * d + j; };
      double ss = 0;
      for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(v[at(j)]) * static_cast<double>(v[at(j)]);
      norms[i] = static_cast<T>(std::sqrt(ss));
      for (int64_t j = 0; j < d; ++j) w[at(j)] = g[i] * v[at(j)] / norms[i];
    }
  }
  void WeightNormBackward(const T* dw, const T* v, const T* g, const T* norms, T* dv, T* dg,
                          int64_t n, int64_t d, bool columns) override {
    for (int64_t i = 0; i < n; ++i) {
      auto at = [&](int64_t j) { return columns ? j * n + i : i * d + j; };
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += static_cast<double>(dw[at(j)]) * static_cast<double>(v[at(j)]);
      const T nrm = norms[i];
      dg[i] += static_cast<T>(s / nrm);
      const T k = static_cast<T>(s / (static_cast<double>(nrm) * nrm));
      for (int64_t j = 0; j < d; ++j) dv[at(j)] += g[i] / nrm * (dw[at(j)] - k * v[at(j)]);
    }
  }

  CrossEntropyStats CrossEntropyForward(const T* logits, const int32_t* targets, T* lse,
                                        int64_t rows, int64_t vocab, float eps,
                                        int32_t pad) override {
    CrossEntropyStats s;
    const double eps_i = static_cast<double>(eps) / static_cast<double>(vocab - 1);
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = logits + r * vocab;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, static_cast<double>(z[v]));
      double sum = 0, zsum = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        sum += std::exp(z[v] - mx);
        zsum += z[v];
      }
      const double l = mx + std::log(sum);
      lse[r] = static_cast<T>(l);
      if (targets[r] == pad) continue;
      const double nll = l - z[targets[r]];
      const double smooth = vocab * l - zsum;
      s.loss += (1.0 - eps - eps_i) * nll + eps_i * smooth;
      s.nll += nll;
      ++s.tokens;
    }
    return s;
  }
  void CrossEntropyBackward(const T* logits, const T* lse, const int32_t* targets, void* dlogits,
                            DType dlogits_dtype, int64_t rows, int64_t vocab, float eps,
                            int32_t pad, float grad_scale) override {
    const double eps_i = static_cast<double>(eps) / static_cast<double>(vocab - 1);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < vocab; ++v) {
        const int64_t i = r * vocab + v;
        double g = 0;
        if (targets[r] != pad) {
          const double pr = std::exp(static_cast<double>(logits[i]) - lse[r]);
          g = grad_scale * (pr - eps_i - (v == targets[r] ? 1.0 - eps - eps_i : 0.0));
        }
        Store(dlogits, dlogits_dtype, i, g);
      }
  }
 private:
  bool fused_attention_ = true;
};

}  // namespace sf
