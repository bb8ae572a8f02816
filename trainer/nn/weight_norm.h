// The weight-normalised layers of fairseq's ConvS2S (`fconv`, Gehring et al. 2017): every
// projection and convolution there is wrapped in PyTorch's weight_norm, w = g · v / ||v||
// (Salimans & Kingma 2016), with the parameters stored as fairseq names them:
//
//   WnLinear   <name>.weight_v [out, in], <name>.weight_g [out, 1], <name>.bias [out]
//              (weight_norm dim 0: one norm per output row)
//   WnConvTbc  <name>.weight_v [k, in, out], <name>.weight_g [1, 1, out], <name>.bias [out]
//              (fairseq's ConvTBC under weight_norm dim 2: one norm per output channel, over
//              the k·in weights feeding it)
//
// The effective weight w is computed once per weight change (Refresh: after initialisation, a
// load and every optimizer step), kept in fp32 and in the compute dtype for the GEMMs. The
// backward computes dL/dw with one GEMM and turns it into the gradients of v and g
// (Backend::WeightNormBackward), accumulated like every other gradient.
//
// The convolution is a gather, a GEMM and a scatter, all existing backend ops:
//   unfold [rows, k·in]:  row r, tap j = x_ext[index[r·k + j]]   (Backend::EmbeddingForward)
//   y [rows, out]      = unfold · w[k·in, out] + bias             (Backend::Gemm)
//   dx_ext            += scatter of dunfold by index, skipping the zero row
//                                                               (Backend::EmbeddingBackward)
// x_ext holds the input rows and one more, all zeros (index zero_row); the caller's index says
// which input row each tap reads, so padding at the edges (centred or causal) and masked
// positions all read the zero row.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"

namespace sf {

// w = g · v / ||v|| over `n` vectors of `d` elements (rows of v, or columns: see
// Backend::WeightNormForward).
template <typename T>
class WnWeight {
 public:
  WnWeight(ParamStore<T>& store, const std::string& name, std::vector<int64_t> v_shape,
           std::vector<int64_t> g_shape, int64_t n, int64_t d, bool columns)
      : n_(n), d_(d), columns_(columns) {
    v_ = store.Add(name + ".weight_v", std::move(v_shape), true);
    g_ = store.Add(name + ".weight_g", std::move(g_shape), false);
  }

  // fairseq's initialisation: v ~ N(0, std), and g = ||v|| (what weight_norm sets when it wraps
  // a layer), so that w starts as v. Host values; the caller pushes them.
  void Init(ParamStore<T>& store, std::mt19937_64& rng, double std) {
    std::normal_distribution<double> normal(0.0, std);
    T* v = store.host_value(v_);
    for (int64_t i = 0; i < n_ * d_; ++i) v[i] = static_cast<T>(normal(rng));
    T* g = store.host_value(g_);
    for (int64_t i = 0; i < n_; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < d_; ++j) {
        const double x = v[columns_ ? j * n_ + i : i * d_ + j];
        ss += x * x;
      }
      g[i] = static_cast<T>(std::sqrt(ss));
    }
  }

  // w and its compute-dtype copy from the current v and g.
  void Refresh(ParamStore<T>& store, Context<T>& ctx) {
    const DType dt = DTypeOf<T>::value;
    ctx.Plan(w_, {n_ * d_}, dt);
    ctx.Plan(norms_, {n_}, dt);
    ctx.backend().WeightNormForward(store.value(v_), store.value(g_), w_.template data<T>(),
                                    norms_.template data<T>(), n_, d_, columns_);
    if (ctx.low_precision()) {
      ctx.Plan(wc_, {n_ * d_}, ctx.compute());
      ctx.backend().Cast(w_.template data<T>(), wc_.raw(), ctx.compute(), n_ * d_);
    }
  }
  const T* w() const { return w_.template data<T>(); }
  const void* compute(const Context<T>& ctx) const { return ctx.low_precision() ? wc_.raw() : w_.raw(); }
  // dL/dw, written (beta 0) by the layer's backward GEMM, then Backward().
  T* dw(Context<T>& ctx) {
    ctx.Plan(dw_, {n_ * d_}, DTypeOf<T>::value);
    return dw_.template data<T>();
  }
  void Backward(ParamStore<T>& store, Context<T>& ctx) {
    ctx.backend().WeightNormBackward(dw_.template data<T>(), store.value(v_), store.value(g_),
                                     norms_.template data<T>(), store.grad(v_), store.grad(g_), n_, d_,
                                     columns_);
  }

