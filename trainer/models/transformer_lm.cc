#include "trainer/models/transformer_lm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "trainer/models/model_metadata.h"
#include "trainer/models/transformer_init.h"
#include "trainer/nn/output_loss.h"

namespace sf {

Status TransformerLmConfig::Validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgument("hyperparameters." + field + ": " + why);
  };
  if (d_model < 1) return bad("d_model", "must be >= 1");
  if (heads < 1 || d_model % heads != 0) {
    return bad("heads", std::to_string(heads) + " does not divide d_model " + std::to_string(d_model));
  }
  if (layers < 1) return bad("decoder_layers", "must be >= 1");
  if (ffn_dim < 1) return bad("ffn_dim", "must be >= 1");
  if (vocab < 2) return bad("vocab", "must be >= 2");
  if (pad_id < 0 || pad_id >= vocab) return bad("pad_id", "outside the vocabulary");
  if (max_positions < 1) return bad("max_positions", "must be >= 1");
  for (float p : {dropout, attention_dropout, activation_dropout, label_smoothing}) {
    if (!(p >= 0.0f && p < 1.0f)) return bad("dropout", "rates and label_smoothing must be in [0, 1)");
  }
  return Status::Ok();
}

double TransformerLmConfig::TrainingFlops(int64_t batch, int64_t len) const {
  const double C = static_cast<double>(d_model), F = static_cast<double>(ffn_dim);
  const double n = static_cast<double>(batch * len);
  // Multiply-adds of the forward: projections, attention scores and context, the feed-forward,
  // the output projection; x2 for FLOPs, x3 for forward + backward.
  const double fwd = static_cast<double>(layers) * n * (4 * C * C + 2 * C * F + 2 * static_cast<double>(len) * C) +
                     n * C * static_cast<double>(vocab);
  return 3 * 2 * fwd;
}

std::map<std::string, std::string> TransformerLmMetadata(const TransformerLmConfig& c) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return {{"arch", "transformer_lm"},
          {"d_model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"decoder_layers", std::to_string(c.layers)},
          {"ffn_dim", std::to_string(c.ffn_dim)},
          {"activation", ActivationText(c.activation)},
          {"normalize_before", b(c.normalize_before)},
          {"share_decoder_input_output_embed", b(c.share_input_output_embed)},
          {"tgt_vocab", std::to_string(c.vocab)},
          {"pad_id", std::to_string(c.pad_id)},
          {"max_positions", std::to_string(c.max_positions)},
          {"label_smoothing", MetaText(c.label_smoothing)}};
}

Result<TransformerLmConfig> TransformerLmConfigFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end() || arch->second != "transformer_lm") {
    return InvalidArgument("__metadata__ arch: not 'transformer_lm'");
  }
  TransformerLmConfig c;
  SF_ASSIGN_OR_RETURN(c.d_model, MetaInt(m, "d_model"));
  SF_ASSIGN_OR_RETURN(c.heads, MetaInt(m, "heads"));
  SF_ASSIGN_OR_RETURN(c.layers, MetaInt(m, "decoder_layers"));
  if (c.layers > 1024) return InvalidArgument("__metadata__ decoder_layers: out of range");
  SF_ASSIGN_OR_RETURN(c.ffn_dim, MetaInt(m, "ffn_dim"));
  SF_ASSIGN_OR_RETURN(c.activation, MetaActivation(m));
  SF_ASSIGN_OR_RETURN(c.normalize_before, MetaBool(m, "normalize_before"));
  SF_ASSIGN_OR_RETURN(c.share_input_output_embed, MetaBool(m, "share_decoder_input_output_embed"));
  SF_ASSIGN_OR_RETURN(MetaSizes sizes, ReadMetaSizes(m, false));
  c.vocab = sizes.tgt_vocab;
  c.pad_id = sizes.pad_id;
  c.max_positions = sizes.max_positions;
  SF_ASSIGN_OR_RETURN(c.label_smoothing, MetaFloatOr(m, "label_smoothing", c.label_smoothing));
  Status st = c.Validate();
  if (!st.ok()) return st.WithContext("__metadata__");
  return c;
}

