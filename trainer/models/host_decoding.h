// The host (CPU) kernels of incremental decoding: what the Transformer's Translator and the
// language model's LmGenerator run per search step on fp32 master weights, with OpenMP.
//
// Determinism: every output element is computed by the same code in the same order whatever
// the number of rows computed with it, so a row's result does not depend on the batch it is in,
// and a cached step gives the same numbers as recomputing the whole prefix.
// Thread-safe (no state); they parallelise internally.
#pragma once

#include <cstdint>

#include "trainer/nn/transformer_layer.h"  // Activation

namespace sf::host {

// y[i, j] = dot(x[i, :], w[j, :]) + b[j] for i < m, j < n (w is [n, k], row-major; b may be
// null).
void Linear(const float* x, int64_t m, int64_t k, const float* w, const float* b, int64_t n, float* y);

// y = LayerNorm(x) * gamma + beta per row (eps 1e-5); y may be x.
void RowLayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t cols);

// One query row of multi-head attention: for each head, softmax over keys 0..nkeys-1 (skipping
// keys with key_pad set; key_pad may be null) of scale * q.k, then the weighted sum of values.
// k, v: [nkeys, kv_stride] with head h at columns h*head_dim. scores: nkeys floats of scratch.
void AttendRow(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t nkeys,
               const uint8_t* key_pad, int64_t heads, int64_t head_dim, float scale, float* out, float* scores);

void Activate(float* x, int64_t n, Activation act);
void AddInPlace(float* y, const float* x, int64_t n);

// The feed-forward sub-block of one layer, in place over x [rows, c]: pre-norm
// x += fc2(act(fc1(LN(x)))), post-norm x = LN(x + fc2(act(fc1(x)))). h [rows, c], f [rows, ff]
// and o [rows, c] are scratch.
void FeedForwardBlock(float* x, int64_t rows, int64_t c, int64_t ff, bool pre, const float* ln_g,
                      const float* ln_b, const float* w1, const float* b1, const float* w2, const float* b2,
                      Activation act, float* h, float* f, float* o);

// One layer's causal self-attention weights (fairseq's names: self_attn.in_proj_weight [3C, C],
// in_proj_bias, out_proj.weight, out_proj.bias, self_attn_layer_norm.weight / .bias).
struct SelfAttentionWeights {
  const float *in_w = nullptr, *in_b = nullptr, *out_w = nullptr, *out_b = nullptr;
  const float *ln_g = nullptr, *ln_b = nullptr;
};

// The self-attention sub-block over a key/value cache, in place over x [m, c]: query q is
// position pos[q] of cache row row[q]. Every query's key and value are written into the caches
// k_cache, v_cache ([rows, cap, c]) first; then each query attends to positions 0..pos[q] of its
// row (causal). Pre-norm x += out(attn(LN(x))), post-norm x = LN(x + out(attn(x))). h [m, c],
// qkv [m, 3c], ctx [m, c], o [m, c] are scratch.
void CachedSelfAttentionBlock(float* x, int64_t m, const int64_t* row, const int64_t* pos, float* k_cache,
                              float* v_cache, int64_t cap, int64_t c, int64_t heads, bool pre,
                              const SelfAttentionWeights& w, float* h, float* qkv, float* ctx, float* o);

}  // namespace sf::host
