// The sections of an experiment config (experiment_config.h), each read from its YAML node at
// `path` into its struct, with every problem reported to `sink` (yaml_reader.h) naming the path.
// Internal to ParseExperimentConfig.
#pragma once

#include <optional>
#include <string>

#include "common/config/experiment_config.h"
#include "common/config/yaml_reader.h"

namespace sf::config {

bool ReadLength(ErrorSink& sink, const YAML::Node& node, const std::string& path, Length& out);
bool ReadPrecision(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                   Precision& out);
void ReadLossScaling(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                     LossScalingConfig& out);
void ReadOptimizations(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                       OptimizationsConfig& out);
void ReadResources(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                   ResourcesConfig& out);
void ReadSlurm(ErrorSink& sink, const YAML::Node& node, const std::string& path, SlurmConfig& out);
// `reproducibility: {experiment_seed: 0..2^31-1}`.
void ReadReproducibility(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                         std::optional<int64_t>& experiment_seed);
// smaller_is_better given explicitly (nullopt: derived from the metric). `any_metric`: user
// code reports the metrics, so any name is allowed (with an entrypoint).
void ReadSearcher(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                  SearcherConfig& out, std::optional<bool>& smaller_given, bool any_metric);
void ReadCheckpointStorage(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                           CheckpointStorageConfig& out);
// `entrypoint: python3 train.py` (a shell command line) or `entrypoint: [python3, train.py]`
// (a program and its arguments).
void ReadEntrypoint(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                    ExperimentConfig& out);
void ReadContextDirectory(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                          bool has_entrypoint, ExperimentConfig& out);

}  // namespace sf::config