template <typename T>
TransformerLm<T>::TransformerLm(const TransformerLmConfig& config, Backend<T>* backend, DType compute)
    : config_(config), ctx_(backend, compute) {
  LayerOptions o = TransformerLayerOptions(config);
  o.causal = true;
  uint32_t site = 1;
  uint32_t ffn_site = 2 + static_cast<uint32_t>(EncoderLayer<T>::kSites * config.layers);
  embed_ = std::make_unique<TokenEmbedding<T>>(store_, "decoder.embed_tokens", config.vocab, config.d_model,
                                               config.pad_id, config.max_positions, config.dropout, site++);
  for (int64_t i = 0; i < config.layers; ++i) {
    layer_start_.push_back(store_.total_numel());
    layers_.push_back(
        std::make_unique<EncoderLayer<T>>(store_, "decoder.layers." + std::to_string(i) + ".", o, site, ffn_site++));
    site += EncoderLayer<T>::kSites;
  }
  norm_start_ = store_.total_numel();
  if (config.normalize_before) norm_ = std::make_unique<LayerNorm<T>>(store_, "decoder.layer_norm", config.d_model);
  out_proj_start_ = store_.total_numel();
  out_proj_ = config.share_input_output_embed
                  ? embed_->table()
                  : store_.Add("decoder.output_projection.weight", {config.vocab, config.d_model}, true);
  store_.Finalize(backend->allocator());
}

template <typename T>
void TransformerLm<T>::InitParameters(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto next = [&] { return normal(rng); };
  XavierMatricesZeroVectors(store_, rng);
  embed_->Init(next);
  for (auto& l : layers_) l->Init();
  if (norm_) norm_->Init();
  if (!config_.share_input_output_embed) InitOutputProjection(store_.host_value(out_proj_), config_.vocab, config_.d_model, next);
  store_.PushValues();
  WeightsUpdated();
}

template <typename T>
void TransformerLm<T>::WeightsUpdated() {
  store_.RefreshMirror(ctx_.backend(), ctx_.compute());
  ctx_.backend().WeightsChanged();
}

template <typename T>
Result<CrossEntropyStats> TransformerLm<T>::Forward(const Seq2SeqBatch& b) {
  const TransformerLmConfig& c = config_;
  const int64_t B = b.batch, L = b.tgt_len, C = c.d_model, V = c.vocab, n = B * L;
  if (B <= 0 || L <= 0) return InvalidArgument("empty batch");
  if (L > c.max_positions) return InvalidArgument("sequence longer than max_positions " + std::to_string(c.max_positions));
  for (int64_t i = 0; i < n; ++i) {
    if (b.tgt_in[i] < 0 || b.tgt_in[i] >= V || b.tgt_out[i] < 0 || b.tgt_out[i] >= V) {
      return InvalidArgument("token out of range at " + std::to_string(i));
    }
  }
  batch_ = B;
  len_ = L;
  const DType dt = DTypeOf<T>::value;
  // One staged copy: tokens [n] | next tokens [n] | positions [n] (int32), padding [n] (uint8).
  const size_t ints = static_cast<size_t>(3 * n), bytes = ints * sizeof(int32_t) + static_cast<size_t>(n);
  staging_.resize(bytes);
  int32_t* si = reinterpret_cast<int32_t*>(staging_.data());
  std::memcpy(si, b.tgt_in, static_cast<size_t>(n) * sizeof(int32_t));
  std::memcpy(si + n, b.tgt_out, static_cast<size_t>(n) * sizeof(int32_t));
  embed_->PositionIds(b.tgt_in, B, L, si + 2 * n);
  uint8_t* su = staging_.data() + ints * sizeof(int32_t);
  for (int64_t i = 0; i < n; ++i) su[i] = b.tgt_in[i] == c.pad_id;
  ctx_.Plan(batch_dev_, {static_cast<int64_t>(bytes)}, DType::kU8);
  ctx_.backend().CopyToDevice(batch_dev_.raw(), staging_.data(), bytes);
  const int32_t* di = reinterpret_cast<const int32_t*>(batch_dev_.raw());
  tgt_out_ = di + n;
  const uint8_t* pad = static_cast<const uint8_t*>(batch_dev_.raw()) + ints * sizeof(int32_t);
  ctx_.Plan(x0_, {n, C}, dt);
  ctx_.Plan(lse_, {n}, dt);
  embed_->Forward(ctx_, di, di + 2 * n, B, L, x0_.template data<T>());
  const T* x = x0_.template data<T>();
  for (auto& l : layers_) x = l->Forward(ctx_, x, pad, B, L);
  if (norm_) {
    ctx_.Plan(final_, {n, C}, dt);
    norm_->Forward(ctx_, x, final_.template data<T>(), n);
    x = final_.template data<T>();
  }
  out_ = x;
  const DType cdt = ctx_.compute();
  out_c_ = ctx_.AsCompute(x, n * C, out_cast_);
  const void* w_out = store_.compute_value(out_proj_, cdt);
  // bf16 training: the loss gradient comes with the loss, a block of rows at a time
  // (trainer/nn/output_loss.h; Backward applies grad_scale as the GEMMs' alpha), as in the
  // encoder-decoder (transformer.cc says why fp32 and f16 wait for Backward).
  loss_grad_ready_ = ctx_.training && cdt == DType::kBF16;
  if (loss_grad_ready_) {
    ctx_.Plan(dlogits_low_, {n, V}, cdt);
    return ProjectWithLossGradient(ctx_, out_c_, w_out, n, C, V, tgt_out_, c.label_smoothing,
                                   c.pad_id, 0, logits_, lse_.template data<T>(),
                                   dlogits_low_.raw(), cdt);
  }
  ctx_.Plan(logits_, {n, V}, dt);
  ctx_.backend().Gemm(1, n, V, C, GemmOperand{out_c_, cdt, false, C, 0},
                      GemmOperand{w_out, cdt, true, C, 0, true}, logits_.template data<T>(), V, 0,
                      1.0f, 0.0f);
  return ctx_.backend().CrossEntropyForward(logits_.template data<T>(), tgt_out_, lse_.template data<T>(), n, V,
                                            c.label_smoothing, c.pad_id);
}

