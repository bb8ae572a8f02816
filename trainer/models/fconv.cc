#include "trainer/models/fconv.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "trainer/models/model_metadata.h"
#include "trainer/nn/output_loss.h"

namespace sf {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;

// Dropout sites (Context::Key): unique within the model.
constexpr uint32_t kEncoderEmbedSite = 1, kDecoderEmbedSite = 2, kOutputSite = 3;
constexpr uint32_t kEncoderLayerSite = 100, kDecoderLayerSite = 1000;

// fairseq's make_positions on right-padded rows: pad + 1 + t for tokens, pad for padding.
void PositionIds(const int32_t* tokens, int64_t rows, int64_t time, int32_t pad, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t n = 0;
    for (int64_t t = 0; t < time; ++t) {
      const int32_t tok = tokens[r * time + t];
      out[r * time + t] = tok == pad ? pad : pad + (++n);
    }
  }
}

}  // namespace

// One side's embeddings and convolution stack, and its activations of the last Forward.
template <typename T>
struct FConvModel<T>::Side {
  int64_t embed = 0, vocab = 0;
  bool causal = false;
  std::vector<ConvSpec> specs;
  int table = -1, positions = -1;
  std::unique_ptr<WnLinear<T>> fc1;
  std::vector<std::unique_ptr<WnLinear<T>>> proj;  // null where the residual needs none
  std::vector<std::unique_ptr<WnConvTbc<T>>> conv;

  int64_t rows = 0;
  Tensor tokens, pos_ids;                 // int32 [rows]
  Tensor emb, demb;                       // dropped embedding [rows, embed] and its gradient
  std::vector<Tensor> x, res, xin, cout, glu, index;  // per layer (x: L + 1)
  Tensor dx, dnext, dres, dxin, dconv;    // backward scratch

  Side(ParamStore<T>& store, const std::string& prefix, int64_t vocab_size, int64_t embed_dim,
       const std::vector<ConvSpec>& layers, int64_t max_positions, int32_t pad, bool is_causal)
      : embed(embed_dim), vocab(vocab_size), causal(is_causal), specs(layers) {
    table = store.Add(prefix + ".embed_tokens.weight", {vocab, embed}, true);
    positions = store.Add(prefix + ".embed_positions.weight", {max_positions + pad + 1, embed}, true);
    fc1 = std::make_unique<WnLinear<T>>(store, prefix + ".fc1", embed, specs.front().channels);
    int64_t in = specs.front().channels;
    for (size_t l = 0; l < specs.size(); ++l) {
      const int64_t out = specs[l].channels;
      const std::string i = std::to_string(l);
      proj.push_back(in != out ? std::make_unique<WnLinear<T>>(store, prefix + ".projections." + i, in, out) : nullptr);
      conv.push_back(std::make_unique<WnConvTbc<T>>(store, prefix + ".convolutions." + i, in, 2 * out, specs[l].kernel));
      in = out;
    }
    const size_t L = specs.size();
    x.resize(L + 1);
    res.resize(L);
    xin.resize(L);
    cout.resize(L);
    glu.resize(L);
    index.resize(L);
  }
  int64_t channels(size_t l) const { return specs[l].channels; }
  int64_t in_channels(size_t l) const { return l == 0 ? specs.front().channels : specs[l - 1].channels; }
  int64_t last_channels() const { return specs.back().channels; }
};

template <typename T>
struct FConvModel<T>::Attention {
  std::unique_ptr<WnLinear<T>> in_proj, out_proj;
  Tensor q, scores, probs, c, out;  // [Nt, E], [B, T, S] x2, [Nt, E], [Nt, C]
};

template <typename T>
struct FConvModel<T>::State {
  int64_t batch = 0, src_len = 0, tgt_len = 0;
  std::vector<float> sqrt_len;  // √(source tokens) per sentence
  Tensor sqrt_len_dev;          // the same in the backend's memory
  Tensor tgt_out, src_pad;      // int32 [B·T], uint8 [B·S]
  Tensor enc_a, enc_b, denc_a, denc_b;  // [B·S, E]
  Tensor enc_bs, denc_bs;       // √s · b (what the attention reads) and its gradient
  Tensor h, logits, lse, dh, zeros;
  Tensor dlogits_low, dbias;     // bf16 training: the loss gradient and fc3's bias gradient
  bool loss_grad_ready = false;  // Forward left them there (output_loss.h)
  std::vector<uint8_t> staging;
};

