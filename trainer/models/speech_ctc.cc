#include "trainer/models/speech_ctc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "trainer/models/model_metadata.h"
#include "trainer/models/transformer_init.h"
#include "trainer/nn/embedding.h"
#include "trainer/nn/linear.h"

namespace sf {
namespace {

constexpr int32_t kPositionPad = 1;  // fairseq's padding_idx: frame t has position 2 + t

}  // namespace

Status SpeechCtcConfig::Validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgument("hyperparameters." + field + ": " + why);
  };
  if (mels < 7) return bad("mels", "must be at least 7 (two stride-2 convolutions of width 3)");
  if (conv_channels < 1) return bad("conv_channels", "must be >= 1");
  if (d_model < 2) return bad("d_model", "must be >= 2");
  if (heads < 1 || d_model % heads != 0) {
    return bad("heads", std::to_string(heads) + " does not divide d_model " + std::to_string(d_model));
  }
  if (layers < 1) return bad("encoder_layers", "must be >= 1");
  if (ffn_dim < 1) return bad("ffn_dim", "must be >= 1");
  if (vocab < 2) return bad("vocab", "must be >= 2 (blank and one symbol)");
  if (blank < 0 || blank >= vocab) return bad("blank", "outside the vocabulary");
  if (max_positions < 1) return bad("max_positions", "must be >= 1");
  for (float p : {dropout, attention_dropout, activation_dropout}) {
    if (!(p >= 0.0f && p < 1.0f)) return bad("dropout", "rates must be in [0, 1)");
  }
  if (decoder_layers < 0 || decoder_layers > 1024) return bad("decoder_layers", "must be in [0, 1024]");
  if (!(ctc_weight >= 0.0f && ctc_weight <= 1.0f)) return bad("ctc_weight", "must be in [0, 1]");
  if (!has_decoder() && ctc_weight != 1.0f) {
    return bad("ctc_weight", "below 1 weighs an attention decoder's loss; set decoder_layers");
  }
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f)) return bad("label_smoothing", "must be in [0, 1)");
  return Status::Ok();
}

double SpeechCtcConfig::TrainingFlops(int64_t batch, int64_t frames) const {
  const double t1 = static_cast<double>((frames - 1) / 2), m1 = static_cast<double>((mels - 1) / 2);
  const double t2 = static_cast<double>(Subsampled(frames)), m2 = static_cast<double>(Subsampled(mels));
  const double C = static_cast<double>(conv_channels), D = static_cast<double>(d_model);
  const double F = static_cast<double>(ffn_dim), B = static_cast<double>(batch);
  const double n = B * t2;
  // Multiply-adds of the forward: the convolutions, the projection, the layers, the CTC head.
  const double fwd = B * t1 * m1 * C * 9 + B * t2 * m2 * C * C * 9 + n * C * m2 * D +
                     static_cast<double>(layers) * n * (4 * D * D + 2 * D * F + 2 * t2 * D) +
                     n * D * static_cast<double>(vocab);
  return 3 * 2 * fwd;
}

std::map<std::string, std::string> SpeechCtcMetadata(const SpeechCtcConfig& c) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  std::map<std::string, std::string> m = {{"arch", "speech_transformer_ctc"},
          {"mels", std::to_string(c.mels)},
          {"conv_channels", std::to_string(c.conv_channels)},
          {"d_model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"encoder_layers", std::to_string(c.layers)},
          {"ffn_dim", std::to_string(c.ffn_dim)},
          {"activation", ActivationText(c.activation)},
          {"normalize_before", b(c.normalize_before)},
          {"tgt_vocab", std::to_string(c.vocab)},
          {"blank", std::to_string(c.blank)},
          {"max_positions", std::to_string(c.max_positions)},
          {"zero_infinity", b(c.zero_infinity)}};
  if (c.has_decoder()) {
    m["decoder_layers"] = std::to_string(c.decoder_layers);
    m["ctc_weight"] = MetaText(c.ctc_weight);
    m["label_smoothing"] = MetaText(c.label_smoothing);
  }
  return m;
}

