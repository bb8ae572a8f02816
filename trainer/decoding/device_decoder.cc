#include "trainer/decoding/device_decoder.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sf {
namespace {

constexpr float kLayerNormEps = 1e-5f;

std::string LayerName(const char* side, int64_t i, const char* rest) {
  return std::string(side) + ".layers." + std::to_string(i) + "." + rest;
}

GemmOperand Operand(const float* data, bool transposed, int64_t ld, int64_t batch_stride = 0,
                    bool constant = false) {
  GemmOperand g;
  g.data = data;
  g.dtype = DType::kF32;
  g.transposed = transposed;
  g.ld = ld;
  g.batch_stride = batch_stride;
  g.constant = constant;
  return g;
}

}  // namespace

DeviceDecoder::DeviceDecoder(Transformer<float>* model)
    : model_(model), be_(model->context().backend()) {
  const auto& cfg = model->config();
  std::vector<float> pe = SinusoidalPositions<float>(cfg.max_positions, cfg.d_model, cfg.pad_id);
  const int64_t rows = cfg.max_positions + cfg.pad_id + 1, dim = cfg.d_model;
  pe_ = Tensor({rows, dim}, DType::kF32, be_.allocator());
  pe_.CopyFromHost(pe.data());
}

const float* DeviceDecoder::W(const std::string& name) const {
  auto& store = model_->params();
  const int id = store.Find(name);
  return id < 0 ? nullptr : store.value(id);
}

void DeviceDecoder::Linear(const float* x, int64_t rows, int64_t in, const float* w,
                           const float* b, int64_t out, float* y) {
  be_.Gemm(1, rows, out, in, Operand(x, false, in), Operand(w, true, in, 0, true), y, out, 0,
           1.0f, 0.0f);
  if (b) be_.BiasDropoutResidualForward(y, b, nullptr, y, rows, out, 0.0f, DropoutKey{});
}

void DeviceDecoder::LayerNorm(const float* x, const float* gamma, const float* beta, float* y,
                              int64_t rows) {
  const int64_t c = model_->config().d_model;
  mean_.Resize({rows}, DType::kF32, be_.allocator());
  rstd_.Resize({rows}, DType::kF32, be_.allocator());
  be_.LayerNormForward(x, gamma, beta, y, mean_.data<float>(), rstd_.data<float>(), rows, c,
                       kLayerNormEps);
}

void DeviceDecoder::GatherRows(const int32_t* index, int64_t rows, int64_t cols, Tensor& t,
                               Tensor& spare) {
  // A gather is an embedding lookup with scale 1 (exact).
  be_.EmbeddingForward(index, t.data<float>(), nullptr, nullptr, spare.data<float>(), rows, cols,
                       1.0f);
  std::swap(t, spare);
}

void DeviceDecoder::FeedForward(Tensor& x, int64_t rows, const std::string& prefix,
                                const std::string& norm) {
  const auto& cfg = model_->config();
  const int64_t C = cfg.d_model, F = cfg.ffn_dim;
  const bool pre = cfg.normalize_before;
  const float* g = W(prefix + norm + ".weight");
  const float* b = W(prefix + norm + ".bias");
  f_.Resize({rows, F}, DType::kF32, be_.allocator());
  o_.Resize({rows, C}, DType::kF32, be_.allocator());
  const float* src = x.data<float>();
  if (pre) {
    LayerNorm(x.data<float>(), g, b, h_.data<float>(), rows);
    src = h_.data<float>();
  }
  float* f = f_.data<float>();
  Linear(src, rows, C, W(prefix + "fc1.weight"), nullptr, F, f);
  be_.BiasActivationForward(f, W(prefix + "fc1.bias"), f, f, DType::kF32, rows, F, cfg.activation);
  Linear(f, rows, F, W(prefix + "fc2.weight"), nullptr, C, o_.data<float>());
  be_.BiasDropoutResidualForward(o_.data<float>(), W(prefix + "fc2.bias"), x.data<float>(),
                                 x.data<float>(), rows, C, 0.0f, DropoutKey{});
  if (!pre) {
    LayerNorm(x.data<float>(), g, b, h_.data<float>(), rows);
    std::swap(x, h_);
  }
}