template <typename T>
void TransformerLm<T>::Backward(float grad_scale) {
  const TransformerLmConfig& c = config_;
  const int64_t n = batch_ * len_, C = c.d_model, V = c.vocab;
  const DType dt = DTypeOf<T>::value, cdt = ctx_.compute();
  auto& be = ctx_.backend();
  for (Tensor* t : {&grad_a_, &grad_b_, &tmp1_, &tmp2_}) ctx_.Plan(*t, {n, C}, dt);
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
      ctx_.Plan(dlogits_low_, {n, V}, cdt);
      dlog = dlogits_low_.raw();
    }
    be.CrossEntropyBackward(logits_.template data<T>(), lse_.template data<T>(), tgt_out_, dlog,
                            cdt, n, V, c.label_smoothing, c.pad_id, grad_scale);
  }
  T* gy = grad_a_.template data<T>();
  T* other = grad_b_.template data<T>();
  // dy = dlogits W_out; dW_out += dlogits^T y.
  be.Gemm(1, n, C, V, GemmOperand{dlog, cdt, false, V, 0},
          GemmOperand{store_.compute_value(out_proj_, cdt), cdt, false, C, 0, true}, gy, C, 0,
          alpha, 0.0f);
  be.Gemm(1, V, C, n, GemmOperand{dlog, cdt, true, V, 0}, GemmOperand{out_c_, cdt, false, C, 0},
          store_.grad(out_proj_), C, 0, alpha, 1.0f);
  auto final_from = [this](int64_t offset) {
    if (grads_final_) grads_final_(offset);
  };
  if (!c.share_input_output_embed) final_from(out_proj_start_);
  if (norm_) {
    norm_->Backward(ctx_, gy, other, n, false);
    std::swap(gy, other);
    final_from(norm_start_);
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    layers_[i]->Backward(ctx_, gy, other, tmp1_.template data<T>(), tmp2_.template data<T>());
    std::swap(gy, other);
    final_from(layer_start_[i]);
  }
  embed_->Backward(ctx_, gy);
  final_from(0);
}

template class TransformerLm<float>;
template class TransformerLm<double>;

}  // namespace sf
