// LayerNorm over the last dimension C of [N, C] rows, with learned gain and bias (eps 1e-5, as
// torch.nn.LayerNorm). Saves per-row mean and 1/std for the backward; the input buffer must
// stay unchanged until Backward.
#pragma once

#include <string>

#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class LayerNorm {
 public:
  LayerNorm(ParamStore<T>& store, const std::string& name, int64_t dim) : store_(store), dim_(dim) {
    weight_ = store.Add(name + ".weight", {dim}, false);
    bias_ = store.Add(name + ".bias", {dim}, false);
  }
  void Init() {
    T* w = store_.host_value(weight_);
    for (int64_t i = 0; i < dim_; ++i) w[i] = T(1);
  }

  // y[N, C] = LN(x), and y_low (null: none) = y in the compute dtype, for a GEMM that reads it;
  // remembers x.
  void Forward(Context<T>& ctx, const T* x, T* y, int64_t rows, void* y_low = nullptr) {
    if (y_low) {
      // The fused tail with no branch (a null) only reads h: x stays as it is.
      return ForwardResidual(ctx, nullptr, nullptr, nullptr, 0.0f, DropoutKey{}, const_cast<T*>(x),
                             y, y_low, rows);
    }
    ctx.Plan(mean_, {rows}, DTypeOf<T>::value);
    ctx.Plan(rstd_, {rows}, DTypeOf<T>::value);
    x_ = x;
    ctx.backend().LayerNormForward(x, store_.value(weight_), store_.value(bias_), y,
                                   mean_.data<T>(), rstd_.data<T>(), rows, dim_, 1e-5f);
  }
  // A residual block's tail (Backend::ResidualLayerNormForward): h = residual + dropout(a +
  // bias) [written to h; a null: h is the input as given], y = LN(h), and y_low (null: none) = y
  // in the compute dtype. Remembers h.
  void ForwardResidual(Context<T>& ctx, const T* a, const T* bias, const T* residual, float p,
                       DropoutKey key, T* h, T* y, void* y_low, int64_t rows) {
    ctx.Plan(mean_, {rows}, DTypeOf<T>::value);
    ctx.Plan(rstd_, {rows}, DTypeOf<T>::value);
    x_ = h;
    ctx.backend().ResidualLayerNormForward(a, bias, residual, p, key, h, store_.value(weight_),
                                           store_.value(bias_), y, y_low, ctx.compute(),
                                           mean_.data<T>(), rstd_.data<T>(), rows, dim_, 1e-5f);
  }
  // Its backward when h feeds the residual and the branch (post-norm): dh (overwritten) is the
  // gradient w.r.t. h, d_branch gets mask * dh / (1-p) in the compute dtype, dbias += its sums.
  void BackwardResidual(Context<T>& ctx, const T* dy, T* dh, void* d_branch, T* dbias, float p,
                        DropoutKey key, int64_t rows) {
    ctx.backend().ResidualLayerNormBackward(dy, x_, store_.value(weight_), mean_.data<T>(),
                                            rstd_.data<T>(), dh, d_branch, ctx.compute(), dbias,
                                            store_.grad(weight_), store_.grad(bias_), p, key, rows,
                                            dim_);
  }
  // dx = (or +=, when accumulate) the gradient w.r.t. x; dx may alias dy when not accumulating.
  void Backward(Context<T>& ctx, const T* dy, T* dx, int64_t rows, bool accumulate) {
    ctx.backend().LayerNormBackward(dy, x_, store_.value(weight_), mean_.data<T>(),
                                    rstd_.data<T>(), dx, store_.grad(weight_), store_.grad(bias_),
                                    rows, dim_, accumulate);
  }

 private:
  ParamStore<T>& store_;
  int64_t dim_;
  int weight_ = -1, bias_ = -1;
  const T* x_ = nullptr;
  Tensor mean_, rstd_;
};

}  // namespace sf
