// `sf audit|master ...`, and every cluster command registered in one place (AddClusterCommands):
// experiments (experiment_commands.cc), trials (trial_commands.cc), agents, slots and resource
// pools (agent_commands.cc), checkpoints (checkpoint_commands.cc); what they share:
// cluster_command.h.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/api_call.h"
#include "cli/cli_defaults.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/http_client.h"
#include "cli/output.h"
#include "common/command_line.h"
#include "common/config/experiment_config.h"
#include "common/value.h"

namespace sf::cli {
namespace {

int ListAudit(const Flags& f, Api& api) {
  std::string path = "/api/v1/audit?limit=" + std::to_string(f.limit);
  if (!f.actor.empty()) path += "&actor=" + QueryValue(f.actor);
  auto r = api.Call("GET", path);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  const Value* entries = r->Find("entries");
  for (const Value& e : entries && entries->is_list() ? entries->as_list() : Value::List{}) {
    rows.push_back({Str(e, "time"), Str(e, "actor"), Str(e, "peer"), Str(e, "method") + " " + Str(e, "path"),
                    Str(e, "status")});
  }
  PrintTable({"TIME", "WHO", "FROM", "WHAT", "STATUS"}, rows);
  return kExitOk;
}

int MasterInfo(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/master");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  for (const auto& [k, v] : r->as_map()) std::cout << k << ": " << Str(*r, k) << "\n";
  return kExitOk;
}

}  // namespace

void AddClusterCommands(CLI::App& sf, CommandAction& action) {
  AddExperimentCommands(sf, action);
  AddTrialCommands(sf, action);
  AddAgentCommands(sf, action);
  AddCheckpointCommands(sf, action);

  CLI::App* audit = sf.add_subcommand("audit", "the master's record of every change made through its API");
  audit->require_subcommand(1);
  ClusterCommand audit_list =
      AddCommand(audit, "list", "list recorded changes, newest first: when, who, from where, what, status", action,
                 ListAudit);
  audit_list.app->add_option("--limit", audit_list.flags->limit, "at most this many (1-1000, default 100)")
      ->check(CLI::Range(1, 1000));
  audit_list.app->add_option("--actor", audit_list.flags->actor, "only changes by this user");

  CLI::App* master =
      sf.add_subcommand("master", "the master itself (`sf master` alone is `sf master info`)");
  master->require_subcommand(0, 1);
  ClusterCommand info = AddCommand(master, "info", "show the master's version, id and slot counts",
                                   action, MasterInfo);
  // Subcommands' callbacks run before their parent's: `info` has had its say by now.
  master->callback([master, flags = info.flags, &action] {
    if (master->get_subcommands().empty()) {
      action = [flags] { return RunAgainstMaster(*flags, MasterInfo); };
    }
  });
}

}  // namespace sf::cli
