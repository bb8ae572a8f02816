// The `sf` command line: subcommands registered by name.
//
// Exit codes, for scripts and CI: 0 success, 1 the operation failed (an experiment ended in
// ERROR, the master refused a request it could have accepted), 2 bad usage or bad input
// (unknown flag, invalid experiment YAML). Results go to stdout; diagnostics to stderr only.
#pragma once

#include <string>
#include <vector>

namespace sf::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// `sf config validate FILE...`
int RunConfigCommand(const std::vector<std::string>& args);
// `sf experiment|trial|agent|slot|checkpoint|master ...` against the master's REST API.
int RunClusterCommand(const std::string& noun, const std::vector<std::string>& args);
// `sf deploy local up|status|down`
int RunDeployCommand(const std::vector<std::string>& args);

}  // namespace sf::cli
