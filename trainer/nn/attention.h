// Multi-head scaled dot-product attention with a fused input projection.
//
// Parameters (names as fairseq's / torch.nn.MultiheadAttention's): <name>.in_proj_weight
// [3C, C] (rows: q, k, v), <name>.in_proj_bias [3C], <name>.out_proj.weight [C, C],
// <name>.out_proj.bias [C].
//
// Self-attention  (kSelf):  one GEMM x[B*T, C] . W_in^T -> [B*T, 3C], split to q, k, v.
// Cross-attention (kCross): q = x . W_q^T (rows 0..C of W_in) and k, v = enc . W_kv^T (rows C..3C).
// Per head (D = C/H):  S = q k^T [B,H,Tq,Tk];  P = softmax(S/sqrt(D) masked);  P' = dropout(P);
// ctx = P' v [B,H,Tq,D] -> merged to [B*Tq, C];  out = ctx . W_out^T.
// Masks: key padding mask [B, Tk] (1 = pad) and, for decoder self-attention, causal (k > q).
// Forward returns `out` WITHOUT out_proj.bias: the caller fuses it into bias+dropout+residual.
//
// Two ways to run it, chosen by the backend (Backend::has_fused_attention):
// - Fused (the CPU): the input projection's GEMM adds its bias and writes q, k, v in the compute
//   dtype as [B*T, 3C] (kernels read each head in place); one fused kernel computes ctx with a
//   blockwise softmax that is never stored, keeping only lse [B, H, Tq]; the backward recomputes
//   P from it. Saved: compute-dtype x (and enc), the projection, ctx and lse.
// - Per-head GEMMs (other backends): q/k/v split into head layout, S and P materialised. Saved:
//   compute-dtype copies of x (and enc), q/k/v in head layout, P' and ctx, and P itself in T.
// In fp32 the compute-dtype copies are the buffers themselves; in mixed precision the kernels
// producing q/k/v, P' and ctx write the compute dtype directly (there is no fp32 copy). Buffers
// are planned once per batch shape.
#pragma once

#include <cmath>
#include <string>

#include "trainer/nn/context.h"
#include "trainer/nn/linear.h"
#include "trainer/nn/param_store.h"

namespace sf {

enum class AttentionKind { kSelf, kCross };

template <typename T>
class MultiheadAttention {
 public:
  MultiheadAttention(ParamStore<T>& store, const std::string& name, int64_t dim, int64_t heads,
                     AttentionKind kind, bool causal, float dropout, uint32_t dropout_site)
      : store_(store), dim_(dim), heads_(heads), head_dim_(dim / heads), kind_(kind),
        causal_(causal), dropout_(dropout), site_(dropout_site) {
    w_in_ = store.Add(name + ".in_proj_weight", {3 * dim, dim}, true);
    b_in_ = store.Add(name + ".in_proj_bias", {3 * dim}, false);
    w_out_ = store.Add(name + ".out_proj.weight", {dim, dim}, true);
    b_out_ = store.Add(name + ".out_proj.bias", {dim}, false);
  }
  int in_proj_weight() const { return w_in_; }
  // The planned buffer this layer keeps x in the compute dtype in ([rows, C]), for a layer norm
  // to write directly (then pass it to Forward as x_compute); null in fp32.
  void* InputComputeBuffer(Context<T>& ctx, int64_t rows) {
    if (!ctx.low_precision()) return nullptr;
    ctx.Plan(x_cast_, {rows * dim_}, ctx.compute());
    return x_cast_.raw();
  }
  int out_proj_weight() const { return w_out_; }
  const T* out_bias() { return store_.value(b_out_); }
  T* out_bias_grad() { return store_.grad(b_out_); }

