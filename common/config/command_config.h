// A command's config file (`sf cmd run --config FILE`; docs/tasks.md): what Determined's command
// config holds that Steadfast's commands have, so a command can be written down and run again.
//
//   entrypoint: [python3, eval.py, --split, test]   # or one string, run by /bin/sh -c
//   resources:
//     slots: 2              # 1..4096; one process each
//     resource_pool: gpu    # default: the default pool
//     priority: 10          # 1..99, lower first; default 42
//   workspace: research     # by name; default Uncategorized
//   context: src            # a directory, relative to the file's; default none
//
// Contract:
// - ParseCommandConfig reads one YAML document; every problem is a ConfigError with the field's
//   path, line and column (unknown keys with a "did you mean"), all of them reported at once.
// - The command line wins over the file: `sf cmd run` applies a flag or a program after `--`
//   over what the file says (cli/task_commands.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/experiment_config.h"

namespace sf::config {

struct CommandConfig {
  std::vector<std::string> entrypoint;  // empty: not given
  std::optional<int64_t> slots;
  std::optional<std::string> resource_pool;
  std::optional<int64_t> priority;
  std::optional<std::string> workspace;
  std::optional<std::string> context;  // as written (relative paths: to the file's directory)
};

struct CommandConfigResult {
  CommandConfig config;
  std::vector<ConfigError> errors;  // empty: config is valid
};

CommandConfigResult ParseCommandConfig(std::string_view yaml_text);

}  // namespace sf::config
