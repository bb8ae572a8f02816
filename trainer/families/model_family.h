// The model family registry: everything the trainer, the translator and the bench know about a
// family of sequence models, registered in one place per family.
//
// A family (trainer/families/<name>_family.cc) registers, for its own config type:
// - its config codec: from a trial's typed hyperparameters (config::TrialHyperparameters), from
//   and to its weights' __metadata__, from and to trainer_state.json's "model" value, its
//   shape (vocabularies, padding, positions) and its checks (Validate);
// - its model factory (a Seq2SeqModel on a backend) and its search (a Generator; none for a
//   family that translates nothing);
// - what sets it apart: a language model (trains on one side's text, continues text, scores no
//   translation); whether its search has an uncached reference mode (`translate --no-cache`).
// ModelSpec (trainer/models/model_spec.h) holds a family's name and its config, and does
// everything through the family's entry; nothing else compares family names. A new family is its
// model, its generator, one <name>_family.cc here, and one line in model_family.cc's list (plus
// its schema side in common/config/families/ (archs, presets, task, typed decoder; its new knobs in
// common/config/hyperparameter_schema.cc), which the master validates with).
//
// The speech recogniser (SpeechCtcModel) is not a sequence-to-sequence family: it trains through
// SpeechRun (trainer/run/speech_run.h) and is not registered here.
//
// The registry is built once, on first use, and read-only after: thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "common/config/trial_hyperparameters.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/core/dtype.h"
#include "trainer/kernels/backend.h"
#include "trainer/decoding/generator.h"
#include "trainer/models/seq2seq_model.h"

namespace sf {

using FamilyMetadata = std::map<std::string, std::string>;

// A family's config, type-erased (FamilyConfigOf<Config> holds it).
class FamilyConfig {
 public:
  virtual ~FamilyConfig() = default;
  virtual std::unique_ptr<FamilyConfig> Clone() const = 0;
  virtual std::type_index type() const = 0;
};

template <class Config>
class FamilyConfigOf final : public FamilyConfig {
 public:
  explicit FamilyConfigOf(Config config) : value(std::move(config)) {}
  std::unique_ptr<FamilyConfig> Clone() const override { return std::make_unique<FamilyConfigOf>(value); }
  std::type_index type() const override { return typeid(Config); }
  Config value;
};

// One family's entry. Every function is set; make_generator returns null for a family that
// translates nothing.
struct ModelFamily {
  std::string name;
  std::type_index config_type = typeid(void);
  bool language_model = false;
  bool uncached_reference = false;  // its search can recompute the whole prefix (translate --no-cache)

  std::function<Result<std::unique_ptr<FamilyConfig>>(const config::TrialHyperparameters&)> from_hyperparameters;
  std::function<Result<std::unique_ptr<FamilyConfig>>(const FamilyMetadata&)> from_metadata;
  std::function<FamilyMetadata(const FamilyConfig&)> metadata;
  std::function<Result<std::unique_ptr<FamilyConfig>>(const Value&)> from_value;
  std::function<Value(const FamilyConfig&)> to_value;
  std::function<ModelShape(const FamilyConfig&)> shape;
  std::function<void(FamilyConfig&, const ModelShape&)> set_shape;
  std::function<Status(const FamilyConfig&)> validate;
  std::function<std::unique_ptr<Seq2SeqModel<float>>(const FamilyConfig&, Backend<float>*, DType)> make_model;
  std::function<std::unique_ptr<Generator>(Seq2SeqModel<float>*)> make_generator;
};

// What a family writes, in terms of its own config type; RegisterFamily makes the entry.
template <class Config>
struct FamilyCodec {
  std::string name;
  bool language_model = false;
  bool uncached_reference = false;
  Result<Config> (*from_hyperparameters)(const config::TrialHyperparameters&) = nullptr;
  Result<Config> (*from_metadata)(const FamilyMetadata&) = nullptr;
  FamilyMetadata (*metadata)(const Config&) = nullptr;
  Result<Config> (*from_value)(const Value&) = nullptr;
  Value (*to_value)(const Config&) = nullptr;
  ModelShape (*shape)(const Config&) = nullptr;
  void (*set_shape)(Config&, const ModelShape&) = nullptr;
  std::unique_ptr<Seq2SeqModel<float>> (*make_model)(const Config&, Backend<float>*, DType) = nullptr;
  std::unique_ptr<Generator> (*make_generator)(Seq2SeqModel<float>*) = nullptr;
};

template <class Config>
ModelFamily RegisterFamily(const FamilyCodec<Config>& c) {
  using Held = FamilyConfigOf<Config>;
  auto wrap = [](Result<Config> r) -> Result<std::unique_ptr<FamilyConfig>> {
    if (!r.ok()) return r.status();
    return std::unique_ptr<FamilyConfig>(std::make_unique<Held>(std::move(*r)));
  };
  auto of = [](const FamilyConfig& f) -> const Config& { return static_cast<const Held&>(f).value; };
  ModelFamily f;
  f.name = c.name;
  f.config_type = typeid(Config);
  f.language_model = c.language_model;
  f.uncached_reference = c.uncached_reference;
  f.from_hyperparameters = [c, wrap](const config::TrialHyperparameters& hp) { return wrap(c.from_hyperparameters(hp)); };
  f.from_metadata = [c, wrap](const FamilyMetadata& m) { return wrap(c.from_metadata(m)); };
  f.metadata = [c, of](const FamilyConfig& x) { return c.metadata(of(x)); };
  f.from_value = [c, wrap](const Value& v) { return wrap(c.from_value(v)); };
  f.to_value = [c, of](const FamilyConfig& x) { return c.to_value(of(x)); };
  f.shape = [c, of](const FamilyConfig& x) { return c.shape(of(x)); };
  f.set_shape = [c](FamilyConfig& x, const ModelShape& s) { c.set_shape(static_cast<Held&>(x).value, s); };
  f.validate = [of](const FamilyConfig& x) { return of(x).Validate(); };
  f.make_model = [c, of](const FamilyConfig& x, Backend<float>* b, DType d) { return c.make_model(of(x), b, d); };
  f.make_generator = [c](Seq2SeqModel<float>* m) { return c.make_generator ? c.make_generator(m) : nullptr; };
  return f;
}

// The feed-forward activation a hyperparameter or a stored value names (relu or gelu); errors
// name the hyperparameter. And back.
Result<Activation> ActivationNamed(const std::string& name);
const char* ActivationName(Activation activation);

// The registered family `name`; null when none is.
const ModelFamily* FindModelFamily(const std::string& name);
// The registered families' names, in registration order ("transformer", "lstm", ...).
const std::vector<std::string>& ModelFamilies();
// "transformer, lstm, transformer_lm, fconv": for error messages.
std::string ModelFamilyList();

}  // namespace sf
