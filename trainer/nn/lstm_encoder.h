// fairseq's LSTM encoder (fairseq/models/lstm.py, LSTMEncoder.forward): token embeddings,
// dropout_in, an LSTM stack (trainer/nn/lstm_stack.h: L layers, one or both directions) over the
// packed source, the outputs back in [S, B, Ds] time-major (Ds = H, or 2H with both directions:
// the forward direction's H first) with dropout_out, and each layer's final h and c combined over
// directions as fairseq's combine_bidir ([B, Ds] per layer).
//
// The source is [B, S] token ids right-padded with `pad` (the engine's batches); a sentence's
// length is its count of non-pad tokens, at least 1. Padded output positions hold an arbitrary
// row of their sentence (fairseq fills 1.0): the decoder's attention masks them (padding()), and
// their gradient is ignored.
//
// Parameters (fairseq names, under `prefix`, e.g. "encoder."): embed_tokens.weight [V, E] and
// lstm.weight_ih_l0 ... (nn.LSTM's). The pad row gets no gradient (nn.Embedding's padding_idx).
// Dropout sites: site (dropout_in), site + 1 (dropout_out), site + 2 ... (between layers).
// residual_from >= 2: GNMT's residual connections from that layer (1-based) up (lstm_stack.h).
// bidirectional_layers = k > 0 (with bidirectional; GNMT: 1): only the bottom k layers run both
// ways (lstm_stack.h); the outputs are then the top layer's, Ds = H, and a two-way layer's final
// state is its backward direction's, as TensorFlow's GNMT encoder hands the decoder
// (nmt/gnmt_model.py: bi_encoder_state[1]), so every layer's is [B, H].
#pragma once

#include <climits>
#include <string>
#include <vector>

