// Transformer encoder and decoder layers (fairseq's TransformerEncoderLayer /
// TransformerDecoderLayer), post-norm (normalize_before = false, the original Transformer) or
// pre-norm. With N = B*T rows of C features:
//
// Encoder, post-norm:  h1 = x + drop(SelfAttn(x) + b_o);  x1 = LN_sa(h1)
//                      h2 = x1 + drop(FFN(x1) + b_2);     out = LN_final(h2)
// Encoder, pre-norm:   h1 = x + drop(SelfAttn(LN_sa(x)) + b_o)
//                      out = h1 + drop(FFN(LN_final(h1)) + b_2)
// Decoder adds causal self-attention and, between it and the FFN, cross-attention over the
// encoder output with its own layer norm (encoder_attn_layer_norm).
//
// Parameter names below <prefix> ("encoder.layers.0."): self_attn.*, self_attn_layer_norm.*,
// [encoder_attn.*, encoder_attn_layer_norm.*,] fc1.*, fc2.*, final_layer_norm.*.
// Dropout sites: kSites consecutive ids from `site` (attention probs, attention residual, FFN
// residual; the decoder's cross-attention probs/residual use +3/+4), and `ffn_site` for the
// feed-forward's activation dropout. The model gives every layer's ffn_site after all its other
// sites, so adding activation dropout left every other mask as it was.
//
// Forward returns a pointer to the layer's output buffer (valid until the next Forward).
// Backward(dout, dx, tmp1, tmp2): dout [N, C] may be overwritten; dx receives the input gradient;
// tmp1/tmp2 are [N, C] scratch.
//
// Mixed precision: each residual tail (residual + dropout + layer norm) is one fused kernel that
// also writes the normalised output in the compute dtype straight into the buffer of the block
// that reads it; post-norm layers also keep their output so (output_compute(), for the next
// layer's x_compute). Backward, post-norm, each tail's fused backward writes the branch's
// gradient in the compute dtype for the branch's GEMMs.
#pragma once

#include <string>

#include "trainer/nn/attention.h"
#include "trainer/nn/feed_forward.h"
#include "trainer/nn/layer_norm.h"

namespace sf {

// Where a layer norm's output x1/x2/x3 goes. In fp32 the attention or FFN that reads it keeps a
// pointer to it for the backward, so it is a planned buffer of the layer. In mixed precision its
// readers keep compute-dtype copies and the forward is done with it before the layer's next
// layer norm writes: all of a layer's normalised activations share one scratch slot.
template <typename T>
T* NormedBuffer(Context<T>& ctx, Tensor& planned, int64_t n, int64_t C) {
  if (ctx.low_precision()) return ctx.ScratchT(kScratchNormed, n * C);
  ctx.Plan(planned, {n, C}, DTypeOf<T>::value);
  return planned.data<T>();
}

// Mixed precision: a planned [n, C] buffer in the compute dtype (a layer's output kept for the
// next layer's GEMMs); fp32: null.
template <typename T>
void* PlanCompute(Context<T>& ctx, Tensor& planned, int64_t n, int64_t C) {
  if (!ctx.low_precision()) return nullptr;
  ctx.Plan(planned, {n, C}, ctx.compute());
  return planned.raw();
}

// Where a fused residual/layer-norm backward writes a branch's gradient: the kScratchCastA slot
// in the compute dtype (the slot a branch's backward casts its dout into anyway), or, in fp32,
// the given [n, C] buffer.
template <typename T>
void* BranchBuffer(Context<T>& ctx, T* fp32_buffer, int64_t n, int64_t C) {
  if (!ctx.low_precision()) return fp32_buffer;
  return ctx.Scratch(kScratchCastA, n * C, ctx.compute());
}

struct LayerOptions {
  int64_t dim = 0, heads = 0, ffn_dim = 0;
  float dropout = 0, attention_dropout = 0, activation_dropout = 0;
  Activation activation = Activation::kRelu;
  bool normalize_before = false;
  // EncoderLayer only: causal self-attention (position t attends to 0..t), the layer of a
  // decoder-only language model (fairseq's transformer_lm: a decoder layer without encoder
  // attention, which has the same parameters).
  bool causal = false;
};

template <typename T>
class EncoderLayer {
 public:
  EncoderLayer(ParamStore<T>& store, const std::string& prefix, const LayerOptions& o,
               uint32_t site, uint32_t ffn_site)
      : o_(o), site_(site),
        attn_(store, prefix + "self_attn", o.dim, o.heads, AttentionKind::kSelf, o.causal,
              o.attention_dropout, site),
        ln1_(store, prefix + "self_attn_layer_norm", o.dim),
        ffn_(store, prefix, o.dim, o.ffn_dim, o.activation, o.activation_dropout, ffn_site),
        ln2_(store, prefix + "final_layer_norm", o.dim) {}
  static constexpr uint32_t kSites = 3;

