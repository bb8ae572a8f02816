// Models by name (fairseq style). An architecture name ("transformer") or a preset
// ("transformer_tiny", "transformer_base", "transformer_big") plus hyperparameters gives a TransformerConfig.
//
// Hyperparameters arrive as strings keyed by their YAML name (arch, d_model, heads,
// encoder_layers, decoder_layers, ffn_dim, dropout, attention_dropout, activation_dropout,
// activation, normalize_before, share_embeddings, share_decoder_input_output_embed, src_vocab,
// tgt_vocab, pad_id, label_smoothing, max_positions); values given override the preset's.
// Errors name the field path ("hyperparameters.heads: 5 does not divide d_model 256").
// Thread-safe (stateless).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/transformer.h"

namespace sf {

using HyperparameterMap = std::map<std::string, std::string>;

// Names the registry knows: architectures and presets.
std::vector<std::string> ModelNames();

// The preset (or architecture default) `name` with `overrides` applied, validated.
Result<TransformerConfig> MakeModelConfig(const std::string& name,
                                          const HyperparameterMap& overrides = {});

}  // namespace sf
