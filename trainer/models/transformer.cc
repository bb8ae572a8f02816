#include "trainer/models/transformer.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <random>

#include "trainer/models/transformer_init.h"
#include "trainer/models/weights_io.h"
#include "trainer/nn/output_loss.h"

namespace sf {

Status TransformerConfig::Validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgument("hyperparameters." + field + ": " + why);
  };
  if (d_model <= 0 || d_model % 2) return bad("d_model", std::to_string(d_model) + " must be a positive even number");
  if (heads <= 0 || d_model % heads)
    return bad("heads", std::to_string(heads) + " does not divide d_model " + std::to_string(d_model));
  if (encoder_layers < 1) return bad("encoder_layers", "must be >= 1");
  if (decoder_layers < 1) return bad("decoder_layers", "must be >= 1");
  if (ffn_dim <= 0) return bad("ffn_dim", "must be > 0");
  if (!(dropout >= 0 && dropout < 1)) return bad("dropout", "must be in [0, 1)");
  if (!(attention_dropout >= 0 && attention_dropout < 1))
    return bad("attention_dropout", "must be in [0, 1)");
  if (!(activation_dropout >= 0 && activation_dropout < 1))
    return bad("activation_dropout", "must be in [0, 1)");
  if (src_vocab < 2) return bad("src_vocab", "must be >= 2");
  if (tgt_vocab < 2) return bad("tgt_vocab", "must be >= 2");
  if (pad_id < 0 || pad_id >= std::min(src_vocab, tgt_vocab))
    return bad("pad_id", std::to_string(pad_id) + " is not a token of both vocabularies");
  if (share_embeddings && src_vocab != tgt_vocab)
    return bad("share_embeddings", "needs src_vocab == tgt_vocab (" + std::to_string(src_vocab) +
                                       " vs " + std::to_string(tgt_vocab) + ")");
  if (share_embeddings && !share_decoder_input_output_embed)
    return bad("share_decoder_input_output_embed",
               "false contradicts share_embeddings: true (one table for source, target and "
               "output)");
  if (!(label_smoothing >= 0 && label_smoothing < 1)) return bad("label_smoothing", "must be in [0, 1)");
  if (max_positions < 1) return bad("max_positions", "must be >= 1");
  return Status::Ok();
}

double TransformerConfig::TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const {
  const double C = static_cast<double>(d_model), F = static_cast<double>(ffn_dim);
  const double ns = static_cast<double>(batch * src_len), nt = static_cast<double>(batch * tgt_len);
  // Forward multiply-adds, x2 for FLOPs.
  double fwd = 0;
  fwd += encoder_layers * ns * (4 * C * C + 2 * C * F + 2 * src_len * C);
  fwd += decoder_layers * (nt * (4 * C * C + 2 * C * F + 2 * tgt_len * C) +  // self + FFN
                           nt * (2 * C * C + 2 * src_len * C) +              // cross q, out, attn
                           ns * 2 * C * C);                                   // cross k, v
  fwd += nt * C * static_cast<double>(tgt_vocab);                             // output projection
  return 3 * 2 * fwd;
}

template <typename T>
Transformer<T>::Transformer(const TransformerConfig& config, Backend<T>* backend, DType compute)
    : config_(config), ctx_(backend, compute) {
  const LayerOptions o = TransformerLayerOptions(config);
  uint32_t site = 1;
  // The activation-dropout sites follow every other site (one per layer, encoder then decoder),
  // so the masks of models without it are what they were before it existed.
  const uint32_t first_ffn_site =
      3 + static_cast<uint32_t>(EncoderLayer<T>::kSites * config.encoder_layers +
                                DecoderLayer<T>::kSites * config.decoder_layers);
  uint32_t ffn_site = first_ffn_site;
  enc_embed_ = std::make_unique<TokenEmbedding<T>>(store_, "encoder.embed_tokens",
                                                   config.src_vocab, config.d_model,
                                                   config.pad_id, config.max_positions,
                                                   config.dropout, site++);
  for (int64_t i = 0; i < config.encoder_layers; ++i) {
    encoder_start_.push_back(store_.total_numel());
    encoder_.push_back(std::make_unique<EncoderLayer<T>>(
        store_, "encoder.layers." + std::to_string(i) + ".", o, site, ffn_site++));
    site += EncoderLayer<T>::kSites;
  }
  enc_norm_start_ = store_.total_numel();
  if (config.normalize_before)
    enc_norm_ = std::make_unique<LayerNorm<T>>(store_, "encoder.layer_norm", config.d_model);
  dec_embed_start_ = store_.total_numel();
  dec_embed_ = std::make_unique<TokenEmbedding<T>>(
      store_, "decoder.embed_tokens", config.tgt_vocab, config.d_model, config.pad_id,
      config.max_positions, config.dropout, site++,
      config.share_embeddings ? enc_embed_->table() : -1);
  for (int64_t i = 0; i < config.decoder_layers; ++i) {
    decoder_start_.push_back(store_.total_numel());
    decoder_.push_back(std::make_unique<DecoderLayer<T>>(
        store_, "decoder.layers." + std::to_string(i) + ".", o, site, ffn_site++));
    site += DecoderLayer<T>::kSites;
  }
  dec_norm_start_ = store_.total_numel();
  if (config.normalize_before)
    dec_norm_ = std::make_unique<LayerNorm<T>>(store_, "decoder.layer_norm", config.d_model);
  assert(site == first_ffn_site);
  out_proj_start_ = store_.total_numel();
  out_proj_ = config.share_decoder_input_output_embed
                  ? dec_embed_->table()
                  : store_.Add("decoder.output_projection.weight",
                               {config.tgt_vocab, config.d_model}, true);
  store_.Finalize(backend->allocator());
}

