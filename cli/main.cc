// sf: the Steadfast command line.
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"

namespace {

constexpr char kUsage[] =
    "usage: sf [--version] COMMAND [ARGS...]\n"
    "\n"
    "commands:\n"
    "  config validate FILE...                 check experiment YAML files\n"
    "  experiment create FILE [--follow] [--paused] [--config KEY=VALUE]...\n"
    "  experiment list | describe ID | kill ID | pause ID | activate ID | archive ID\n"
    "  trial list EXP_ID | describe ID | logs ID [-f] | metrics ID [--kind validation]\n"
    "  agent list | slot list | checkpoint list EXP_ID | master info\n"
    "  deploy local up [--agents N] [--cpu-slots K] [--dir DIR] | status | down [--delete-data]\n"
    "\n"
    "Cluster commands take --master URL (default: $SF_MASTER, then http://127.0.0.1:8080)\n"
    "and --json on every listing.\n"
    "\n"
    "Exit codes: 0 ok, 1 failed, 2 bad usage or input.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return sf::cli::kExitUsage;
  }
  const std::string command = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return sf::cli::kExitOk;
  }
  if (command == "--version" || command == "version") {
    std::cout << "sf " << SF_VERSION << "\n";
    return sf::cli::kExitOk;
  }
  if (command == "config") return sf::cli::RunConfigCommand(rest);
  if (command == "deploy") return sf::cli::RunDeployCommand(rest);
  for (const char* noun : {"experiment", "e", "trial", "t", "agent", "slot", "checkpoint", "master"}) {
    if (command == noun) return sf::cli::RunClusterCommand(command, rest);
  }
  std::cerr << "sf: unknown command \"" << command << "\"\n" << kUsage;
  return sf::cli::kExitUsage;
}
