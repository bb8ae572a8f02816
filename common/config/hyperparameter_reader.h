// Reading and checking the `hyperparameters` section of an experiment config.
//
// Internal to common/config: ParseExperimentConfig reads the section with ReadHyperparameters
// and runs the cross-field checks once the whole document is read (the searcher's below; the
// native models' in model_hyperparameters.h). The public
// hyperparameter functions (ConstantHyperparameters, GridPointCount,
// ValidateTrialHyperparameters) stay declared in experiment_config.h and are defined in
// hyperparameter_reader.cc.
//
// Each hyperparameter is a constant, a search space (a mapping whose `type` is const, int,
// double, log or categorical) or a nested group (any other mapping). The two modes differ in
// what a name and a constant may be:
//
//  - kNative (no `entrypoint`): the native trainer's hyperparameters. Every name and group
//    member must be in hyperparameter_schema.h; constants, categorical values and the end
//    points of ranges must be valid values of their hyperparameter; int/double/log spaces need
//    a numeric hyperparameter; a group's `type` picks which members apply.
//  - kFreeForm (`entrypoint` given): the user's code owns the hyperparameters, so any name is
//    accepted. A constant is any YAML value (numbers must be finite: trials get their
//    hyperparameters as JSON); a mapping without a space `type` is a nested group of free-form
//    hyperparameters, its `type` member (if any) an ordinary constant. Spaces are read and
//    checked exactly as in native mode, less the checks against the schema; int bounds must lie
//    within ±2^53 (they are held as doubles) and a log space's values must be finite.
//
// Both modes give the same Hyperparameter tree, so the searchers sample, enumerate and count
// free-form spaces exactly as native ones. Problems are added to the ErrorSink with the dotted
// path ("hyperparameters.optimizer.lr.maxval"), the value as written and the reason, located
// at the offending node; a hyperparameter with a problem is left out of the result.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>

#include "common/config/experiment_config.h"
#include "common/config/yaml_reader.h"

namespace sf::config {

enum class HyperparameterMode { kNative, kFreeForm };

// Where each hyperparameter was written, by path ("hyperparameters.lr_schedule.warmup"), for
// locating the cross-field errors found after reading.
using HyperparameterLocations = std::map<std::string, YAML::Node>;

// Reads the section `node` (at path "hyperparameters") into `out`; records every
// hyperparameter's node in `locations`.
void ReadHyperparameters(ErrorSink& sink, const YAML::Node& node, HyperparameterMode mode,
                         Hyperparameters& out, HyperparameterLocations& locations);

// The spaces against the searcher (both modes): the single searcher takes no space; grid search
// needs every space enumerable (count on double and log spaces, or an int range of at most
// 1000 values) and at most 100,000 points in all.
void CheckSearchSpaces(ErrorSink& sink, const ExperimentConfig& config,
                       const HyperparameterLocations& locations);

}  // namespace sf::config
