// sf: the Steadfast command line.
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/command_line.h"

namespace {

constexpr char kFooter[] =
    "Cluster commands take --master URL (default: $SF_MASTER, then http://127.0.0.1:8080)\n"
    "and --json. Every command answers --help.\n"
    "\n"
    "Exit codes: 0 ok, 1 failed, 2 bad usage or input.";

// The deepest command the parser reached (`sf experiment describe`).
const CLI::App& DeepestCommand(const CLI::App& sf) {
  const CLI::App* app = &sf;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return *app;
}

// CLI11's message, except where a subcommand belongs: there CLI11 says that one is required
// even when the user typed a wrong one, so name what was typed instead.
std::string ErrorMessage(const CLI::App& command, const CLI::ParseError& e) {
  const std::vector<std::string> extra = command.remaining();
  if (dynamic_cast<const CLI::RequiredError*>(&e) && command.get_require_subcommand_min() > 0 &&
      !extra.empty()) {
    if (extra.front().rfind('-', 0) == 0) return "unknown flag " + extra.front();
    return "unknown command \"" + extra.front() + "\"";
  }
  return e.what();
}

}  // namespace

int main(int argc, char** argv) {
  using sf::cli::CommandAction;
  using sf::cmdline::kExitOk;
  using sf::cmdline::kExitUsage;
  CLI::App sf(
      "Steadfast's command line: experiments, trials and agents on a cluster, and a local "
      "cluster to run them on.",
      "sf");
  sf::cmdline::UseDefaults(sf);
  sf.require_subcommand(1);
  sf.set_version_flag("--version", std::string("sf ") + SF_VERSION, "print sf's version and exit");

  CommandAction action;
  sf::cli::AddConfigCommands(sf, action);
  sf::cli::AddClusterCommands(sf, action);
  sf::cli::AddDeployCommands(sf, action);
  sf::cli::OnSelected(sf.add_subcommand("help", "print this help and exit"), action, [&sf] {
    std::cout << sf.get_formatter()->make_help(&sf, sf.get_name(), CLI::AppFormatMode::Normal);
    return kExitOk;
  });
  sf::cli::OnSelected(sf.add_subcommand("version", "print sf's version and exit"), action, [] {
    std::cout << "sf " << SF_VERSION << "\n";
    return kExitOk;
  });
  sf.footer(kFooter);  // after the subcommands: they would copy it

  if (argc <= 1) {
    std::cerr << sf.help();
    return kExitUsage;
  }
  // As sf::cmdline::Parse, but a mistyped command is named rather than "a subcommand is
  // required".
  try {
    sf.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << sf.help();  // the help of the deepest command parsed
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    const CLI::App& command = DeepestCommand(sf);
    return sf::cmdline::UsageError(command, ErrorMessage(command, e), std::cerr);
  }
  return action();
}
