// Small seq2seq batches and a small model for engine tests: random tokens with ragged,
// right-padded rows (fairseq's <pad> = 1, </s> = 2), in the engine's layout; and the normwise
// error the model-level comparisons use.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "trainer/models/transformer.h"

namespace sf {

inline constexpr int32_t kPad = 1, kEos = 2;

struct HostBatch {
  std::vector<int32_t> src, tin, tout;
  int64_t batch = 0, src_len = 0, tgt_len = 0;
  Seq2SeqBatch view() const {
    return {src.data(), tin.data(), tout.data(), batch, src_len, tgt_len};
  }
};

// Random tokens in [4, V) with right padding: row b of the source has length
// src_len - (b % 3), of the target tgt_len - (b % 2).
inline HostBatch RandomBatch(int64_t B, int64_t Ts, int64_t Tt, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(4, static_cast<int32_t>(V) - 1);
  HostBatch h{std::vector<int32_t>(B * Ts, kPad), std::vector<int32_t>(B * Tt, kPad),
              std::vector<int32_t>(B * Tt, kPad), B, Ts, Tt};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Ts - b % 3; ++t) h.src[b * Ts + t] = tok(rng);
    const int64_t len = Tt - b % 2;
    for (int64_t t = 0; t < len; ++t) {
      h.tout[b * Tt + t] = t == len - 1 ? kEos : tok(rng);
      h.tin[b * Tt + t] = t == 0 ? kEos : h.tout[b * Tt + t - 1];
    }
  }
  return h;
}

// max |a - b| / max |b| over n elements: a normwise relative error.
inline double MaxRel(const float* a, const float* b, int64_t n) {
  double num = 0, den = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

inline TransformerConfig SmallConfig() {
  TransformerConfig c;
  c.d_model = 32;
  c.heads = 4;
  c.ffn_dim = 48;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0;
  c.attention_dropout = 0;
  c.src_vocab = 53;
  c.tgt_vocab = 47;
  c.pad_id = kPad;
  c.max_positions = 64;
  c.label_smoothing = 0.1f;
  return c;
}

}  // namespace sf
