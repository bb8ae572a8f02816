// Token embedding scaled by sqrt(C) plus fairseq's sinusoidal positions, then dropout.
//
//   out[b,t,:] = sqrt(C) * E[tok[b,t], :] + PE[pos[b,t], :];  out = dropout(out)
// Positions follow fairseq's make_positions: pos = pad + (number of non-pad tokens in row b up to
// and including t) for non-pad tokens, pos = pad for padding (whose PE row is zero).
// PE[p] = [sin(p*f_0) .. sin(p*f_{h-1}), cos(p*f_0) .. cos(p*f_{h-1})], h = C/2,
// f_i = exp(-i * ln(10000) / (h - 1)) (fairseq's SinusoidalPositionalEmbedding.get_embedding).
// Positions are computed on the host from the host copy of the tokens (PositionIds) and handed
// to Forward with the tokens, both in the backend's memory; the PE table is copied there on the
// first Forward.
// The table E [V, C] ("<name>.weight") may be shared (tied) with another embedding or the
// output projection; its pad row gets no gradient (nn.Embedding padding_idx semantics).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"

namespace sf {

// fairseq's sinusoidal position table [max_positions + pad + 1, dim]: row p (p != pad) holds
// sin(p * w_i) in column i and cos(p * w_i) in column dim/2 + i, w_i = 10000^(-i / (dim/2 - 1));
// the pad row and an odd last column are zero. Row pad + 1 + t is position t.
template <typename T>
std::vector<T> SinusoidalPositions(int64_t max_positions, int64_t dim, int32_t pad) {
  const int64_t rows = max_positions + pad + 1, half = dim / 2;
  std::vector<T> pe(static_cast<size_t>(rows * dim), T(0));
  const double f = std::log(10000.0) / static_cast<double>(half - 1);
  for (int64_t p = 0; p < rows; ++p) {
    if (p == pad) continue;
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * std::exp(-static_cast<double>(i) * f);
      pe[p * dim + i] = static_cast<T>(std::sin(a));
      pe[p * dim + half + i] = static_cast<T>(std::cos(a));
    }
  }
  return pe;
}

template <typename T>
class TokenEmbedding {
 public:
  // table_id >= 0 reuses an existing table (shared embeddings); otherwise "<name>.weight" is
  // declared.
  TokenEmbedding(ParamStore<T>& store, const std::string& name, int64_t vocab, int64_t dim,
                 int32_t pad, int64_t max_positions, float dropout, uint32_t site,
                 int table_id = -1)
      : store_(store), vocab_(vocab), dim_(dim), pad_(pad), dropout_(dropout), site_(site) {
    table_ = table_id >= 0 ? table_id : store.Add(name + ".weight", {vocab, dim}, true);
    pe_host_ = SinusoidalPositions<T>(max_positions, dim, pad);
    max_positions_ = max_positions;
  }
  int table() const { return table_; }
  float scale() const { return static_cast<float>(std::sqrt(static_cast<double>(dim_))); }

  // Normal(0, C^-1/2) with a zero pad row (fairseq's Embedding init). `next` draws N(0,1).
  template <typename Normal>
  void Init(Normal&& next) {
    T* e = store_.host_value(table_);
    const double sd = 1.0 / std::sqrt(static_cast<double>(dim_));
    for (int64_t i = 0; i < vocab_ * dim_; ++i) e[i] = static_cast<T>(next() * sd);
    if (pad_ >= 0 && pad_ < vocab_)
      for (int64_t c = 0; c < dim_; ++c) e[int64_t{pad_} * dim_ + c] = T(0);
  }

  // fairseq's make_positions for host tokens [B, T] into pos [B*T].
  void PositionIds(const int32_t* tokens, int64_t batch, int64_t time, int32_t* pos) const {
    for (int64_t b = 0; b < batch; ++b) {
      int32_t count = 0;
      for (int64_t t = 0; t < time; ++t) {
        const int64_t r = b * time + t;
        pos[r] = tokens[r] == pad_ ? pad_ : pad_ + (++count);
      }
    }
  }

  // tokens [B, T] and their PositionIds (both in the backend's memory) -> out [B, T, C].
  // Returns false when a row is longer than max_positions.
  bool Forward(Context<T>& ctx, const int32_t* tokens, const int32_t* pos_ids, int64_t batch,
               int64_t time, T* out) {
    if (time > max_positions_) return false;
    tokens_ = tokens;
    rows_ = batch * time;
    if (pe_.empty() || &pe_.allocator() != &ctx.memory()) {
      pe_.Resize({static_cast<int64_t>(pe_host_.size())}, DTypeOf<T>::value, ctx.memory());
      pe_.CopyFromHost(pe_host_.data());
    }
    ctx.backend().EmbeddingForward(tokens, store_.value(table_), pe_.data<T>(), pos_ids, out,
                                   rows_, dim_, scale());
    p_used_ = ctx.training ? dropout_ : 0.0f;
    key_ = ctx.Key(site_);
    if (p_used_ > 0)
      ctx.backend().BiasDropoutResidualForward(out, nullptr, nullptr, out, rows_, dim_, p_used_,
                                               key_);
    return true;
  }
  // dout [B*T, C] is overwritten (dropout backward in place).
  void Backward(Context<T>& ctx, T* dout) {
    if (p_used_ > 0)
      ctx.backend().BiasDropoutResidualBackward(dout, dout, nullptr, rows_, dim_, p_used_, key_);
    ctx.backend().EmbeddingBackward(tokens_, dout, store_.grad(table_), rows_, dim_, scale(),
                                    pad_);
  }

 private:
  ParamStore<T>& store_;
  int64_t vocab_, dim_;
  int32_t pad_;
  float dropout_;
  uint32_t site_;
  int table_ = -1;
  int64_t max_positions_ = 0;
  std::vector<T> pe_host_;
  Tensor pe_;  // pe_host_ in the backend's memory
  const int32_t* tokens_ = nullptr;
  int64_t rows_ = 0;
  float p_used_ = 0;
  DropoutKey key_;
};

}  // namespace sf