 private:
  int64_t n_, d_;
  bool columns_;
  int v_ = -1, g_ = -1;
  Tensor w_, wc_, norms_, dw_;
};

// fconv's Linear(in, out, dropout): weight_norm(nn.Linear) with v ~ N(0, sqrt((1 - dropout) /
// in)) and a zero bias.
template <typename T>
class WnLinear {
 public:
  WnLinear(ParamStore<T>& store, const std::string& name, int64_t in, int64_t out)
      : in_(in), out_(out), weight_(store, name, {out, in}, {out, 1}, out, in, false) {
    bias_ = store.Add(name + ".bias", {out}, false);
  }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

  void Init(ParamStore<T>& store, std::mt19937_64& rng, double dropout) {
    weight_.Init(store, rng, std::sqrt((1.0 - dropout) / static_cast<double>(in_)));
    std::fill_n(store.host_value(bias_), out_, T(0));
  }
  void Refresh(ParamStore<T>& store, Context<T>& ctx) { weight_.Refresh(store, ctx); }
  const T* weight() const { return weight_.w(); }  // [out, in]
  const void* compute_weight(const Context<T>& ctx) const { return weight_.compute(ctx); }  // [out, in]
  int bias_id() const { return bias_; }

  // y [rows, out] = x [rows, in] w^T + bias.
  void Forward(ParamStore<T>& store, Context<T>& ctx, const T* x, int64_t rows, T* y) {
    const DType cd = ctx.compute();
    ctx.backend().Gemm(1, rows, out_, in_, GemmOperand{ctx.AsComputeScratch(x, rows * in_, kScratchCastA), cd, false, in_, 0},
                       GemmOperand{weight_.compute(ctx), cd, true, in_, 0, true}, y, out_, 0, 1.0f, 0.0f);
    ctx.backend().BiasDropoutResidualForward(y, store.value(bias_), nullptr, y, rows, out_, 0.0f, DropoutKey{});
  }
  // dbias += Σ_rows dy; v, g from dW = dy^T x; dx (may be null) = dy w, written or, with
  // dx_beta 1, added.
  void Backward(ParamStore<T>& store, Context<T>& ctx, const T* x, const T* dy, int64_t rows, T* dx,
                float dx_beta) {
    ctx.backend().ColumnSum(dy, store.grad(bias_), rows, out_);
    BackwardWeightAndInput(store, ctx, x, ctx.AsComputeScratch(dy, rows * out_, kScratchCastA), 1.0f, rows, dx,
                           dx_beta);
  }
  // The same without the bias's gradient, from alpha · dy with dy_c already in the compute dtype
  // (not in the kScratchCastB slot): the output layer whose loss gradient came with the loss.
  void BackwardWeightAndInput(ParamStore<T>& store, Context<T>& ctx, const T* x, const void* dy_c, float alpha,
                              int64_t rows, T* dx, float dx_beta) {
    const DType cd = ctx.compute();
    Backend<T>& be = ctx.backend();
    be.Gemm(1, out_, in_, rows, GemmOperand{dy_c, cd, true, out_, 0},
            GemmOperand{ctx.AsComputeScratch(x, rows * in_, kScratchCastB), cd, false, in_, 0}, weight_.dw(ctx), in_,
            0, alpha, 0.0f);
    weight_.Backward(store, ctx);
    if (dx) {
      be.Gemm(1, rows, in_, out_, GemmOperand{dy_c, cd, false, out_, 0},
              GemmOperand{weight_.compute(ctx), cd, false, in_, 0, true}, dx, in_, 0, alpha, dx_beta);
    }
  }

 private:
  int64_t in_, out_;
  WnWeight<T> weight_;
  int bias_ = -1;
};

// fconv's ConvTBC(in, out, k, dropout) under weight_norm(dim=2): v ~ N(0, sqrt(4 (1 - dropout) /
// (k · in))), zero bias. See the header comment for the gather / GEMM / scatter.
template <typename T>
class WnConvTbc {
 public:
  WnConvTbc(ParamStore<T>& store, const std::string& name, int64_t in, int64_t out, int64_t kernel)
      : in_(in), out_(out), k_(kernel), weight_(store, name, {kernel, in, out}, {1, 1, out}, out, kernel * in, true) {
    bias_ = store.Add(name + ".bias", {out}, false);
  }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  int64_t kernel() const { return k_; }

