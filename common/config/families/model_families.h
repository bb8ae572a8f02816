// The architecture families the configuration knows: one entry per family, registered in one
// place (model_families.cc), which the master's validation, the defaults, the typed decoder and
// the generated docs all read. The trainer's side of a family (its config codec, model and
// search) is trainer/families/model_family.h.
//
// A family (common/config/families/<name>_family.cc) declares:
// - its name, and the article it is read with ("an lstm model", "a transformer model");
// - its task: it translates, models one language, or recognises speech (which data it reads,
//   which metrics it reports: data_config.h, experiment_config.h);
// - its archs, each with its preset (model-size defaults that explicit values override); the
//   first arch is named after the family;
// - the defaults that follow from other completed values (the lstm's four dropout rates follow
//   `dropout`; the speech model's ctc_weight depends on decoder_layers), if any;
// - how its own struct of TrialHyperparameters is read from the completed map.
// Which hyperparameters apply to a family is said by each hyperparameter's spec
// (HpSpec::families in hyperparameter_schema.cc, names that must be registered here), and the
// cross-field rules are keyed on the knobs they concern (model_hyperparameters.cc), so they need
// no family names. A sixth family is one <name>_family.cc here, one line in model_families.cc,
// its new knobs in the schema, and its trainer side.
//
// Built once, on first use, and read-only after: thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/config/families/knob_reader.h"
#include "common/config/trial_hyperparameters.h"
#include "common/status.h"
#include "common/value.h"

namespace sf::config {

enum class FamilyTask {
  kTranslation,        // source and target text; BLEU
  kLanguageModel,      // one side's text; perplexity, no source, no BLEU
  kSpeechRecognition,  // audio manifests; WER and CER
};

struct FamilySchema {
  std::string name;
  std::string article;  // "a" or "an"
  FamilyTask task = FamilyTask::kTranslation;
  // Arch name -> preset, in documentation order; the first is `name`.
  std::vector<std::pair<std::string, Value::Map>> archs;
  // Completes defaults that follow other values, after the preset and the schema's defaults
  // (WithDefaults); given values are kept. Null: none.
  void (*derive_defaults)(Value::Map& completed) = nullptr;
  // Sets the family's own member of `hp` from the completed top level.
  Status (*decode)(const KnobReader& hyperparameters, TrialHyperparameters& hp) = nullptr;
};

// Every family, in documentation order.
const std::vector<FamilySchema>& FamilySchemas();
// The family named `family`; null for an unknown name.
const FamilySchema* FindFamilySchema(const std::string& family);
// The family `arch` belongs to; null for an unknown arch.
const FamilySchema* FamilySchemaOfArch(const std::string& arch);

// Each family's entry (one per <name>_family.cc); model_families.cc lists them.
FamilySchema TransformerFamilySchema();
FamilySchema LstmFamilySchema();
FamilySchema TransformerLmFamilySchema();
FamilySchema FConvFamilySchema();
FamilySchema SpeechTransformerCtcFamilySchema();

}  // namespace sf::config