  void Init() { ln1_.Init(); ln2_.Init(); }
  MultiheadAttention<T>& attention() { return attn_; }
  FeedForward<T>& ffn() { return ffn_; }

  // x_compute (mixed precision, may be null): x in the compute dtype (the previous layer's
  // output_compute()), kept unchanged until Backward.
  const T* Forward(Context<T>& ctx, const T* x, const uint8_t* pad, int64_t batch, int64_t time,
                   const void* x_compute = nullptr) {
    const int64_t n = batch * time, C = o_.dim;
    n_ = n;
    for (Tensor* t : {&a_, &h1_, &out_}) ctx.Plan(*t, {n, C}, DTypeOf<T>::value);
    auto& be = ctx.backend();
    p_ = ctx.training ? o_.dropout : 0.0f;
    k1_ = ctx.Key(site_ + 1);
    k2_ = ctx.Key(site_ + 2);
    T *a = a_.data<T>(), *h1 = h1_.data<T>(), *out = out_.data<T>();
    T* x1 = NormedBuffer(ctx, x1_, n, C);
    T* x2 = o_.normalize_before ? NormedBuffer(ctx, x2_, n, C) : nullptr;
    out_compute_ = nullptr;
    if (!o_.normalize_before) {
      attn_.Forward(ctx, x, x, pad, batch, time, time, a, x_compute);
      void* x1_c = ffn_.InputComputeBuffer(ctx, n);
      ln1_.ForwardResidual(ctx, a, attn_.out_bias(), x, p_, k1_, h1, x1, x1_c, n);
      ffn_.Forward(ctx, x1, a, n, x1_c);
      out_compute_ = PlanCompute(ctx, out_low_, n, C);
      ln2_.ForwardResidual(ctx, a, ffn_.fc2_bias(), x1, p_, k2_, a, out, out_compute_, n);  // a: h2
    } else {
      void* x1_c = attn_.InputComputeBuffer(ctx, n);
      ln1_.Forward(ctx, x, x1, n, x1_c);
      attn_.Forward(ctx, x1, x1, pad, batch, time, time, a, x1_c);
      void* x2_c = ffn_.InputComputeBuffer(ctx, n);
      ln2_.ForwardResidual(ctx, a, attn_.out_bias(), x, p_, k1_, h1, x2, x2_c, n);
      ffn_.Forward(ctx, x2, a, n, x2_c);
      be.BiasDropoutResidualForward(a, ffn_.fc2_bias(), h1, out, n, C, p_, k2_);
    }
    return out;
  }
  // The last Forward's output in the compute dtype (post-norm, mixed precision), else null.
  const void* output_compute() const { return out_compute_; }

  void Backward(Context<T>& ctx, T* dout, T* dx, T* tmp1, T* tmp2) {
    auto& be = ctx.backend();
    const int64_t n = n_, C = o_.dim;
    if (!o_.normalize_before) {
      void* branch = BranchBuffer(ctx, tmp2, n, C);
      ln2_.BackwardResidual(ctx, dout, tmp1, branch, ffn_.fc2_bias_grad(), p_, k2_, n);  // d h2
      ffn_.BackwardCompute(ctx, branch, tmp1, n, 1.0f);                                  // d x1
      branch = BranchBuffer(ctx, tmp2, n, C);
      ln1_.BackwardResidual(ctx, tmp1, dx, branch, attn_.out_bias_grad(), p_, k1_, n);   // d h1
      attn_.BackwardCompute(ctx, branch, dx, 1.0f, nullptr);
    } else {
      be.BiasDropoutResidualBackward(dout, tmp1, ffn_.fc2_bias_grad(), n, C, p_, k2_);
      ffn_.Backward(ctx, tmp1, tmp2, n, 0.0f);
      ln2_.Backward(ctx, tmp2, dout, n, true);                                // dout = d h1
      be.BiasDropoutResidualBackward(dout, tmp1, attn_.out_bias_grad(), n, C, p_, k1_);
      attn_.Backward(ctx, tmp1, tmp2, 0.0f, nullptr);
      ln1_.Backward(ctx, tmp2, dx, n, false);
      be.Add(dout, dx, n * C);
    }
  }

