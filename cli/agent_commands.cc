// `sf agent list|revoke|restore`, `sf slot list`, `sf resource-pool list`: the agents, their
// slots (GPU memory and utilisation from NVML, as the agents report it) and the pools they bring
// slots into, over the master's REST API (cluster_command.h has what they share).
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

// Bytes (a protobuf int64, a JSON string) as GiB with one decimal: "79.6".
std::string Gibibytes(const std::string& bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f",
                std::strtod(bytes.c_str(), nullptr) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// One row per GPU slot: agent, slot, GPU name, memory used/total, utilisation, what runs on it.
// Usage the master has no current sample for reads "-".
std::vector<std::vector<std::string>> GpuRows(const Value& agents) {
  std::vector<std::vector<std::string>> rows;
  for (const Value& a : agents.as_list()) {
    const Value* slots = a.Find("slots");
    if (!slots || !slots->is_list()) continue;
    for (const Value& s : slots->as_list()) {
      if (Str(s, "type") != "SLOT_TYPE_CUDA") continue;
      const Value* usage = s.Find("usage");
      const bool sampled = usage && usage->is_map();
      const std::string total = Str(s, "memoryTotalBytes");
      const std::string used = sampled ? Str(*usage, "memoryUsedBytes") : "";
      std::string memory = (sampled ? Gibibytes(used.empty() ? "0" : used) : "-") + "/" +
                           (total.empty() ? "-" : Gibibytes(total)) + " GiB";
      std::string util = Str(sampled ? *usage : s, "utilizationPercent");
      std::string trial = Str(s, "trialId");
      rows.push_back({Str(a, "id"), Str(s, "id"), Str(s, "device"), memory,
                      sampled ? (util.empty() ? "0" : util) + "%" : "-",
                      trial == "0" || trial.empty() ? "free" : "trial " + trial});
    }
  }
  return rows;
}

// `agent list` (one row per agent, then one per GPU slot, if any) and `slot list` (one row per
// slot) read the same listing.
int ListAgentsOrSlots(bool slots_view, const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/agents");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& a : r->Find("agents")->as_list()) {
    const auto& slots = a.Find("slots")->as_list();
    if (!slots_view) {
      int busy = 0;
      for (const Value& s : slots) busy += Str(s, "trialId") != "0" && !Str(s, "trialId").empty();
      rows.push_back({Str(a, "id"), Str(a, "resourcePool"), Str(a, "connected"),
                      std::to_string(slots.size()), std::to_string(busy), Str(a, "lastHeartbeat")});
    } else {
      for (const Value& s : slots) {
        std::string trial = Str(s, "trialId");
        rows.push_back({Str(a, "id"), Str(s, "id"), StateName(s.Find("type"), "SLOT_TYPE_"),
                        Str(s, "device"),
                        trial == "0" || trial.empty() ? "free" : "trial " + trial});
      }
    }
  }
  if (slots_view) {
    PrintTable({"AGENT", "SLOT", "TYPE", "DEVICE", "STATE"}, rows);
  } else {
    PrintTable({"AGENT", "POOL", "CONNECTED", "SLOTS", "BUSY", "LAST HEARTBEAT"}, rows);
    std::vector<std::vector<std::string>> gpus = GpuRows(*r->Find("agents"));
    if (!gpus.empty()) {
      std::cout << "\n";
      PrintTable({"AGENT", "GPU SLOT", "DEVICE", "MEMORY USED/TOTAL", "UTIL", "STATE"}, gpus);
    }
  }
  return kExitOk;
}

int ListResourcePools(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/resource-pools");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  const Value* pools = r->Find("resourcePools");
  for (const Value& p : pools && pools->is_list() ? pools->as_list() : Value::List{}) {
    rows.push_back({Str(p, "name"), Str(p, "scheduler"), Str(p, "agents"), Str(p, "totalSlots"),
                    Str(p, "usedSlots"), Str(p, "runningTrials"), Str(p, "queuedTrials"), Str(p, "queuedSlots")});
  }
  PrintTable({"POOL", "SCHEDULER", "AGENTS", "SLOTS", "USED", "RUNNING", "QUEUED", "QUEUED SLOTS"}, rows);
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
               std::string(what) == "revoke"
                   ? "shut one agent out (admins): refused even with the join token, disconnected if connected"
                   : "let a revoked agent join again (admins)",
               action,
               [w = std::string(what)](const Flags& f, Api& api) {
                 auto r = api.Call("POST", "/api/v1/agents/" + QueryValue(f.id) + "/" + w);
                 if (!r) return api.exit_code;
                 std::cout << (f.json ? r->ToJson() : "agent " + f.id + (w == "revoke" ? " revoked" : " restored"))
                           << "\n";
                 return kExitOk;
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
