// Model weights in the open: save and load a Transformer's fp32 parameters as safetensors, one
// tensor per parameter under its documented name and shape (docs/model-format.md). The model's
// configuration is stored as string metadata (d_model, heads, ...), so a reader can rebuild
// the architecture; PyTorch users can load the file with the `safetensors` package or a few
// lines of json + numpy.
//
// Errors: I/O problems and, on load, a missing tensor, an unexpected dtype (only F32 is
// accepted) or shape — the message names the tensor. A failed load leaves the model unchanged.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "trainer/models/transformer.h"

namespace sf {

// The config as metadata strings ("d_model" -> "256", ...).
std::map<std::string, std::string> ConfigMetadata(const TransformerConfig& config);

Status SaveWeights(Transformer<float>& model, const std::string& path);
// Loads every parameter; calls model.WeightsUpdated().
Status LoadWeights(Transformer<float>& model, const std::string& path);

}  // namespace sf