  // x [B, Tq, C]; kv_source [B, Tk, C] (ignored for self-attention, where Tk = Tq);
  // key_padding [B, Tk] or null. Writes out [B*Tq, C] (pre-bias). Inputs must stay unchanged
  // until Backward. Under mixed precision x_compute / kv_compute, when not null, are x and
  // kv_source already in the compute dtype (a layer norm wrote them; x_compute may be
  // InputComputeBuffer()): used as they are, also until Backward, instead of casting.
  void Forward(Context<T>& ctx, const T* x, const T* kv_source, const uint8_t* key_padding,
               int64_t batch, int64_t tq, int64_t tk, T* out, const void* x_compute = nullptr,
               const void* kv_compute = nullptr) {
    if (kind_ == AttentionKind::kSelf) tk = tq;
    batch_ = batch, tq_ = tq, tk_ = tk;
    x_compute_ = ctx.low_precision() ? x_compute : nullptr;
    kv_compute_ = ctx.low_precision() ? kv_compute : nullptr;
    fused_ = ctx.backend().has_fused_attention();
    if (fused_) return ForwardFused(ctx, x, kv_source, key_padding, out);
    const DType dt = DTypeOf<T>::value, cdt = ctx.compute();
    const int64_t C = dim_, H = heads_, D = head_dim_;
    const int64_t nq = batch * tq * C, nk = batch * tk * C;
    // Head layout: q [B,H,Tq,D], then k [B,H,Tk,D], then v [B,H,Tk,D]. They, the dropped
    // probabilities and the merged context are GEMM operands only: in mixed precision the
    // kernels that produce them write the compute dtype directly (no fp32 copy at all).
    const bool low = ctx.low_precision();
    const DType odt = low ? cdt : dt;  // dtype of those operands
    const float p = ctx.training ? dropout_ : 0.0f;
    const int64_t ns = batch * H * tq * tk;
    ctx.Plan(probs_, {ns}, dt);
    Tensor& heads = low ? heads_cast_ : heads_buf_;
    ctx.Plan(heads, {nq + 2 * nk}, odt);
    void* q = heads.raw();
    void* k = heads.data<char>() + nq * DTypeSize(odt);  // v follows k

    x_c_ = InputCompute(ctx, x, nq);
    T* proj = ctx.ScratchT(kScratchGemmOut, batch * tq * 3 * C);
    if (kind_ == AttentionKind::kSelf) {
      LinearForward(ctx, WIn(ctx, 0, 3), x_c_, batch * tq, proj);
      ctx.backend().SplitHeads(proj, store_.value(b_in_), q, odt, batch, tq, 3, H, D);
    } else {
      LinearForward(ctx, WIn(ctx, 0, 1), x_c_, batch * tq, proj);
      ctx.backend().SplitHeads(proj, store_.value(b_in_), q, odt, batch, tq, 1, H, D);
      enc_c_ = KvCompute(ctx, kv_source, nk);
      T* kvp = ctx.ScratchT(kScratchGemmOut, batch * tk * 2 * C);
      LinearForward(ctx, WIn(ctx, 1, 2), enc_c_, batch * tk, kvp);
      ctx.backend().SplitHeads(kvp, store_.value(b_in_) + C, k, odt, batch, tk, 2, H, D);
    }
    heads_c_ = q;
    const void* qc = heads_c_;
    const void* kc = Offset(heads_c_, cdt, nq);
    const void* vc = Offset(heads_c_, cdt, nq + nk);

    // S[bh] = q[bh] . k[bh]^T   [Tq, Tk]
    T* scores = ctx.ScratchT(kScratchScores, batch * H * tq * tk);
    ctx.backend().Gemm(batch * H, tq, tk, D, GemmOperand{qc, cdt, false, D, tq * D},
                       GemmOperand{kc, cdt, true, D, tk * D}, scores, tk, tq * tk, 1.0f, 0.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    // P' = dropout(P): its own buffer when it differs from P or has another dtype.
    void* dropped = nullptr;
    if (low || p > 0) {
      Tensor& pd = low ? pd_cast_ : dropped_;
      ctx.Plan(pd, {ns}, odt);
      dropped = pd.raw();
    }
    ctx.backend().SoftmaxForward(scores, probs_.data<T>(), dropped, odt, key_padding, batch, H,
                                 tq, tk, scale, causal_, p, ctx.Key(site_));
    p_used_ = p;
    key_ = ctx.Key(site_);
    pd_c_ = dropped ? dropped : probs_.data<T>();
    // ctx[bh] = P'[bh] . v[bh]   [Tq, D], then merged to [B, Tq, C]
    T* ctx_heads = ctx.ScratchT(kScratchHeadsGrad, nq);
    ctx.backend().Gemm(batch * H, tq, D, tk, GemmOperand{pd_c_, cdt, false, tk, tq * tk},
                       GemmOperand{vc, cdt, false, D, tk * D}, ctx_heads, D, tq * D, 1.0f, 0.0f);
    Tensor& merged = low ? ctx_cast_ : ctx_;
    ctx.Plan(merged, {batch * tq, C}, odt);
    ctx.backend().MergeHeads(ctx_heads, merged.raw(), odt, batch, tq, 1, H, D);
    ctx_c_ = merged.raw();
    LinearForward(ctx, WOut(ctx), ctx_c_, batch * tq, out);
  }

  // dout [B*Tq, C]: gradient of the pre-bias output. dx [B*Tq, C] = (or += when dx_beta = 1)
  // gradient w.r.t. x. For cross-attention d_kv_source [B*Tk, C] is ADDED to (it collects the
  // encoder output's gradient from every decoder layer).
  void Backward(Context<T>& ctx, const T* dout, T* dx, float dx_beta, T* d_kv_source) {
    BackwardCompute(ctx, ctx.AsComputeScratch(dout, batch_ * tq_ * dim_, kScratchCastA), dx,
                    dx_beta, d_kv_source);
  }
  // The same from dout already in the compute dtype (a fused residual/layer-norm backward wrote
  // it; it may be the kScratchCastA slot, which this call reuses after reading it).
  void BackwardCompute(Context<T>& ctx, const void* dout_c, T* dx, float dx_beta,
                       T* d_kv_source) {
    if (fused_) return BackwardFused(ctx, dout_c, dx, dx_beta, d_kv_source);
    const DType cdt = ctx.compute();
    const int64_t B = batch_, tq = tq_, tk = tk_, C = dim_, H = heads_, D = head_dim_;
    const int64_t nq = B * tq * C, nk = B * tk * C, ns = B * H * tq * tk;
    // out = ctx . W_out^T
    T* dctx = ctx.ScratchT(kScratchMerged, B * tq * 3 * C);
    LinearBackward(ctx, WOut(ctx), ctx_c_, dout_c, B * tq, dctx, 0.0f);
    // Gradients in head layout: dq [B,H,Tq,D], dk, dv [B,H,Tk,D] contiguous like heads_buf_.
    T* dheads = ctx.ScratchT(kScratchHeadsGrad, nq + 2 * nk);
    T* dq = dheads;
    T* dk = dq + nq;
    T* dv = dk + nk;
    // dctx in head layout, as the GEMMs' operand: in dq's place (fp32), or in the compute dtype.
    void* dctx_c = ctx.low_precision() ? ctx.Scratch(kScratchCastA, nq, cdt) : dq;
    ctx.backend().SplitHeads(dctx, nullptr, dctx_c, cdt, B, tq, 1, H, D);
    const void* qc = heads_c_;
    const void* kc = Offset(heads_c_, cdt, nq);
    const void* vc = Offset(heads_c_, cdt, nq + nk);
    // dP' = dctx . v^T  [Tq, Tk];  dv = P'^T . dctx  [Tk, D]
    T* dpd = ctx.ScratchT(kScratchDProbs, ns);
    ctx.backend().Gemm(B * H, tq, tk, D, GemmOperand{dctx_c, cdt, false, D, tq * D},
                       GemmOperand{vc, cdt, true, D, tk * D}, dpd, tk, tq * tk, 1.0f, 0.0f);
    ctx.backend().Gemm(B * H, tk, D, tq, GemmOperand{pd_c_, cdt, true, tk, tq * tk},
                       GemmOperand{dctx_c, cdt, false, D, tq * D}, dv, D, tk * D, 1.0f, 0.0f);
    // dS = softmax backward (through the regenerated dropout mask), scaled by 1/sqrt(D).
    // dS, only ever a GEMM operand: written in the compute dtype.
    void* ds_c = ctx.Scratch(ctx.low_precision() ? kScratchCastB : kScratchScores, ns, cdt);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    ctx.backend().SoftmaxBackward(dpd, probs_.data<T>(), ds_c, cdt, B, H, tq, tk, scale, p_used_,
                                  key_);
    // dq = dS . k  [Tq, D];  dk = dS^T . q  [Tk, D]   (dq overwrites dctx, no longer needed)
    ctx.backend().Gemm(B * H, tq, D, tk, GemmOperand{ds_c, cdt, false, tk, tq * tk},
                       GemmOperand{kc, cdt, false, D, tk * D}, dq, D, tq * D, 1.0f, 0.0f);
    ctx.backend().Gemm(B * H, tk, D, tq, GemmOperand{ds_c, cdt, true, tk, tq * tk},
                       GemmOperand{qc, cdt, false, D, tq * D}, dk, D, tk * D, 1.0f, 0.0f);
    T* dproj = ctx.ScratchT(kScratchMerged, B * tq * 3 * C);
    if (kind_ == AttentionKind::kSelf) {
      ctx.backend().MergeHeads(dheads, dproj, DTypeOf<T>::value, B, tq, 3, H, D);  // [B*T, 3C]
      ctx.backend().ColumnSum(dproj, store_.grad(b_in_), B * tq, 3 * C);
      const void* dproj_c = ctx.AsComputeScratch(dproj, B * tq * 3 * C, kScratchCastA);
      LinearBackward(ctx, WIn(ctx, 0, 3), x_c_, dproj_c, B * tq, dx, dx_beta);
    } else {
      ctx.backend().MergeHeads(dq, dproj, DTypeOf<T>::value, B, tq, 1, H, D);  // [B*Tq, C]
      ctx.backend().ColumnSum(dproj, store_.grad(b_in_), B * tq, C);
      const void* dq_c = ctx.AsComputeScratch(dproj, B * tq * C, kScratchCastA);
      LinearBackward(ctx, WIn(ctx, 0, 1), x_c_, dq_c, B * tq, dx, dx_beta);
      T* dkv = ctx.ScratchT(kScratchGemmOut, B * tk * 2 * C);
      ctx.backend().MergeHeads(dk, dkv, DTypeOf<T>::value, B, tk, 2, H, D);  // [B*Tk, 2C]
      ctx.backend().ColumnSum(dkv, store_.grad(b_in_) + C, B * tk, 2 * C);
      const void* dkv_c = ctx.AsComputeScratch(dkv, B * tk * 2 * C, kScratchCastB);
      LinearBackward(ctx, WIn(ctx, 1, 2), enc_c_, dkv_c, B * tk, d_kv_source, 1.0f);
    }
  }

 private:
  // The fused path (see the header comment). The projection [B*Tq, 3C] (self) or q [B*Tq, C] and
  // k|v [B*Tk, 2C] (cross) is written by the GEMM with its bias, in the compute dtype.
  AttentionArgs Args(Context<T>& ctx, const uint8_t* key_padding, float p) const {
    const int64_t C = dim_;
    AttentionArgs a;
    a.batch = batch_, a.heads = heads_, a.tq = tq_, a.tk = tk_, a.head_dim = head_dim_;
    a.ldq = kind_ == AttentionKind::kSelf ? 3 * C : C;
    a.ldk = a.ldv = kind_ == AttentionKind::kSelf ? 3 * C : 2 * C;
    a.ldo = C;
    a.key_padding = key_padding;
    a.causal = causal_;
    a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
    a.dropout = p;
    a.key = ctx.Key(site_);
    a.dtype = ctx.compute();
    return a;
  }

  void ForwardFused(Context<T>& ctx, const T* x, const T* kv_source, const uint8_t* key_padding,
                    T* out) {
    const DType cdt = ctx.compute();
    const int64_t C = dim_, nq = batch_ * tq_, nk = batch_ * tk_;
    x_c_ = InputCompute(ctx, x, nq * C);
    const T* b_in = store_.value(b_in_);
    if (kind_ == AttentionKind::kSelf) {
      ctx.Plan(proj_, {nq, 3 * C}, cdt);
      LinearBiasActForward(ctx, WIn(ctx, 0, 3), x_c_, nq, b_in, GemmActivation::kNone, proj_.raw(), cdt);
      q_c_ = proj_.raw();
      k_c_ = Offset(q_c_, cdt, C);
      v_c_ = Offset(q_c_, cdt, 2 * C);
    } else {
      ctx.Plan(proj_, {nq, C}, cdt);
      ctx.Plan(kv_proj_, {nk, 2 * C}, cdt);
      LinearBiasActForward(ctx, WIn(ctx, 0, 1), x_c_, nq, b_in, GemmActivation::kNone, proj_.raw(), cdt);
      enc_c_ = KvCompute(ctx, kv_source, nk * C);
      LinearBiasActForward(ctx, WIn(ctx, 1, 2), enc_c_, nk, b_in + C, GemmActivation::kNone,
                           kv_proj_.raw(), cdt);
      q_c_ = proj_.raw();
      k_c_ = kv_proj_.raw();
      v_c_ = Offset(k_c_, cdt, C);
    }
    key_padding_ = key_padding;
    p_used_ = ctx.training ? dropout_ : 0.0f;
    ctx.Plan(lse_, {batch_ * heads_ * tq_}, DType::kF32);
    ctx.Plan(ctx_fused_, {nq, C}, cdt);
    ctx.backend().AttentionForward(Args(ctx, key_padding, p_used_), q_c_, k_c_, v_c_,
                                   ctx_fused_.raw(), lse_.template data<float>());
    ctx_c_ = ctx_fused_.raw();
    LinearForward(ctx, WOut(ctx), ctx_c_, nq, out);
  }

  void BackwardFused(Context<T>& ctx, const void* dout_c, T* dx, float dx_beta, T* d_kv_source) {
    const DType cdt = ctx.compute();
    const int64_t C = dim_, nq = batch_ * tq_, nk = batch_ * tk_;
    // out = ctx . W_out^T: dW_out, and dctx straight into the compute dtype (the kernel's dO).
    LinearWeightGrad(ctx, WOut(ctx), ctx_c_, dout_c, nq);
    void* dctx_c = ctx.Scratch(kScratchCastB, nq * C, cdt);
    LinearInputGradTo(ctx, WOut(ctx), dout_c, nq, dctx_c, cdt);
    const AttentionArgs a = Args(ctx, key_padding_, p_used_);
    // dq, dk, dv straight into the in-projection's operand dtype, with the bias gradient.
    AttentionGrads<T> g;
    g.dtype = cdt;
    g.dbias = store_.grad(b_in_);
    if (kind_ == AttentionKind::kSelf) {
      // dq | dk | dv side by side in [B*T, 3C], the in-projection's output gradient.
      void* dproj = ctx.Scratch(kScratchCastA, nq * 3 * C, cdt);
      g.dq = dproj;
      g.dk = Offset(dproj, cdt, C);
      g.dv = Offset(dproj, cdt, 2 * C);
      ctx.backend().AttentionBackward(a, q_c_, k_c_, v_c_, ctx_c_, dctx_c, lse_.template data<float>(), g);
      LinearBackward(ctx, WIn(ctx, 0, 3), x_c_, dproj, nq, dx, dx_beta);
    } else {
      void* dq = ctx.Scratch(kScratchCastA, nq * C, cdt);
      void* dkv = ctx.Scratch(kScratchMerged, nk * 2 * C, cdt);
      g.dq = dq;
      g.dk = dkv;
      g.dv = Offset(dkv, cdt, C);
      ctx.backend().AttentionBackward(a, q_c_, k_c_, v_c_, ctx_c_, dctx_c, lse_.template data<float>(), g);
      LinearBackward(ctx, WIn(ctx, 0, 1), x_c_, dq, nq, dx, dx_beta);
      LinearBackward(ctx, WIn(ctx, 1, 2), enc_c_, dkv, nk, d_kv_source, 1.0f);
    }
  }

  // x (n elements) in the compute dtype: what the caller gave, or a cast kept until Backward.
  const void* InputCompute(Context<T>& ctx, const T* x, int64_t n) {
    if (x_compute_) return x_compute_;
    return ctx.AsCompute(x, n, x_cast_);
  }
  const void* KvCompute(Context<T>& ctx, const T* kv, int64_t n) {
    if (kv_compute_) return kv_compute_;
    return ctx.AsCompute(kv, n, enc_cast_);
  }

  static const void* Offset(const void* p, DType dt, int64_t elements) {
    return static_cast<const char*>(p) + elements * DTypeSize(dt);
  }
  static void* Offset(void* p, DType dt, int64_t elements) {
    return static_cast<char*>(p) + elements * DTypeSize(dt);
  }
  // Rows [first*C, (first+count)*C) of in_proj_weight.
  WeightView<T> WIn(Context<T>& ctx, int64_t first, int64_t count) {
    return {Offset(store_.compute_value(w_in_, ctx.compute()), ctx.compute(), first * dim_ * dim_),
            store_.grad(w_in_) + first * dim_ * dim_, count * dim_, dim_};
  }
  WeightView<T> WOut(Context<T>& ctx) {
    return {store_.compute_value(w_out_, ctx.compute()), store_.grad(w_out_), dim_, dim_};
  }

  ParamStore<T>& store_;
  int64_t dim_, heads_, head_dim_;
  AttentionKind kind_;
  bool causal_;
  float dropout_;
  uint32_t site_;
  int w_in_, b_in_, w_out_, b_out_;
  int64_t batch_ = 0, tq_ = 0, tk_ = 0;
  float p_used_ = 0;
  DropoutKey key_;
  bool fused_ = false;
  const void* x_compute_ = nullptr;
  const void* kv_compute_ = nullptr;
  const uint8_t* key_padding_ = nullptr;
  Tensor proj_, kv_proj_, lse_, ctx_fused_;  // the fused path's saved buffers
  const void* q_c_ = nullptr;
  const void* k_c_ = nullptr;
  const void* v_c_ = nullptr;
  Tensor heads_buf_, probs_, dropped_, ctx_;
  Tensor x_cast_, enc_cast_, heads_cast_, pd_cast_, ctx_cast_;
  const void* x_c_ = nullptr;
  const void* enc_c_ = nullptr;
  const void* heads_c_ = nullptr;
  const void* pd_c_ = nullptr;
  const void* ctx_c_ = nullptr;
};

}  // namespace sf
