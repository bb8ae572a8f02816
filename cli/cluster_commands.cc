// `sf trial|agent|slot|resource-pool|audit|checkpoint|master ...`: the cluster over its REST
// API (experiments: cli/experiment_commands.cc; what both share: cli/cluster_command.h).
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

int ListTrials(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/experiments/" + f.id + "/trials");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& t : r->Find("trials")->as_list()) {
    rows.push_back({Str(t, "id"), StateName(t.Find("state"), "TRIAL_STATE_"),
                    Str(t, "totalBatches"), Str(t, "restarts"), Str(t, "bestValidationMetric"),
                    t.Find("hparams") ? t.Find("hparams")->ToJson() : ""});
  }
  PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "BEST", "HYPERPARAMETERS"}, rows);
  return kExitOk;
}

int DescribeTrial(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/trials/" + f.id);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  const Value& t = *r->Find("trial");
  for (const char* k : {"id", "experimentId", "state", "pendingReason", "restarts", "totalBatches", "targetBatches",
                        "latestValidationMetric", "bestValidationMetric", "latestCheckpointUuid",
                        "startTime", "endTime", "error"}) {
    std::cout << k << ": " << Str(t, k) << "\n";
  }
  std::cout << "hparams: " << (t.Find("hparams") ? t.Find("hparams")->ToJson() : "{}") << "\n";
  return kExitOk;
}

int TrialLogs(const Flags& f, Api& api) {
  if (f.follow) {
    // The same answer for an unknown trial as without -f (exit 2, the master's message).
    if (!api.Call("GET", "/api/v1/trials/" + f.id)) return api.exit_code;
    bool ended = false, malformed = false;
    Status st = api.client.Stream("/api/v1/trials/" + f.id + "/logs?follow=true",
                                  [&](const std::string& event, const std::string& data) {
                                    if (event == "end") {
                                      ended = true;
                                      return false;
                                    }
                                    auto v = Value::FromJson(data);
                                    if (!v.ok()) {
                                      std::cerr << "sf: the master sent a log event that is not JSON: "
                                                << v.status().message() << "\n";
                                      malformed = true;
                                      return false;
                                    }
                                    std::cout << Str(*v, "message") << "\n" << std::flush;
                                    return true;
                                  });
    if (!st.ok()) {
      std::cerr << "sf: " << st.message() << "\n";
      return kExitFailed;
    }
    if (malformed) return kExitFailed;
    if (!ended) {
      std::cerr << "sf: the master closed the log stream of trial " << f.id << " before the trial ended\n";
      return kExitFailed;
    }
    return kExitOk;
  }
  int64_t after = 0;
  while (true) {
    auto r = api.Call(
        "GET", "/api/v1/trials/" + f.id + "/logs?limit=10000&afterId=" + std::to_string(after));
    if (!r) return api.exit_code;
    const auto& logs = r->Find("logs")->as_list();
    for (const Value& l : logs) {
      std::cout << (f.json ? l.ToJson() : Str(l, "message")) << "\n";
      after = std::stoll(Str(l, "id"));
    }
    if (logs.size() < 10000) return kExitOk;
  }
}

int TrialMetrics(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/trials/" + f.id + "/metrics?kind=" + f.kind);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::string> keys;
  for (const Value& m : r->Find("metrics")->as_list()) {
    if (const Value* vals = m.Find("values"); vals && vals->is_map()) {
      for (const auto& [k, v] : vals->as_map()) {
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      }
    }
  }
  std::vector<std::string> header = {"BATCHES"};
  for (const auto& k : keys) header.push_back(k);
  std::vector<std::vector<std::string>> rows;
  for (const Value& m : r->Find("metrics")->as_list()) {
    std::vector<std::string> row = {Str(m, "batches")};
    for (const auto& k : keys) row.push_back(m.Find("values") ? Str(*m.Find("values"), k) : "");
    rows.push_back(row);
  }
  PrintTable(header, rows);
  return kExitOk;
}

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

void AddTrialCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* trial = sf.add_subcommand("trial", "inspect trials: state, logs, metrics");
  trial->alias("t");
  trial->require_subcommand(1);

  AddCommand(trial, "list", "list an experiment's trials", action, ListTrials)
      .Id("EXPERIMENT_ID", "the experiment's id");
  AddCommand(trial, "describe", "show one trial", action, DescribeTrial)
      .Id("TRIAL_ID", "the trial's id");
  ClusterCommand logs = AddCommand(trial, "logs", "print a trial's logs", action, TrialLogs);
  logs.Id("TRIAL_ID", "the trial's id");
  logs.app->add_flag("-f,--follow", logs.flags->follow,
                     "keep printing new lines until the trial ends");
  ClusterCommand metrics = AddCommand(
      trial, "metrics", "print a trial's metrics, one row per report", action, TrialMetrics);
  metrics.Id("TRIAL_ID", "the trial's id");
  metrics.app->add_option("--kind", metrics.flags->kind, "which metrics: training or validation")
      ->type_name("KIND")
      ->check(CLI::IsMember({"training", "validation"}))
      ->capture_default_str();
}

}  // namespace

void AddClusterCommands(CLI::App& sf, CommandAction& action) {
  AddExperimentCommands(sf, action);
  AddTrialCommands(sf, action);

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

  CLI::App* audit = sf.add_subcommand("audit", "the master's record of every change made through its API");
  audit->require_subcommand(1);
  ClusterCommand audit_list =
      AddCommand(audit, "list", "list recorded changes, newest first: when, who, from where, what, status", action,
                 ListAudit);
  audit_list.app->add_option("--limit", audit_list.flags->limit, "at most this many (1-1000, default 100)")
      ->check(CLI::Range(1, 1000));
  audit_list.app->add_option("--actor", audit_list.flags->actor, "only changes by this user");

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