template <typename T>
FConvModel<T>::FConvModel(const FConvConfig& config, Backend<T>* backend, DType compute)
    : config_(config), ctx_(backend, compute), s_(std::make_unique<State>()) {
  const FConvConfig& c = config_;
  encoder_ = std::make_unique<Side>(store_, "encoder", c.src_vocab, c.encoder_embed, c.encoder_convs, c.max_positions,
                                    c.pad_id, false);
  enc_fc2_ = std::make_unique<WnLinear<T>>(store_, "encoder.fc2", c.encoder_convs.back().channels, c.encoder_embed);
  decoder_ = std::make_unique<Side>(store_, "decoder", c.tgt_vocab, c.decoder_embed, c.decoder_convs, c.max_positions,
                                    c.pad_id, true);
  for (size_t l = 0; l < c.decoder_convs.size(); ++l) {
    auto a = std::make_unique<Attention>();
    const std::string p = "decoder.attention." + std::to_string(l);
    a->in_proj = std::make_unique<WnLinear<T>>(store_, p + ".in_projection", c.decoder_convs[l].channels, c.decoder_embed);
    a->out_proj = std::make_unique<WnLinear<T>>(store_, p + ".out_projection", c.decoder_embed, c.decoder_convs[l].channels);
    attention_.push_back(std::move(a));
  }
  dec_fc2_ = std::make_unique<WnLinear<T>>(store_, "decoder.fc2", c.decoder_convs.back().channels, c.decoder_out_embed);
  if (c.share_input_output_embed) {
    fc3_bias_ = store_.Add("decoder.fc3.bias", {c.tgt_vocab}, false);
  } else {
    fc3_ = std::make_unique<WnLinear<T>>(store_, "decoder.fc3", c.decoder_out_embed, c.tgt_vocab);
  }
  store_.Finalize(backend->allocator());
}

template <typename T>
FConvModel<T>::~FConvModel() = default;

template <typename T>
const T* FConvModel<T>::logits() const {
  return s_->logits.template data<T>();
}

template <typename T>
void FConvModel<T>::InitParameters(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double p = config_.dropout;
  for (Side* side : {encoder_.get(), decoder_.get()}) {
    // fairseq's Embedding and PositionalEmbedding: N(0, 0.1), the padding row zero.
    std::normal_distribution<double> normal(0.0, 0.1);
    for (int id : {side->table, side->positions}) {
      T* v = store_.host_value(id);
      const auto& shape = store_.params()[id].shape;
      for (int64_t i = 0; i < shape[0] * shape[1]; ++i) v[i] = static_cast<T>(normal(rng));
      std::fill_n(v + static_cast<int64_t>(config_.pad_id) * shape[1], shape[1], T(0));
    }
    side->fc1->Init(store_, rng, p);
    for (size_t l = 0; l < side->conv.size(); ++l) {
      if (side->proj[l]) side->proj[l]->Init(store_, rng, 0.0);
      side->conv[l]->Init(store_, rng, p);
    }
  }
  enc_fc2_->Init(store_, rng, 0.0);
  for (auto& a : attention_) {
    a->in_proj->Init(store_, rng, 0.0);
    a->out_proj->Init(store_, rng, 0.0);
  }
  dec_fc2_->Init(store_, rng, 0.0);
  if (fc3_) {
    fc3_->Init(store_, rng, p);
  } else {
    std::fill_n(store_.host_value(fc3_bias_), config_.tgt_vocab, T(0));
  }
  store_.PushValues();
  WeightsUpdated();
}

template <typename T>
void FConvModel<T>::WeightsUpdated() {
  store_.RefreshMirror(ctx_.backend(), ctx_.compute());
  for (Side* side : {encoder_.get(), decoder_.get()}) {
    side->fc1->Refresh(store_, ctx_);
    for (size_t l = 0; l < side->conv.size(); ++l) {
      if (side->proj[l]) side->proj[l]->Refresh(store_, ctx_);
      side->conv[l]->Refresh(store_, ctx_);
    }
  }
  enc_fc2_->Refresh(store_, ctx_);
  for (auto& a : attention_) {
    a->in_proj->Refresh(store_, ctx_);
    a->out_proj->Refresh(store_, ctx_);
  }
  dec_fc2_->Refresh(store_, ctx_);
  if (fc3_) fc3_->Refresh(store_, ctx_);
  ctx_.backend().WeightsChanged();
}