Result<SpeechCtcConfig> SpeechCtcConfigFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end() || arch->second != "speech_transformer_ctc") {
    return InvalidArgument("__metadata__ arch: not 'speech_transformer_ctc'");
  }
  SpeechCtcConfig c;
  SF_ASSIGN_OR_RETURN(c.mels, MetaInt(m, "mels"));
  SF_ASSIGN_OR_RETURN(c.conv_channels, MetaInt(m, "conv_channels"));
  SF_ASSIGN_OR_RETURN(c.d_model, MetaInt(m, "d_model"));
  SF_ASSIGN_OR_RETURN(c.heads, MetaInt(m, "heads"));
  SF_ASSIGN_OR_RETURN(c.layers, MetaInt(m, "encoder_layers"));
  if (c.layers > 1024) return InvalidArgument("__metadata__ encoder_layers: out of range");
  SF_ASSIGN_OR_RETURN(c.ffn_dim, MetaInt(m, "ffn_dim"));
  SF_ASSIGN_OR_RETURN(c.activation, MetaActivation(m));
  SF_ASSIGN_OR_RETURN(c.normalize_before, MetaBool(m, "normalize_before"));
  SF_ASSIGN_OR_RETURN(c.vocab, MetaInt(m, "tgt_vocab"));
  SF_ASSIGN_OR_RETURN(int64_t blank, MetaInt(m, "blank"));
  if (blank < 0 || blank > (int64_t{1} << 30)) return InvalidArgument("__metadata__ blank: out of range");
  c.blank = static_cast<int32_t>(blank);
  SF_ASSIGN_OR_RETURN(c.max_positions, MetaInt(m, "max_positions"));
  SF_ASSIGN_OR_RETURN(c.zero_infinity, MetaBool(m, "zero_infinity"));
  if (m.count("decoder_layers")) {  // a joint CTC/attention model
    SF_ASSIGN_OR_RETURN(c.decoder_layers, MetaInt(m, "decoder_layers"));
    if (c.decoder_layers < 1 || c.decoder_layers > 1024) {
      return InvalidArgument("__metadata__ decoder_layers: out of range");
    }
    SF_ASSIGN_OR_RETURN(c.ctc_weight, MetaFloat(m, "ctc_weight"));
    SF_ASSIGN_OR_RETURN(c.label_smoothing, MetaFloat(m, "label_smoothing"));
  }
  Status st = c.Validate();
  if (!st.ok()) return st.WithContext("__metadata__");
  return c;
}

