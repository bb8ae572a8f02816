// fairseq's LSTM decoder (fairseq/models/lstm.py, LSTMDecoder.extract_features) for training
// with teacher forcing: L stacked LSTM cells with input feeding, and dot-product attention over
// the encoder's outputs (AttentionLayer: input_proj, a masked softmax, output_proj with tanh).
// Per target step j, for all B sentences (time-major rows j*B .. j*B+B-1):
//   layer 0 reads [x_j | feed_j] (feed_0 = 0, then the previous step's output), layer i > 0 the
//   dropped output of layer i-1; each layer's state starts at h0[i], c0[i] (zeros when null);
//   on the top layer's h: a = h Wi^T, p = softmax_s(enc[s] · a) over unmasked source positions,
//   ctx = Σ_s p_s enc[s], out = tanh([ctx | h] Wo^T), y_j = dropout(out) — the step's output
//   and the next step's feed.
// Parameters (fairseq names, under `prefix`, e.g. "decoder."): layers.<i>.weight_ih
// [4H, E + H] (layer 0) or [4H, H], layers.<i>.weight_hh [4H, H], layers.<i>.bias_ih,
// layers.<i>.bias_hh [4H], attention.input_proj.weight [Ds, H], attention.output_proj.weight
// [H, Ds + H]. The embedding, the encoder-state projections, additional_fc and fc_out are the
// model's.
//
// The embedding part of layer 0's input GEMM is hoisted over every step (one GEMM forward, one
// for each gradient backward); every other product is per step. The backward runs the steps in
// reverse, carrying each layer's dh and dc and the feed's gradient, and accumulates the encoder
// outputs' gradient (d_enc +=). Dropout (rate p, training only) after every layer but the top and
// after the attention, as fairseq's dropout_out, with dropout sites site + j*(L+1) + i (i = L:
// the output's) so every step draws its own mask.
//
// Residual connections (GNMT, "from layer 3"): with residual_from = r >= 2, layer i >= r - 1
// (0-based) outputs y = h + x, x being its input before dropout (the layer below's y); the cell
// reads the dropped input and carries its own h. The top layer's y is what the attention reads.
//
// Mixed precision: GEMM operands in ctx.compute() (activations cast as they are used, the
// encoder outputs once per Forward, weights from the store's mirror); the cells, softmax, tanh
// and all gradients stay T.
#pragma once

#include <string>
#include <vector>