#include "trainer/nn/context.h"
#include "trainer/nn/lstm_stack.h"
#include "trainer/nn/packed_sequence.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class LstmEncoder {
 public:
  LstmEncoder(ParamStore<T>& store, const std::string& prefix, int64_t vocab, int64_t embed, int64_t hidden,
              int layers, bool bidirectional, float dropout_in, float dropout_out, int32_t pad, uint32_t site = 0,
              int residual_from = 0, int bidirectional_layers = 0)
      : store_(store), vocab_(vocab), embed_(embed), hidden_(hidden), pad_(pad), dropout_in_(dropout_in),
        dropout_out_(dropout_out), site_(site),
        stack_(store, prefix + "lstm.", embed, hidden, layers, bidirectional, layers > 1 ? dropout_out : 0.0f,
               site + 2, residual_from, bidirectional_layers) {
    table_ = store.Add(prefix + "embed_tokens.weight", {vocab, embed}, true);
    final_h_.resize(layers);
    final_c_.resize(layers);
  }
  int64_t output_units() const { return hidden_ * stack_.directions(); }
  int layers() const { return stack_.layers(); }

  // src [B, S] on the host. kInvalidArgument naming the sentence for an empty one or a token
  // outside [0, vocab).
  Status Forward(Context<T>& ctx, const int32_t* src, int64_t batch, int64_t src_len) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t B = batch, S = src_len, H = hidden_, dirs = stack_.directions(), D = output_units();
    std::vector<int64_t>& lengths = host_.lengths;
    lengths.assign(B, 0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) {
        const int32_t tok = src[b * S + s];
        if (tok < 0 || tok >= vocab_) {
          return InvalidArgument("source sentence " + std::to_string(b) + " position " + std::to_string(s) +
                                 ": token " + std::to_string(tok) + " is outside the vocabulary of " +
                                 std::to_string(vocab_));
        }
        if (tok != pad_) lengths[b]++;
      }
    }
    auto packed = PackLengths(lengths);
    if (!packed.ok()) return InvalidArgument("source: " + packed.status().message());
    layout_ = std::move(packed).value();
    batch_ = B;
    src_len_ = S;
    const int64_t N = layout_.rows();
    p_in_ = ctx.training ? dropout_in_ : 0.0f;
    p_out_ = ctx.training ? dropout_out_ : 0.0f;
    key_in_ = ctx.Key(site_);
    key_out_ = ctx.Key(site_ + 1);
    // Host-side index vectors: the packed token ids; each output position's packed row (to
    // gather; padding reads the sentence's first row) and the same with padding skipped (to
    // scatter the gradient); each sentence's sorted position; the padding mask.
    // (Host buffers kept across calls: no allocation once the shapes were seen.)
    std::vector<int32_t>&ids = host_.ids, &gather = host_.gather, &scatter = host_.scatter,
                        &sorted_of = host_.sorted_of, &batch_of = host_.batch_of;
    std::vector<uint8_t>& padding = host_.padding;
    ids.resize(N);
    gather.resize(S * B);
    scatter.resize(S * B);
    sorted_of.resize(B);
    batch_of.resize(B);
    padding.assign(B * S, 0);
    for (int64_t i = 0; i < B; ++i) {
      sorted_of[layout_.order[i]] = static_cast<int32_t>(i);
      batch_of[i] = static_cast<int32_t>(layout_.order[i]);
    }
    for (int64_t t = 0; t < layout_.steps(); ++t) {
      for (int64_t i = 0; i < layout_.batch_sizes[t]; ++i) ids[layout_.Row(i, t)] = src[layout_.order[i] * S + t];
    }
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t b = 0; b < B; ++b) {
        const int64_t i = sorted_of[b];
        const bool real = s < lengths[b];
        gather[s * B + b] = static_cast<int32_t>(layout_.Row(i, real ? s : 0));
        scatter[s * B + b] = real ? gather[s * B + b] : kSkip;
        padding[b * S + s] = real ? 0 : 1;
      }
    }
    Upload(ctx, ids_, ids);
    Upload(ctx, gather_, gather);
    Upload(ctx, scatter_, scatter);
    Upload(ctx, sorted_of_, sorted_of);
    Upload(ctx, batch_of_, batch_of);
    ctx.Plan(padding_, {B, S}, DType::kU8);
    padding_.CopyFromHost(padding.data());
    // Embeddings (with dropout_in), the stack.
    ctx.Plan(emb_, {N, embed_}, dt);
    be.EmbeddingForward(ids_.data<int32_t>(), store_.value(table_), nullptr, nullptr, emb_.template data<T>(), N,
                        embed_, 1.0f);
    if (p_in_ > 0) {
      be.BiasDropoutResidualForward(emb_.template data<T>(), nullptr, nullptr, emb_.template data<T>(), N, embed_,
                                    p_in_, key_in_);
    }
    const std::vector<const T*> top = stack_.Forward(ctx, emb_.template data<T>(), embed_, layout_);
    // Outputs [S, B, D]: each direction gathered into time-major order, then side by side.
    ctx.Plan(out_, {S * B, D}, dt);
    if (dirs == 1) {
      GatherRows(be, gather_, top[0], out_.template data<T>(), S * B, H);
    } else {
      T* parts = ctx.ScratchT(kScratchMerged, 2 * S * B * H);
      for (int64_t d = 0; d < 2; ++d) GatherRows(be, gather_, top[d], parts + d * S * B * H, S * B, H);
      be.MergeHeads(parts, out_.raw(), dt, 1, S * B, 2, 1, H);
    }
    if (p_out_ > 0) {
      be.BiasDropoutResidualForward(out_.template data<T>(), nullptr, nullptr, out_.template data<T>(), S * B, D,
                                    p_out_, key_out_);
    }
    // Final states [B, D] per layer, in batch order: each direction's, then side by side.
    for (int l = 0; l < layers(); ++l) {
      for (int which = 0; which < 2; ++which) {
        Tensor& dst = (which == 0 ? final_h_ : final_c_)[l];
        ctx.Plan(dst, {B, D}, dt);
        T* parts = ctx.ScratchT(kScratchMerged, 3 * B * H);
        T* sorted = parts + 2 * B * H;
        for (int64_t d = 0; d < dirs; ++d) {
          const int dir = StateDirection(l, static_cast<int>(d));
          stack_.FinalState(ctx, l, dir, which == 0 ? sorted : nullptr, which == 1 ? sorted : nullptr);
          GatherRows(be, sorted_of_, sorted, parts + d * B * H, B, H);
        }
        if (dirs == 1) {
          be.Cast(parts, dst.raw(), dt, B * H);
        } else {
          be.MergeHeads(parts, dst.raw(), dt, 1, B, 2, 1, H);
        }
      }
    }
    return Status::Ok();
  }

  const T* outputs() const { return out_.template data<T>(); }        // [S, B, D]
  const uint8_t* padding() const { return padding_.data<uint8_t>(); }  // [B, S], 1 = padding
  const T* final_h(int layer) const { return final_h_[layer].template data<T>(); }  // [B, D]
  const T* final_c(int layer) const { return final_c_[layer].template data<T>(); }

  // d_out [S, B, D] (padded positions ignored; may be null) and the final states' gradients, one
  // [B, D] per layer (empty or null entries: none). The embedding's gradient accumulates.
  void Backward(Context<T>& ctx, const T* d_out, const std::vector<const T*>& d_final_h,
                const std::vector<const T*>& d_final_c) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t B = batch_, S = src_len_, H = hidden_, dirs = stack_.directions(), D = output_units();
    const int64_t N = layout_.rows();
    // The outputs' gradients back into each direction's packed rows.
    dy_.resize(dirs);
    std::vector<const T*> dy;
    for (int64_t d = 0; d < dirs; ++d) {
      ctx.Plan(dy_[d], {N, H}, dt);
      dy_[d].ZeroFill();
      dy.push_back(dy_[d].template data<T>());
    }
    if (d_out) {
      T* g = ctx.ScratchT(kScratchMerged, S * B * D);
      be.Cast(d_out, g, dt, S * B * D);
      if (p_out_ > 0) be.BiasDropoutResidualBackward(g, g, nullptr, S * B, D, p_out_, key_out_);
      const T* parts = g;
      if (dirs == 2) {
        T* split = ctx.ScratchT(kScratchHeadsGrad, S * B * D);
        be.SplitHeads(g, nullptr, split, dt, 1, S * B, 2, 1, H);
        parts = split;
      }
      for (int64_t d = 0; d < dirs; ++d) {
        be.EmbeddingBackward(scatter_.data<int32_t>(), parts + d * S * B * H, dy_[d].template data<T>(), S * B, H,
                             1.0f, kSkip);
      }
    }
    // The final states' gradients, per layer and direction, by sorted position.
    const int n_states = stack_.index(layers() - 1, stack_.directions() - 1) + 1;
    std::vector<const T*> dh_n(n_states, nullptr), dc_n(n_states, nullptr);
    d_states_.resize(2 * n_states);
    for (int l = 0; l < layers(); ++l) {
      for (int which = 0; which < 2; ++which) {
        const std::vector<const T*>& grads = which == 0 ? d_final_h : d_final_c;
        const T* g = l < static_cast<int>(grads.size()) ? grads[l] : nullptr;
        if (!g) continue;
        const T* parts = g;
        if (dirs == 2) {
          T* split = ctx.ScratchT(kScratchHeadsGrad, B * D);
          be.SplitHeads(g, nullptr, split, dt, 1, B, 2, 1, H);
          parts = split;
        }
        for (int64_t d = 0; d < dirs; ++d) {
          const int k = stack_.index(l, StateDirection(l, static_cast<int>(d)));
          Tensor& t = d_states_[2 * k + which];
          ctx.Plan(t, {B, H}, dt);
          GatherRows(be, batch_of_, parts + d * B * H, t.template data<T>(), B, H);
          (which == 0 ? dh_n : dc_n)[k] = t.template data<T>();
        }
      }
    }
    ctx.Plan(d_emb_, {N, embed_}, dt);
    stack_.Backward(ctx, dy, d_emb_.template data<T>(), 0.0f, dh_n, dc_n);
    if (p_in_ > 0) {
      be.BiasDropoutResidualBackward(d_emb_.template data<T>(), d_emb_.template data<T>(), nullptr, N, embed_, p_in_,
                                     key_in_);
    }
    be.EmbeddingBackward(ids_.data<int32_t>(), d_emb_.template data<T>(), store_.grad(table_), N, embed_, 1.0f, pad_);
  }

 private:
  static constexpr int32_t kSkip = INT32_MAX;  // a scatter index that EmbeddingBackward skips

  // The stack direction whose final state is part `d` of layer l's (of directions() parts): the
  // same direction, or a two-way layer's backward one under one-way layers.
  int StateDirection(int l, int d) const { return stack_.directions(l) == stack_.directions() ? d : 1; }

  void Upload(Context<T>& ctx, Tensor& t, const std::vector<int32_t>& host) {
    ctx.Plan(t, {static_cast<int64_t>(host.size())}, DType::kI32);
    t.CopyFromHost(host.data());
  }
  static void GatherRows(Backend<T>& be, const Tensor& index, const T* in, T* out, int64_t n, int64_t width) {
    be.EmbeddingForward(index.data<int32_t>(), in, nullptr, nullptr, out, n, width, 1.0f);
  }

  ParamStore<T>& store_;
  int64_t vocab_, embed_, hidden_;
  int32_t pad_;
  float dropout_in_, dropout_out_;
  uint32_t site_;
  LstmStack<T> stack_;
  int table_;
  float p_in_ = 0, p_out_ = 0;
  DropoutKey key_in_, key_out_;
  PackedLayout layout_;
  int64_t batch_ = 0, src_len_ = 0;
  Tensor ids_, gather_, scatter_, sorted_of_, batch_of_, padding_, emb_, out_, d_emb_;
  std::vector<Tensor> final_h_, final_c_, dy_, d_states_;
  struct {
    std::vector<int64_t> lengths;
    std::vector<int32_t> ids, gather, scatter, sorted_of, batch_of;
    std::vector<uint8_t> padding;
  } host_;
};

}  // namespace sf
