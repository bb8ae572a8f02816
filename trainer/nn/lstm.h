// One LSTM layer in one direction: PyTorch's nn.LSTM for one layer (gate order i, f, g, o), over
// a packed batch in PyTorch's PackedSequence layout — the sequences sorted longest first, the
// rows of time step t (batch_sizes[t] of them, non-increasing in t) right after those of step
// t-1 — so an input is [N, in] with N = Σ batch_sizes and no padding is ever computed.
//
// Parameters (the names of nn.LSTM's state_dict, fairseq's too): <prefix>weight_ih_<suffix>
// [4H, in], <prefix>weight_hh_<suffix> [4H, H], <prefix>bias_ih_<suffix> [4H],
// <prefix>bias_hh_<suffix> [4H]; suffix "l0", "l1_reverse", ..., or none (nn.LSTMCell's names,
// weight_ih ...).
//
// The input may come in parts (a bidirectional layer below: its two directions' outputs; a
// decoder: the embedding and the fed-back attention output): x = [x_0 | x_1 | ...] by columns,
// never concatenated — each part's GEMM reads its block of W_ih's columns.
//
// Forward: the input GEMM of every step at once, G = x W_ih^T [N, 4H] (hoisted out of the
// recurrence; one GEMM per input part); then per step t with n = batch_sizes[t] rows, G_t += h_{t-1}[:n] W_hh^T (one GEMM:
// the recurrent part) and the cell (Backend::LstmCellForward) with bias_ih + bias_hh gives c_t
// and h_t. The output is the packed h [N, H]. The initial state is zeros, or h0 / c0 [B, H]
// (B = batch_sizes[0]).
// Backward (from dy [N, H]), per step from the last: dh_t = dy_t + the gradient carried from
// step t+1, the cell's backward gives dG_t (written over the saved activations) and the carried
// dc; the carried dh is dG_t W_hh. Then, for every step at once, dW_hh += Σ_t dG_t^T h_{t-1},
// and per input part dx_k = dG W_ih[:, block k] and dW_ih[:, block k] += dG^T x_k, and both
// biases' gradients += the column sums of dG. The initial state's gradients are left in dh0() / dc0()
// when one was given.
//
// Mixed precision: GEMM operands in ctx.compute() — x cast once, each h_t cast as it is made
// (kept for the backward's dW_hh), each dG_t cast before its GEMMs; the cell, c and the
// gradients stay T. The layer keeps what the backward reads (x's compute copy, the activations,
// c, h) until the next Forward; the caller keeps x, h0 and c0 alive as long.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"

namespace sf {

template <typename T>
class Lstm {
 public:
  Lstm(ParamStore<T>& store, const std::string& prefix, const std::string& suffix, int64_t input, int64_t hidden)
      : Lstm(store, prefix, suffix, std::vector<int64_t>{input}, hidden) {}
  Lstm(ParamStore<T>& store, const std::string& prefix, const std::string& suffix, std::vector<int64_t> input_parts,
       int64_t hidden)
      : store_(store), parts_(std::move(input_parts)), hidden_(hidden) {
    const std::string tail = suffix.empty() ? "" : "_" + suffix;
    for (int64_t w : parts_) input_ += w;
    w_ih_ = store.Add(prefix + "weight_ih" + tail, {4 * hidden, input_}, true);
    w_hh_ = store.Add(prefix + "weight_hh" + tail, {4 * hidden, hidden}, true);
    b_ih_ = store.Add(prefix + "bias_ih" + tail, {4 * hidden}, false);
    b_hh_ = store.Add(prefix + "bias_hh" + tail, {4 * hidden}, false);
  }
  int64_t hidden() const { return hidden_; }

