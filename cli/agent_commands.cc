// `sf agent list|revoke|restore`, `sf slot list`, `sf resource-pool list`: the agents, their
// slots (GPU memory and utilisation from NVML, as the agents report it) and the pools they bring
// slots into, through the master's Api methods (cluster_command.h has what they share).
#include <cstdint>
#include <cstdio>
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

// Bytes as GiB with one decimal: "79.6".
std::string Gibibytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// "free", or "trial 7" for the trial holding the slot.
std::string SlotState(const v1::Slot& s) {
  return s.trial_id() == 0 ? "free" : "trial " + std::to_string(s.trial_id());
}

// One row per GPU slot: agent, slot, GPU name, memory used/total, utilisation, what runs on it.
// Usage the master has no current sample for reads "-".
std::vector<std::vector<std::string>> GpuRows(const v1::GetAgentsResponse& agents) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Agent& a : agents.agents()) {
    for (const v1::Slot& s : a.slots()) {
      if (s.type() != v1::SLOT_TYPE_CUDA) continue;
      const bool sampled = s.has_usage();
      std::string memory = (sampled ? Gibibytes(s.usage().memory_used_bytes()) : "-") + "/" +
                           Gibibytes(s.memory_total_bytes()) + " GiB";
      rows.push_back({a.id(), s.id(), s.device(), memory,
                      sampled ? std::to_string(s.usage().utilization_percent()) + "%" : "-",
                      SlotState(s)});
    }
  }
  return rows;
}

// `agent list` (one row per agent, then one per GPU slot, if any) and `slot list` (one row per
// slot) read the same listing.
int ListAgentsOrSlots(bool slots_view, const Flags& f, Api& api) {
  auto r = api.Call<v1::GetAgentsResponse>("GetAgents", v1::GetAgentsRequest());
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Agent& a : r->message.agents()) {
    if (!slots_view) {
      int busy = 0;
      for (const v1::Slot& s : a.slots()) busy += s.trial_id() != 0;
      rows.push_back({a.id(), a.resource_pool(), BoolText(a.connected()),
                      std::to_string(a.slots_size()), std::to_string(busy),
                      TimeText(a.has_last_heartbeat(), a.last_heartbeat())});
    } else {
      for (const v1::Slot& s : a.slots())
        rows.push_back({a.id(), s.id(), EnumText(s.type()), s.device(), SlotState(s)});
    }
  }
  if (slots_view) {
    PrintTable({"AGENT", "SLOT", "TYPE", "DEVICE", "STATE"}, rows);
  } else {
    PrintTable({"AGENT", "POOL", "CONNECTED", "SLOTS", "BUSY", "LAST HEARTBEAT"}, rows);
    std::vector<std::vector<std::string>> gpus = GpuRows(r->message);
    if (!gpus.empty()) {
      std::cout << "\n";
      PrintTable({"AGENT", "GPU SLOT", "DEVICE", "MEMORY USED/TOTAL", "UTIL", "STATE"}, gpus);
    }
  }
  return kExitOk;
}

int ListResourcePools(const Flags& f, Api& api) {
  auto r =
      api.Call<v1::GetResourcePoolsResponse>("GetResourcePools", v1::GetResourcePoolsRequest());
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::ResourcePool& p : r->message.resource_pools()) {
    // A pool of agents counts agents; one another manager places (Slurm) counts its nodes.
    const bool agents = p.scheduler() == "priority" || p.scheduler() == "fair_share";
    rows.push_back({p.name(), p.scheduler(), agents ? std::to_string(p.agents()) : "-",
                    agents ? "-" : std::to_string(p.nodes()), std::to_string(p.total_slots()),
                    std::to_string(p.used_slots()), std::to_string(p.running_trials()),
                    std::to_string(p.queued_trials()), std::to_string(p.queued_slots())});
  }
  PrintTable({"POOL", "SCHEDULER", "AGENTS", "NODES", "SLOTS", "USED", "RUNNING", "QUEUED", "QUEUED SLOTS"}, rows);
  return kExitOk;
}

// `sf agent revoke|restore AGENT_ID` (admins).
int RevokeOrRestoreAgent(bool revoke, const Flags& f, Api& api) {
  v1::AgentRevocationRequest request;
  request.set_agent_id(f.id);
  auto r = api.Call<v1::AgentRevocationResponse>(revoke ? "RevokeAgent" : "RestoreAgent", request);
  if (!r) return api.exit_code;
  std::cout << (f.json ? r->json : "agent " + f.id + (revoke ? " revoked" : " restored")) << "\n";
  return kExitOk;
}

}  // namespace

void AddAgentCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* agent = sf.add_subcommand("agent", "the agents connected to the master");
  agent->require_subcommand(1);
  AddCommand(agent, "list",
             "list agents, their slots and how many are busy, then each GPU slot: device, "
             "memory used/total, utilisation (NVML, as the agent's last heartbeat reported it)",
             action, [](const Flags& f, Api& api) { return ListAgentsOrSlots(false, f, api); });
  for (const char* what : {"revoke", "restore"}) {
    AddCommand(agent, what,
               std::string(what) == "revoke" ? "shut one agent out (admins): refused even with the "
                                               "join token, disconnected if connected"
                                             : "let a revoked agent join again (admins)",
               action,
               [revoke = std::string(what) == "revoke"](const Flags& f, Api& api) {
                 return RevokeOrRestoreAgent(revoke, f, api);
               })
        .Id("AGENT_ID", "the agent's id (sf agent list)");
  }

  CLI::App* slot = sf.add_subcommand("slot", "the agents' slots");
  slot->require_subcommand(1);
  AddCommand(slot, "list", "list every agent's slots and the trial on each", action,
             [](const Flags& f, Api& api) { return ListAgentsOrSlots(true, f, api); });

  CLI::App* pool = sf.add_subcommand("resource-pool", "the resource pools agents bring slots into");
  pool->require_subcommand(1);
  AddCommand(pool, "list", "list pools: scheduler, agents, slots, slots in use, running and queued trials",
             action, ListResourcePools);
}

}  // namespace sf::cli