template <typename T>
Result<CrossEntropyStats> FConvModel<T>::Forward(const Seq2SeqBatch& b) {
  const FConvConfig& c = config_;
  State& s = *s_;
  const int64_t B = b.batch, S = b.src_len, Tt = b.tgt_len, Ns = B * S, Nt = B * Tt;
  if (B <= 0 || S <= 0 || Tt <= 0) return InvalidArgument("empty batch");
  if (S > c.max_positions || Tt > c.max_positions) {
    return InvalidArgument("sequence longer than max_positions " + std::to_string(c.max_positions));
  }
  for (int64_t i = 0; i < Ns; ++i) {
    if (b.src[i] < 0 || b.src[i] >= c.src_vocab) return InvalidArgument("source token out of range at " + std::to_string(i));
  }
  for (int64_t i = 0; i < Nt; ++i) {
    if (b.tgt_in[i] < 0 || b.tgt_in[i] >= c.tgt_vocab || b.tgt_out[i] < 0 || b.tgt_out[i] >= c.tgt_vocab) {
      return InvalidArgument("target token out of range at " + std::to_string(i));
    }
  }
  s.batch = B;
  s.src_len = S;
  s.tgt_len = Tt;
  Backend<T>& be = ctx_.backend();
  const DType dt = DTypeOf<T>::value, cd = ctx_.compute();
  const float p = ctx_.training ? c.dropout : 0.0f;

  // Host-side inputs: tokens, positions, the source padding, and each convolution's gather
  // index (the encoder's reads the zero row at padding: fairseq's masked_fill before each conv).
  std::vector<uint8_t> pad(static_cast<size_t>(Ns));
  s.sqrt_len.assign(static_cast<size_t>(B), 0.0f);
  for (int64_t r = 0; r < B; ++r) {
    int64_t n = 0;
    for (int64_t t = 0; t < S; ++t) {
      pad[r * S + t] = b.src[r * S + t] == c.pad_id;
      n += !pad[r * S + t];
    }
    s.sqrt_len[r] = static_cast<float>(std::sqrt(static_cast<double>(n)));
  }
  auto stage_ints = [&](Tensor& t, const std::vector<int32_t>& v) {
    ctx_.Plan(t, {static_cast<int64_t>(v.size())}, DType::kI32);
    be.CopyToDevice(t.raw(), v.data(), v.size() * sizeof(int32_t));
  };
  for (Side* side : {encoder_.get(), decoder_.get()}) {
    const bool enc = side == encoder_.get();
    const int64_t time = enc ? S : Tt;
    const int32_t* tokens = enc ? b.src : b.tgt_in;
    side->rows = B * time;
    std::vector<int32_t> v(tokens, tokens + side->rows), pos(static_cast<size_t>(side->rows));
    PositionIds(tokens, B, time, c.pad_id, pos.data());
    stage_ints(side->tokens, v);
    stage_ints(side->pos_ids, pos);
    for (size_t l = 0; l < side->specs.size(); ++l) {
      const int64_t k = side->specs[l].kernel;
      stage_ints(side->index[l], ConvIndex(B, time, k, side->causal ? k - 1 : (k - 1) / 2, enc ? pad.data() : nullptr));
    }
  }
  ctx_.Plan(s.sqrt_len_dev, {B}, DType::kF32);
  be.CopyToDevice(s.sqrt_len_dev.raw(), s.sqrt_len.data(), s.sqrt_len.size() * sizeof(float));
  ctx_.Plan(s.src_pad, {Ns}, DType::kU8);
  be.CopyToDevice(s.src_pad.raw(), pad.data(), pad.size());
  stage_ints(s.tgt_out, std::vector<int32_t>(b.tgt_out, b.tgt_out + Nt));
  int64_t widest = 0;
  for (const auto* side : {&c.encoder_convs, &c.decoder_convs}) {
    for (const ConvSpec& spec : *side) widest = std::max(widest, spec.channels);
  }
  if (s.zeros.empty() || s.zeros.numel() < widest) {
    ctx_.Plan(s.zeros, {widest}, dt);
    s.zeros.ZeroFill();
  }

  // The embeddings (dropped) and fc1.
  auto embed = [&](Side& side, uint32_t site) {
    ctx_.Plan(side.emb, {side.rows, side.embed}, dt);
    be.EmbeddingForward(side.tokens.template data<int32_t>(), store_.value(side.table), store_.value(side.positions),
                        side.pos_ids.template data<int32_t>(), side.emb.template data<T>(), side.rows, side.embed, 1.0f);
    be.BiasDropoutResidualForward(side.emb.template data<T>(), nullptr, nullptr, side.emb.template data<T>(), side.rows,
                                  side.embed, p, ctx_.Key(site));
    ctx_.Plan(side.x[0], {side.rows, side.specs.front().channels}, dt);
    side.fc1->Forward(store_, ctx_, side.emb.template data<T>(), side.rows, side.x[0].template data<T>());
  };
  // Layer l of a stack up to its GLU: the residual (projected), dropout into the extended input,
  // the convolution and the GLU.
  auto conv_glu = [&](Side& side, size_t l, uint32_t site) {
    const int64_t N = side.rows, in = side.in_channels(l), C = side.channels(l);
    const T* x = side.x[l].template data<T>();
    if (side.proj[l]) {
      ctx_.Plan(side.res[l], {N, C}, dt);
      side.proj[l]->Forward(store_, ctx_, x, N, side.res[l].template data<T>());
    }
    ctx_.Plan(side.xin[l], {N + 1, in}, dt);
    T* xin = side.xin[l].template data<T>();
    be.BiasDropoutResidualForward(x, nullptr, nullptr, xin, N, in, p, ctx_.Key(site));
    // The zero row the gather reads outside a sentence and at padding (a copy of zeros).
    be.BiasDropoutResidualForward(s.zeros.template data<T>(), nullptr, nullptr, xin + N * in, 1, in, 0.0f, DropoutKey{});
    ctx_.Plan(side.cout[l], {N, 2 * C}, dt);
    side.conv[l]->Forward(store_, ctx_, xin, side.index[l].template data<int32_t>(), N, side.cout[l].template data<T>());
    ctx_.Plan(side.glu[l], {N, C}, dt);
    be.GluForward(side.cout[l].template data<T>(), side.glu[l].template data<T>(), N, C);
  };
  // x_{l+1} = (y + residual)·√½.
  auto residual_add = [&](Side& side, size_t l, const T* y) {
    const int64_t N = side.rows, C = side.channels(l);
    const T* r = side.proj[l] ? side.res[l].template data<T>() : side.x[l].template data<T>();
    ctx_.Plan(side.x[l + 1], {N, C}, dt);
    T* out = side.x[l + 1].template data<T>();
    be.BiasDropoutResidualForward(y, nullptr, r, out, N, C, 0.0f, DropoutKey{});
    be.Scale(out, N * C, kSqrtHalf);
  };

  // ---- encoder
  Side& enc = *encoder_;
  const int64_t E = c.encoder_embed;
  embed(enc, kEncoderEmbedSite);
  for (size_t l = 0; l < enc.specs.size(); ++l) {
    conv_glu(enc, l, kEncoderLayerSite + static_cast<uint32_t>(l));
    residual_add(enc, l, enc.glu[l].template data<T>());
  }
  ctx_.Plan(s.enc_a, {Ns, E}, dt);
  ctx_.Plan(s.enc_b, {Ns, E}, dt);
  enc_fc2_->Forward(store_, ctx_, enc.x.back().template data<T>(), Ns, s.enc_a.template data<T>());
  be.BiasDropoutResidualForward(s.enc_a.template data<T>(), nullptr, enc.emb.template data<T>(),
                                s.enc_b.template data<T>(), Ns, E, 0.0f, DropoutKey{});
  be.Scale(s.enc_b.template data<T>(), Ns * E, kSqrtHalf);
  // The attention's scale √s folded into its values once: c = p (√s b).
  ctx_.Plan(s.enc_bs, {Ns, E}, dt);
  be.BiasDropoutResidualForward(s.enc_b.template data<T>(), nullptr, nullptr, s.enc_bs.template data<T>(), Ns, E, 0.0f,
                                DropoutKey{});
  be.ScaleRowGroups(s.enc_bs.template data<T>(), s.sqrt_len_dev.template data<float>(), B, S, E);

  // ---- decoder
  Side& dec = *decoder_;
  const int64_t De = c.decoder_embed;
  embed(dec, kDecoderEmbedSite);
  const void* a_c = nullptr;
  for (size_t l = 0; l < dec.specs.size(); ++l) {
    const int64_t C = dec.channels(l);
    conv_glu(dec, l, kDecoderLayerSite + static_cast<uint32_t>(l));
    Attention& at = *attention_[l];
    const T* g = dec.glu[l].template data<T>();
    // q = (in_projection(g) + t_emb)·√½
    ctx_.Plan(at.q, {Nt, De}, dt);
    at.in_proj->Forward(store_, ctx_, g, Nt, at.q.template data<T>());
    be.BiasDropoutResidualForward(at.q.template data<T>(), nullptr, dec.emb.template data<T>(), at.q.template data<T>(),
                                  Nt, De, 0.0f, DropoutKey{});
    be.Scale(at.q.template data<T>(), Nt * De, kSqrtHalf);
    // scores [B, T, S] = q aᵀ; p = softmax with the padding masked
    ctx_.Plan(at.scores, {B, Tt, S}, dt);
    ctx_.Plan(at.probs, {B, Tt, S}, dt);
    a_c = ctx_.AsComputeScratch(s.enc_a.template data<T>(), Ns * E, kScratchCastB);
    be.Gemm(B, Tt, S, De, GemmOperand{ctx_.AsComputeScratch(at.q.template data<T>(), Nt * De, kScratchCastA), cd, false, De, Tt * De},
            GemmOperand{a_c, cd, true, De, S * De}, at.scores.template data<T>(), S, Tt * S, 1.0f, 0.0f);
    be.SoftmaxForward(at.scores.template data<T>(), at.probs.template data<T>(), nullptr, dt,
                      s.src_pad.template data<uint8_t>(), B, 1, Tt, S, 1.0f, false, 0.0f, DropoutKey{});
    // c = p (√s b)
    ctx_.Plan(at.c, {Nt, De}, dt);
    be.Gemm(B, Tt, De, S,
            GemmOperand{ctx_.AsComputeScratch(at.probs.template data<T>(), B * Tt * S, kScratchCastA), cd, false, S, Tt * S},
            GemmOperand{ctx_.AsComputeScratch(s.enc_bs.template data<T>(), Ns * E, kScratchCastB), cd, false, De, S * De},
            at.c.template data<T>(), De, Tt * De, 1.0f, 0.0f);
    // g' = (out_projection(c) + g)·√½
    ctx_.Plan(at.out, {Nt, C}, dt);
    at.out_proj->Forward(store_, ctx_, at.c.template data<T>(), Nt, at.out.template data<T>());
    be.BiasDropoutResidualForward(at.out.template data<T>(), nullptr, g, at.out.template data<T>(), Nt, C, 0.0f,
                                  DropoutKey{});
    be.Scale(at.out.template data<T>(), Nt * C, kSqrtHalf);
    residual_add(dec, l, at.out.template data<T>());
  }
  // logits = fc3(dropout(fc2(x_L)))
  const int64_t O = c.decoder_out_embed, V = c.tgt_vocab;
  ctx_.Plan(s.h, {Nt, O}, dt);
  dec_fc2_->Forward(store_, ctx_, dec.x.back().template data<T>(), Nt, s.h.template data<T>());
  be.BiasDropoutResidualForward(s.h.template data<T>(), nullptr, nullptr, s.h.template data<T>(), Nt, O, p,
                                ctx_.Key(kOutputSite));
  ctx_.Plan(s.lse, {Nt}, dt);
  // bf16 training: the loss gradient comes with the loss, a block of rows at a time
  // (trainer/nn/output_loss.h), fc3's bias gradient summed from it before rounding.
  s.loss_grad_ready = ctx_.training && cd == DType::kBF16;
  if (s.loss_grad_ready) {
    ctx_.Plan(s.dlogits_low, {Nt, V}, cd);
    const void* w = fc3_ ? fc3_->compute_weight(ctx_) : store_.compute_value(dec.table, cd);
    const T* bias = store_.value(fc3_ ? fc3_->bias_id() : fc3_bias_);
    return ProjectWithLossGradient(ctx_, ctx_.AsComputeScratch(s.h.template data<T>(), Nt * O, kScratchCastA), w, Nt,
                                   O, V, s.tgt_out.template data<int32_t>(), c.label_smoothing, c.pad_id, 0, s.logits,
                                   s.lse.template data<T>(), s.dlogits_low.raw(), cd, bias, &s.dbias);
  }
  ctx_.Plan(s.logits, {Nt, V}, dt);
  if (fc3_) {
    fc3_->Forward(store_, ctx_, s.h.template data<T>(), Nt, s.logits.template data<T>());
  } else {
    be.Gemm(1, Nt, V, O, GemmOperand{ctx_.AsComputeScratch(s.h.template data<T>(), Nt * O, kScratchCastA), cd, false, O, 0},
            GemmOperand{store_.compute_value(dec.table, cd), cd, true, O, 0, true}, s.logits.template data<T>(), V, 0,
            1.0f, 0.0f);
    be.BiasDropoutResidualForward(s.logits.template data<T>(), store_.value(fc3_bias_), nullptr,
                                  s.logits.template data<T>(), Nt, V, 0.0f, DropoutKey{});
  }
  return be.CrossEntropyForward(s.logits.template data<T>(), s.tgt_out.template data<int32_t>(), s.lse.template data<T>(),
                                Nt, V, c.label_smoothing, c.pad_id);
}

