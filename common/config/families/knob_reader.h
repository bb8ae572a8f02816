// Reads a completed hyperparameter map (WithDefaults: preset, then schema defaults) by the
// schema's specs, with errors that name the knob: what DecodeTrialHyperparameters
// (trial_hyperparameters.h) and each family's decoder (model_families.h) read through.
//
// A member a group lacks (it does not apply to the group's type) is its spec's default; a
// top-level knob the map lacks is an error: after WithDefaults every knob of the family with a
// default or a preset value is there. The reader refers to the map it was given; keep that map
// alive while reading. Pure, thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/hyperparameter_schema.h"
#include "common/status.h"
#include "common/value.h"

namespace sf::config {

class KnobReader {
 public:
  // `path` is how errors name the map ("hyperparameters", "hyperparameters.optimizer"); `group`
  // the group's spec when the map is a group's.
  KnobReader(const Value::Map& map, std::string path, const HpSpec* group = nullptr);

  Result<int64_t> Int(const std::string& name) const;
  Result<double> Number(const std::string& name) const;
  Result<bool> Bool(const std::string& name) const;
  // One of the spec's options.
  Result<std::string> Choice(const std::string& name) const;
  // Whether the map holds a non-null value for `name` (an optional knob).
  bool Has(const std::string& name) const;
  Result<KnobReader> Group(const std::string& name) const;
  std::string Path(const std::string& name) const { return path_ + "." + name; }

 private:
  const HpSpec* Spec(const std::string& name) const;
  Result<const Value*> Find(const std::string& name) const;

  const Value::Map& map_;
  std::string path_;
  const HpSpec* group_;
};

}  // namespace sf::config
