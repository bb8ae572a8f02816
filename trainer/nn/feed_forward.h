// Position-wise feed-forward block: out = fc2(dropout(act(fc1(x)))), x and out [N, C], hidden
// [N, F]. The dropout is fairseq's activation_dropout (rate p, training only, mask of dropout
// site `site` indexed by the hidden element r*F + f); at p = 0 it costs nothing.
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
              Activation act, float activation_dropout = 0.0f, uint32_t site = 0)
      : store_(store), dim_(dim), hidden_(hidden), act_(act), dropout_(activation_dropout),
        site_(site) {
    w1_ = store.Add(prefix + "fc1.weight", {hidden, dim}, true);
    b1_ = store.Add(prefix + "fc1.bias", {hidden}, false);
    w2_ = store.Add(prefix + "fc2.weight", {dim, hidden}, true);
    b2_ = store.Add(prefix + "fc2.bias", {dim}, false);
  }
  int fc1_weight() const { return w1_; }
  int fc2_weight() const { return w2_; }
  const T* fc2_bias() { return store_.value(b2_); }
  T* fc2_bias_grad() { return store_.grad(b2_); }

  // out[N, C] = dropout(act(x W1^T + b1)) W2^T; remembers x (and its compute copy).
  //
  // What the activation's backward reads: for ReLU the activation output itself (act'(pre) =
  // [act > 0]), which fc2 keeps anyway as its GEMM operand; for GELU, pre — in the compute dtype
  // under mixed precision, as autocast does. fp32 values that nothing reads later (pre for
  // ReLU, pre under mixed precision) live in scratch just long enough to be used; under mixed
  // precision the activation is produced in the compute dtype directly.
  //
  // Activation dropout (p > 0, training) is applied in place to the fp32 activation, so fc2's
  // operand is the dropped activation. For ReLU that is also what the backward reads: a dropped
  // element reads 0 (derivative 0, which the mask zeroes anyway) and a kept one act/(1-p), whose
  // sign is act's. Under mixed precision the fp32 activation goes through the kScratchMerged
  // slot (free during a forward; the backward sizes it [N, F] anyway) and is then cast.
  //
  // x_compute (mixed precision, may be null): x already in the compute dtype, kept until Backward
  // (a layer norm wrote it, e.g. into InputComputeBuffer()); used instead of casting x.
  void Forward(Context<T>& ctx, const T* x, T* out, int64_t rows, const void* x_compute = nullptr) {
    const DType dt = DTypeOf<T>::value;
    const bool low = ctx.low_precision(), relu = act_ == Activation::kRelu;
    const int64_t nh = rows * hidden_;
    p_ = ctx.training ? dropout_ : 0.0f;
    key_ = ctx.Key(site_);
    // The activation is fc2's GEMM operand only: written in the compute dtype directly.
    Tensor& act = low ? act_cast_ : act_out_;
    ctx.Plan(act, {rows, hidden_}, low ? ctx.compute() : dt);
    x_c_ = ctx.low_precision() && x_compute ? x_compute : ctx.AsCompute(x, rows * dim_, x_cast_);
    if (relu && p_ == 0) {
      // ReLU without activation dropout: fc1, its bias and the ReLU in one GEMM whose epilogue
      // stores the activation in its dtype directly; no pre-activation exists anywhere.
      LinearBiasActForward(ctx, W(ctx, w1_, hidden_, dim_), x_c_, rows, store_.value(b1_),
                           GemmActivation::kRelu, act.raw(), act.dtype());
      act_c_ = saved_ = act.raw();
      saved_dtype_ = act.dtype();
      LinearForward(ctx, W(ctx, w2_, dim_, hidden_), act_c_, rows, out);
      return;
    }
    T* pre = nullptr;
    if (relu || low) {
      pre = ctx.ScratchT(kScratchGemmOut, nh);
    } else {
      ctx.Plan(pre_, {rows, hidden_}, dt);
      pre = pre_.data<T>();
    }
    LinearForward(ctx, W(ctx, w1_, hidden_, dim_), x_c_, rows, pre);
    if (p_ > 0 && low) {
      T* act32 = ctx.ScratchT(kScratchMerged, nh);
      ctx.backend().BiasActivationForward(pre, store_.value(b1_), pre, act32, dt, rows, hidden_,
                                          act_);
      ctx.backend().BiasDropoutResidualForward(act32, nullptr, nullptr, act32, rows, hidden_, p_,
                                               key_);
      ctx.backend().Cast(act32, act.raw(), act.dtype(), nh);
    } else {
      ctx.backend().BiasActivationForward(pre, store_.value(b1_), pre, act.raw(), act.dtype(), rows,
                                          hidden_, act_);
      if (p_ > 0)
        ctx.backend().BiasDropoutResidualForward(act.data<T>(), nullptr, nullptr, act.data<T>(),
                                                 rows, hidden_, p_, key_);
    }
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
    BackwardCompute(ctx, ctx.AsComputeScratch(dout, rows * dim_, kScratchCastA), dx, rows, dx_beta);
  }
  // The same from dout already in the compute dtype (it may be the kScratchCastA slot).
  //
  // The hidden gradient comes out of fc2's GEMM in fp32 and is read once: the activation's
  // backward (and the dropout's) turns it into fc1's operand in the compute dtype, summing the
  // bias gradient from the unrounded values. (A bf16 GEMM output would save ~16 MB of traffic
  // per base-model layer but sum fc1's bias gradient from rounded values, as autocast does;
  // the engine keeps every reduction exact to fp32.)
  void BackwardCompute(Context<T>& ctx, const void* dout_c, T* dx, int64_t rows, float dx_beta) {
    const DType cdt = ctx.compute();
    T* dhidden = ctx.ScratchT(kScratchMerged, rows * hidden_);
    LinearBackward(ctx, W(ctx, w2_, dim_, hidden_), act_c_, dout_c, rows, dhidden, 0.0f);
    if (p_ > 0)
      ctx.backend().BiasDropoutResidualBackward(dhidden, dhidden, nullptr, rows, hidden_, p_, key_);
    void* dh_c = ctx.low_precision() ? ctx.Scratch(kScratchCastB, rows * hidden_, cdt)
                                     : static_cast<void*>(dhidden);
    ctx.backend().BiasActivationBackwardTo(dhidden, DTypeOf<T>::value, saved_, saved_dtype_, dh_c,
                                           cdt, store_.grad(b1_), rows, hidden_, act_);
    LinearBackward(ctx, W(ctx, w1_, hidden_, dim_), x_c_, dh_c, rows, dx, dx_beta);
  }
  // The planned buffer this block keeps x in the compute dtype in ([rows, C]), for a layer norm
  // to write directly; null in fp32.
  void* InputComputeBuffer(Context<T>& ctx, int64_t rows) {
    if (!ctx.low_precision()) return nullptr;
    ctx.Plan(x_cast_, {rows, dim_}, ctx.compute());
    return x_cast_.raw();
  }

 private:
  WeightView<T> W(Context<T>& ctx, int id, int64_t out, int64_t in) {
    return {store_.compute_value(id, ctx.compute()), store_.grad(id), out, in};
  }

  ParamStore<T>& store_;
  int64_t dim_, hidden_;
  Activation act_;
  float dropout_;
  uint32_t site_;
  int w1_, b1_, w2_, b2_;
  float p_ = 0;  // the activation dropout of the last Forward (0 outside training)
  DropoutKey key_;
  Tensor pre_, act_out_, x_cast_, act_cast_, pre_cast_;
  const void* x_c_ = nullptr;
  const void* act_c_ = nullptr;
  const void* saved_ = nullptr;  // what the activation's backward reads (see Forward)
  DType saved_dtype_ = DType::kF32;
};

}  // namespace sf