 private:
  LayerOptions o_;
  uint32_t site_;
  MultiheadAttention<T> attn_;
  LayerNorm<T> ln1_;
  FeedForward<T> ffn_;
  LayerNorm<T> ln2_;
  Tensor a_, h1_, x1_, x2_, out_, out_low_;
  void* out_compute_ = nullptr;
  int64_t n_ = 0;
  float p_ = 0;
  DropoutKey k1_, k2_;
};

template <typename T>
class DecoderLayer {
 public:
  DecoderLayer(ParamStore<T>& store, const std::string& prefix, const LayerOptions& o,
               uint32_t site, uint32_t ffn_site)
      : o_(o), site_(site),
        self_(store, prefix + "self_attn", o.dim, o.heads, AttentionKind::kSelf, true,
              o.attention_dropout, site),
        ln1_(store, prefix + "self_attn_layer_norm", o.dim),
        cross_(store, prefix + "encoder_attn", o.dim, o.heads, AttentionKind::kCross, false,
               o.attention_dropout, site + 3),
        ln2_(store, prefix + "encoder_attn_layer_norm", o.dim),
        ffn_(store, prefix, o.dim, o.ffn_dim, o.activation, o.activation_dropout, ffn_site),
        ln3_(store, prefix + "final_layer_norm", o.dim) {}
  static constexpr uint32_t kSites = 5;

  void Init() { ln1_.Init(); ln2_.Init(); ln3_.Init(); }
  MultiheadAttention<T>& self_attention() { return self_; }
  MultiheadAttention<T>& cross_attention() { return cross_; }
  FeedForward<T>& ffn() { return ffn_; }

  // y [B, Tt, C]; enc [B, Ts, C]; tgt_pad [B, Tt]; src_pad [B, Ts]. y_compute / enc_compute
  // (mixed precision, may be null): y and enc already in the compute dtype, kept until Backward.
  const T* Forward(Context<T>& ctx, const T* y, const T* enc, const uint8_t* tgt_pad,
                   const uint8_t* src_pad, int64_t batch, int64_t tgt_len, int64_t src_len,
                   const void* y_compute = nullptr, const void* enc_compute = nullptr) {
    const int64_t n = batch * tgt_len, C = o_.dim;
    n_ = n;
    for (Tensor* t : {&a_, &h1_, &h2_, &out_}) ctx.Plan(*t, {n, C}, DTypeOf<T>::value);
    auto& be = ctx.backend();
    p_ = ctx.training ? o_.dropout : 0.0f;
    k1_ = ctx.Key(site_ + 1);
    k2_ = ctx.Key(site_ + 2);
    k3_ = ctx.Key(site_ + 4);
    T *a = a_.data<T>(), *h1 = h1_.data<T>(), *h2 = h2_.data<T>(), *out = out_.data<T>();
    T* x1 = NormedBuffer(ctx, x1_, n, C);
    T* x2 = NormedBuffer(ctx, x2_, n, C);
    T* x3 = o_.normalize_before ? NormedBuffer(ctx, x3_, n, C) : nullptr;
    out_compute_ = nullptr;
    if (!o_.normalize_before) {
      self_.Forward(ctx, y, y, tgt_pad, batch, tgt_len, tgt_len, a, y_compute);
      void* x1_c = cross_.InputComputeBuffer(ctx, n);
      ln1_.ForwardResidual(ctx, a, self_.out_bias(), y, p_, k1_, h1, x1, x1_c, n);
      cross_.Forward(ctx, x1, enc, src_pad, batch, tgt_len, src_len, a, x1_c, enc_compute);
      void* x2_c = ffn_.InputComputeBuffer(ctx, n);
      ln2_.ForwardResidual(ctx, a, cross_.out_bias(), x1, p_, k3_, h2, x2, x2_c, n);
      ffn_.Forward(ctx, x2, a, n, x2_c);
      out_compute_ = PlanCompute(ctx, out_low_, n, C);
      ln3_.ForwardResidual(ctx, a, ffn_.fc2_bias(), x2, p_, k2_, a, out, out_compute_, n);
    } else {
      void* x1_c = self_.InputComputeBuffer(ctx, n);
      ln1_.Forward(ctx, y, x1, n, x1_c);
      self_.Forward(ctx, x1, x1, tgt_pad, batch, tgt_len, tgt_len, a, x1_c);
      void* x2_c = cross_.InputComputeBuffer(ctx, n);
      ln2_.ForwardResidual(ctx, a, self_.out_bias(), y, p_, k1_, h1, x2, x2_c, n);
      cross_.Forward(ctx, x2, enc, src_pad, batch, tgt_len, src_len, a, x2_c, enc_compute);
      void* x3_c = ffn_.InputComputeBuffer(ctx, n);
      ln3_.ForwardResidual(ctx, a, cross_.out_bias(), h1, p_, k3_, h2, x3, x3_c, n);
      ffn_.Forward(ctx, x3, a, n, x3_c);
      be.BiasDropoutResidualForward(a, ffn_.fc2_bias(), h2, out, n, C, p_, k2_);
    }
    return out;
  }
  const void* output_compute() const { return out_compute_; }

