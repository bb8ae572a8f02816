// fairseq's `lstm` architecture (fairseq/models/lstm.py, LSTMModel) for training: the LSTM
// encoder (trainer/nn/lstm_encoder.h), the decoder's initial states from each encoder layer's
// final h and c (through encoder_hidden_proj / encoder_cell_proj when the encoder's output size
// differs from the decoder's hidden size), the LSTM decoder with input feeding and attention
// (trainer/nn/lstm_decoder.h) over the decoder's embeddings (dropout_in), additional_fc with
// dropout_out when the decoder's hidden size differs from out_embed, and fc_out (or the decoder's
// embedding when shared), then the label-smoothed cross-entropy summed over non-pad targets.
//
// Parameter names are fairseq's state_dict keys (docs/engine.md): encoder.embed_tokens.weight,
// encoder.lstm.weight_ih_l0 ..., decoder.embed_tokens.weight, decoder.encoder_hidden_proj.*,
// decoder.encoder_cell_proj.*, decoder.layers.<i>.*, decoder.attention.input_proj.weight,
// decoder.attention.output_proj.weight, decoder.additional_fc.*, decoder.fc_out.*.
//
// A Seq2SeqModel (seq2seq_model.h): trained, checkpointed and searched (lstm_generator.h) as
// every family is. Forward and backward are proven against PyTorch (lstm_test.cc) and finite
// differences (layers_test.cc).
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/lstm_config.h"
#include "trainer/models/seq2seq_model.h"
#include "trainer/nn/context.h"
#include "trainer/nn/lstm_decoder.h"
#include "trainer/nn/lstm_encoder.h"
#include "trainer/nn/output_loss.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class LstmModel final : public Seq2SeqModel<T> {
 public:
  LstmModel(const LstmConfig& config, Backend<T>* backend, DType compute)
      : config_(config), ctx_(backend, compute),
        encoder_(store_, "encoder.", config.src_vocab, config.encoder_embed, config.encoder_hidden,
                 config.encoder_layers, config.encoder_bidirectional, config.encoder_dropout_in,
                 config.encoder_dropout_out, config.pad_id, kEncoderSite, config.residual_from,
                 config.encoder_bidirectional_layers),
        decoder_(store_, "decoder.", config.decoder_embed, config.decoder_hidden, config.decoder_layers,
                 config.encoder_units(), config.decoder_dropout_out, kDecoderSite, config.residual_from) {
    const int64_t units = config.encoder_units(), H = config.decoder_hidden;
    decoder_start_ = OffsetOf(store_.Find("decoder.layers.0.weight_ih"));  // the encoder's are first
    dec_table_ = store_.Add("decoder.embed_tokens.weight", {config.tgt_vocab, config.decoder_embed}, true);
    if (units != H) {
      hidden_proj_w_ = store_.Add("decoder.encoder_hidden_proj.weight", {H, units}, true);
      hidden_proj_b_ = store_.Add("decoder.encoder_hidden_proj.bias", {H}, false);
      cell_proj_w_ = store_.Add("decoder.encoder_cell_proj.weight", {H, units}, true);
      cell_proj_b_ = store_.Add("decoder.encoder_cell_proj.bias", {H}, false);
    }
    if (H != config.decoder_out_embed) {
      fc_extra_w_ = store_.Add("decoder.additional_fc.weight", {config.decoder_out_embed, H}, true);
      fc_extra_b_ = store_.Add("decoder.additional_fc.bias", {config.decoder_out_embed}, false);
    }
    if (!config.share_decoder_input_output_embed) {
      fc_out_w_ = store_.Add("decoder.fc_out.weight", {config.tgt_vocab, config.decoder_out_embed}, true);
      fc_out_b_ = store_.Add("decoder.fc_out.bias", {config.tgt_vocab}, false);
    }
    store_.Finalize(backend->allocator());
    states_h_.resize(config.decoder_layers);
    states_c_.resize(config.decoder_layers);
  }
  LstmModel(const LstmModel&) = delete;
  LstmModel& operator=(const LstmModel&) = delete;

  const LstmConfig& config() const { return config_; }
  const char* family() const override { return "lstm"; }
  ModelShape shape() const override {
    return ModelShape{config_.src_vocab, config_.tgt_vocab, config_.pad_id, config_.max_positions};
  }
  std::map<std::string, std::string> Metadata() const override { return LstmMetadata(config_); }
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const override {
    return config_.TrainingFlops(batch, src_len, tgt_len);
  }
  Context<T>& context() override { return ctx_; }
  ParamStore<T>& params() override { return store_; }
  void WeightsUpdated() override {
    store_.RefreshMirror(ctx_.backend(), ctx_.compute());
    ctx_.backend().WeightsChanged();
  }
  // fairseq's lstm initialisation: every parameter U(-0.1, 0.1) (embeddings, LSTM weights and
  // biases, linear weights and biases), the embeddings' pad rows 0; drawn in store order.
  void InitParameters(uint64_t seed) override {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-0.1, 0.1);
    for (const ParamInfo& p : store_.params()) {
      T* v = store_.host_values() + p.offset;
      for (int64_t i = 0; i < p.numel; ++i) v[i] = static_cast<T>(u(rng));
    }
    for (const char* table : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}) {
      const int id = store_.Find(table);
      const int64_t dim = store_.params()[id].shape[1];
      T* row = store_.host_value(id) + static_cast<int64_t>(config_.pad_id) * dim;
      std::fill(row, row + dim, T(0));
    }
    store_.PushValues();
    WeightsUpdated();
  }
  // Called during Backward with decreasing offsets: after the output layers (when untied), after
  // the decoder side (everything stored after the encoder), and 0 after the encoder.
  void set_grads_final_hook(std::function<void(int64_t offset)> hook) override { grads_final_ = std::move(hook); }

  // The loss over the batch's non-pad targets. Errors: tokens out of range, an empty source,
  // sequences longer than max_positions.
  Result<CrossEntropyStats> Forward(const Seq2SeqBatch& batch) override {
    Backend<T>& be = ctx_.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t B = batch.batch, S = batch.src_len, Tt = batch.tgt_len, N = B * Tt;
    if (B <= 0 || S <= 0 || Tt <= 0) return InvalidArgument("empty batch");
    if (S > config_.max_positions || Tt > config_.max_positions) {
      return InvalidArgument("sequence longer than max_positions " + std::to_string(config_.max_positions));
    }
    const int64_t E = config_.decoder_embed, H = config_.decoder_hidden, O = config_.decoder_out_embed;
    const int64_t V = config_.tgt_vocab;
    SF_RETURN_IF_ERROR(encoder_.Forward(ctx_, batch.src, B, S));
    // Target ids, time-major (host buffers kept: no allocation once the shape was seen).
    std::vector<int32_t>& tin = host_tin_;
    std::vector<int32_t>& tout = host_tout_;
    tin.resize(N);
    tout.resize(N);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < Tt; ++t) {
        tin[t * B + b] = batch.tgt_in[b * Tt + t];
        tout[t * B + b] = batch.tgt_out[b * Tt + t];
        for (int32_t tok : {tin[t * B + b], tout[t * B + b]}) {
          if (tok < 0 || tok >= V) {
            return InvalidArgument("target sentence " + std::to_string(b) + " position " + std::to_string(t) +
                                   ": token " + std::to_string(tok) + " is outside the vocabulary of " +
                                   std::to_string(V));
          }
        }
      }
    }
    batch_ = B;
    tgt_len_ = Tt;
    src_len_ = S;
    ctx_.Plan(tin_, {N}, DType::kI32);
    tin_.CopyFromHost(tin.data());
    ctx_.Plan(tout_, {N}, DType::kI32);
    tout_.CopyFromHost(tout.data());
    std::vector<const T*> h0, c0;
    InitialStates(B, &h0, &c0);
    // Embeddings, the decoder, additional_fc, the output projection, the loss.
    p_in_ = ctx_.training ? config_.decoder_dropout_in : 0.0f;
    p_out_ = ctx_.training ? config_.decoder_dropout_out : 0.0f;
    ctx_.Plan(emb_, {N, E}, dt);
    be.EmbeddingForward(tin_.data<int32_t>(), store_.value(dec_table_), nullptr, nullptr, emb_.template data<T>(), N,
                        E, 1.0f);
    if (p_in_ > 0) {
      be.BiasDropoutResidualForward(emb_.template data<T>(), nullptr, nullptr, emb_.template data<T>(), N, E, p_in_,
                                    ctx_.Key(kEmbedSite));
    }
    y_ = decoder_.Forward(ctx_, emb_.template data<T>(), Tt, B, encoder_.outputs(), S, encoder_.padding(), h0, c0);
    features_ = y_;
    if (fc_extra_w_ >= 0) {
      ctx_.Plan(extra_, {N, O}, dt);
      Linear(fc_extra_w_, y_, extra_.template data<T>(), N, O, H);
      be.BiasDropoutResidualForward(extra_.template data<T>(), store_.value(fc_extra_b_), nullptr,
                                    extra_.template data<T>(), N, O, p_out_, ctx_.Key(kExtraSite));
      features_ = extra_.template data<T>();
    }
    ctx_.Plan(lse_, {N}, dt);
    // bf16 training: the loss gradient comes with the loss, a block of rows at a time
    // (trainer/nn/output_loss.h), fc_out's bias gradient summed from it before rounding.
    const DType cd = ctx_.compute();
    loss_grad_ready_ = ctx_.training && cd == DType::kBF16;
    if (loss_grad_ready_) {
      ctx_.Plan(dlogits_low_, {N, V}, cd);
      return ProjectWithLossGradient(ctx_, ctx_.AsComputeScratch(features_, N * O, kScratchCastA),
                                     store_.compute_value(OutWeight(), cd), N, O, V, tout_.data<int32_t>(),
                                     config_.label_smoothing, config_.pad_id, 0, logits_, lse_.template data<T>(),
                                     dlogits_low_.raw(), cd, fc_out_b_ >= 0 ? store_.value(fc_out_b_) : nullptr,
                                     &dbias_);
    }
    ctx_.Plan(logits_, {N, V}, dt);
    Linear(OutWeight(), features_, logits_.template data<T>(), N, V, O);
    if (fc_out_b_ >= 0) {
      be.BiasDropoutResidualForward(logits_.template data<T>(), store_.value(fc_out_b_), nullptr,
                                    logits_.template data<T>(), N, V, 0.0f, DropoutKey{});
    }
    return be.CrossEntropyForward(logits_.template data<T>(), tout_.data<int32_t>(), lse_.template data<T>(), N, V,
                                  config_.label_smoothing, config_.pad_id);
  }

  // Gradients of grad_scale * the loss, accumulated into params().
  void Backward(float grad_scale) override {
    Backend<T>& be = ctx_.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t B = batch_, Tt = tgt_len_, S = src_len_, N = B * Tt;
    const int64_t E = config_.decoder_embed, H = config_.decoder_hidden, O = config_.decoder_out_embed;
    const int64_t V = config_.tgt_vocab, units = config_.encoder_units();
    ctx_.Plan(dfeatures_, {N, O}, dt);
    if (loss_grad_ready_) {
      // Forward left the unscaled gradient (bf16) and the bias's (fp32): scale both here.
      loss_grad_ready_ = false;
      if (fc_out_b_ >= 0) {
        be.Scale(dbias_.template data<T>(), V, grad_scale);
        be.Add(dbias_.template data<T>(), store_.grad(fc_out_b_), V);
      }
      LinearBackwardC(OutWeight(), features_, dlogits_low_.raw(), dfeatures_.template data<T>(), N, V, O, grad_scale);
    } else {
      T* dlogits = logits_.template data<T>();
      be.CrossEntropyBackward(logits_.template data<T>(), lse_.template data<T>(), tout_.data<int32_t>(), dlogits, dt,
                              N, V, config_.label_smoothing, config_.pad_id, grad_scale);
      if (fc_out_b_ >= 0) be.ColumnSum(dlogits, store_.grad(fc_out_b_), N, V);
      LinearBackward(OutWeight(), features_, dlogits, dfeatures_.template data<T>(), N, V, O);
    }
    const T* dy = dfeatures_.template data<T>();
    if (fc_extra_w_ >= 0) {
      T* dz = dfeatures_.template data<T>();
      be.BiasDropoutResidualBackward(dz, dz, store_.grad(fc_extra_b_), N, O, p_out_, ctx_.Key(kExtraSite));
      ctx_.Plan(dy_, {N, H}, dt);
      LinearBackward(fc_extra_w_, y_, dz, dy_.template data<T>(), N, O, H);
      dy = dy_.template data<T>();
    }
    // additional_fc and an untied fc_out, stored last, are final (a tied output is the decoder's
    // embedding, which the decoder's backward still adds to).
    if (grads_final_ && fc_out_w_ >= 0) grads_final_(OffsetOf(fc_extra_w_ >= 0 ? fc_extra_w_ : fc_out_w_));
    ctx_.Plan(demb_, {N, E}, dt);
    ctx_.Plan(denc_, {S * B * units}, dt);
    denc_.ZeroFill();
    decoder_.Backward(ctx_, dy, demb_.template data<T>(), denc_.template data<T>());
    if (p_in_ > 0) {
      be.BiasDropoutResidualBackward(demb_.template data<T>(), demb_.template data<T>(), nullptr, N, E, p_in_,
                                     ctx_.Key(kEmbedSite));
    }
    be.EmbeddingBackward(tin_.data<int32_t>(), demb_.template data<T>(), store_.grad(dec_table_), N, E, 1.0f,
                         config_.pad_id);
    // The initial states' gradients back to the encoder's final states.
    std::vector<const T*> dh(config_.decoder_layers), dc(config_.decoder_layers);
    dstates_.resize(2 * config_.decoder_layers);
    for (int i = 0; i < config_.decoder_layers; ++i) {
      if (hidden_proj_w_ < 0) {
        dh[i] = decoder_.dh0(i);
        dc[i] = decoder_.dc0(i);
        continue;
      }
      for (int which = 0; which < 2; ++which) {
        Tensor& d = dstates_[2 * i + which];
        ctx_.Plan(d, {B, units}, dt);
        const T* dstate = which == 0 ? decoder_.dh0(i) : decoder_.dc0(i);
        be.ColumnSum(dstate, store_.grad(which == 0 ? hidden_proj_b_ : cell_proj_b_), B, H);
        LinearBackward(which == 0 ? hidden_proj_w_ : cell_proj_w_, which == 0 ? encoder_.final_h(i) : encoder_.final_c(i),
                       dstate, d.template data<T>(), B, H, units);
        (which == 0 ? dh : dc)[i] = d.template data<T>();
      }
    }
    // Every decoder-side parameter (stored after the encoder's) is final: their buckets can go
    // out while the encoder's backward runs.
    if (grads_final_) grads_final_(decoder_start_);
    encoder_.Backward(ctx_, denc_.template data<T>(), dh, dc);
    if (grads_final_) grads_final_(0);
  }

  // [T*B, V], time-major rows; bf16 training computes them a block of rows at a time
  // (trainer/nn/output_loss.h) and keeps the last block only, unless every row fitted one.
  const T* logits() const { return logits_.template data<T>(); }

  // ---- Incremental decoding (the beam search, lstm_generator.h): call with
  // context().training false; no gradients.
  //
  // Encodes src [B, S] (host ids, right-padded with pad_id) and computes the decoder's initial
  // states: encoder_outputs() [S, B, Ds], encoder_padding() [B, S], initial_h(i) /
  // initial_c(i) [B, H], in the backend's memory until the next Encode or Forward.
  Status Encode(const int32_t* src, int64_t batch, int64_t src_len) {
    SF_RETURN_IF_ERROR(encoder_.Forward(ctx_, src, batch, src_len));
    init_h_.clear();
    init_c_.clear();
    InitialStates(batch, &init_h_, &init_c_);
    return Status::Ok();
  }
  const T* encoder_outputs() const { return encoder_.outputs(); }
  const uint8_t* encoder_padding() const { return encoder_.padding(); }
  const T* initial_h(int i) const { return init_h_[i]; }
  const T* initial_c(int i) const { return init_c_[i]; }

  // One decoder step for `rows` rows: tokens [rows] (backend memory) the rows' last tokens;
  // enc [S, rows, Ds] and padding [rows, S] their encoder outputs; h, c one [rows, H] per layer
  // and feed [rows, H] their state (feed null: zeros, the first step). The same arithmetic per
  // row as Forward's step, so a step equals the teacher-forced forward's row for that prefix.
  // Leaves logits [rows, V] in logits() and the new state in step_h(i), step_c(i) and
  // step_feed(), valid until the next call.
  void DecodeStep(const int32_t* tokens, int64_t rows, const T* enc, const uint8_t* padding, int64_t src_len,
                  const std::vector<const T*>& h, const std::vector<const T*>& c, const T* feed) {
    Backend<T>& be = ctx_.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t E = config_.decoder_embed, H = config_.decoder_hidden, O = config_.decoder_out_embed;
    const int64_t V = config_.tgt_vocab;
    ctx_.Plan(emb_, {rows, E}, dt);
    be.EmbeddingForward(tokens, store_.value(dec_table_), nullptr, nullptr, emb_.template data<T>(), rows, E, 1.0f);
    const T* y = decoder_.Forward(ctx_, emb_.template data<T>(), 1, rows, enc, src_len, padding, h, c, feed);
    step_feed_ = y;
    const T* features = y;
    if (fc_extra_w_ >= 0) {
      ctx_.Plan(extra_, {rows, O}, dt);
      Linear(fc_extra_w_, y, extra_.template data<T>(), rows, O, H);
      be.BiasDropoutResidualForward(extra_.template data<T>(), store_.value(fc_extra_b_), nullptr,
                                    extra_.template data<T>(), rows, O, 0.0f, DropoutKey{});
      features = extra_.template data<T>();
    }
    ctx_.Plan(logits_, {rows, V}, dt);
    Linear(OutWeight(), features, logits_.template data<T>(), rows, V, O);
    if (fc_out_b_ >= 0) {
      be.BiasDropoutResidualForward(logits_.template data<T>(), store_.value(fc_out_b_), nullptr,
                                    logits_.template data<T>(), rows, V, 0.0f, DropoutKey{});
    }
  }
  const T* step_h(int i) { return decoder_.hidden(i); }
  const T* step_c(int i) { return decoder_.cell(i); }
  const T* step_feed() const { return step_feed_; }

 private:
  static constexpr uint32_t kEncoderSite = 0, kEmbedSite = 40, kExtraSite = 41, kDecoderSite = 100;

  int OutWeight() const { return fc_out_w_ >= 0 ? fc_out_w_ : dec_table_; }
  int64_t OffsetOf(int id) const { return store_.params()[id].offset; }
  // y [rows, out] = x [rows, in] W^T (W: [out, in]).
  void Linear(int w, const T* x, T* y, int64_t rows, int64_t out, int64_t in) {
    const DType cd = ctx_.compute();
    ctx_.backend().Gemm(1, rows, out, in, GemmOperand{ctx_.AsComputeScratch(x, rows * in, kScratchCastA), cd, false, in, 0},
                        GemmOperand{store_.compute_value(w, cd), cd, true, in, 0, true}, y, out, 0, 1.0f, 0.0f);
  }
  // dW += dy^T x; dx = dy W (dx may be null).
  void LinearBackward(int w, const T* x, const T* dy, T* dx, int64_t rows, int64_t out, int64_t in) {
    LinearBackwardC(w, x, ctx_.AsComputeScratch(dy, rows * out, kScratchCastA), dx, rows, out, in, 1.0f);
  }
  // The same with dy already in the compute dtype (not in the kScratchCastB slot), both products
  // scaled by alpha.
  void LinearBackwardC(int w, const T* x, const void* dy_c, T* dx, int64_t rows, int64_t out, int64_t in,
                       float alpha) {
    const DType cd = ctx_.compute();
    ctx_.backend().Gemm(1, out, in, rows, GemmOperand{dy_c, cd, true, out, 0},
                        GemmOperand{ctx_.AsComputeScratch(x, rows * in, kScratchCastB), cd, false, in, 0},
                        store_.grad(w), in, 0, alpha, 1.0f);
    if (dx) {
      ctx_.backend().Gemm(1, rows, in, out, GemmOperand{dy_c, cd, false, out, 0},
                          GemmOperand{store_.compute_value(w, cd), cd, false, in, 0, true}, dx, in, 0, alpha, 0.0f);
    }
  }
  // The decoder's initial states from the encoder's final ones (projected when the sizes
  // differ).
  void InitialStates(int64_t B, std::vector<const T*>* h0, std::vector<const T*>* c0) {
    const int64_t H = config_.decoder_hidden;
    const DType dt = DTypeOf<T>::value;
    for (int i = 0; i < config_.decoder_layers; ++i) {
      if (hidden_proj_w_ < 0) {
        h0->push_back(encoder_.final_h(i));
        c0->push_back(encoder_.final_c(i));
        continue;
      }
      ctx_.Plan(states_h_[i], {B, H}, dt);
      ctx_.Plan(states_c_[i], {B, H}, dt);
      Project(hidden_proj_w_, hidden_proj_b_, encoder_.final_h(i), states_h_[i].template data<T>(), B);
      Project(cell_proj_w_, cell_proj_b_, encoder_.final_c(i), states_c_[i].template data<T>(), B);
      h0->push_back(states_h_[i].template data<T>());
      c0->push_back(states_c_[i].template data<T>());
    }
  }
  // y [B, H] = x [B, units] W^T + b.
  void Project(int w, int b, const T* x, T* y, int64_t rows) {
    const int64_t H = config_.decoder_hidden;
    Linear(w, x, y, rows, H, config_.encoder_units());
    ctx_.backend().BiasDropoutResidualForward(y, store_.value(b), nullptr, y, rows, H, 0.0f, DropoutKey{});
  }

  LstmConfig config_;
  Context<T> ctx_;
  std::function<void(int64_t)> grads_final_;
  ParamStore<T> store_;
  LstmEncoder<T> encoder_;
  LstmDecoder<T> decoder_;
  int dec_table_ = -1, hidden_proj_w_ = -1, hidden_proj_b_ = -1, cell_proj_w_ = -1, cell_proj_b_ = -1;
  int fc_extra_w_ = -1, fc_extra_b_ = -1, fc_out_w_ = -1, fc_out_b_ = -1;
  int64_t decoder_start_ = 0;  // store offset of the first decoder-side parameter
  int64_t batch_ = 0, tgt_len_ = 0, src_len_ = 0;
  float p_in_ = 0, p_out_ = 0;
  const T* y_ = nullptr;
  const T* features_ = nullptr;
  Tensor tin_, tout_, emb_, extra_, logits_, lse_, dfeatures_, dy_, demb_, denc_;
  Tensor dlogits_low_, dbias_;    // bf16 training: the loss gradient and fc_out's bias gradient
  bool loss_grad_ready_ = false;  // Forward left them there
  std::vector<Tensor> states_h_, states_c_, dstates_;
  std::vector<int32_t> host_tin_, host_tout_;
  std::vector<const T*> init_h_, init_c_;
  const T* step_feed_ = nullptr;
};

}  // namespace sf
