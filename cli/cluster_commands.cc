// `sf audit|master ...`, and every cluster command registered in one place (AddClusterCommands):
// experiments (experiment_commands.cc), trials (trial_commands.cc), agents, slots and resource
// pools (agent_commands.cc), checkpoints (checkpoint_commands.cc); what they share:
// cluster_command.h.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

int ListAudit(const Flags& f, Api& api) {
  v1::GetAuditLogRequest request;
  request.set_limit(f.limit);
  request.set_actor(f.actor);
  auto r = api.Call<v1::GetAuditLogResponse>("GetAuditLog", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::AuditLogEntry& e : r->message.entries()) {
    rows.push_back({TimeText(e.has_time(), e.time()), e.actor(), e.peer(),
                    e.method() + " " + e.path(), std::to_string(e.status())});
  }
  PrintTable({"TIME", "WHO", "FROM", "WHAT", "STATUS"}, rows);
  return kExitOk;
}

int MasterInfo(const Flags& f, Api& api) {
  auto r = api.Call<v1::GetMasterResponse>("GetMaster", v1::GetMasterRequest());
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  // Every field, "jsonName: value", sorted by name as the JSON object's keys were.
  const google::protobuf::Descriptor* d = r->message.GetDescriptor();
  std::map<std::string, const google::protobuf::FieldDescriptor*> fields;
  for (int i = 0; i < d->field_count(); ++i) fields[d->field(i)->json_name()] = d->field(i);
  for (const auto& [name, field] : fields)
    std::cout << name << ": " << FieldText(r->message, field) << "\n";
  return kExitOk;
}

}  // namespace

void AddClusterCommands(CLI::App& sf, CommandAction& action) {
  AddExperimentCommands(sf, action);
  AddTrialCommands(sf, action);
  AddAgentCommands(sf, action);
  AddCheckpointCommands(sf, action);
  AddWebhookCommands(sf, action);
  AddModelCommands(sf, action);
  AddServeCommands(sf, action);
  AddTaskCommands(sf, action);
  AddNotebookCommands(sf, action);

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
