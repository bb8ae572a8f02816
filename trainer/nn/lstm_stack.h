// A stack of LSTM layers over packed sequences, in one direction or both: PyTorch's
// nn.LSTM(input, hidden, num_layers, bidirectional, dropout) on a PackedSequence, which is what
// fairseq's LSTM encoder runs. Parameters keep nn.LSTM's names under `prefix`
// (<prefix>weight_ih_l0, <prefix>weight_hh_l0_reverse, ...; fairseq: "encoder.lstm.").
//
// Layer l's forward direction reads layer l-1's outputs in their parts (forward | backward,
// trainer/nn/lstm.h), never concatenated. Its backward direction reads the same rows in reverse
// order within each sequence (PackedLayout::Reversal, applied with the backend's row gather),
// runs as a forward LSTM over them, and its output is gathered back into natural order. Between
// layers (not after the last), dropout with rate p (training only; dropout sites site, site+1,
// ... per layer and direction) as nn.LSTM's `dropout`.
//
// GNMT's encoder (Wu et al. 2016, bidirectional_layers = 1): only the bottom k layers run both
// ways; layer k (the first one-way layer) reads [forward | backward] of layer k-1 in its two
// parts, every layer above it reads the one below's single output. Parameters keep nn.LSTM's
// names per layer: weight_ih_l0, weight_ih_l0_reverse, weight_ih_l1 (of width 2H), ...
//
// Residual connections (GNMT, Wu et al. 2016: "from layer 3"): with residual_from = r >= 2, layer
// l >= r - 1 (0-based) outputs y_l = h_l + x_l per direction, x_l being its input's part of that
// direction before dropout (the layer below's y); the LSTM itself reads the dropped input, as
// TensorFlow's ResidualWrapper(DropoutWrapper(cell)) does. 0: none. A residual needs the layer's
// input in as many parts as it has directions: not on the first one-way layer above two-way
// ones (a programming error: LstmConfig::Validate refuses it). The final states stay each cell's
// own h and c.
//
// Forward returns the top layer's outputs, natural order, one [N, H] buffer per direction of the
// top layer; valid
// until the next Forward. FinalState gives each layer's and direction's final h and c per
// sequence (nn.LSTM's h_n, c_n: the forward direction's at the sequence's last step, the
// backward direction's at its first). Backward takes the outputs' gradients, optionally the final
// states', and writes (or adds, dx_beta = 1) the input's. Initial states are zeros.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "trainer/nn/context.h"
#include "trainer/nn/lstm.h"
#include "trainer/nn/packed_sequence.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class LstmStack {
 public:
  // bidirectional_layers (with bidirectional): how many bottom layers run both ways; 0: all.
  LstmStack(ParamStore<T>& store, const std::string& prefix, int64_t input, int64_t hidden, int layers,
            bool bidirectional, float dropout = 0.0f, uint32_t site = 0, int residual_from = 0,
            int bidirectional_layers = 0)
      : hidden_(hidden), dropout_(dropout), site_(site),
        first_residual_(residual_from >= 2 ? residual_from - 1 : layers) {
    const int two_way = !bidirectional ? 0 : bidirectional_layers > 0 ? std::min(bidirectional_layers, layers) : layers;
    for (int l = 0; l < layers; ++l) {
      dirs_.push_back(l < two_way ? 2 : 1);
      first_.push_back(static_cast<int>(lstms_.size()));
      const std::vector<int64_t> parts = l == 0 ? std::vector<int64_t>{input} : std::vector<int64_t>(dirs_[l - 1], hidden);
      if (Residual(l) && l > 0 && dirs_[l - 1] != dirs_[l]) std::abort();  // programming error (see above)
      for (int d = 0; d < dirs_[l]; ++d) {
        const std::string suffix = "l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
        lstms_.push_back(std::make_unique<Lstm<T>>(store, prefix, suffix, parts, hidden));
      }
    }
    out_.resize(lstms_.size());
    dropped_.resize(lstms_.size());
    res_.resize(lstms_.size());
    reversed_in_.resize(lstms_.size());
  }
  int layers() const { return static_cast<int>(dirs_.size()); }
  // The top layer's directions (the outputs Forward returns); a layer's.
  int directions() const { return dirs_.back(); }
  int directions(int layer) const { return dirs_[layer]; }
  // The position of a layer's direction among all (layer-major): how FinalState's and
  // Backward's per-state vectors are indexed.
  int index(int layer, int dir) const { return first_[layer] + dir; }

  std::vector<const T*> Forward(Context<T>& ctx, const T* x, int64_t input, const PackedLayout& layout) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t n = layout.rows(), H = hidden_;
    rows_ = n;
    input_ = input;
    p_ = ctx.training ? dropout_ : 0.0f;
    if (dirs_[0] == 2) {
      ctx.Plan(reversal_, {n}, DType::kI32);
      const std::vector<int32_t> rev = layout.Reversal();
      reversal_.CopyFromHost(rev.data());
    }
    batch_ = layout.sequences();
    ctx.Plan(last_rows_, {batch_}, DType::kI32);
    const std::vector<int32_t> last = layout.LastRows();
    last_rows_.CopyFromHost(last.data());
    // below: the layer's input parts as its LSTMs read them (dropped); undropped: before
    // dropout (what a residual adds).
    std::vector<const T*> below = {x}, undropped = {x}, top;
    std::vector<int64_t> widths = {input};
    for (int l = 0; l < layers(); ++l) {
      std::vector<const T*> next, next_undropped;
      for (int d = 0; d < dirs_[l]; ++d) {
        const int k = index(l, d);
        const T* o = nullptr;
        if (d == 0) {
          o = lstms_[k]->Forward(ctx, below, layout.batch_sizes);
        } else {
          // The input read backwards, each part gathered into a buffer the layer keeps reading.
          std::vector<Tensor>& rin = reversed_in_[k];
          rin.resize(below.size());
          std::vector<const T*> parts;
          for (size_t j = 0; j < below.size(); ++j) {
            ctx.Plan(rin[j], {n, widths[j]}, dt);
            Gather(be, below[j], rin[j].template data<T>(), n, widths[j]);
            parts.push_back(rin[j].template data<T>());
          }
          const T* h = lstms_[k]->Forward(ctx, parts, layout.batch_sizes);
          ctx.Plan(out_[k], {n, H}, dt);
          Gather(be, h, out_[k].template data<T>(), n, H);
          o = out_[k].template data<T>();
        }
        if (Residual(l)) {
          ctx.Plan(res_[k], {n, H}, dt);
          be.BiasDropoutResidualForward(o, nullptr, undropped[d], res_[k].template data<T>(), n, H, 0.0f, DropoutKey{});
          o = res_[k].template data<T>();
        }
        if (l + 1 == layers()) top.push_back(o);
        next_undropped.push_back(o);
        if (p_ > 0 && l + 1 < layers()) {
          ctx.Plan(dropped_[k], {n, H}, dt);
          be.BiasDropoutResidualForward(o, nullptr, nullptr, dropped_[k].template data<T>(), n, H, p_,
                                        ctx.Key(site_ + k));
          o = dropped_[k].template data<T>();
        }
        next.push_back(o);
      }
      below = next;
      undropped = next_undropped;
      widths.assign(dirs_[l], H);
    }
    keys_.clear();
    for (size_t k = 0; k < lstms_.size(); ++k) keys_.push_back(ctx.Key(site_ + static_cast<uint32_t>(k)));
    return top;
  }

  // Layer `layer`'s final state in direction `dir` (0 forward, 1 backward): h_n, c_n [B, H] by
  // sorted position (PackedLayout::order maps them to the batch); either may be null.
  void FinalState(Context<T>& ctx, int layer, int dir, T* h_n, T* c_n) {
    const Lstm<T>& lstm = *lstms_[index(layer, dir)];
    // The backward direction ran over the reversed rows: its last step is the sequence's first.
    if (h_n) GatherRows(ctx.backend(), last_rows_, lstm.hiddens(), h_n, batch_, hidden_);
    if (c_n) GatherRows(ctx.backend(), last_rows_, lstm.cells(), c_n, batch_, hidden_);
  }

  // dy: one [N, H] gradient per direction (natural order). dx [N, input] (or += when dx_beta = 1);
  // may be null. dh_n, dc_n: the final states' gradients, [B, H] by sorted position, indexed
  // index(layer, dir) (empty, or null entries: none).
  void Backward(Context<T>& ctx, const std::vector<const T*>& dy, T* dx, float dx_beta,
                const std::vector<const T*>& dh_n = {}, const std::vector<const T*>& dc_n = {}) {
    auto final_grad = [](const std::vector<const T*>& v, size_t k) { return k < v.size() ? v[k] : nullptr; };
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t n = rows_, H = hidden_;
    // The gradients of layer l's outputs (natural order), per direction; the top's are dy.
    std::vector<const T*> d_out = dy;
    for (int l = layers() - 1; l >= 0; --l) {
      const int64_t width = l == 0 ? input_ : H;
      const int parts = l == 0 ? 1 : dirs_[l - 1];
      // Where the input's gradients go: dx, or the layer below's output gradients.
      std::vector<T*> d_in(parts, nullptr);
      if (l == 0) {
        d_in[0] = dx;
      } else {
        for (int j = 0; j < parts; ++j) {
          ctx.Plan(d_below_[l % 2][j], {n, H}, dt);
          d_in[j] = d_below_[l % 2][j].template data<T>();
        }
      }
      const float beta = l == 0 ? dx_beta : 0.0f;
      const int k0 = index(l, 0);
      lstms_[k0]->Backward(ctx, d_out[0], d_in, beta, final_grad(dh_n, k0), final_grad(dc_n, k0));
      if (dirs_[l] == 2) {
        const int k = index(l, 1);
        ctx.Plan(d_rev_, {n, H}, dt);
        Gather(be, d_out[1], d_rev_.template data<T>(), n, H);
        std::vector<T*> d_rin(parts, nullptr);
        for (int j = 0; j < parts; ++j) {
          if (!d_in[j]) continue;
          ctx.Plan(d_rin_[j], {n, width}, dt);
          d_rin[j] = d_rin_[j].template data<T>();
        }
        lstms_[k]->Backward(ctx, d_rev_.template data<T>(), d_rin, 0.0f, final_grad(dh_n, k), final_grad(dc_n, k));
        for (int j = 0; j < parts; ++j) {
          if (!d_in[j]) continue;
          T* natural = ctx.ScratchT(kScratchMerged, n * width);
          Gather(be, d_rin[j], natural, n, width);
          be.Add(natural, d_in[j], n * width);
        }
      }
      if (l > 0) {
        // Through the dropout between layer l-1 and l; a residual passes its output's gradient
        // straight to the layer below's.
        if (p_ > 0) {
          for (int j = 0; j < parts; ++j) {
            be.BiasDropoutResidualBackward(d_in[j], d_in[j], nullptr, n, H, p_, keys_[index(l - 1, j)]);
          }
        }
        if (Residual(l)) {
          for (int j = 0; j < parts; ++j) be.Add(d_out[j], d_in[j], n * H);
        }
        d_out.assign(d_in.begin(), d_in.end());
      }
    }
  }

 private:
  bool Residual(int layer) const { return layer >= first_residual_; }
  // out[r] = in[reversal[r]] for every row (the reversal is its own inverse).
  void Gather(Backend<T>& be, const T* in, T* out, int64_t n, int64_t width) {
    GatherRows(be, reversal_, in, out, n, width);
  }
  // out[r] = in[index[r]], r < n: the backend's row gather (an embedding lookup with scale 1).
  static void GatherRows(Backend<T>& be, const Tensor& index, const T* in, T* out, int64_t n, int64_t width) {
    be.EmbeddingForward(index.data<int32_t>(), in, nullptr, nullptr, out, n, width, 1.0f);
  }

  int64_t hidden_;
  std::vector<int> dirs_, first_;  // per layer: its directions; its forward direction's index
  float dropout_;
  uint32_t site_;
  int first_residual_;  // the first layer (0-based) with a residual connection; layers(): none
  float p_ = 0;
  int64_t rows_ = 0, input_ = 0, batch_ = 0;
  std::vector<std::unique_ptr<Lstm<T>>> lstms_;  // layer-major, forward then backward direction
  std::vector<Tensor> out_, dropped_, res_;  // the backward directions' outputs in natural order
  std::vector<std::vector<Tensor>> reversed_in_;
  std::vector<DropoutKey> keys_;
  Tensor reversal_, last_rows_, d_rev_;
  Tensor d_below_[2][2], d_rin_[2];
};

}  // namespace sf
