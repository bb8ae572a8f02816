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

  const T* Forward(Context<T>& ctx, const T* x, const uint8_t* pad, int64_t batch, int64_t time) {
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
    if (!o_.normalize_before) {
      attn_.Forward(ctx, x, x, pad, batch, time, time, a);
      be.BiasDropoutResidualForward(a, attn_.out_bias(), x, h1, n, C, p_, k1_);
      ln1_.Forward(ctx, h1, x1, n);
      ffn_.Forward(ctx, x1, a, n);
      be.BiasDropoutResidualForward(a, ffn_.fc2_bias(), x1, a, n, C, p_, k2_);
      ln2_.Forward(ctx, a, out, n);  // a holds h2
    } else {
      ln1_.Forward(ctx, x, x1, n);
      attn_.Forward(ctx, x1, x1, pad, batch, time, time, a);
      be.BiasDropoutResidualForward(a, attn_.out_bias(), x, h1, n, C, p_, k1_);
      ln2_.Forward(ctx, h1, x2, n);
      ffn_.Forward(ctx, x2, a, n);
      be.BiasDropoutResidualForward(a, ffn_.fc2_bias(), h1, out, n, C, p_, k2_);
    }
    return out;
  }

  void Backward(Context<T>& ctx, T* dout, T* dx, T* tmp1, T* tmp2) {
    auto& be = ctx.backend();
    const int64_t n = n_, C = o_.dim;
    if (!o_.normalize_before) {
      ln2_.Backward(ctx, dout, tmp1, n, false);                               // d h2 = d x1 (res)
      be.BiasDropoutResidualBackward(tmp1, tmp2, ffn_.fc2_bias_grad(), n, C, p_, k2_);
      ffn_.Backward(ctx, tmp2, tmp1, n, 1.0f);                                // d x1 total
      ln1_.Backward(ctx, tmp1, dx, n, false);                                 // d h1 = d x (res)
      be.BiasDropoutResidualBackward(dx, tmp1, attn_.out_bias_grad(), n, C, p_, k1_);
      attn_.Backward(ctx, tmp1, dx, 1.0f, nullptr);
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
  Tensor a_, h1_, x1_, x2_, out_;
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

  // y [B, Tt, C]; enc [B, Ts, C]; tgt_pad [B, Tt]; src_pad [B, Ts].
  const T* Forward(Context<T>& ctx, const T* y, const T* enc, const uint8_t* tgt_pad,
                   const uint8_t* src_pad, int64_t batch, int64_t tgt_len, int64_t src_len) {
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
    if (!o_.normalize_before) {
      self_.Forward(ctx, y, y, tgt_pad, batch, tgt_len, tgt_len, a);
      be.BiasDropoutResidualForward(a, self_.out_bias(), y, h1, n, C, p_, k1_);
      ln1_.Forward(ctx, h1, x1, n);
      cross_.Forward(ctx, x1, enc, src_pad, batch, tgt_len, src_len, a);
      be.BiasDropoutResidualForward(a, cross_.out_bias(), x1, h2, n, C, p_, k3_);
      ln2_.Forward(ctx, h2, x2, n);
      ffn_.Forward(ctx, x2, a, n);
      be.BiasDropoutResidualForward(a, ffn_.fc2_bias(), x2, a, n, C, p_, k2_);
      ln3_.Forward(ctx, a, out, n);
    } else {
      ln1_.Forward(ctx, y, x1, n);
      self_.Forward(ctx, x1, x1, tgt_pad, batch, tgt_len, tgt_len, a);
      be.BiasDropoutResidualForward(a, self_.out_bias(), y, h1, n, C, p_, k1_);
      ln2_.Forward(ctx, h1, x2, n);
      cross_.Forward(ctx, x2, enc, src_pad, batch, tgt_len, src_len, a);
      be.BiasDropoutResidualForward(a, cross_.out_bias(), h1, h2, n, C, p_, k3_);
      ln3_.Forward(ctx, h2, x3, n);
      ffn_.Forward(ctx, x3, a, n);
      be.BiasDropoutResidualForward(a, ffn_.fc2_bias(), h2, out, n, C, p_, k2_);
    }
    return out;
  }

  // d_enc [B*Ts, C] is ADDED to.
  void Backward(Context<T>& ctx, T* dout, T* dx, T* tmp1, T* tmp2, T* d_enc) {
    auto& be = ctx.backend();
    const int64_t n = n_, C = o_.dim;
    if (!o_.normalize_before) {
      ln3_.Backward(ctx, dout, tmp1, n, false);                                // d h3 = d x2 (res)
      be.BiasDropoutResidualBackward(tmp1, tmp2, ffn_.fc2_bias_grad(), n, C, p_, k2_);
      ffn_.Backward(ctx, tmp2, tmp1, n, 1.0f);                                 // d x2 total
      ln2_.Backward(ctx, tmp1, tmp2, n, false);                                // d h2 = d x1 (res)
      be.BiasDropoutResidualBackward(tmp2, tmp1, cross_.out_bias_grad(), n, C, p_, k3_);
      cross_.Backward(ctx, tmp1, tmp2, 1.0f, d_enc);                           // d x1 total
      ln1_.Backward(ctx, tmp2, dx, n, false);                                  // d h1 = d y (res)
      be.BiasDropoutResidualBackward(dx, tmp1, self_.out_bias_grad(), n, C, p_, k1_);
      self_.Backward(ctx, tmp1, dx, 1.0f, nullptr);
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
  Tensor a_, h1_, x1_, h2_, x2_, x3_, out_;
  int64_t n_ = 0;
  float p_ = 0;
  DropoutKey k1_, k2_, k3_;
};

}  // namespace sf
