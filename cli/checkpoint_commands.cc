// `sf checkpoint list|delete`: an experiment's checkpoints, and deleting them now, through the
// master's Api methods (cluster_command.h has what they share).
#include <iostream>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/command_line.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

int ListCheckpoints(const Flags& f, Api& api) {
  v1::GetExperimentCheckpointsRequest request;
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  request.set_id(*id);
  auto r = api.Call<v1::GetExperimentCheckpointsResponse>("GetExperimentCheckpoints", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Checkpoint& c : r->message.checkpoints()) {
    rows.push_back({c.uuid(), std::to_string(c.trial_id()), std::to_string(c.batches()),
                    std::to_string(c.size()),
                    NumberText(c.has_validation_metric(), c.validation_metric()), c.state(),
                    c.path()});
  }
  PrintTable({"UUID", "TRIAL", "BATCHES", "SIZE", "METRIC", "STATE", "PATH"}, rows);
  return kExitOk;
}

// `sf checkpoint delete UUID...`: DeleteCheckpoints, one line per checkpoint; exit 2 when a uuid
// does not exist, else 1 when one was refused, else 0.
int DeleteCheckpoints(const Flags& f, Api& api) {
  v1::DeleteCheckpointsRequest request;
  for (const std::string& uuid : f.ids) request.add_uuids(uuid);
  auto r = api.Call<v1::DeleteCheckpointsResponse>("DeleteCheckpoints", request);
  if (!r) return api.exit_code;
  return PrintResults(
      r->message.results(), r->json, f,
      [](const v1::DeleteCheckpointResult& result) {
        return "checkpoint " + result.uuid() + ": deleted";
      },
      [](const v1::DeleteCheckpointResult& result) { return result.error(); });
}

}  // namespace

void AddCheckpointCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* checkpoint = sf.add_subcommand("checkpoint", "an experiment's checkpoints");
  checkpoint->require_subcommand(1);
  AddCommand(checkpoint, "list", "list an experiment's checkpoints", action, ListCheckpoints)
      .Id("EXPERIMENT_ID", "the experiment's id");
  ClusterCommand delete_checkpoints = AddCommand(
      checkpoint, "delete", "delete checkpoints now: their files, and their state becomes DELETED", action,
      DeleteCheckpoints);
  delete_checkpoints.app->add_option("UUID", delete_checkpoints.flags->ids, "the checkpoints' uuids")
      ->type_name("")
      ->required();
}

}  // namespace sf::cli