  // x [N, in] packed by `batch_sizes`; h0, c0 [batch_sizes[0], H] or null (zeros). Returns the
  // packed output h [N, H], valid until the next Forward.
  const T* Forward(Context<T>& ctx, const T* x, const std::vector<int64_t>& batch_sizes, const T* h0 = nullptr,
                   const T* c0 = nullptr) {
    return Forward(ctx, std::vector<const T*>{x}, batch_sizes, h0, c0);
  }
  // The same with the input in its parts, x_k [N, parts[k]].
  const T* Forward(Context<T>& ctx, const std::vector<const T*>& x, const std::vector<int64_t>& batch_sizes,
                   const T* h0 = nullptr, const T* c0 = nullptr) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value;
    const bool low = ctx.low_precision();
    const int64_t H = hidden_, G = 4 * hidden_;
    batch_sizes_ = batch_sizes;
    offsets_.assign(batch_sizes.size() + 1, 0);
    for (size_t t = 0; t < batch_sizes.size(); ++t) offsets_[t + 1] = offsets_[t] + batch_sizes[t];
    const int64_t n_rows = offsets_.back();
    const int64_t batch = batch_sizes.empty() ? 0 : batch_sizes[0];
    ctx.Plan(gates_, {n_rows, G}, dt);
    ctx.Plan(c_, {n_rows, H}, dt);
    ctx.Plan(h_, {n_rows, H}, dt);
    if (low) ctx.Plan(h_cast_, {n_rows, H}, ctx.compute());
    ctx.Plan(bias_, {G}, dt);
    h0_ = h0;
    c0_ = c0;
    h0_c_ = h0 ? ctx.AsCompute(h0, batch * H, h0_cast_) : nullptr;
    be.Cast(store_.value(b_ih_), bias_.raw(), dt, G);
    be.Add(store_.value(b_hh_), bias_.data<T>(), G);
    x_cast_.resize(parts_.size());
    x_c_.resize(parts_.size());
    for (size_t k = 0; k < parts_.size(); ++k) x_c_[k] = ctx.AsCompute(x[k], n_rows * parts_[k], x_cast_[k]);
    if (n_rows == 0) return h_.data<T>();
    // G = Σ_k x_k W_ih[:, block k]^T: the input's part of every step at once.
    const void* w_ih = store_.compute_value(w_ih_, ctx.compute());
    const size_t es = DTypeSize(ctx.compute());
    for (size_t k = 0, col = 0; k < parts_.size(); col += parts_[k], ++k) {
      be.Gemm(1, n_rows, G, parts_[k], GemmOperand{x_c_[k], ctx.compute(), false, parts_[k], 0},
              GemmOperand{static_cast<const char*>(w_ih) + col * es, ctx.compute(), true, input_, 0, true},
              gates_.data<T>(), G, 0, 1.0f, k == 0 ? 0.0f : 1.0f);
    }
    const void* w_hh = store_.compute_value(w_hh_, ctx.compute());
    for (size_t t = 0; t < batch_sizes.size(); ++t) {
      const int64_t n = batch_sizes[t];
      T* g = gates_.data<T>() + offsets_[t] * G;
      if (const void* h_prev = HPrevCompute(ctx, t)) {
        be.Gemm(1, n, G, H, GemmOperand{h_prev, ctx.compute(), false, H, 0},
                GemmOperand{w_hh, ctx.compute(), true, H, 0, true}, g, G, 0, 1.0f, 1.0f);
      }
      T* h = h_.data<T>() + offsets_[t] * H;
      be.LstmCellForward(g, bias_.data<T>(), CPrev(t), c_.data<T>() + offsets_[t] * H, h, n, H);
      if (low) be.Cast(h, static_cast<char*>(h_cast_.raw()) + offsets_[t] * H * DTypeSize(ctx.compute()),
                       ctx.compute(), n * H);
    }
    return h_.data<T>();
  }