  void Init(ParamStore<T>& store, std::mt19937_64& rng, double dropout) {
    weight_.Init(store, rng, std::sqrt(4.0 * (1.0 - dropout) / static_cast<double>(k_ * in_)));
    std::fill_n(store.host_value(bias_), out_, T(0));
  }
  void Refresh(ParamStore<T>& store, Context<T>& ctx) { weight_.Refresh(store, ctx); }

  // y [rows, out] from x_ext [rows + 1, in] (last row zeros) and index [rows · k] (backend
  // memory). Keeps the unfolded input for the backward.
  void Forward(ParamStore<T>& store, Context<T>& ctx, const T* x_ext, const int32_t* index, int64_t rows, T* y) {
    const DType dt = DTypeOf<T>::value, cd = ctx.compute();
    Backend<T>& be = ctx.backend();
    ctx.Plan(unfold_, {rows, k_ * in_}, dt);
    be.EmbeddingForward(index, x_ext, nullptr, nullptr, unfold_.template data<T>(), rows * k_, in_, 1.0f);
    be.Gemm(1, rows, out_, k_ * in_,
            GemmOperand{ctx.AsComputeScratch(unfold_.template data<T>(), rows * k_ * in_, kScratchCastA), cd, false,
                        k_ * in_, 0},
            GemmOperand{weight_.compute(ctx), cd, false, out_, 0, true}, y, out_, 0, 1.0f, 0.0f);
    be.BiasDropoutResidualForward(y, store.value(bias_), nullptr, y, rows, out_, 0.0f, DropoutKey{});
  }
  // From dy [rows, out]: dbias, v and g; dx_ext [rows + 1, in] += the input's gradient (the
  // caller zeroes it; the zero row gets nothing).
  void Backward(ParamStore<T>& store, Context<T>& ctx, const T* dy, const int32_t* index, int64_t rows,
                T* dx_ext) {
    const DType dt = DTypeOf<T>::value, cd = ctx.compute();
    Backend<T>& be = ctx.backend();
    be.ColumnSum(dy, store.grad(bias_), rows, out_);
    const void* dy_c = ctx.AsComputeScratch(dy, rows * out_, kScratchCastA);
    be.Gemm(1, k_ * in_, out_, rows,
            GemmOperand{ctx.AsComputeScratch(unfold_.template data<T>(), rows * k_ * in_, kScratchCastB), cd, true,
                        k_ * in_, 0},
            GemmOperand{dy_c, cd, false, out_, 0}, weight_.dw(ctx), out_, 0, 1.0f, 0.0f);
    weight_.Backward(store, ctx);
    ctx.Plan(dunfold_, {rows, k_ * in_}, dt);
    be.Gemm(1, rows, k_ * in_, out_, GemmOperand{dy_c, cd, false, out_, 0},
            GemmOperand{weight_.compute(ctx), cd, true, out_, 0, true}, dunfold_.template data<T>(), k_ * in_, 0,
            1.0f, 0.0f);
    be.EmbeddingBackward(index, dunfold_.template data<T>(), dx_ext, rows * k_, in_, 1.0f,
                         static_cast<int32_t>(rows));
  }

 private:
  int64_t in_, out_, k_;
  WnWeight<T> weight_;
  int bias_ = -1;
  Tensor unfold_, dunfold_;
};

// The gather index of a convolution over B sequences of T positions (rows b·T + t): tap j of
// output (b, t) reads input t + j - left of the same sequence, or the zero row (B·T) outside the
// sequence or where `masked` (may be null) marks the input position (padding). left = (k-1)/2
// centres the kernel (fairseq's encoder; for even k one more on the right), left = k-1 makes it
// causal (the decoder).
inline std::vector<int32_t> ConvIndex(int64_t batch, int64_t time, int64_t kernel, int64_t left,
                                      const uint8_t* masked) {
  const int32_t zero = static_cast<int32_t>(batch * time);
  std::vector<int32_t> index(static_cast<size_t>(batch * time * kernel), zero);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < time; ++t) {
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t s = t + j - left;
        if (s < 0 || s >= time || (masked && masked[b * time + s])) continue;
        index[static_cast<size_t>((b * time + t) * kernel + j)] = static_cast<int32_t>(b * time + s);
      }
    }
  }
  return index;
}

}  // namespace sf
