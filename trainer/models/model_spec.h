// A model of any family as a value: which family, and that family's configuration. Built from
// hyperparameters (trainer/run/model_setup.h), from a weights file's __metadata__ (here), and
// turned into a model (MakeModel). Adding a family means: its config with Validate and
// metadata, a Seq2SeqModel, a generator (generator.h), and a case in each function here.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "trainer/models/fconv.h"
#include "trainer/models/lstm_config.h"
#include "trainer/models/seq2seq_model.h"
#include "trainer/models/transformer.h"
#include "trainer/models/transformer_lm.h"

namespace sf {

struct ModelSpec {
  std::string family = "transformer";  // "transformer" | "lstm" | "transformer_lm" | "fconv"
  TransformerConfig transformer;       // family "transformer"
  LstmConfig lstm;                     // family "lstm"
  TransformerLmConfig lm;              // family "transformer_lm"
  FConvConfig fconv;                   // family "fconv"

  // A decoder-only language model: it scores and continues text, and translates nothing.
  bool language_model() const { return family == "transformer_lm"; }

  ModelShape shape() const;
  // The weights' __metadata__ of this model (what Seq2SeqModel::Metadata() returns).
  std::map<std::string, std::string> metadata() const;
  Status Validate() const;
};

// The families the engine trains.
const std::vector<std::string>& ModelFamilies();

// The architecture a weights file describes, by its "arch" key ("transformer", "lstm",
// "transformer_lm", "fconv").
// Errors name the key and value; an unknown arch lists the known families.
Result<ModelSpec> ModelSpecFromMetadata(const std::map<std::string, std::string>& metadata);

// OK when `metadata` (a weights file's) describes `model`'s architecture; otherwise names the
// first difference ("the weights are an lstm model, this is a transformer"; "d_model is 64 in
// the weights, 32 in this model"). Empty metadata (files written before it was stored) is
// accepted: the parameter shapes are still checked by the loader. label_smoothing is a loss
// setting and may differ. Any TrainableModel: a text family's metadata is read through its
// config (ModelSpecFromMetadata), another family's (the speech recogniser's) compared as written.
Status CheckMetadataFits(const std::map<std::string, std::string>& metadata, const TrainableModel<float>& model);

// A fresh (uninitialised) model of `spec` on `backend` (must outlive it), GEMMs in `compute`.
std::unique_ptr<Seq2SeqModel<float>> MakeModel(const ModelSpec& spec, Backend<float>* backend, DType compute);

}  // namespace sf
