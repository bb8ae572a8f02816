// `sf checkpoint list|delete`: an experiment's checkpoints, and deleting them now, over the
// master's REST API (cluster_command.h has what they share).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "common/command_line.h"
#include "common/value.h"

namespace sf::cli {
namespace {

int ListCheckpoints(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/experiments/" + f.id + "/checkpoints");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& c : r->Find("checkpoints")->as_list()) {
    rows.push_back({Str(c, "uuid"), Str(c, "trialId"), Str(c, "batches"), Str(c, "size"),
                    Str(c, "validationMetric"), Str(c, "state"), Str(c, "path")});
  }
  PrintTable({"UUID", "TRIAL", "BATCHES", "SIZE", "METRIC", "STATE", "PATH"}, rows);
  return kExitOk;
}

// `sf checkpoint delete UUID...`: POST /api/v1/checkpoints/delete, one line per checkpoint; exit 2
// when a uuid does not exist, else 1 when one was refused, else 0.
int DeleteCheckpoints(const Flags& f, Api& api) {
  Value::List uuids;
  for (const std::string& uuid : f.ids) uuids.push_back(Value(uuid));
  auto r = api.Call("POST", "/api/v1/checkpoints/delete", Value(Value::Map{{"uuids", Value(std::move(uuids))}}).ToJson());
  if (!r) return api.exit_code;
  return PrintResults(
      *r, f, [](const Value& result) { return "checkpoint " + Str(result, "uuid") + ": deleted"; },
      [](const Value& result) { return Str(result, "error"); });
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
