// sf: the Steadfast command line.
#include <iostream>
#include <optional>
#include <string>

#include "cli/api_call.h"
#include "cli/command.h"
#include "common/command_line.h"

namespace {

constexpr char kFooter[] =
    "Cluster commands take --master URL (default: $SF_MASTER, then ~/.config/steadfast/cli.json,\n"
    "then http://127.0.0.1:8080), --ca-file PATH for an https:// master (default: $SF_CA_FILE)\n"
    "and --json, before or after the command. Every command answers --help.\n"
    "\n"
    "Exit codes: 0 ok, 1 failed, 2 bad usage or input.";

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

  sf::cli::AddGlobalMasterOptions(sf);  // `sf -m URL experiment list`, as `det -m URL ...`

  CommandAction action;
  sf::cli::AddConfigCommands(sf, action);
  sf::cli::AddClusterCommands(sf, action);
  sf::cli::AddAccountCommands(sf, action);
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
  if (std::optional<int> exit_code = sf::cmdline::Parse(sf, argc, argv)) return *exit_code;
  return action();
}