template <typename T>
SpeechCtcModel<T>::SpeechCtcModel(const SpeechCtcConfig& config, Backend<T>* backend, DType compute)
    : config_(config), ctx_(backend, compute) {
  const SpeechCtcConfig& c = config;
  const int64_t C = c.conv_channels, D = c.d_model;
  conv0_w_ = store_.Add("encoder.embed.conv.0.weight", {C, 1, 3, 3}, false);
  conv0_b_ = store_.Add("encoder.embed.conv.0.bias", {C}, false);
  conv1_w_ = store_.Add("encoder.embed.conv.2.weight", {C, C, 3, 3}, false);
  conv1_b_ = store_.Add("encoder.embed.conv.2.bias", {C}, false);
  out_w_ = store_.Add("encoder.embed.out.0.weight", {D, C * SpeechCtcConfig::Subsampled(c.mels)}, true);
  out_b_ = store_.Add("encoder.embed.out.0.bias", {D}, false);
  const LayerOptions o = TransformerLayerOptions(c);
  uint32_t site = 1;  // 0: the front end's dropout
  uint32_t ffn_site = 1 + static_cast<uint32_t>(EncoderLayer<T>::kSites * c.layers);
  for (int64_t i = 0; i < c.layers; ++i) {
    layers_.push_back(
        std::make_unique<EncoderLayer<T>>(store_, "encoder.layers." + std::to_string(i) + ".", o, site, ffn_site++));
    site += EncoderLayer<T>::kSites;
  }
  if (c.normalize_before) norm_ = std::make_unique<LayerNorm<T>>(store_, "encoder.layer_norm", D);
  ctc_w_ = store_.Add("ctc.ctc_lo.weight", {c.vocab, D}, true);
  ctc_b_ = store_.Add("ctc.ctc_lo.bias", {c.vocab}, false);
  if (c.has_decoder()) {
    // Dropout sites after the encoder's: the decoder's embedding, its layers', then their
    // feed-forwards' (so a CTC-only model's masks are what they were before the decoder).
    uint32_t dec_site = ffn_site;
    uint32_t dec_ffn_site = dec_site + 1 + static_cast<uint32_t>(DecoderLayer<T>::kSites * c.decoder_layers);
    dec_embed_ = std::make_unique<TokenEmbedding<T>>(store_, "decoder.embed_tokens", c.decoder_vocab(), D, c.blank,
                                                     c.max_positions, c.dropout, dec_site++);
    for (int64_t i = 0; i < c.decoder_layers; ++i) {
      decoder_.push_back(std::make_unique<DecoderLayer<T>>(store_, "decoder.layers." + std::to_string(i) + ".", o,
                                                           dec_site, dec_ffn_site++));
      dec_site += DecoderLayer<T>::kSites;
    }
    if (c.normalize_before) dec_norm_ = std::make_unique<LayerNorm<T>>(store_, "decoder.layer_norm", D);
  }
  store_.Finalize(backend->allocator());
  const std::vector<T> pe = SinusoidalPositions<T>(c.max_positions, D, kPositionPad);
  pe_.Resize({static_cast<int64_t>(pe.size())}, DTypeOf<T>::value, backend->allocator());
  pe_.CopyFromHost(pe.data());
}

template <typename T>
void SpeechCtcModel<T>::InitParameters(uint64_t seed) {
  std::mt19937_64 rng(seed);
  XavierMatricesZeroVectors(store_, rng);
  // Kernels: Xavier-uniform over fan_in = cin·9, fan_out = cout·9 (PyTorch's xavier_uniform_ on
  // a 4-D weight).
  for (int id : {conv0_w_, conv1_w_}) {
    const ParamInfo& p = store_.params()[id];
    const double a = std::sqrt(6.0 / static_cast<double>((p.shape[0] + p.shape[1]) * p.shape[2] * p.shape[3]));
    std::uniform_real_distribution<double> u(-a, a);
    T* v = store_.host_value(id);
    for (int64_t i = 0; i < p.numel; ++i) v[i] = static_cast<T>(u(rng));
  }
  for (auto& l : layers_) l->Init();
  if (norm_) norm_->Init();
  if (dec_embed_) {  // fairseq's N(0, D^-1/2) table with a zero padding (blank) row
    std::normal_distribution<double> normal(0.0, 1.0);
    dec_embed_->Init([&] { return normal(rng); });
  }
  for (auto& l : decoder_) l->Init();
  if (dec_norm_) dec_norm_->Init();
  store_.PushValues();
  WeightsUpdated();
}

template <typename T>
void SpeechCtcModel<T>::WeightsUpdated() {
  store_.RefreshMirror(ctx_.backend(), ctx_.compute());
  ctx_.backend().WeightsChanged();
}

template <typename T>
Conv2dShape SpeechCtcModel<T>::Conv1Shape() const {
  Conv2dShape s;
  s.n = batch_, s.cin = 1, s.h = t_, s.w = config_.mels, s.cout = config_.conv_channels, s.kh = 3, s.kw = 3;
  s.sh = 2, s.sw = 2;
  s.compute = ctx_.compute() == DType::kBF16 ? DType::kBF16 : DType::kF32;
  return s;
}

