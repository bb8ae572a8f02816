#include "cli/cluster_command.h"

#include <iostream>
#include <string>

namespace sf::cli {

std::optional<int64_t> IntegerId(const std::string& id) {
  // As the master reads an integer path parameter (master/api/routes/rest_transcoder.cc), with
  // its message for one that is not.
  try {
    size_t used = 0;
    const int64_t v = std::stoll(id, &used);
    if (used == id.size()) return v;
  } catch (...) {
  }
  std::cerr << "sf: id: \"" << id << "\" is not an integer\n";
  return std::nullopt;
}

int RunAgainstMaster(const Flags& flags, const ClusterRun& run) {
  Flags f = flags;
  ApplyGlobalMasterOptions(&f.master, &f.ca_file, &f.json);  // `sf -m URL trial ...`
  Result<Api> api = ConnectToMaster(f.master, f.ca_file);
  if (!api.ok()) {
    std::cerr << "sf: " << api.status().message() << "\n";
    return kExitUsage;
  }
  return run(f, *api);
}

ClusterCommand AddCommand(CLI::App* parent, const std::string& name, const std::string& description,
                          CommandAction& action, ClusterRun run) {
  ClusterCommand command{parent->add_subcommand(name, description), std::make_shared<Flags>()};
  AddMasterOptions(command.app, &command.flags->master, &command.flags->ca_file, &command.flags->json);
  OnSelected(command.app, action, [flags = command.flags, run = std::move(run)] {
    return RunAgainstMaster(*flags, run);
  });
  return command;
}

}  // namespace sf::cli
