// Running a CLI11 command line the Steadfast way, so every program answers alike:
//
//   --help / -h (on the program or any subcommand)  that command's usage on stdout, exit 0
//   --version (where the program has one)            "<program> <version>" on stdout, exit 0
//   bad usage (unknown flag, missing value or positional, a value of the wrong type)
//       one line naming the problem, prefixed with the command ("sf-trainer bench: ..."),
//       then "run with --help for usage", on stderr; exit 2
//
// Programs build their CLI::App tree (subcommands, flags, descriptions) and hand it here to
// parse; they check their own settings afterwards and report those errors the same way
// (UsageError). Not thread-safe (a CLI::App is not); call once from main.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace sf::cmdline {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;

// Gives `app` Steadfast's defaults: -h/--help on it and on every subcommand added later, and
// defaults shown in the help. Call right after constructing the app:
//   CLI::App app("what the program does", "sf-trainer");  cmdline::UseDefaults(app);
void UseDefaults(CLI::App& app);

// Parses `argc/argv` (argv[0] is the program) into `app`. Returns nullopt when the program
// should go on, or the exit status to return now after printing help, version or a usage
// error as above. `out`/`err` default to stdout/stderr.
std::optional<int> Parse(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                         std::ostream& err);
std::optional<int> Parse(CLI::App& app, int argc, const char* const* argv);
// The same for arguments without the program name (e.g. from a test).
std::optional<int> Parse(CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err);

// Prints "<command path>: <message>" and the --help hint to `err`; returns kExitUsage.
// `command` is the app (or subcommand) the message is about.
int UsageError(const CLI::App& command, const std::string& message, std::ostream& err);

// A check for whole numbers >= `min`, with a message a user reads ("must be >= 1, not 0"); the
// help shows it as INT>=min. (CLI11's PositiveNumber prints a 300-digit double bound.)
CLI::Validator AtLeast(int64_t min);

// "sf-trainer bench" for the bench subcommand of sf-trainer.
std::string CommandPath(const CLI::App& command);

}  // namespace sf::cmdline