#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class LstmDecoder {
 public:
  LstmDecoder(ParamStore<T>& store, const std::string& prefix, int64_t embed, int64_t hidden, int layers,
              int64_t encoder_units, float dropout = 0.0f, uint32_t site = 0, int residual_from = 0)
      : store_(store), embed_(embed), hidden_(hidden), layers_(layers), units_(encoder_units), dropout_(dropout),
        site_(site), first_residual_(residual_from >= 2 ? residual_from - 1 : layers) {
    for (int i = 0; i < layers; ++i) {
      const std::string p = prefix + "layers." + std::to_string(i) + ".";
      const int64_t in = i == 0 ? embed + hidden : hidden;
      w_ih_.push_back(store.Add(p + "weight_ih", {4 * hidden, in}, true));
      w_hh_.push_back(store.Add(p + "weight_hh", {4 * hidden, hidden}, true));
      b_ih_.push_back(store.Add(p + "bias_ih", {4 * hidden}, false));
      b_hh_.push_back(store.Add(p + "bias_hh", {4 * hidden}, false));
    }
    w_in_ = store.Add(prefix + "attention.input_proj.weight", {encoder_units, hidden}, true);
    w_out_ = store.Add(prefix + "attention.output_proj.weight", {hidden, encoder_units + hidden}, true);
    gates_.resize(layers);
    cells_.resize(layers);
    hiddens_.resize(layers);
    outputs_.resize(layers);
    dout_.resize(layers);
    dropped_.resize(layers);
    bias_.resize(layers);
    dh_.resize(layers);
    dc_.resize(layers);
  }

  // x [T*B, E] time-major (embedded, after the caller's dropout); enc [S, B, Ds] and its padding
  // [B, S] (1 = padding; null: none); h0, c0: one [B, H] per layer or empty (zeros); feed0
  // [B, H]: the first step's input feed (null: zeros, as in training; incremental decoding
  // passes the previous step's output, and gets no gradient for it). Returns the outputs
  // y [T*B, H], valid until the next Forward; the last step's states are hidden(i) / cell(i).
  const T* Forward(Context<T>& ctx, const T* x, int64_t steps, int64_t batch, const T* enc, int64_t src_len,
                   const uint8_t* enc_padding, std::vector<const T*> h0 = {}, std::vector<const T*> c0 = {},
                   const T* feed0 = nullptr) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value, cd = ctx.compute();
    const int64_t B = batch, H = hidden_, G = 4 * hidden_, S = src_len, N = steps * batch;
    steps_ = steps;
    batch_ = batch;
    src_len_ = S;
    x_ = x;
    enc_ = enc;
    enc_padding_ = enc_padding;
    h0.resize(layers_, nullptr);
    c0.resize(layers_, nullptr);
    h0_ = h0;
    c0_ = c0;
    p_ = ctx.training ? dropout_ : 0.0f;
    seed_ = ctx.seed;
    micro_batch_ = ctx.micro_batch;
    for (int i = 0; i < layers_; ++i) {
      ctx.Plan(gates_[i], {N, G}, dt);
      ctx.Plan(cells_[i], {N, H}, dt);
      ctx.Plan(hiddens_[i], {N, H}, dt);
      if (Residual(i)) ctx.Plan(outputs_[i], {N, H}, dt);
      if (i + 1 < layers_ && p_ > 0) ctx.Plan(dropped_[i], {N, H}, dt);
      ctx.Plan(bias_[i], {G}, dt);
      be.Cast(store_.value(b_ih_[i]), bias_[i].raw(), dt, G);
      be.Add(store_.value(b_hh_[i]), bias_[i].template data<T>(), G);
    }
    ctx.Plan(a_, {N, units_}, dt);
    ctx.Plan(probs_, {N, S}, dt);
    ctx.Plan(context_, {N, units_}, dt);
    ctx.Plan(pre_, {N, H}, dt);
    ctx.Plan(y_, {N, H}, dt);
    enc_c_ = ctx.AsCompute(enc, S * B * units_, enc_cast_);
    if (N == 0) return y_.template data<T>();
    // Layer 0's embedding part for every step: G_0 = x W_ih0[:, :E]^T.
    be.Gemm(1, N, G, embed_, GemmOperand{ctx.AsComputeScratch(x, N * embed_, kScratchCastA), cd, false, embed_, 0},
            GemmOperand{Weight(ctx, w_ih_[0], 0), cd, true, embed_ + H, 0, true}, gates_[0].template data<T>(), G, 0,
            1.0f, 0.0f);
    for (int64_t j = 0; j < steps; ++j) {
      const int64_t row = j * B;
      for (int i = 0; i < layers_; ++i) {
        T* g = gates_[i].template data<T>() + row * G;
        if (i == 0) {
          if (const T* feed = j > 0 ? Row(y_, j - 1) : feed0) {
            Gemm(ctx, B, G, H, feed, Weight(ctx, w_ih_[0], embed_), embed_ + H, true, g, G, 1.0f);
          }
        } else {
          Gemm(ctx, B, G, H, LayerInput(i, j), Weight(ctx, w_ih_[i], 0), H, true, g, G, 0.0f);
        }
        if (const T* h_prev = j > 0 ? Row(hiddens_[i], j - 1) : h0_[i]) {
          Gemm(ctx, B, G, H, h_prev, Weight(ctx, w_hh_[i], 0), H, true, g, G, 1.0f);
        }
        const T* c_prev = j > 0 ? Row(cells_[i], j - 1) : c0_[i];
        T* h = Row(hiddens_[i], j);
        be.LstmCellForward(g, bias_[i].template data<T>(), c_prev, Row(cells_[i], j), h, B, H);
        if (Residual(i)) {
          be.BiasDropoutResidualForward(h, nullptr, Output(i - 1, j), Row(outputs_[i], j), B, H, 0.0f, DropoutKey{});
        }
        if (i + 1 < layers_ && p_ > 0) {
          be.BiasDropoutResidualForward(Output(i, j), nullptr, nullptr, Row(dropped_[i], j), B, H, p_, Key(j, i));
        }
      }
      // Attention on the top layer's output.
      const T* h = Output(layers_ - 1, j);
      const void* h_c = ctx.AsCompute(h, B * H, top_cast_);  // for input_proj and output_proj
      T* a = Row(a_, j, units_);
      GemmC(ctx, B, units_, H, h_c, Weight(ctx, w_in_, 0), H, true, a, units_, 0.0f);
      T* scores = ctx.ScratchT(kScratchScores, B * S);
      const void* a_c = ctx.AsComputeScratch(a, B * units_, kScratchCastA);
      be.Gemm(B, 1, S, units_, GemmOperand{a_c, cd, false, units_, units_},
              GemmOperand{enc_c_, cd, true, B * units_, units_}, scores, S, S, 1.0f, 0.0f);
      T* p = Row(probs_, j, S);
      be.SoftmaxForward(scores, p, nullptr, dt, enc_padding, B, 1, 1, S, 1.0f, false, 0.0f, DropoutKey{});
      T* context = Row(context_, j, units_);
      be.Gemm(B, 1, units_, S, GemmOperand{ctx.AsComputeScratch(p, B * S, kScratchCastB), cd, false, S, S},
              GemmOperand{enc_c_, cd, false, B * units_, units_}, context, units_, units_, 1.0f, 0.0f);
      T* pre = Row(pre_, j);
      Gemm(ctx, B, H, units_, context, Weight(ctx, w_out_, 0), units_ + H, true, pre, H, 0.0f);
      GemmC(ctx, B, H, H, h_c, Weight(ctx, w_out_, units_), units_ + H, true, pre, H, 1.0f);
      T* y = Row(y_, j);
      be.BiasActivationForward(pre, nullptr, pre, y, dt, B, H, Activation::kTanh);
      if (p_ > 0) be.BiasDropoutResidualForward(y, nullptr, nullptr, y, B, H, p_, Key(j, layers_));
    }
    return y_.template data<T>();
  }

  // The last step's h and c of layer i [B, H] (after Forward).
  const T* hidden(int i) { return Row(hiddens_[i], steps_ - 1); }
  const T* cell(int i) { return Row(cells_[i], steps_ - 1); }

  // dy [T*B, H]: the gradient of the outputs. dx [T*B, E] is written; d_enc [S, B, Ds] is added
  // to (may be null). The initial states' gradients are left in dh0(i) / dc0(i).
  void Backward(Context<T>& ctx, const T* dy, T* dx, T* d_enc) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value, cd = ctx.compute();
    const int64_t B = batch_, H = hidden_, G = 4 * hidden_, S = src_len_, N = steps_ * batch_, D = units_;
    for (int i = 0; i < layers_; ++i) {
      ctx.Plan(dh_[i], {B, H}, dt);
      ctx.Plan(dc_[i], {B, H}, dt);
      ctx.Plan(dout_[i], {B, H}, dt);
      dh_[i].ZeroFill();
      dc_[i].ZeroFill();
    }
    ctx.Plan(dfeed_, {B, H}, dt);
    dfeed_.ZeroFill();
    ctx.Plan(dtmp_, {B, std::max(H, D)}, dt);
    ctx.Plan(dtmp2_, {B, D}, dt);
    if (d_enc) {  // every step's dctx and dscores, for the encoder's gradient after the loop
      ctx.Plan(dctx_all_, {N, D}, dt);
      ctx.Plan(dscores_all_, {N, S}, dt);
    }
    ctx.Plan(da_all_c_, {N, D}, cd);  // every step's da, for input_proj's weight gradient
    if (N == 0) return;
    for (int64_t j = steps_ - 1; j >= 0; --j) {
      // The output's gradient: its own and the next step's feed's; back through dropout and tanh.
      T* dout = dfeed_.template data<T>();
      be.Add(dy + j * B * H, dout, B * H);
      if (p_ > 0) be.BiasDropoutResidualBackward(dout, dout, nullptr, B, H, p_, Key(j, layers_));
      be.BiasActivationBackward(dout, Row(pre_, j), dt, dout, nullptr, B, H, Activation::kTanh);
      // The step's pre-activation is read: its row keeps dpre for output_proj's weight gradient,
      // taken over every step after the loop.
      be.Cast(dout, Row(pre_, j), dt, B * H);
      // output_proj: dctx = dpre Wo[:, :D]; dh_top = dpre Wo[:, D:].
      const void* dout_c = ctx.AsComputeScratch(dout, B * H, kScratchCastA);
      T* dctx = d_enc ? Row(dctx_all_, j, D) : dtmp_.template data<T>();
      GemmC(ctx, B, D, H, dout_c, Weight(ctx, w_out_, 0), D + H, false, dctx, D, 0.0f);
      // dout_[i]: the gradient of layer i's output at this step (from above); dh_[i] the
      // recurrent one, from the next step.
      T* dh_top = dout_[layers_ - 1].template data<T>();
      GemmC(ctx, B, H, H, dout_c, Weight(ctx, w_out_, D), D + H, false, dh_top, H, 0.0f);
      // Attention: dp_s = dctx · enc[s]; softmax; da = Σ_s dscores_s enc[s]. (d_enc[s] gets
      // p_s dctx + dscores_s a of every step after the loop.)
      const T* p = Row(probs_, j, S);
      T* dp = ctx.ScratchT(kScratchDProbs, B * S);
      const void* dctx_c = ctx.AsComputeScratch(dctx, B * D, kScratchCastA);
      be.Gemm(B, 1, S, D, GemmOperand{dctx_c, cd, false, D, D}, GemmOperand{enc_c_, cd, true, B * D, D}, dp, S, S,
              1.0f, 0.0f);
      T* dscores = d_enc ? Row(dscores_all_, j, S) : ctx.ScratchT(kScratchScores, B * S);
      be.SoftmaxBackward(dp, p, dscores, dt, B, 1, 1, S, 1.0f, 0.0f, DropoutKey{});
      T* da = dtmp2_.template data<T>();
      const void* ds_c = ctx.AsComputeScratch(dscores, B * S, kScratchCastA);
      be.Gemm(B, 1, D, S, GemmOperand{ds_c, cd, false, S, S}, GemmOperand{enc_c_, cd, false, B * D, D}, da, D, D,
              1.0f, 0.0f);
      // input_proj: dh_top += da Wi (da kept, rounded, for the weight gradient after the loop).
      void* da_c = static_cast<char*>(da_all_c_.raw()) + j * B * D * DTypeSize(cd);
      be.Cast(da, da_c, cd, B * D);
      GemmC(ctx, B, H, D, da_c, Weight(ctx, w_in_, 0), H, false, dh_top, H, 1.0f);
      // The cells, top down.
      for (int i = layers_ - 1; i >= 0; --i) {
        T* g = Row(gates_[i], j, G);
        be.Add(dout_[i].template data<T>(), dh_[i].template data<T>(), B * H);
        const T* c_prev = j > 0 ? Row(cells_[i], j - 1) : c0_[i];
        be.LstmCellBackward(g, c_prev, Row(cells_[i], j), dh_[i].template data<T>(), dc_[i].template data<T>(), g,
                            dc_[i].template data<T>(), nullptr, B, H);
        const void* g_c = ctx.AsComputeScratch(g, B * G, kScratchCastA);  // for both input gradients
        if (j > 0 || h0_[i]) {
          GemmC(ctx, B, H, G, g_c, Weight(ctx, w_hh_[i], 0), H, false, dh_[i].template data<T>(), H, 0.0f);
        }
        if (i > 0) {
          // Into the layer below's output, through the dropout between them, and straight
          // through a residual.
          T* din = dout_[i - 1].template data<T>();
          GemmC(ctx, B, H, G, g_c, Weight(ctx, w_ih_[i], 0), H, false, din, H, 0.0f);
          if (p_ > 0) be.BiasDropoutResidualBackward(din, din, nullptr, B, H, p_, Key(j, i - 1));
          if (Residual(i)) be.Add(dout_[i].template data<T>(), din, B * H);
        } else if (j > 0) {
          // The feed's part: its gradient goes to the previous step's output.
          GemmC(ctx, B, H, G, g_c, Weight(ctx, w_ih_[0], embed_), embed_ + H, false, dfeed_.template data<T>(), H,
                0.0f);
        }
      }
    }
    // The encoder's gradient, every step at once: per batch entry b,
    //   d_enc[:, b] += P_b^T dCtx_b + dScores_b^T A_b   (P_b, dScores_b [steps, S]; dCtx_b, A_b
    //   [steps, D]; rows of stride B*S and B*D in the step-major buffers),
    // two batched products over the steps instead of two rank-1 updates per step, each of which
    // read and wrote all of d_enc (10.8% of an lstm_small bf16 step, docs/performance-cpu.md).
    if (d_enc) {
      auto step_major = [&](Tensor& t, int64_t width, ScratchSlot slot) {
        return ctx.AsComputeScratch(t.template data<T>(), N * width, slot);
      };
      be.Gemm(B, S, D, steps_, GemmOperand{step_major(probs_, S, kScratchCastA), cd, true, B * S, S},
              GemmOperand{step_major(dctx_all_, D, kScratchCastB), cd, false, B * D, D}, d_enc, B * D, D, 1.0f,
              1.0f);
      be.Gemm(B, S, D, steps_, GemmOperand{step_major(dscores_all_, S, kScratchCastA), cd, true, B * S, S},
              GemmOperand{step_major(a_, D, kScratchCastB), cd, false, B * D, D}, d_enc, B * D, D, 1.0f, 1.0f);
    }
    // The weight gradients, every step at once (one product over N = steps x B rows each instead
    // of one per step over B rows): the step loop left dpre in pre_, da in da_all_c_ and the gate
    // gradients in gates_. x is cast into kScratchCastA, dy_c lives in kScratchCastB.
    auto weight_grad = [&](int64_t m, int64_t n, int64_t rows, const void* dy_c, const T* x, T* dw, int64_t ldw) {
      be.Gemm(1, m, n, rows, GemmOperand{dy_c, cd, true, m, 0},
              GemmOperand{ctx.AsComputeScratch(x, rows * n, kScratchCastA), cd, false, n, 0}, dw, ldw, 0, 1.0f, 1.0f);
    };
    const size_t es = DTypeSize(cd);
    // output_proj: dWo += dpre^T [ctx | h]; input_proj: dWi += da^T h.
    const void* dpre_c = ctx.AsComputeScratch(pre_.template data<T>(), N * H, kScratchCastB);
    weight_grad(H, D, N, dpre_c, context_.template data<T>(), store_.grad(w_out_), D + H);
    weight_grad(H, H, N, dpre_c, Output(layers_ - 1, 0), store_.grad(w_out_) + D, D + H);
    weight_grad(D, H, N, da_all_c_.raw(), Output(layers_ - 1, 0), store_.grad(w_in_), H);
    // The cells, layer 0 last (its gate gradients also give the embedding's part and dx).
    for (int i = layers_ - 1; i >= 0; --i) {
      const void* g_c = ctx.AsComputeScratch(gates_[i].template data<T>(), N * G, kScratchCastB);
      const void* g_c1 = static_cast<const char*>(g_c) + B * G * es;  // from step 1 on
      // dW_hh += Σ_j g_j^T h_{j-1}: steps 1.. against hiddens 0..; step 0 against h0.
      if (N > B) weight_grad(G, H, N - B, g_c1, Row(hiddens_[i], 0), store_.grad(w_hh_[i]), H);
      if (h0_[i]) weight_grad(G, H, B, g_c, h0_[i], store_.grad(w_hh_[i]), H);
      if (i > 0) {
        weight_grad(G, H, N, g_c, LayerInput(i, 0), store_.grad(w_ih_[i]), H);
        continue;
      }
      // Layer 0: the feed's part (steps 1.. against the outputs 0..), then the embedding's.
      if (N > B) weight_grad(G, H, N - B, g_c1, Row(y_, 0), store_.grad(w_ih_[0]) + embed_, embed_ + H);
      weight_grad(G, embed_, N, g_c, x_, store_.grad(w_ih_[0]), embed_ + H);
      if (dx) {
        be.Gemm(1, N, embed_, G, GemmOperand{g_c, cd, false, G, 0},
                GemmOperand{Weight(ctx, w_ih_[0], 0), cd, false, embed_ + H, 0, true}, dx, embed_, 0, 1.0f, 0.0f);
      }
    }
    for (int i = 0; i < layers_; ++i) {
      be.ColumnSum(gates_[i].template data<T>(), store_.grad(b_ih_[i]), N, G);
      be.ColumnSum(gates_[i].template data<T>(), store_.grad(b_hh_[i]), N, G);
    }
  }

  const T* dh0(int layer) const { return dh_[layer].template data<T>(); }
  const T* dc0(int layer) const { return dc_[layer].template data<T>(); }

 private:
  T* Row(Tensor& t, int64_t step, int64_t width = -1) {
    return t.template data<T>() + step * batch_ * (width < 0 ? hidden_ : width);
  }
  bool Residual(int layer) const { return layer >= first_residual_; }
  // Layer i's output at a step: h, or h + its input with a residual connection.
  T* Output(int layer, int64_t step) { return Row(Residual(layer) ? outputs_[layer] : hiddens_[layer], step); }
  const T* LayerInput(int layer, int64_t step) {
    return p_ > 0 ? Row(dropped_[layer - 1], step) : Output(layer - 1, step);
  }
  DropoutKey Key(int64_t step, int layer) const {
    const uint32_t site = site_ + static_cast<uint32_t>(step * (layers_ + 1) + layer);
    return {seed_, (micro_batch_ << 16) | site};
  }
  // Columns [col, ...) of a weight [rows, ld] in the compute dtype.
  const void* Weight(Context<T>& ctx, int id, int64_t col) {
    return static_cast<const char*>(store_.compute_value(id, ctx.compute())) + col * DTypeSize(ctx.compute());
  }
  // c [m, n] (row stride ldc) = x [m, k] · W^T (W: [n, k] rows of stride ldw; transposed) or
  // x · W (W: [k, n]; not transposed), + beta c. x_c: x already in the compute dtype (an operand
  // several products share is cast once per step, not once per product).
  void GemmC(Context<T>& ctx, int64_t m, int64_t n, int64_t k, const void* x_c, const void* w, int64_t ldw,
             bool transposed, T* c, int64_t ldc, float beta) {
    const DType cd = ctx.compute();
    ctx.backend().Gemm(1, m, n, k, GemmOperand{x_c, cd, false, k, 0}, GemmOperand{w, cd, transposed, ldw, 0, true},
                       c, ldc, 0, 1.0f, beta);
  }
  void Gemm(Context<T>& ctx, int64_t m, int64_t n, int64_t k, const T* x, const void* w, int64_t ldw,
            bool transposed, T* c, int64_t ldc, float beta) {
    GemmC(ctx, m, n, k, ctx.AsComputeScratch(x, m * k, kScratchCastA), w, ldw, transposed, c, ldc, beta);
  }
  ParamStore<T>& store_;
  int64_t embed_, hidden_;
  int layers_;
  int64_t units_;
  float dropout_;
  uint32_t site_;
  int first_residual_;  // the first layer (0-based) with a residual connection; layers_: none
  float p_ = 0;
  uint64_t seed_ = 0, micro_batch_ = 0;
  int64_t steps_ = 0, batch_ = 0, src_len_ = 0;
  std::vector<int> w_ih_, w_hh_, b_ih_, b_hh_;
  int w_in_, w_out_;
  const T* x_ = nullptr;
  const T* enc_ = nullptr;
  const void* enc_c_ = nullptr;
  const uint8_t* enc_padding_ = nullptr;
  std::vector<const T*> h0_, c0_;
  std::vector<Tensor> gates_, cells_, hiddens_, outputs_, dropped_, bias_, dh_, dc_, dout_;
  Tensor a_, probs_, context_, pre_, y_, enc_cast_, dfeed_, dtmp_, dtmp2_, dctx_all_, dscores_all_;
  Tensor top_cast_;  // a step's top-layer output in the compute dtype (Forward)
  Tensor da_all_c_;  // every step's gradient of the attention query, compute dtype (Backward)
};

}  // namespace sf
