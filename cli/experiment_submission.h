// What `sf experiment create` and `fork` submit: the config with --config overrides applied and
// validated here by the master's own parser (errors name the file or experiment and the field),
// its relative paths made absolute against the file's directory so the cluster reads the files
// the user meant, and a user trial's context directory packed (docs/core-api.md).
#pragma once

#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/context/context_archive.h"
#include "common/status.h"

namespace sf::cli {

// Applies --config overrides to `text` and validates the result with the master's parser;
// errors name `source` (a file, or "experiment 7") and the field.
Result<config::ParseResult> OverrideAndValidate(std::string& text,
                                                const std::vector<std::string>& overrides,
                                                const std::string& source);

// The submitted text (overrides applied, relative paths made absolute) and the config it parses
// to, with its paths resolved.
struct PreparedConfig {
  std::string text;
  config::ExperimentConfig resolved;
};

// Reads `file`, applies `overrides`, validates it and makes its paths absolute.
Result<PreparedConfig> PrepareConfig(const std::string& file,
                                     const std::vector<std::string>& overrides);

// Packs a user trial's context directory (docs/core-api.md); checks the script the entrypoint
// names is in it.
Result<context::PackedContext> PackExperimentContext(const config::ExperimentConfig& c);

}  // namespace sf::cli
