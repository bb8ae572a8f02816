// What the encoder-decoder Transformer (transformer.h) and the decoder-only language model
// (transformer_lm.h) share in their construction: the layer options from their configuration,
// and fairseq's initialisation of the matrices and vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "trainer/nn/param_store.h"
#include "trainer/nn/transformer_layer.h"

namespace sf {

// The layers' options from a config with d_model, heads, ffn_dim, the three dropout rates,
// activation and normalize_before.
template <typename Config>
LayerOptions TransformerLayerOptions(const Config& c) {
  LayerOptions o;
  o.dim = c.d_model;
  o.heads = c.heads;
  o.ffn_dim = c.ffn_dim;
  o.dropout = c.dropout;
  o.attention_dropout = c.attention_dropout;
  o.activation_dropout = c.activation_dropout;
  o.activation = c.activation;
  o.normalize_before = c.normalize_before;
  return o;
}

// fairseq's: Xavier-uniform (fan_in + fan_out from the [out, in] shape) for every matrix but the
// embedding tables and the untied output projection, zero for every vector (layer norms set
// their own afterwards), drawn in store order from `rng`.
template <typename T>
void XavierMatricesZeroVectors(ParamStore<T>& store, std::mt19937_64& rng) {
  for (const ParamInfo& p : store.params()) {
    T* v = store.host_values() + p.offset;
    if (p.shape.size() == 2 && p.name.find("embed_tokens") == std::string::npos &&
        p.name != "decoder.output_projection.weight") {
      const double a = std::sqrt(6.0 / static_cast<double>(p.shape[0] + p.shape[1]));
      std::uniform_real_distribution<double> u(-a, a);
      for (int64_t i = 0; i < p.numel; ++i) v[i] = static_cast<T>(u(rng));
    } else if (p.shape.size() == 1) {
      std::fill(v, v + p.numel, T(0));
    }
  }
}

// fairseq: nn.init.normal_(output_projection.weight, std=C^-0.5) for an untied [V, C] projection.
template <typename T, typename Normal>
void InitOutputProjection(T* w, int64_t vocab, int64_t dim, Normal&& next) {
  const double sd = 1.0 / std::sqrt(static_cast<double>(dim));
  for (int64_t i = 0; i < vocab * dim; ++i) w[i] = static_cast<T>(next() * sd);
}

}  // namespace sf
