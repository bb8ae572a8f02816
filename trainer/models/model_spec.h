// A model of any registered family as a value: which family, and that family's configuration.
// Built from a trial's hyperparameters (trainer/run/model_setup.h), from a weights file's
// __metadata__ and from trainer_state.json's "model" (here), and turned into a model
// (MakeModel). Everything family-specific goes through the family's registry entry
// (trainer/families/model_family.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <typeinfo>

#include "common/status.h"
#include "common/value.h"
#include "trainer/families/model_family.h"
#include "trainer/models/seq2seq_model.h"

namespace sf {

class ModelSpec {
 public:
  // The Transformer with TransformerConfig's own defaults.
  ModelSpec();
  // Family `family` with `config` (which must be that family's config type: aborts otherwise).
  template <class Config>
  static ModelSpec Of(const std::string& family, Config config) {
    return ModelSpec(family, std::make_unique<FamilyConfigOf<Config>>(std::move(config)));
  }
  ModelSpec(const std::string& family, std::unique_ptr<FamilyConfig> config);
  ModelSpec(const ModelSpec& other);
  ModelSpec& operator=(const ModelSpec& other);
  ModelSpec(ModelSpec&&) = default;
  ModelSpec& operator=(ModelSpec&&) = default;

  const std::string& family() const { return entry_->name; }
  const ModelFamily& entry() const { return *entry_; }
  // The family's config (Config must be its type: aborts otherwise).
  template <class Config>
  const Config& config() const {
    CheckType(typeid(Config));
    return static_cast<const FamilyConfigOf<Config>&>(*config_).value;
  }
  template <class Config>
  Config& config() {
    CheckType(typeid(Config));
    return static_cast<FamilyConfigOf<Config>&>(*config_).value;
  }
  const FamilyConfig& erased() const { return *config_; }

  // A decoder-only language model: it scores and continues text, and translates nothing.
  bool language_model() const { return entry_->language_model; }
  ModelShape shape() const { return entry_->shape(*config_); }
  void set_shape(const ModelShape& shape) { entry_->set_shape(*config_, shape); }
  // The weights' __metadata__ of this model (what Seq2SeqModel::Metadata() returns).
  std::map<std::string, std::string> metadata() const { return entry_->metadata(*config_); }
  Status Validate() const { return entry_->validate(*config_); }
  // trainer_state.json's "model".
  Value ToValue() const { return entry_->to_value(*config_); }

 private:
  void CheckType(const std::type_info& type) const;

  const ModelFamily* entry_;
  std::unique_ptr<FamilyConfig> config_;
};

// The architecture a weights file describes, by its "arch" key (a registered family's name).
// Errors name the key and value; an unknown arch lists the known families.
Result<ModelSpec> ModelSpecFromMetadata(const std::map<std::string, std::string>& metadata);

// The model as stored in trainer_state.json ("model", ModelSpec::ToValue); a value without "arch"
// (older checkpoints) is a Transformer, and members it lacks keep the config's own defaults.
Result<ModelSpec> ModelSpecFromValue(const Value& value);

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
