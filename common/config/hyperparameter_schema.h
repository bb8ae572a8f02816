// The hyperparameters the built-in models, optimizers and schedules understand.
//
// Models are built in (docs/engine.md), so hyperparameter names are known: an unknown name is an
// error, as a typo in any other section is. Each name has a type, a range and a default; a
// nested group (`optimizer`, `lr_schedule`) has a `type` member choosing which other members
// apply. The trainer reads trial hyperparameters through WithDefaults(), so the defaults
// documented in docs/config.md live in exactly one place: here.
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

  const HpSpec* Member(const std::string& name) const;
};

// Top-level hyperparameters by name, in documentation order.
const std::vector<std::pair<std::string, HpSpec>>& HyperparameterSchema();
const HpSpec* FindHyperparameterSpec(const std::string& name);
std::vector<std::string> HyperparameterNames();

// Architecture presets: arch name -> model-size defaults (d_model, heads, layers, ffn_dim).
const std::map<std::string, Value::Map>& ArchPresets();

// A concrete hyperparameter set completed with the arch preset and every default, so the
// trainer reads each knob from one place. `hparams` must be a map (validated beforehand).
Value WithDefaults(const Value& hparams);

}  // namespace sf::config