void DeviceDecoder::Encode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                           int64_t S, int64_t Ts) {
  const auto& cfg = model_->config();
  const int64_t C = cfg.d_model, H = cfg.heads, D = C / H, R = S * Ts;
  const bool pre = cfg.normalize_before;
  const float emb_scale = static_cast<float>(std::sqrt(static_cast<double>(C)));
  const float att_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  auto* tok = static_cast<const int32_t*>(StageOnDevice(be_, tokens_, tokens, DType::kI32));
  auto* pos = static_cast<const int32_t*>(StageOnDevice(be_, positions_, positions, DType::kI32));
  for (Tensor* t : {&x_, &h_, &o_, &ctx_}) t->Resize({R, C}, DType::kF32, be_.allocator());
  qkv_.Resize({R, 3 * C}, DType::kF32, be_.allocator());
  heads_.Resize({3, R, C}, DType::kF32, be_.allocator());
  scores_.Resize({S * H, Ts, Ts}, DType::kF32, be_.allocator());
  probs_.Resize({S * H, Ts, Ts}, DType::kF32, be_.allocator());
  be_.EmbeddingForward(tok, W("encoder.embed_tokens.weight"), pe_.data<float>(), pos,
                       x_.data<float>(), R, C, emb_scale);
  const auto* pad = src_pad_.data<uint8_t>();
  for (int64_t l = 0; l < cfg.encoder_layers; ++l) {
    const float* g = W(LayerName("encoder", l, "self_attn_layer_norm.weight"));
    const float* b = W(LayerName("encoder", l, "self_attn_layer_norm.bias"));
    const float* src = x_.data<float>();
    if (pre) {
      LayerNorm(src, g, b, h_.data<float>(), R);
      src = h_.data<float>();
    }
    Linear(src, R, C, W(LayerName("encoder", l, "self_attn.in_proj_weight")), nullptr, 3 * C,
           qkv_.data<float>());
    // [S, Ts, 3, H, D] + bias -> q, k, v each [S, H, Ts, D]
    float* q = heads_.data<float>();
    const float* k = q + R * C;
    const float* v = k + R * C;
    be_.SplitHeads(qkv_.data<float>(), W(LayerName("encoder", l, "self_attn.in_proj_bias")), q,
                   DType::kF32, S, Ts, 3, H, D);
    be_.Gemm(S * H, Ts, Ts, D, Operand(q, false, D, Ts * D), Operand(k, true, D, Ts * D),
             scores_.data<float>(), Ts, Ts * Ts, 1.0f, 0.0f);
    be_.SoftmaxForward(scores_.data<float>(), probs_.data<float>(), nullptr, DType::kF32, pad, S,
                       H, Ts, Ts, att_scale, false, 0.0f, DropoutKey{});
    // context [S, H, Ts, D] (into q's place) -> [S, Ts, H, D]
    be_.Gemm(S * H, Ts, D, Ts, Operand(probs_.data<float>(), false, Ts, Ts * Ts),
             Operand(v, false, D, Ts * D), q, D, Ts * D, 1.0f, 0.0f);
    be_.MergeHeads(q, ctx_.data<float>(), DType::kF32, S, Ts, 1, H, D);
    Linear(ctx_.data<float>(), R, C, W(LayerName("encoder", l, "self_attn.out_proj.weight")),
           nullptr, C, o_.data<float>());
    be_.BiasDropoutResidualForward(o_.data<float>(),
                                   W(LayerName("encoder", l, "self_attn.out_proj.bias")),
                                   x_.data<float>(), x_.data<float>(), R, C, 0.0f, DropoutKey{});
    if (!pre) {
      LayerNorm(x_.data<float>(), g, b, h_.data<float>(), R);
      std::swap(x_, h_);
    }
    FeedForward(x_, R, "encoder.layers." + std::to_string(l) + ".", "final_layer_norm");
  }
  enc_.Resize({R, C}, DType::kF32, be_.allocator());
  if (pre) {
    LayerNorm(x_.data<float>(), W("encoder.layer_norm.weight"), W("encoder.layer_norm.bias"),
              enc_.data<float>(), R);
  } else {
    std::swap(enc_, x_);
  }
}

