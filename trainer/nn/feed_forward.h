// Position-wise feed-forward block: out = fc2(act(fc1(x))), x and out [N, C], hidden [N, F].
// Parameters (fairseq names): <name>fc1.weight [F, C], fc1.bias [F], fc2.weight [C, F],
// fc2.bias [C]. Forward returns fc2's output WITHOUT its bias: the caller fuses fc2.bias into
// its bias+dropout+residual kernel and accumulates the bias gradient from it (fc2_bias()).
#pragma once

#include <string>

#include "trainer/nn/context.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class FeedForward {
 public:
  FeedForward(ParamStore<T>& store, const std::string& prefix, int64_t dim, int64_t hidden,
              Activation act)
      : store_(store), dim_(dim), hidden_(hidden), act_(act) {
    w1_ = store.Add(prefix + "fc1.weight", {hidden, dim}, true);
    b1_ = store.Add(prefix + "fc1.bias", {hidden}, false);
    w2_ = store.Add(prefix + "fc2.weight", {dim, hidden}, true);
    b2_ = store.Add(prefix + "fc2.bias", {dim}, false);
  }
  int fc1_weight() const { return w1_; }
  int fc2_weight() const { return w2_; }
  const T* fc2_bias() { return store_.value(b2_); }
  T* fc2_bias_grad() { return store_.grad(b2_); }

  // out[N, C] = act(x W1^T + b1) W2^T; remembers x (and its compute copy).
  //
  // What the activation's backward reads: for ReLU the activation output itself (act'(pre) =
  // [act > 0]), which fc2 keeps anyway as its GEMM operand; for GELU, pre — in the compute dtype
  // under mixed precision, as autocast does. fp32 values that nothing reads later (pre for
  // ReLU, pre under mixed precision) live in scratch just long enough to be used; under mixed
  // precision the activation is produced in the compute dtype directly.
  void Forward(Context<T>& ctx, const T* x, T* out, int64_t rows) {
    const DType dt = DTypeOf<T>::value;
    const bool low = ctx.low_precision(), relu = act_ == Activation::kRelu;
    const int64_t nh = rows * hidden_;
    T* pre = nullptr;
    if (relu || low) {
      pre = ctx.ScratchT(kScratchGemmOut, nh);
    } else {
      ctx.Plan(pre_, {rows, hidden_}, dt);
      pre = pre_.data<T>();
    }
    // The activation is fc2's GEMM operand only: written in the compute dtype directly.
    Tensor& act = low ? act_cast_ : act_out_;
    ctx.Plan(act, {rows, hidden_}, low ? ctx.compute() : dt);
    x_c_ = ctx.AsCompute(x, rows * dim_, x_cast_);
    LinearForward(ctx, W(ctx, w1_, hidden_, dim_), x_c_, rows, pre);
    ctx.backend().BiasActivationForward(pre, store_.value(b1_), pre, act.raw(), act.dtype(), rows,
                                        hidden_, act_);
    act_c_ = act.raw();
    if (relu) {
      saved_ = act_c_;
    } else {
      saved_ = low ? ctx.AsCompute(pre, nh, pre_cast_) : pre;
    }
    saved_dtype_ = low ? ctx.compute() : dt;
    LinearForward(ctx, W(ctx, w2_, dim_, hidden_), act_c_, rows, out);
  }

  // dout: gradient of fc2's pre-bias output [N, C]. dx = (or += when dx_beta = 1) grad w.r.t. x.
  void Backward(Context<T>& ctx, const T* dout, T* dx, int64_t rows, float dx_beta) {
    const void* dout_c = ctx.AsComputeScratch(dout, rows * dim_, kScratchCastA);
    T* dhidden = ctx.ScratchT(kScratchMerged, rows * hidden_);
    LinearBackward(ctx, W(ctx, w2_, dim_, hidden_), act_c_, dout_c, rows, dhidden, 0.0f);
    ctx.backend().BiasActivationBackward(dhidden, saved_, saved_dtype_, dhidden,
                                         store_.grad(b1_), rows, hidden_, act_);
    const void* dh_c = ctx.AsComputeScratch(dhidden, rows * hidden_, kScratchCastB);
    LinearBackward(ctx, W(ctx, w1_, hidden_, dim_), x_c_, dh_c, rows, dx, dx_beta);
  }

 private:
  WeightView<T> W(Context<T>& ctx, int id, int64_t out, int64_t in) {
    return {store_.compute_value(id, ctx.compute()), store_.grad(id), out, in};
  }

  ParamStore<T>& store_;
  int64_t dim_, hidden_;
  Activation act_;
  int w1_, b1_, w2_, b2_;
  Tensor pre_, act_out_, x_cast_, act_cast_, pre_cast_;
  const void* x_c_ = nullptr;
  const void* act_c_ = nullptr;
  const void* saved_ = nullptr;  // what the activation's backward reads (see Forward)
  DType saved_dtype_ = DType::kF32;
};

}  // namespace sf