template <typename T>
void Transformer<T>::InitParameters(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto next = [&] { return normal(rng); };
  XavierMatricesZeroVectors(store_, rng);
  enc_embed_->Init(next);
  if (!config_.share_embeddings) dec_embed_->Init(next);
  for (auto& l : encoder_) l->Init();
  for (auto& l : decoder_) l->Init();
  if (enc_norm_) enc_norm_->Init();
  if (dec_norm_) dec_norm_->Init();
  if (!config_.share_decoder_input_output_embed) {
    InitOutputProjection(store_.host_value(out_proj_), config_.tgt_vocab, config_.d_model, next);
  }
  store_.PushValues();
  WeightsUpdated();
}

template <typename T>
void Transformer<T>::WeightsUpdated() {
  store_.RefreshMirror(ctx_.backend(), ctx_.compute());
  ctx_.backend().WeightsChanged();
  mirror_stale_ = false;
}

template <typename T>
Result<CrossEntropyStats> Transformer<T>::Forward(const Seq2SeqBatch& b) {
  const TransformerConfig& c = config_;
  const int64_t B = b.batch, Ts = b.src_len, Tt = b.tgt_len, C = c.d_model, V = c.tgt_vocab;
  if (B <= 0 || Ts <= 0 || Tt <= 0) return InvalidArgument("empty batch");
  if (Ts > c.max_positions || Tt > c.max_positions)
    return InvalidArgument("sequence longer than max_positions " + std::to_string(c.max_positions));
  for (int64_t i = 0; i < B * Ts; ++i)
    if (b.src[i] < 0 || b.src[i] >= c.src_vocab)
      return InvalidArgument("source token " + std::to_string(b.src[i]) + " out of range");
  for (int64_t i = 0; i < B * Tt; ++i)
    if (b.tgt_in[i] < 0 || b.tgt_in[i] >= V || b.tgt_out[i] < 0 || b.tgt_out[i] >= V)
      return InvalidArgument("target token out of range at " + std::to_string(i));
  if (mirror_stale_) {
    store_.RefreshMirror(ctx_.backend(), ctx_.compute());
    mirror_stale_ = false;
  }
  batch_ = b;
  const DType dt = DTypeOf<T>::value;
  const int64_t ns = B * Ts, nt = B * Tt;
  // Stage the micro-batch in the backend's memory with one copy: the token ids, their positions
  // and the padding masks, all computed here on the host.
  //   int32: src [ns] | tgt_in [nt] | tgt_out [nt] | src_pos [ns] | tgt_pos [nt]
  //   uint8: src_pad [ns] | tgt_pad [nt]
  const size_t ints = static_cast<size_t>(2 * ns + 3 * nt);
  const size_t bytes = ints * sizeof(int32_t) + static_cast<size_t>(ns + nt);
  staging_.resize(bytes);
  int32_t* si = reinterpret_cast<int32_t*>(staging_.data());
  std::memcpy(si, b.src, static_cast<size_t>(ns) * sizeof(int32_t));
  std::memcpy(si + ns, b.tgt_in, static_cast<size_t>(nt) * sizeof(int32_t));
  std::memcpy(si + ns + nt, b.tgt_out, static_cast<size_t>(nt) * sizeof(int32_t));
  enc_embed_->PositionIds(b.src, B, Ts, si + ns + 2 * nt);
  dec_embed_->PositionIds(b.tgt_in, B, Tt, si + 2 * ns + 2 * nt);
  uint8_t* su = staging_.data() + ints * sizeof(int32_t);
  for (int64_t i = 0; i < ns; ++i) su[i] = b.src[i] == c.pad_id;
  for (int64_t i = 0; i < nt; ++i) su[ns + i] = b.tgt_in[i] == c.pad_id;
  ctx_.Plan(batch_dev_, {static_cast<int64_t>(bytes)}, DType::kU8);
  ctx_.backend().CopyToDevice(batch_dev_.raw(), staging_.data(), bytes);
  const int32_t* di = reinterpret_cast<const int32_t*>(batch_dev_.raw());
  const int32_t *src = di, *tgt_in = di + ns;
  tgt_out_ = di + ns + nt;
  const int32_t *src_pos = di + ns + 2 * nt, *tgt_pos = di + 2 * ns + 2 * nt;
  const uint8_t* src_pad = static_cast<const uint8_t*>(batch_dev_.raw()) + ints * sizeof(int32_t);
  const uint8_t* tgt_pad = src_pad + ns;
  ctx_.Plan(enc_x0_, {ns, C}, dt);
  ctx_.Plan(dec_x0_, {nt, C}, dt);
  ctx_.Plan(lse_, {nt}, dt);

  // Mixed precision: each layer's output also in the compute dtype (post-norm layers write it;
  // the final norms of pre-norm models too), handed to the next GEMMs instead of casting.
  enc_embed_->Forward(ctx_, src, src_pos, B, Ts, enc_x0_.data<T>());
  const T* x = enc_x0_.data<T>();
  const void* xc = nullptr;
  for (auto& l : encoder_) {
    x = l->Forward(ctx_, x, src_pad, B, Ts, xc);
    xc = l->output_compute();
  }
  if (enc_norm_) {
    ctx_.Plan(enc_final_, {ns, C}, dt);
    void* low = PlanCompute(ctx_, enc_final_c_, ns, C);
    enc_norm_->Forward(ctx_, x, enc_final_.data<T>(), ns, low);
    x = enc_final_.data<T>();
    xc = low;
  }
  enc_out_ = x;

  dec_embed_->Forward(ctx_, tgt_in, tgt_pos, B, Tt, dec_x0_.data<T>());
  const T* y = dec_x0_.data<T>();
  const void* yc = nullptr;
  for (auto& l : decoder_) {
    y = l->Forward(ctx_, y, enc_out_, tgt_pad, src_pad, B, Tt, Ts, yc, xc);
    yc = l->output_compute();
  }
  if (dec_norm_) {
    ctx_.Plan(dec_final_, {nt, C}, dt);
    void* low = PlanCompute(ctx_, dec_final_c_, nt, C);
    dec_norm_->Forward(ctx_, y, dec_final_.data<T>(), nt, low);
    y = dec_final_.data<T>();
    yc = low;
  }
  dec_out_ = y;
  dec_out_c_ = yc ? yc : ctx_.AsCompute(y, nt * C, dec_out_cast_);
  // logits[Nt, V] = y[Nt, C] . W_out^T  (W_out [V, C]: the decoder's table or its own matrix)
  const DType cdt = ctx_.compute();
  const void* w_out = store_.compute_value(out_proj_, cdt);
  // bf16 training: the loss gradient (unscaled; Backward applies grad_scale as the GEMMs' alpha,
  // exact for bf16's fp32 range) comes out of the same pass over the logits as the loss, a block
  // of rows at a time so the fp32 logits never reach memory whole (output_loss.h). fp32 keeps
  // the logits readable until Backward (its gradient overwrites them), and f16 needs the loss
  // scale before rounding, so both compute it in Backward.
  loss_grad_ready_ = ctx_.training && cdt == DType::kBF16;
  if (loss_grad_ready_) {
    ctx_.Plan(dlogits_low_, {nt, V}, cdt);
    return ProjectWithLossGradient(ctx_, dec_out_c_, w_out, nt, C, V, tgt_out_, c.label_smoothing,
                                   c.pad_id, logit_block_rows_, logits_, lse_.data<T>(),
                                   dlogits_low_.raw(), cdt);
  }
  ctx_.Plan(logits_, {nt, V}, dt);
  ctx_.backend().Gemm(1, nt, V, C, GemmOperand{dec_out_c_, cdt, false, C, 0},
                      GemmOperand{w_out, cdt, true, C, 0, true}, logits_.data<T>(), V, 0, 1.0f,
                      0.0f);
  return ctx_.backend().CrossEntropyForward(logits_.data<T>(), tgt_out_, lse_.data<T>(), nt, V,
                                            c.label_smoothing, c.pad_id);
}

