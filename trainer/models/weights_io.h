// Model weights in the open: save and load a model's fp32 parameters (any family) as
// safetensors, one tensor per parameter under its documented name and shape
// (docs/model-format.md, docs/models.md). The model's configuration is stored as string
// metadata (Seq2SeqModel::Metadata(): arch, d_model, heads, ...), so a reader can rebuild the
// architecture (model_spec.h); PyTorch users can load the file with the `safetensors` package
// or a few lines of json + numpy.
//
// Errors: I/O problems and, on load, a missing tensor, an unexpected dtype (only F32 is
// accepted) or shape — the message names the tensor. A failed load leaves the model unchanged.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "trainer/models/transformer.h"

namespace sf {

// The Transformer's config as metadata strings ("d_model" -> "256", ...): the keys docs/model-format.md
// lists (arch, d_model, heads, encoder_layers, decoder_layers, ffn_dim, activation,
// normalize_before, share_embeddings, share_decoder_input_output_embed, src_vocab, tgt_vocab,
// pad_id, max_positions, label_smoothing).
std::map<std::string, std::string> ConfigMetadata(const TransformerConfig& config);

// The inverse of ConfigMetadata: the architecture a weights file describes (dropout rates are
// training settings, not stored; they keep their defaults). A file without
// share_decoder_input_output_embed (written before it existed) is tied: true. Errors name the
// key and the file's value ("__metadata__ heads: 'x' is not an integer"); the result is
// validated.
Result<TransformerConfig> ConfigFromMetadata(const std::map<std::string, std::string>& metadata);

Status SaveWeights(Seq2SeqModel<float>& model, const std::string& path);
// Loads every parameter after checking the file's metadata against the model
// (model_spec.h: CheckMetadataFits); calls model.WeightsUpdated().
Status LoadWeights(Seq2SeqModel<float>& model, const std::string& path);

}  // namespace sf
