// The hyperparameters the built-in models, optimizers and schedules understand.
//
// Models are built in (docs/engine.md), so hyperparameter names are known: an unknown name is an
// error, as a typo in any other section is. Each name has a type, a range and a default; a
// nested group (`optimizer`, `lr_schedule`) has a `type` member choosing which other members
// apply. The trainer reads trial hyperparameters through WithDefaults(), so the defaults
// documented in docs/config.md live in exactly one place: here.
//
// Each `arch` belongs to an architecture family (ArchFamily: "transformer", "lstm" and "fconv",
// which translate, "transformer_lm", a language model, and "speech_transformer_ctc", a speech
// recogniser). A hyperparameter applies to every
// family unless its spec names the families it applies to (HpSpec::families); one given for an
// arch of another family is refused at submit time, and WithDefaults fills in only those that
// apply to the arch's family.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/value.h"

namespace sf::config {

struct HpSpec {
  enum class Type { kInt, kDouble, kBool, kEnum, kNumberList, kGroup };
  Type type = Type::kDouble;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::vector<std::string> options;  // kEnum
  size_t list_length = 0;            // kNumberList (each element checked against min/max)
  Value default_value;               // null: no default (optional or derived)
  std::string doc;
  // kGroup: the members, and for each value of the member `type`, which others apply.
  std::vector<std::pair<std::string, HpSpec>> members;
  std::map<std::string, std::vector<std::string>> members_by_type;
  // Top level only: the architecture families (ArchFamily) the hyperparameter applies to;
  // empty: every family.
  std::vector<std::string> families;

  const HpSpec* Member(const std::string& name) const;
};

// Top-level hyperparameters by name, in documentation order.
const std::vector<std::pair<std::string, HpSpec>>& HyperparameterSchema();
const HpSpec* FindHyperparameterSpec(const std::string& name);
std::vector<std::string> HyperparameterNames();

// The architecture family of an `arch` value, as the families registered it
// (families/model_families.h): "transformer" for transformer, transformer_tiny,
// transformer_base and transformer_big; "lstm" for lstm, lstm_small and lstm_gnmt4;
// "transformer_lm" for transformer_lm and transformer_lm_small; "fconv" for fconv,
// fconv_iwslt_de_en and fconv_small; "speech_transformer_ctc" for speech_transformer_ctc,
// speech_transformer_ctc_small and speech_transformer_ctc_base; "" for anything else.
std::string ArchFamily(const std::string& arch);

// Whether `family` is a language model's (its task, FamilyTask::kLanguageModel: trains on one
// side's text, has no source and scores no translation): "transformer_lm".
bool IsLanguageModelFamily(const std::string& family);

// Whether `family` recognises speech (FamilyTask::kSpeechRecognition: reads audio manifests,
// data_config.h; its metrics are wer and cer): "speech_transformer_ctc".
bool IsSpeechFamily(const std::string& family);

// Whether `spec` applies to models of `family` (always, when spec.families is empty; never
// for a spec limited to some families when `family` is "").
bool AppliesTo(const HpSpec& spec, const std::string& family);

// Architecture presets, as each family registered them (families/model_families.h): arch name
// -> model-size defaults (transformer: d_model, heads, layers,
// ffn_dim; lstm: the embedding and hidden sizes, layers, encoder_bidirectional, tying;
// transformer_lm: d_model, heads, decoder_layers, ffn_dim, tying; fconv: the embedding widths,
// layers, conv_channels, kernel_size, tying; speech_transformer_ctc: conv_channels, d_model,
// heads, encoder_layers, ffn_dim, normalize_before). Every arch value has one, and each holds only
// hyperparameters that apply to the arch's family.
const std::map<std::string, Value::Map>& ArchPresets();

// A concrete hyperparameter set completed with the arch preset and the schema default of every
// hyperparameter that applies to the arch's family (absent arch: "transformer"), so the
// trainer reads each knob from one place: an lstm trial gets no d_model, heads, activation...,
// a transformer trial no encoder_bidirectional..., a transformer_lm trial no encoder_layers,
// share_embeddings, max_len_a/b nor any lstm one, an fconv trial no d_model, heads...,
// encoder_hidden_size... nor any of the lstm's dropout rates. For the lstm family,
// encoder_dropout_in, encoder_dropout_out, decoder_dropout_in and decoder_dropout_out default to
// the completed `dropout` (fairseq's lstm); for the speech family, ctc_weight defaults to 0.3 with
// decoder_layers and 1 without. Given values are kept as they are. `hparams` must be a
// map (validated beforehand, ValidateTrialHyperparameters); an arch of no family gets only the
// hyperparameters that apply to every family. The derived defaults are each family's
// (FamilySchema::derive_defaults).
Value WithDefaults(const Value& hparams);

}  // namespace sf::config