  // dy [N, H]: the gradient of Forward's output. dx (or += when dx_beta = 1) [N, in]; may be null.
  void Backward(Context<T>& ctx, const T* dy, T* dx, float dx_beta) {
    Backward(ctx, dy, std::vector<T*>{dx}, dx_beta);
  }
  // The same with the input's gradient in its parts (each may be null), and optionally the
  // gradients of each sequence's final state (dh_n, dc_n [B, H], by sorted position: the h and c
  // of its last step).
  void Backward(Context<T>& ctx, const T* dy, const std::vector<T*>& dx, float dx_beta, const T* dh_n = nullptr,
                const T* dc_n = nullptr) {
    Backend<T>& be = ctx.backend();
    const DType dt = DTypeOf<T>::value;
    const int64_t H = hidden_, G = 4 * hidden_;
    const int64_t n_rows = offsets_.back();
    const int64_t batch = batch_sizes_.empty() ? 0 : batch_sizes_[0];
    ctx.Plan(dh_, {batch, H}, dt);
    ctx.Plan(dc_, {batch, H}, dt);
    // A sequence's carried gradients start at its last step (the first the loop below reaches
    // for its row; rows not yet reached are never touched): the final state's, or zero.
    if (dh_n) {
      be.Cast(dh_n, dh_.raw(), dt, batch * H);
    } else {
      dh_.ZeroFill();
    }
    if (dc_n) {
      be.Cast(dc_n, dc_.raw(), dt, batch * H);
    } else {
      dc_.ZeroFill();
    }
    if (n_rows == 0) return;
    const bool low = ctx.low_precision();
    const size_t es = DTypeSize(ctx.compute());
    // Nothing in the loop below borrows the kScratchCastB slot.
    const char* dg_c =
        static_cast<const char*>(low ? ctx.Scratch(kScratchCastB, n_rows * G, ctx.compute()) : gates_.raw());
    const void* w_hh = store_.compute_value(w_hh_, ctx.compute());
    for (size_t t = batch_sizes_.size(); t-- > 0;) {
      const int64_t n = batch_sizes_[t];
      T* g = gates_.data<T>() + offsets_[t] * G;
      be.Add(dy + offsets_[t] * H, dh_.data<T>(), n * H);
      // Rows past n ended before step t: their carried gradients wait untouched.
      be.LstmCellBackward(g, CPrev(t), c_.data<T>() + offsets_[t] * H, dh_.data<T>(), dc_.data<T>(), g,
                          dc_.data<T>(), nullptr, n, H);
      // The step's gate gradients in the compute dtype, where the products over every step
      // below read them too (one cast per element, not two).
      const void* dg = dg_c + offsets_[t] * G * es;
      if (low) be.Cast(g, const_cast<void*>(dg), ctx.compute(), n * G);
      if (HPrevCompute(ctx, t)) {
        be.Gemm(1, n, H, G, GemmOperand{dg, ctx.compute(), false, G, 0},
                GemmOperand{w_hh, ctx.compute(), false, H, 0, true}, dh_.data<T>(), H, 0, 1.0f, 0.0f);
      }
    }
    // dW_hh += Σ_t dG_t^T h_{t-1}[:n_t]: every step after the first in one product over its
    // rows (one per step over n_t rows ran at half the GEMM rate), against the rows of h that
    // preceded them — h shifted by one step when no sequence ends early, otherwise each step's
    // first n_t rows of h_{t-1} gathered — and step 0 against h0.
    const int64_t first = batch_sizes_[0];
    if (n_rows > first) {
      const void* h_prev = HPrevCompute(ctx, 1);
      if (std::any_of(batch_sizes_.begin(), batch_sizes_.end(), [&](int64_t n) { return n != first; })) {
        char* gathered = static_cast<char*>(ctx.Scratch(kScratchCastA, (n_rows - first) * H, ctx.compute()));
        for (size_t t = 1; t < batch_sizes_.size(); ++t) {
          be.Cast(h_.data<T>() + offsets_[t - 1] * H, gathered + (offsets_[t] - first) * H * es, ctx.compute(),
                  batch_sizes_[t] * H);
        }
        h_prev = gathered;
      }
      be.Gemm(1, G, H, n_rows - first, GemmOperand{dg_c + first * G * es, ctx.compute(), true, G, 0},
              GemmOperand{h_prev, ctx.compute(), false, H, 0}, store_.grad(w_hh_), H, 0, 1.0f, 1.0f);
    }
    if (h0_c_) {
      be.Gemm(1, G, H, first, GemmOperand{dg_c, ctx.compute(), true, G, 0},
              GemmOperand{h0_c_, ctx.compute(), false, H, 0}, store_.grad(w_hh_), H, 0, 1.0f, 1.0f);
    }
    // dW_ih[:, block k] += dG^T x_k; dx_k = dG W_ih[:, block k].
    const void* dg_all = dg_c;
    const void* w_ih = store_.compute_value(w_ih_, ctx.compute());
    for (size_t k = 0, col = 0; k < parts_.size(); col += parts_[k], ++k) {
      be.Gemm(1, G, parts_[k], n_rows, GemmOperand{dg_all, ctx.compute(), true, G, 0},
              GemmOperand{x_c_[k], ctx.compute(), false, parts_[k], 0}, store_.grad(w_ih_) + col, input_, 0, 1.0f,
              1.0f);
      if (k < dx.size() && dx[k]) {
        be.Gemm(1, n_rows, parts_[k], G, GemmOperand{dg_all, ctx.compute(), false, G, 0},
                GemmOperand{static_cast<const char*>(w_ih) + col * es, ctx.compute(), false, input_, 0, true}, dx[k],
                parts_[k], 0, 1.0f, dx_beta);
      }
    }
    be.ColumnSum(gates_.data<T>(), store_.grad(b_ih_), n_rows, G);
    be.ColumnSum(gates_.data<T>(), store_.grad(b_hh_), n_rows, G);
  }

  // After Backward, with h0 / c0 given to Forward: their gradients [B, H].
  const T* dh0() const { return dh_.data<T>(); }
  const T* dc0() const { return dc_.data<T>(); }
  // After Forward: the packed h and c of every step, [N, H] (a sequence's final state is at its
  // last step's row, PackedLayout::LastRows).
  const T* hiddens() const { return h_.data<T>(); }
  const T* cells() const { return c_.data<T>(); }

 private:
  // h_{t-1} for step t's first batch_sizes[t] rows in the compute dtype; null when it is zero.
  const void* HPrevCompute(Context<T>& ctx, size_t t) {
    if (t == 0) return h0_c_;
    const size_t es = DTypeSize(ctx.compute());
    const void* base = ctx.low_precision() ? h_cast_.raw() : h_.raw();
    return static_cast<const char*>(base) + offsets_[t - 1] * hidden_ * es;
  }
  const T* CPrev(size_t t) { return t == 0 ? c0_ : c_.data<T>() + offsets_[t - 1] * hidden_; }

  ParamStore<T>& store_;
  std::vector<int64_t> parts_;
  int64_t input_ = 0, hidden_;
  int w_ih_, w_hh_, b_ih_, b_hh_;
  std::vector<int64_t> batch_sizes_, offsets_;
  Tensor gates_, c_, h_, h_cast_, bias_, h0_cast_, dh_, dc_;
  std::vector<Tensor> x_cast_;
  std::vector<const void*> x_c_;
  const void* h0_c_ = nullptr;
  const T* h0_ = nullptr;
  const T* c0_ = nullptr;
};

}  // namespace sf
