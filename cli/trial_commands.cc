// `sf trial list|describe|logs|metrics`: a trial's state, logs (followed as server-sent events
// with -f) and metrics, over the master's REST API (cluster_command.h has what they share).
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

}  // namespace

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

}  // namespace sf::cli
