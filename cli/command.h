// The `sf` command line: one CLI11 tree, `sf` at its root, to which each command file adds its
// subcommands.
//
// Exit codes, for scripts and CI: 0 success, 1 the operation failed (an experiment ended in
// ERROR, the master refused a request it could have accepted), 2 bad usage or bad input
// (unknown flag, missing argument, invalid experiment YAML). Results go to stdout; diagnostics
// to stderr only. `--help` on any command prints its usage to stdout and exits 0.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace sf::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// What the parsed command line does; returns the process's exit code.
using CommandAction = std::function<int()>;

// The contract of every Add*Commands below: it adds its commands under `sf`, each command and
// flag with a one-line description. Call them after sf::cmdline::UseDefaults(sf), so that every
// subcommand copies sf's -h/--help. Flag values are held by objects the registered callbacks own,
// so they outlive the call; `action` must outlive parsing. When parsing selects one of the
// commands, that command's callback stores in `action` what carries it out: nothing runs during
// parsing, and main calls `action` only once the whole command line parsed cleanly.

// `sf config validate FILE...`
void AddConfigCommands(CLI::App& sf, CommandAction& action);
// `sf experiment|trial|agent|slot|checkpoint|master ...` against the master's REST API.
void AddClusterCommands(CLI::App& sf, CommandAction& action);
// `sf login|logout|whoami`, `sf user|token|workspace ...` (cli/account_commands.cc)
void AddAccountCommands(CLI::App& sf, CommandAction& action);
// `sf deploy local up|status|down`
void AddDeployCommands(CLI::App& sf, CommandAction& action);

// Makes `command`, once parsed, set `action` to `run`.
inline void OnSelected(CLI::App* command, CommandAction& action, CommandAction run) {
  command->callback([&action, run = std::move(run)] { action = run; });
}

}  // namespace sf::cli
