// The host (CPU) kernels of incremental decoding: what the Transformer's Translator and the
// language model's LmGenerator run per search step on fp32 master weights, with OpenMP.
//
// Determinism: every output element is computed by the same code in the same order whatever
// the number of rows computed with it, so a row's result does not depend on the batch it is in,
// and a cached step gives the same numbers as recomputing the whole prefix.
// Thread-safe (no state); they parallelise internally.
#pragma once

#include <cstdint>
#include <string>

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

// One decoder layer's weights (fairseq's TransformerDecoderLayer names under "<prefix>": the
// self-attention's as above, encoder_attn.{in_proj_weight, in_proj_bias, out_proj.weight,
// out_proj.bias}, encoder_attn_layer_norm.*, fc1.*, fc2.*, final_layer_norm.*).
struct DecoderLayerWeights {
  SelfAttentionWeights self;
  const float *cross_in_w = nullptr, *cross_in_b = nullptr, *cross_out_w = nullptr, *cross_out_b = nullptr;
  const float *cross_ln_g = nullptr, *cross_ln_b = nullptr;
  const float *fc1_w = nullptr, *fc1_b = nullptr, *fc2_w = nullptr, *fc2_b = nullptr;
  const float *ffn_ln_g = nullptr, *ffn_ln_b = nullptr;
};

// The weights of the layer under `prefix` ("decoder.layers.3."), each found by `find(name)`.
template <typename Find>
DecoderLayerWeights DecoderLayerWeightsAt(Find&& find, const std::string& prefix) {
  auto w = [&](const char* rest) -> const float* { return find(prefix + rest); };
  DecoderLayerWeights d;
  d.self = {w("self_attn.in_proj_weight"), w("self_attn.in_proj_bias"), w("self_attn.out_proj.weight"),
            w("self_attn.out_proj.bias"), w("self_attn_layer_norm.weight"), w("self_attn_layer_norm.bias")};
  d.cross_in_w = w("encoder_attn.in_proj_weight");
  d.cross_in_b = w("encoder_attn.in_proj_bias");
  d.cross_out_w = w("encoder_attn.out_proj.weight");
  d.cross_out_b = w("encoder_attn.out_proj.bias");
  d.cross_ln_g = w("encoder_attn_layer_norm.weight");
  d.cross_ln_b = w("encoder_attn_layer_norm.bias");
  d.fc1_w = w("fc1.weight");
  d.fc1_b = w("fc1.bias");
  d.fc2_w = w("fc2.weight");
  d.fc2_b = w("fc2.bias");
  d.ffn_ln_g = w("final_layer_norm.weight");
  d.ffn_ln_b = w("final_layer_norm.bias");
  return d;
}

// The encoder attention's keys and values of one layer for `rows` encoder outputs enc [rows, c]:
// k, v [rows, c] (computed once per source and shared by its hypotheses).
void CrossKeysValues(const float* enc, int64_t rows, int64_t c, const DecoderLayerWeights& w, float* k, float* v);

// One decoder layer over m query rows, in place over x [m, c]: the cached causal self-attention
// (CachedSelfAttentionBlock's row/pos/cache arguments), then query q's attention over memory
// block memory[q] of cross_k / cross_v ([blocks, mem_len, c], keys with mem_pad [blocks,
// mem_len] set skipped; mem_pad may be null), then the feed-forward. Scratch: h, ctx, o [m, c],
// qkv [m, 3c], f [m, ff].
void DecoderLayerStep(float* x, int64_t m, const int64_t* row, const int64_t* pos, float* k_cache, float* v_cache,
                      int64_t cap, const float* cross_k, const float* cross_v, const int64_t* memory,
                      int64_t mem_len, const uint8_t* mem_pad, int64_t c, int64_t heads, int64_t ff, bool pre,
                      Activation act, const DecoderLayerWeights& w, float* h, float* qkv, float* ctx, float* o,
                      float* f);

}  // namespace sf::host