template <typename T>
Conv2dShape SpeechCtcModel<T>::Conv2Shape() const {
  Conv2dShape s;
  s.n = batch_, s.cin = config_.conv_channels, s.h = t1_, s.w = m1_, s.cout = config_.conv_channels, s.kh = 3;
  s.kw = 3, s.sh = 2, s.sw = 2;
  s.compute = ctx_.compute() == DType::kBF16 ? DType::kBF16 : DType::kF32;
  return s;
}

template <typename T>
Result<CtcStats> SpeechCtcModel<T>::Forward(const SpeechBatchView& b) {
  const SpeechCtcConfig& c = config_;
  const int64_t B = b.batch, T0 = b.max_frames, M = c.mels, D = c.d_model, V = c.vocab, L = b.max_target;
  if (B <= 0 || T0 <= 0) return InvalidArgument("empty batch");
  len2_.resize(B);
  CtcStats stats;
  stats.utterances = B;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t f = b.frames[i];
    if (f < 7 || f > T0) {
      return InvalidArgument("utterance " + std::to_string(i) + ": " + std::to_string(f) +
                             " frames (at least 7 for the subsampling, at most the batch's " + std::to_string(T0) + ")");
    }
    len2_[i] = static_cast<int32_t>(SpeechCtcConfig::Subsampled(f));
    if (len2_[i] > c.max_positions) {
      return InvalidArgument("utterance " + std::to_string(i) + ": " + std::to_string(len2_[i]) +
                             " encoder frames, more than max_positions " + std::to_string(c.max_positions));
    }
    if (b.target_lengths[i] < 0 || b.target_lengths[i] > L) {
      return InvalidArgument("utterance " + std::to_string(i) + ": target length " + std::to_string(b.target_lengths[i]));
    }
    for (int64_t k = 0; k < b.target_lengths[i]; ++k) {
      const int32_t l = b.targets[i * L + k];
      if (l < 0 || l >= V || l == c.blank) {
        return InvalidArgument("utterance " + std::to_string(i) + " label " + std::to_string(k) + ": " +
                               std::to_string(l) + " is blank or outside the vocabulary of " + std::to_string(V));
      }
    }
    stats.target_tokens += b.target_lengths[i];
  }
  // The decoder reads <sos> + the transcript and predicts the transcript + <eos>.
  lt_ = 0;
  if (c.has_decoder()) {
    for (int64_t i = 0; i < B; ++i) lt_ = std::max<int64_t>(lt_, b.target_lengths[i] + 1);
    if (lt_ > c.max_positions) {
      return InvalidArgument("a transcript of " + std::to_string(lt_ - 1) + " symbols: the decoder reads at most " +
                             std::to_string(c.max_positions - 1) + " (max_positions)");
    }
  }
  batch_ = B;
  t_ = T0;
  t1_ = (T0 - 1) / 2;
  m1_ = (M - 1) / 2;
  t2_ = SpeechCtcConfig::Subsampled(T0);
  m2_ = SpeechCtcConfig::Subsampled(M);
  max_target_ = std::max<int64_t>(L, 1);
  const int64_t n = B * t2_, C = c.conv_channels, K = C * m2_;
  const DType dt = DTypeOf<T>::value;
  auto& be = ctx_.backend();
  // One staged copy: lengths [B] | target lengths [B] | targets [B, L'] | position ids [n]
  // | with a decoder: tgt_in, tgt_out, their position ids [B, lt] (int32) | padding [n] | the
  // decoder's padding [B, lt] (uint8).
  const int64_t nt = B * lt_;
  const int64_t ints = 2 * B + B * max_target_ + n, all_ints = ints + 3 * nt;
  staging_.assign(static_cast<size_t>(all_ints * 4 + n + nt), 0);
  int32_t* si = reinterpret_cast<int32_t*>(staging_.data());
  std::copy(len2_.begin(), len2_.end(), si);
  std::copy(b.target_lengths, b.target_lengths + B, si + B);
  for (int64_t i = 0; i < B; ++i) std::copy(b.targets + i * L, b.targets + i * L + b.target_lengths[i], si + 2 * B + i * max_target_);
  int32_t* pos = si + 2 * B + B * max_target_;
  uint8_t* pad = staging_.data() + all_ints * 4;
  for (int64_t i = 0; i < B; ++i) {
    for (int64_t t = 0; t < t2_; ++t) {
      const bool real = t < len2_[i];
      pos[i * t2_ + t] = real ? static_cast<int32_t>(kPositionPad + 1 + t) : kPositionPad;
      pad[i * t2_ + t] = real ? 0 : 1;
    }
  }
  if (c.has_decoder()) {
    int32_t* tin = si + ints;
    int32_t* tout = tin + nt;
    uint8_t* tpad = pad + n;
    for (int64_t i = 0; i < B; ++i) {
      const int32_t* y = b.targets + i * L;
      const int64_t len = b.target_lengths[i];
      tin[i * lt_] = c.sos_eos();
      std::copy(y, y + len, tin + i * lt_ + 1);
      std::copy(y, y + len, tout + i * lt_);
      tout[i * lt_ + len] = c.sos_eos();  // the rest stays blank: padding
    }
    dec_embed_->PositionIds(tin, B, lt_, tout + nt);
    for (int64_t r = 0; r < nt; ++r) tpad[r] = tin[r] == c.blank;
  }
  ctx_.Plan(batch_dev_, {static_cast<int64_t>(staging_.size())}, DType::kU8);
  be.CopyToDevice(batch_dev_.raw(), staging_.data(), staging_.size());
  const int32_t* di = reinterpret_cast<const int32_t*>(batch_dev_.raw());
  const uint8_t* pad_dev = static_cast<const uint8_t*>(batch_dev_.raw()) + all_ints * 4;
  // Features (fp32 from the host; T may be double in the gradient tests).
  ctx_.Plan(feats_, {B * T0 * M}, dt);
  if constexpr (std::is_same_v<T, float>) {
    be.CopyToDevice(feats_.raw(), b.features, static_cast<size_t>(B * T0 * M) * sizeof(float));
  } else {
    std::vector<T> widened(b.features, b.features + B * T0 * M);
    be.CopyToDevice(feats_.raw(), widened.data(), widened.size() * sizeof(T));
  }
  // The subsampling: two convolutions with ReLU (in place: the ReLU's output is what its
  // backward reads).
  ctx_.Plan(y1_, {B * C * t1_ * m1_}, dt);
  ctx_.Plan(y2_, {B * C * t2_ * m2_}, dt);
  be.Conv2dForward(feats_.template data<T>(), store_.value(conv0_w_), store_.value(conv0_b_), y1_.template data<T>(),
                   Conv1Shape());
  be.BiasActivationForward(y1_.template data<T>(), nullptr, y1_.template data<T>(), y1_.raw(), dt, B * C, t1_ * m1_,
                           Activation::kRelu);
  be.Conv2dForward(y1_.template data<T>(), store_.value(conv1_w_), store_.value(conv1_b_), y2_.template data<T>(),
                   Conv2Shape());
  be.BiasActivationForward(y2_.template data<T>(), nullptr, y2_.template data<T>(), y2_.raw(), dt, B * C, t2_ * m2_,
                           Activation::kRelu);
  // [B, C, T', M'] -> [B, T', C·M'] in the compute dtype (the projection's operand), then the
  // projection, its bias, × sqrt(D), the positions and dropout.
  const DType cdt = ctx_.compute();
  ctx_.Plan(z_cast_, {n * K}, cdt);
  be.MergeHeads(y2_.template data<T>(), z_cast_.raw(), cdt, B, t2_, 1, C, m2_);
  z_c_ = z_cast_.raw();
  ctx_.Plan(h_, {n, D}, dt);
  LinearForward(ctx_, WeightView<T>{store_.compute_value(out_w_, cdt), store_.grad(out_w_), D, K}, z_c_, n,
                h_.template data<T>());
  be.BiasDropoutResidualForward(h_.template data<T>(), store_.value(out_b_), nullptr, h_.template data<T>(), n, D, 0.0f,
                                DropoutKey{});
  be.Scale(h_.template data<T>(), n * D, static_cast<float>(std::sqrt(static_cast<double>(D))));
  ctx_.Plan(pos_rows_, {n, D}, dt);
  be.EmbeddingForward(di + 2 * B + B * max_target_, pe_.template data<T>(), nullptr, nullptr,
                      pos_rows_.template data<T>(), n, D, 1.0f);
  p_ = ctx_.training ? c.dropout : 0.0f;
  be.BiasDropoutResidualForward(h_.template data<T>(), nullptr, pos_rows_.template data<T>(), h_.template data<T>(), n, D,
                                0.0f, DropoutKey{});
  be.BiasDropoutResidualForward(h_.template data<T>(), nullptr, nullptr, h_.template data<T>(), n, D, p_, ctx_.Key(0));
  const T* x = h_.template data<T>();
  for (auto& l : layers_) x = l->Forward(ctx_, x, pad_dev, B, t2_);
  if (norm_) {
    ctx_.Plan(final_, {n, D}, dt);
    norm_->Forward(ctx_, x, final_.template data<T>(), n);
    x = final_.template data<T>();
  }
  enc_out_ = x;
  x_c_ = ctx_.AsCompute(x, n * D, x_cast_);
  ctx_.Plan(logits_, {n, V}, dt);
  LinearForward(ctx_, WeightView<T>{store_.compute_value(ctc_w_, cdt), store_.grad(ctc_w_), V, D}, x_c_, n,
                logits_.template data<T>());
  be.BiasDropoutResidualForward(logits_.template data<T>(), store_.value(ctc_b_), nullptr, logits_.template data<T>(), n,
                                V, 0.0f, DropoutKey{});
  ctx_.Plan(losses_, {B}, DType::kF32);
  // Training: the loss and its unscaled gradient in one pass (Backward scales it); evaluation:
  // the loss only.
  dlogits_ready_ = ctx_.training;
  if (dlogits_ready_) ctx_.Plan(dlogits_, {n, V}, dt);
  be.CtcLoss(logits_.template data<T>(), di, di + 2 * B, di + B, t2_, B, V, max_target_, c.blank, c.zero_infinity, 1.0f,
             losses_.template data<float>(), dlogits_ready_ ? dlogits_.template data<T>() : nullptr);
  if (c.has_decoder()) {
    // The decoder over <sos> + transcript, attending to the encoder output; the tied output
    // projection; the label-smoothed cross-entropy (its gradient: Backward).
    const int32_t* tin = di + ints;
    tgt_out_ = tin + nt;
    const int64_t Vd = c.decoder_vocab();
    ctx_.Plan(dec_x0_, {nt, D}, dt);
    dec_embed_->Forward(ctx_, tin, tin + 2 * nt, B, lt_, dec_x0_.template data<T>());
    const T* y = dec_x0_.template data<T>();
    for (auto& l : decoder_) y = l->Forward(ctx_, y, enc_out_, pad_dev + n, pad_dev, B, lt_, t2_);
    if (dec_norm_) {
      ctx_.Plan(dec_final_, {nt, D}, dt);
      dec_norm_->Forward(ctx_, y, dec_final_.template data<T>(), nt);
      y = dec_final_.template data<T>();
    }
    dec_out_c_ = ctx_.AsCompute(y, nt * D, dec_out_cast_);
    ctx_.Plan(dec_logits_, {nt, Vd}, dt);
    ctx_.Plan(dec_lse_, {nt}, dt);
    be.Gemm(1, nt, Vd, D, GemmOperand{dec_out_c_, cdt, false, D, 0},
            GemmOperand{store_.compute_value(dec_embed_->table(), cdt), cdt, true, D, 0, true},
            dec_logits_.template data<T>(), Vd, 0, 1.0f, 0.0f);
    T* logits = dec_logits_.template data<T>();
    const CrossEntropyStats ce =
        be.CrossEntropyForward(logits, tgt_out_, dec_lse_.template data<T>(), nt, Vd, c.label_smoothing, c.blank);
    stats.attention_loss = ce.loss;
    stats.attention_nll = ce.nll;
  }
  std::vector<float> losses(B);
  be.CopyToHost(losses.data(), losses_.raw(), static_cast<size_t>(B) * sizeof(float));
  for (float l : losses) stats.ctc_loss += std::isfinite(l) ? l : 0.0;
  stats.loss = c.has_decoder() ? c.ctc_weight * stats.ctc_loss + (1.0 - c.ctc_weight) * stats.attention_loss
                               : stats.ctc_loss;
  // Infeasible: fewer frames than labels plus the blanks that separate repeated labels (their
  // loss is 0 with zero_infinity, +inf without; either way they are counted).
  for (int64_t i = 0; i < B; ++i) {
    int64_t need = b.target_lengths[i];
    for (int64_t k = 1; k < b.target_lengths[i]; ++k) need += b.targets[i * L + k] == b.targets[i * L + k - 1];
    stats.infeasible += need > len2_[i];
  }
  return stats;
}