Status DeviceDecoder::TranslateBatch(const std::vector<const std::vector<int32_t>*>& sources,
                                     const BeamOptions& opt, std::vector<Hypothesis>* out) {
  const auto& cfg = model_->config();
  const int64_t C = cfg.d_model, H = cfg.heads, D = C / H, V = cfg.tgt_vocab;
  const int64_t Ld = cfg.decoder_layers;
  const int32_t pad = cfg.pad_id;
  const bool pre = cfg.normalize_before;
  const float emb_scale = static_cast<float>(std::sqrt(static_cast<double>(C)));
  const float att_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const int64_t S = static_cast<int64_t>(sources.size());
  const int beam = opt.beam;
  const float* enc_table = W("encoder.embed_tokens.weight");
  const float* dec_table = cfg.share_embeddings ? enc_table : W("decoder.embed_tokens.weight");
  const float* output_projection =
      cfg.share_decoder_input_output_embed ? dec_table : W("decoder.output_projection.weight");
  if (!enc_table || !dec_table || !output_projection) {
    return Internal("model has no embedding tables or output projection");
  }

  // ---- encoder over the padded sources (each + EOS, right-padded)
  int64_t Ts = 1;
  for (const auto* s : sources) Ts = std::max<int64_t>(Ts, static_cast<int64_t>(s->size()) + 1);
  std::vector<int32_t> tokens(static_cast<size_t>(S * Ts), pad), positions(tokens.size(), pad);
  std::vector<uint8_t> src_pad(tokens.size(), 1);
  for (int64_t s = 0; s < S; ++s) {
    const auto& src = *sources[s];
    const int64_t n = static_cast<int64_t>(src.size());
    for (int64_t t = 0; t <= n; ++t) {
      tokens[s * Ts + t] = t < n ? src[t] : kEosToken;
      positions[s * Ts + t] = pad + 1 + static_cast<int32_t>(t);
      src_pad[s * Ts + t] = 0;
    }
  }
  StageOnDevice(be_, src_pad_, src_pad, DType::kU8);
  Encode(tokens, positions, S, Ts);

  // Cross-attention keys/values of every layer, once per sentence, head-major: [S, H, Ts, D].
  cross_k_.resize(Ld);
  cross_v_.resize(Ld);
  ctx_.Resize({S * Ts, C}, DType::kF32, be_.allocator());
  for (int64_t l = 0; l < Ld; ++l) {
    const float* w = W(LayerName("decoder", l, "encoder_attn.in_proj_weight"));
    const float* b = W(LayerName("decoder", l, "encoder_attn.in_proj_bias"));
    for (int part = 1; part <= 2; ++part) {
      Tensor& dst = part == 1 ? cross_k_[l] : cross_v_[l];
      dst.Resize({S * Ts, C}, DType::kF32, be_.allocator());
      Linear(enc_.data<float>(), S * Ts, C, w + part * C * C, nullptr, C, ctx_.data<float>());
      be_.SplitHeads(ctx_.data<float>(), b + part * C, dst.data<float>(), DType::kF32, S, Ts, 1, H, D);
    }
  }
  cross_spare_.Resize({S * Ts, C}, DType::kF32, be_.allocator());

  // ---- beam search
  std::vector<int64_t> max_len(S);
  int64_t longest = 0;
  for (int64_t s = 0; s < S; ++s) {
    max_len[s] = MaxTargetLength(opt, static_cast<int64_t>(sources[s]->size()), cfg.max_positions);
    longest = std::max(longest, max_len[s]);
  }
  BeamSearch search(std::move(max_len), beam, opt.lenpen, kEosToken);
  const int64_t cap = longest + 1, rows0 = S * beam;
  self_k_.resize(Ld);
  self_v_.resize(Ld);
  for (int64_t l = 0; l < Ld; ++l) {
    self_k_[l].Resize({cap, rows0, C}, DType::kF32, be_.allocator());
    self_v_[l].Resize({cap, rows0, C}, DType::kF32, be_.allocator());
  }
  spare_.Resize({cap, rows0, C}, DType::kF32, be_.allocator());
  std::vector<int32_t> index;
  std::vector<uint8_t> active_pad;
  std::vector<int64_t> parents, kept;

  for (int64_t t = 0; !search.done(); ++t) {
    const int64_t N = search.rows(), A = static_cast<int64_t>(search.active().size());
    const int64_t T = t + 1;  // keys so far, this step's included
    for (Tensor* x : {&x_, &h_, &o_, &q_, &ctx_}) x->Resize({N, C}, DType::kF32, be_.allocator());
    heads_.Resize({2, N, C}, DType::kF32, be_.allocator());  // cross-attention queries, context
    // scores / probabilities [N, H, 1, T] (self) and [A, H, beam, Ts] (cross)
    scores_.Resize({N * H * std::max(T, Ts)}, DType::kF32, be_.allocator());
    probs_.Resize({N * H * std::max(T, Ts)}, DType::kF32, be_.allocator());
    // The newest token of each row at position t.
    tokens.resize(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) tokens[r] = search.history(r)[t];
    positions.assign(static_cast<size_t>(N), pad + 1 + static_cast<int32_t>(t));
    auto* tok = static_cast<const int32_t*>(StageOnDevice(be_, tokens_, tokens, DType::kI32));
    auto* pos = static_cast<const int32_t*>(StageOnDevice(be_, positions_, positions, DType::kI32));
    be_.EmbeddingForward(tok, dec_table, pe_.data<float>(), pos, x_.data<float>(), N, C, emb_scale);
    for (int64_t l = 0; l < Ld; ++l) {
      const std::string p = "decoder.layers." + std::to_string(l) + ".";
      // Self-attention over positions 0..t; this step's keys/values appended at block t.
      const float* g1 = W(p + "self_attn_layer_norm.weight");
      const float* b1 = W(p + "self_attn_layer_norm.bias");
      const float* src = x_.data<float>();
      if (pre) {
        LayerNorm(src, g1, b1, h_.data<float>(), N);
        src = h_.data<float>();
      }
      const float* w = W(p + "self_attn.in_proj_weight");
      const float* b = W(p + "self_attn.in_proj_bias");
      float* K = self_k_[l].data<float>();
      float* Vc = self_v_[l].data<float>();
      Linear(src, N, C, w, b, C, q_.data<float>());
      Linear(src, N, C, w + C * C, b + C, C, K + t * N * C);
      Linear(src, N, C, w + 2 * C * C, b + 2 * C, C, Vc + t * N * C);
      // Head j of row r is batch entry r*H + j, at offset (r*H + j)*D in q, K and V.
      be_.Gemm(N * H, 1, T, D, Operand(q_.data<float>(), false, D, D), Operand(K, true, N * C, D),
               scores_.data<float>(), T, T, 1.0f, 0.0f);
      be_.SoftmaxForward(scores_.data<float>(), probs_.data<float>(), nullptr, DType::kF32,
                         nullptr, N, H, 1, T, att_scale, false, 0.0f, DropoutKey{});
      be_.Gemm(N * H, 1, D, T, Operand(probs_.data<float>(), false, T, T),
               Operand(Vc, false, N * C, D), ctx_.data<float>(), D, D, 1.0f, 0.0f);
      Linear(ctx_.data<float>(), N, C, W(p + "self_attn.out_proj.weight"), nullptr, C,
             o_.data<float>());
      be_.BiasDropoutResidualForward(o_.data<float>(), W(p + "self_attn.out_proj.bias"),
                                     x_.data<float>(), x_.data<float>(), N, C, 0.0f, DropoutKey{});
      if (!pre) {
        LayerNorm(x_.data<float>(), g1, b1, h_.data<float>(), N);
        std::swap(x_, h_);
      }
      // Cross-attention: the beams of active sentence a are rows a*beam..; with the queries split
      // into heads ([A, H, beam, D]) each (sentence, head) is one batch entry of both GEMMs.
      const float* g2 = W(p + "encoder_attn_layer_norm.weight");
      const float* b2 = W(p + "encoder_attn_layer_norm.bias");
      src = x_.data<float>();
      if (pre) {
        LayerNorm(src, g2, b2, h_.data<float>(), N);
        src = h_.data<float>();
      }
      Linear(src, N, C, W(p + "encoder_attn.in_proj_weight"), nullptr, C, q_.data<float>());
      float* qh = heads_.data<float>();
      float* ch = qh + N * C;
      be_.SplitHeads(q_.data<float>(), W(p + "encoder_attn.in_proj_bias"), qh, DType::kF32, A, beam, 1, H, D);
      // scores [A, H, beam, Ts]
      be_.Gemm(A * H, beam, Ts, D, Operand(qh, false, D, beam * D),
               Operand(cross_k_[l].data<float>(), true, D, Ts * D), scores_.data<float>(), Ts,
               beam * Ts, 1.0f, 0.0f);
      be_.SoftmaxForward(scores_.data<float>(), probs_.data<float>(), nullptr, DType::kF32,
                         src_pad_.data<uint8_t>(), A, H, beam, Ts, att_scale, false, 0.0f,
                         DropoutKey{});
      // context [A, H, beam, D] -> [A, beam, H, D] = [N, C]
      be_.Gemm(A * H, beam, D, Ts, Operand(probs_.data<float>(), false, Ts, beam * Ts),
               Operand(cross_v_[l].data<float>(), false, D, Ts * D), ch, D, beam * D, 1.0f, 0.0f);
      be_.MergeHeads(ch, ctx_.data<float>(), DType::kF32, A, beam, 1, H, D);
      Linear(ctx_.data<float>(), N, C, W(p + "encoder_attn.out_proj.weight"), nullptr, C,
             o_.data<float>());
      be_.BiasDropoutResidualForward(o_.data<float>(), W(p + "encoder_attn.out_proj.bias"),
                                     x_.data<float>(), x_.data<float>(), N, C, 0.0f, DropoutKey{});
      if (!pre) {
        LayerNorm(x_.data<float>(), g2, b2, h_.data<float>(), N);
        std::swap(x_, h_);
      }
      FeedForward(x_, N, p, "final_layer_norm");
    }
    const float* last = x_.data<float>();
    if (pre) {
      LayerNorm(last, W("decoder.layer_norm.weight"), W("decoder.layer_norm.bias"),
                h_.data<float>(), N);
      last = h_.data<float>();
    }
    logits_.Resize({N, V}, DType::kF32, be_.allocator());
    be_.Gemm(1, N, V, C, Operand(last, false, C), Operand(output_projection, true, C, 0, true),
             logits_.data<float>(), V, 0, 1.0f, 0.0f);
    // Each row's best continuations, then the search's choice.
    step_.Advance(be_, logits_.data<float>(), V, pad, search, &parents, &kept);
    if (search.done()) break;

    // Reorder the self-attention caches by parent: block t' row r <- block t' row parents[r].
    const int64_t N2 = static_cast<int64_t>(parents.size());
    index.resize(static_cast<size_t>(T * N2));
    for (int64_t tt = 0; tt < T; ++tt) {
      for (int64_t r = 0; r < N2; ++r) index[tt * N2 + r] = static_cast<int32_t>(tt * N + parents[r]);
    }
    auto* idx = static_cast<const int32_t*>(StageOnDevice(be_, index_, index, DType::kI32));
    for (int64_t l = 0; l < Ld; ++l) {
      GatherRows(idx, T * N2, C, self_k_[l], spare_);
      GatherRows(idx, T * N2, C, self_v_[l], spare_);
    }
    // Finished sentences leave: compact the cross-attention keys/values and the source mask.
    if (static_cast<int64_t>(kept.size()) < A) {
      index.assign(kept.begin(), kept.end());
      idx = static_cast<const int32_t*>(StageOnDevice(be_, index_, index, DType::kI32));
      for (int64_t l = 0; l < Ld; ++l) {
        GatherRows(idx, static_cast<int64_t>(kept.size()), Ts * C, cross_k_[l], cross_spare_);
        GatherRows(idx, static_cast<int64_t>(kept.size()), Ts * C, cross_v_[l], cross_spare_);
      }
      active_pad.clear();
      for (int64_t s : search.active()) {
        active_pad.insert(active_pad.end(), src_pad.begin() + s * Ts, src_pad.begin() + (s + 1) * Ts);
      }
      StageOnDevice(be_, src_pad_, active_pad, DType::kU8);
    }
  }
  out->assign(static_cast<size_t>(S), Hypothesis{});
  for (int64_t s = 0; s < S; ++s) {
    if (!sources[s]->empty()) (*out)[s] = search.Best(s);  // an empty source translates to nothing
  }
  return Status::Ok();
}

}  // namespace sf