  // d_enc [B*Ts, C] is ADDED to.
  void Backward(Context<T>& ctx, T* dout, T* dx, T* tmp1, T* tmp2, T* d_enc) {
    auto& be = ctx.backend();
    const int64_t n = n_, C = o_.dim;
    if (!o_.normalize_before) {
      void* branch = BranchBuffer(ctx, tmp2, n, C);
      ln3_.BackwardResidual(ctx, dout, tmp1, branch, ffn_.fc2_bias_grad(), p_, k2_, n);  // d h3
      ffn_.BackwardCompute(ctx, branch, tmp1, n, 1.0f);                                  // d x2
      branch = BranchBuffer(ctx, dout, n, C);  // dout is spent
      ln2_.BackwardResidual(ctx, tmp1, tmp2, branch, cross_.out_bias_grad(), p_, k3_, n);  // d h2
      cross_.BackwardCompute(ctx, branch, tmp2, 1.0f, d_enc);                              // d x1
      branch = BranchBuffer(ctx, tmp1, n, C);
      ln1_.BackwardResidual(ctx, tmp2, dx, branch, self_.out_bias_grad(), p_, k1_, n);    // d h1
      self_.BackwardCompute(ctx, branch, dx, 1.0f, nullptr);
    } else {
      be.BiasDropoutResidualBackward(dout, tmp1, ffn_.fc2_bias_grad(), n, C, p_, k2_);
      ffn_.Backward(ctx, tmp1, tmp2, n, 0.0f);
      ln3_.Backward(ctx, tmp2, dout, n, true);                                 // dout = d h2
      be.BiasDropoutResidualBackward(dout, tmp1, cross_.out_bias_grad(), n, C, p_, k3_);
      cross_.Backward(ctx, tmp1, tmp2, 0.0f, d_enc);
      ln2_.Backward(ctx, tmp2, dout, n, true);                                 // dout = d h1
      be.BiasDropoutResidualBackward(dout, tmp1, self_.out_bias_grad(), n, C, p_, k1_);
      self_.Backward(ctx, tmp1, tmp2, 0.0f, nullptr);
      ln1_.Backward(ctx, tmp2, dx, n, false);
      be.Add(dout, dx, n * C);
    }
  }

 private:
  LayerOptions o_;
  uint32_t site_;
  MultiheadAttention<T> self_;
  LayerNorm<T> ln1_;
  MultiheadAttention<T> cross_;
  LayerNorm<T> ln2_;
  FeedForward<T> ffn_;
  LayerNorm<T> ln3_;
  Tensor a_, h1_, x1_, h2_, x2_, x3_, out_, out_low_;
  void* out_compute_ = nullptr;
  int64_t n_ = 0;
  float p_ = 0;
  DropoutKey k1_, k2_, k3_;
};

}  // namespace sf