template <typename T>
void FConvModel<T>::Backward(float grad_scale) {
  const FConvConfig& c = config_;
  State& s = *s_;
  Backend<T>& be = ctx_.backend();
  const DType dt = DTypeOf<T>::value, cd = ctx_.compute();
  const int64_t B = s.batch, S = s.src_len, Tt = s.tgt_len, Ns = B * S, Nt = B * Tt;
  const int64_t E = c.encoder_embed, De = c.decoder_embed, O = c.decoder_out_embed, V = c.tgt_vocab;
  const float p = ctx_.training ? c.dropout : 0.0f;
  Side& enc = *encoder_;
  Side& dec = *decoder_;

  // ---- output layers
  ctx_.Plan(s.dh, {Nt, O}, dt);
  const int bias_id = fc3_ ? fc3_->bias_id() : fc3_bias_;
  const void* dl_c = nullptr;  // the loss gradient in the compute dtype, times alpha
  float alpha = 1.0f;
  if (s.loss_grad_ready) {
    // Forward left the unscaled gradient (bf16) and the bias's (fp32): scale them here.
    s.loss_grad_ready = false;
    be.Scale(s.dbias.template data<T>(), V, grad_scale);
    be.Add(s.dbias.template data<T>(), store_.grad(bias_id), V);
    dl_c = s.dlogits_low.raw();
    alpha = grad_scale;
  } else {
    T* dlogits = s.logits.template data<T>();
    be.CrossEntropyBackward(s.logits.template data<T>(), s.lse.template data<T>(), s.tgt_out.template data<int32_t>(),
                            dlogits, dt, Nt, V, c.label_smoothing, c.pad_id, grad_scale);
    be.ColumnSum(dlogits, store_.grad(bias_id), Nt, V);
    dl_c = ctx_.AsComputeScratch(dlogits, Nt * V, kScratchCastA);
  }
  if (fc3_) {
    fc3_->BackwardWeightAndInput(store_, ctx_, s.h.template data<T>(), dl_c, alpha, Nt, s.dh.template data<T>(), 0.0f);
  } else {
    be.Gemm(1, V, O, Nt, GemmOperand{dl_c, cd, true, V, 0},
            GemmOperand{ctx_.AsComputeScratch(s.h.template data<T>(), Nt * O, kScratchCastB), cd, false, O, 0},
            store_.grad(dec.table), O, 0, alpha, 1.0f);
    be.Gemm(1, Nt, O, V, GemmOperand{dl_c, cd, false, V, 0},
            GemmOperand{store_.compute_value(dec.table, cd), cd, false, O, 0, true}, s.dh.template data<T>(), O, 0,
            alpha, 0.0f);
  }
  be.BiasDropoutResidualBackward(s.dh.template data<T>(), s.dh.template data<T>(), nullptr, Nt, O, p,
                                 ctx_.Key(kOutputSite));

  // A stack's layers backwards, from dx (the gradient of its output x_L, in side.dx): per layer
  // `into_glu` turns the gradient of the layer's y (before the residual add) into the GLU's.
  auto stack_backward = [&](Side& side, uint32_t site0, const std::function<void(size_t, T*)>& attention_backward) {
    const int64_t N = side.rows;
    for (size_t l = side.specs.size(); l-- > 0;) {
      const int64_t in = side.in_channels(l), C = side.channels(l);
      // dX = gradient of x_{l+1}; both the residual and y get dX·√½.
      T* dy = side.dx.template data<T>();
      be.Scale(dy, N * C, kSqrtHalf);
      ctx_.Plan(side.dres, {N, C}, dt);
      be.BiasDropoutResidualForward(dy, nullptr, nullptr, side.dres.template data<T>(), N, C, 0.0f, DropoutKey{});
      attention_backward(l, dy);  // dy becomes the GLU output's gradient
      ctx_.Plan(side.dconv, {N, 2 * C}, dt);
      be.GluBackward(side.cout[l].template data<T>(), dy, side.dconv.template data<T>(), N, C);
      ctx_.Plan(side.dxin, {N + 1, in}, dt);
      side.dxin.ZeroFill();
      side.conv[l]->Backward(store_, ctx_, side.dconv.template data<T>(), side.index[l].template data<int32_t>(), N,
                             side.dxin.template data<T>());
      ctx_.Plan(side.dnext, {N, in}, dt);
      T* dx = side.dnext.template data<T>();
      be.BiasDropoutResidualBackward(side.dxin.template data<T>(), dx, nullptr, N, in, p,
                                     ctx_.Key(site0 + static_cast<uint32_t>(l)));
      if (side.proj[l]) {
        side.proj[l]->Backward(store_, ctx_, side.x[l].template data<T>(), side.dres.template data<T>(), N, dx, 1.0f);
      } else {
        be.Add(side.dres.template data<T>(), dx, N * C);
      }
      std::swap(side.dx, side.dnext);
    }
  };
  // fc1 and the embeddings from the gradient of x_0 (side.dx); side.demb already holds any other
  // gradient of the dropped embedding.
  auto embed_backward = [&](Side& side, uint32_t site) {
    side.fc1->Backward(store_, ctx_, side.emb.template data<T>(), side.dx.template data<T>(), side.rows,
                       side.demb.template data<T>(), 1.0f);
    be.BiasDropoutResidualBackward(side.demb.template data<T>(), side.demb.template data<T>(), nullptr, side.rows,
                                   side.embed, p, ctx_.Key(site));
    be.EmbeddingBackward(side.tokens.template data<int32_t>(), side.demb.template data<T>(), store_.grad(side.table),
                         side.rows, side.embed, 1.0f, c.pad_id);
    be.EmbeddingBackward(side.pos_ids.template data<int32_t>(), side.demb.template data<T>(),
                         store_.grad(side.positions), side.rows, side.embed, 1.0f, c.pad_id);
  };

  // ---- decoder
  ctx_.Plan(dec.dx, {Nt, dec.last_channels()}, dt);
  dec_fc2_->Backward(store_, ctx_, dec.x.back().template data<T>(), s.dh.template data<T>(), Nt,
                     dec.dx.template data<T>(), 0.0f);
  ctx_.Plan(dec.demb, {Nt, De}, dt);
  dec.demb.ZeroFill();
  ctx_.Plan(s.denc_a, {Ns, E}, dt);
  ctx_.Plan(s.denc_bs, {Ns, E}, dt);
  s.denc_a.ZeroFill();
  s.denc_bs.ZeroFill();
  Tensor dq, dctx, dprobs, dscores, dglu;
  stack_backward(dec, kDecoderLayerSite, [&](size_t l, T* dy) {
    Attention& at = *attention_[l];
    const int64_t C = dec.channels(l);
    const T* g = dec.glu[l].template data<T>();
    // y = g' = (out_projection(c) + g)·√½: both get dy·√½.
    be.Scale(dy, Nt * C, kSqrtHalf);
    ctx_.Plan(dctx, {Nt, De}, dt);
    at.out_proj->Backward(store_, ctx_, at.c.template data<T>(), dy, Nt, dctx.template data<T>(), 0.0f);
    // c = p b' (b' = √s b): dp = dc b'ᵀ, db' += pᵀ dc.
    ctx_.Plan(dprobs, {B, Tt, S}, dt);
    const void* dc_c = ctx_.AsComputeScratch(dctx.template data<T>(), Nt * De, kScratchCastA);
    be.Gemm(B, Tt, S, De, GemmOperand{dc_c, cd, false, De, Tt * De},
            GemmOperand{ctx_.AsComputeScratch(s.enc_bs.template data<T>(), Ns * E, kScratchCastB), cd, true, De, S * De},
            dprobs.template data<T>(), S, Tt * S, 1.0f, 0.0f);
    be.Gemm(B, S, De, Tt,
            GemmOperand{ctx_.AsComputeScratch(at.probs.template data<T>(), B * Tt * S, kScratchCastB), cd, true, S, Tt * S},
            GemmOperand{dc_c, cd, false, De, Tt * De}, s.denc_bs.template data<T>(), E, S * E, 1.0f, 1.0f);
    ctx_.Plan(dscores, {B, Tt, S}, dt);
    be.SoftmaxBackward(dprobs.template data<T>(), at.probs.template data<T>(), dscores.raw(), dt, B, 1, Tt, S, 1.0f,
                       0.0f, DropoutKey{});
    // scores = q aᵀ: dq = dscores a, da += dscoresᵀ q.
    ctx_.Plan(dq, {Nt, De}, dt);
    const void* ds_c = ctx_.AsComputeScratch(dscores.template data<T>(), B * Tt * S, kScratchCastA);
    be.Gemm(B, Tt, De, S, GemmOperand{ds_c, cd, false, S, Tt * S},
            GemmOperand{ctx_.AsComputeScratch(s.enc_a.template data<T>(), Ns * E, kScratchCastB), cd, false, De, S * De},
            dq.template data<T>(), De, Tt * De, 1.0f, 0.0f);
    be.Gemm(B, S, De, Tt, GemmOperand{ds_c, cd, true, S, Tt * S},
            GemmOperand{ctx_.AsComputeScratch(at.q.template data<T>(), Nt * De, kScratchCastB), cd, false, De, Tt * De},
            s.denc_a.template data<T>(), E, S * E, 1.0f, 1.0f);
    // q = (in_projection(g) + t_emb)·√½
    be.Scale(dq.template data<T>(), Nt * De, kSqrtHalf);
    be.Add(dq.template data<T>(), dec.demb.template data<T>(), Nt * De);
    ctx_.Plan(dglu, {Nt, C}, dt);
    at.in_proj->Backward(store_, ctx_, g, dq.template data<T>(), Nt, dglu.template data<T>(), 0.0f);
    be.Add(dglu.template data<T>(), dy, Nt * C);  // dy: the GLU output's whole gradient
  });
  embed_backward(dec, kDecoderEmbedSite);

  // ---- encoder: a = fc2(x_L) (GradMultiply), b = (a + e)·√½
  const int64_t attention_layers = static_cast<int64_t>(attention_.size());
  T* da = s.denc_a.template data<T>();
  // b' = √s b, b = (a + e)·√½
  ctx_.Plan(s.denc_b, {Ns, E}, dt);
  be.BiasDropoutResidualForward(s.denc_bs.template data<T>(), nullptr, nullptr, s.denc_b.template data<T>(), Ns, E,
                                0.0f, DropoutKey{});
  be.ScaleRowGroups(s.denc_b.template data<T>(), s.sqrt_len_dev.template data<float>(), B, S, E);
  be.Scale(s.denc_b.template data<T>(), Ns * E, kSqrtHalf);
  be.Add(s.denc_b.template data<T>(), da, Ns * E);
  if (c.scale_encoder_gradient) {
    be.Scale(da, Ns * E, static_cast<float>(1.0 / (2.0 * static_cast<double>(attention_layers))));
  }
  ctx_.Plan(enc.dx, {Ns, enc.last_channels()}, dt);
  enc_fc2_->Backward(store_, ctx_, enc.x.back().template data<T>(), da, Ns, enc.dx.template data<T>(), 0.0f);
  ctx_.Plan(enc.demb, {Ns, E}, dt);
  be.BiasDropoutResidualForward(s.denc_b.template data<T>(), nullptr, nullptr, enc.demb.template data<T>(), Ns, E,
                                0.0f, DropoutKey{});
  stack_backward(enc, kEncoderLayerSite, [](size_t, T*) {});
  embed_backward(enc, kEncoderEmbedSite);
  if (grads_final_) grads_final_(0);
}

template class FConvModel<float>;
template class FConvModel<double>;

}  // namespace sf