template <typename T>
void SpeechCtcModel<T>::Backward(float grad_scale) {
  const SpeechCtcConfig& c = config_;
  const int64_t B = batch_, n = B * t2_, D = c.d_model, V = c.vocab, C = c.conv_channels, K = C * m2_;
  const DType dt = DTypeOf<T>::value, cdt = ctx_.compute();
  auto& be = ctx_.backend();
  const int32_t* di = reinterpret_cast<const int32_t*>(batch_dev_.raw());
  const int64_t nt = c.has_decoder() ? B * lt_ : 0;
  for (Tensor* t : {&grad_a_, &grad_b_, &tmp1_, &tmp2_}) ctx_.Plan(*t, {std::max(n, nt), D}, dt);
  if (c.has_decoder()) {
    // The attention branch first: its gradient for the encoder output collects in d_enc_, which
    // the CTC head's then adds to.
    const int64_t Vd = c.decoder_vocab();
    ctx_.Plan(d_enc_, {n, D}, dt);
    d_enc_.ZeroFill();
    void* dlog = dec_logits_.raw();  // fp32: in place over the logits
    if (ctx_.low_precision()) {
      ctx_.Plan(dec_dlogits_, {nt, Vd}, cdt);
      dlog = dec_dlogits_.raw();
    }
    be.CrossEntropyBackward(dec_logits_.template data<T>(), dec_lse_.template data<T>(), tgt_out_, dlog, cdt, nt, Vd,
                            c.label_smoothing, c.blank, grad_scale * (1.0f - c.ctc_weight));
    T* gy = grad_a_.template data<T>();
    T* other = grad_b_.template data<T>();
    const int table = dec_embed_->table();
    be.Gemm(1, nt, D, Vd, GemmOperand{dlog, cdt, false, Vd, 0},
            GemmOperand{store_.compute_value(table, cdt), cdt, false, D, 0, true}, gy, D, 0, 1.0f, 0.0f);
    be.Gemm(1, Vd, D, nt, GemmOperand{dlog, cdt, true, Vd, 0}, GemmOperand{dec_out_c_, cdt, false, D, 0},
            store_.grad(table), D, 0, 1.0f, 1.0f);
    if (dec_norm_) {
      dec_norm_->Backward(ctx_, gy, other, nt, false);
      std::swap(gy, other);
    }
    for (size_t i = decoder_.size(); i-- > 0;) {
      decoder_[i]->Backward(ctx_, gy, other, tmp1_.template data<T>(), tmp2_.template data<T>(),
                            d_enc_.template data<T>());
      std::swap(gy, other);
    }
    dec_embed_->Backward(ctx_, gy);
  }
  if (!dlogits_ready_) {  // a Forward in evaluation mode computed the loss only
    ctx_.Plan(dlogits_, {n, V}, dt);
    be.CtcLoss(logits_.template data<T>(), di, di + 2 * B, di + B, t2_, B, V, max_target_, c.blank, c.zero_infinity,
               1.0f, losses_.template data<float>(), dlogits_.template data<T>());
  }
  const float ctc_scale = grad_scale * (c.has_decoder() ? c.ctc_weight : 1.0f);
  if (ctc_scale != 1.0f) be.Scale(dlogits_.template data<T>(), n * V, ctc_scale);
  dlogits_ready_ = false;
  be.ColumnSum(dlogits_.template data<T>(), store_.grad(ctc_b_), n, V);
  // The encoder output's gradient: the CTC head's, plus the decoder's when there is one (the
  // layers then alternate between d_enc_ and grad_b_).
  T* gy = c.has_decoder() ? d_enc_.template data<T>() : grad_a_.template data<T>();
  T* other = grad_b_.template data<T>();
  const void* dlog_c = ctx_.AsComputeScratch(dlogits_.template data<T>(), n * V, kScratchCastA);
  LinearBackward(ctx_, WeightView<T>{store_.compute_value(ctc_w_, cdt), store_.grad(ctc_w_), V, D}, x_c_, dlog_c, n, gy,
                 c.has_decoder() ? 1.0f : 0.0f);
  if (norm_) {
    norm_->Backward(ctx_, gy, other, n, false);
    std::swap(gy, other);
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    layers_[i]->Backward(ctx_, gy, other, tmp1_.template data<T>(), tmp2_.template data<T>());
    std::swap(gy, other);
  }
  // Through dropout, the positions (no parameters), × sqrt(D), the bias and the projection.
  be.BiasDropoutResidualBackward(gy, gy, nullptr, n, D, p_, ctx_.Key(0));
  be.Scale(gy, n * D, static_cast<float>(std::sqrt(static_cast<double>(D))));
  be.ColumnSum(gy, store_.grad(out_b_), n, D);
  ctx_.Plan(dz_, {n * K}, dt);
  const void* gy_c = ctx_.AsComputeScratch(gy, n * D, kScratchCastA);
  LinearBackward(ctx_, WeightView<T>{store_.compute_value(out_w_, cdt), store_.grad(out_w_), D, K}, z_c_, gy_c, n,
                 dz_.template data<T>(), 0.0f);
  // [B, T', C·M'] -> [B, C, T', M'], then the ReLUs and the convolutions.
  ctx_.Plan(dy2_, {B * C * t2_ * m2_}, dt);
  be.SplitHeads(dz_.template data<T>(), nullptr, dy2_.raw(), dt, B, t2_, 1, C, m2_);
  be.BiasActivationBackward(dy2_.template data<T>(), y2_.raw(), dt, dy2_.template data<T>(), nullptr, B * C, t2_ * m2_,
                            Activation::kRelu);
  ctx_.Plan(dy1_, {B * C * t1_ * m1_}, dt);
  be.Conv2dBackward(y1_.template data<T>(), store_.value(conv1_w_), dy2_.template data<T>(), dy1_.template data<T>(),
                    store_.grad(conv1_w_), store_.grad(conv1_b_), Conv2Shape());
  be.BiasActivationBackward(dy1_.template data<T>(), y1_.raw(), dt, dy1_.template data<T>(), nullptr, B * C, t1_ * m1_,
                            Activation::kRelu);
  be.Conv2dBackward(feats_.template data<T>(), store_.value(conv0_w_), dy1_.template data<T>(), nullptr,
                    store_.grad(conv0_w_), store_.grad(conv0_b_), Conv1Shape());
  if (grads_final_) grads_final_(0);
}

template class SpeechCtcModel<float>;
template class SpeechCtcModel<double>;

}  // namespace sf