template <typename T>
void Transformer<T>::Backward(float grad_scale) {
  const TransformerConfig& c = config_;
  const Seq2SeqBatch& b = batch_;
  const int64_t B = b.batch, Ts = b.src_len, Tt = b.tgt_len, C = c.d_model, V = c.tgt_vocab;
  const int64_t ns = B * Ts, nt = B * Tt, nmax = std::max(ns, nt);
  const DType dt = DTypeOf<T>::value, cdt = ctx_.compute();
  auto& be = ctx_.backend();
  for (Tensor* t : {&grad_a_, &grad_b_, &tmp1_, &tmp2_}) ctx_.Plan(*t, {nmax, C}, dt);
  ctx_.Plan(d_enc_, {ns, C}, dt);

  // dlogits in the compute dtype: in place over the logits (fp32) or into a bf16/f16 buffer;
  // already there, unscaled, when Forward computed it with the loss.
  void* dlog = logits_.raw();
  float alpha = 1.0f;
  if (loss_grad_ready_) {
    dlog = dlogits_low_.raw();
    alpha = grad_scale;
    loss_grad_ready_ = false;
  } else {
    if (ctx_.low_precision()) {
      ctx_.Plan(dlogits_low_, {nt, V}, cdt);
      dlog = dlogits_low_.raw();
    }
    be.CrossEntropyBackward(logits_.data<T>(), lse_.data<T>(), tgt_out_, dlog, cdt, nt, V,
                            c.label_smoothing, c.pad_id, grad_scale);
  }
  T* gy = grad_a_.data<T>();
  // dy[Nt, C] = dlogits[Nt, V] . W_out[V, C];  dW_out[V, C] += dlogits^T . y
  be.Gemm(1, nt, C, V, GemmOperand{dlog, cdt, false, V, 0},
          GemmOperand{store_.compute_value(out_proj_, cdt), cdt, false, C, 0, true}, gy, C, 0,
          alpha, 0.0f);
  be.Gemm(1, V, C, nt, GemmOperand{dlog, cdt, true, V, 0},
          GemmOperand{dec_out_c_, cdt, false, C, 0}, store_.grad(out_proj_), C, 0, alpha, 1.0f);
  T* other = grad_b_.data<T>();
  auto final_from = [this](int64_t offset) {
    if (grads_final_) grads_final_(offset);
  };
  // An untied output projection, stored last, is complete now.
  if (!c.share_decoder_input_output_embed) final_from(out_proj_start_);
  if (dec_norm_) {
    dec_norm_->Backward(ctx_, gy, other, nt, false);
    std::swap(gy, other);
    final_from(dec_norm_start_);
  }
  d_enc_.ZeroFill();
  for (size_t i = decoder_.size(); i-- > 0;) {
    decoder_[i]->Backward(ctx_, gy, other, tmp1_.data<T>(), tmp2_.data<T>(), d_enc_.data<T>());
    std::swap(gy, other);
    final_from(decoder_start_[i]);
  }
  dec_embed_->Backward(ctx_, gy);  // the decoder's table (shared: the encoder's, final last)
  final_from(dec_embed_start_);

  // Encoder: start from the gradient the decoder layers collected for the encoder output, and
  // alternate between the two free gradient buffers.
  T* gx = d_enc_.data<T>();
  T* bufs[2] = {grad_a_.data<T>(), grad_b_.data<T>()};
  int next = 0;
  if (enc_norm_) {
    enc_norm_->Backward(ctx_, gx, bufs[next], ns, false);
    gx = bufs[next];
    next ^= 1;
    final_from(enc_norm_start_);
  }
  for (size_t i = encoder_.size(); i-- > 0;) {
    encoder_[i]->Backward(ctx_, gx, bufs[next], tmp1_.data<T>(), tmp2_.data<T>());
    gx = bufs[next];
    next ^= 1;
    final_from(encoder_start_[i]);
  }
  enc_embed_->Backward(ctx_, gx);
  final_from(0);
}

template <typename T>
std::map<std::string, std::string> Transformer<T>::Metadata() const {
  return ConfigMetadata(config_);
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace sf
