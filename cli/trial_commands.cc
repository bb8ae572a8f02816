// `sf trial list|describe|logs|metrics`: a trial's state, logs (followed as server-sent events
// with -f) and metrics, through the master's Api methods (cluster_command.h has what they share).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/api/rest_request.h"
#include "common/command_line.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

int ListTrials(const Flags& f, Api& api) {
  v1::GetExperimentTrialsRequest request;
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  request.set_experiment_id(*id);
  auto r = api.Call<v1::GetExperimentTrialsResponse>("GetExperimentTrials", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Trial& t : r->message.trials()) {
    rows.push_back({std::to_string(t.id()), EnumText(t.state()), std::to_string(t.total_batches()),
                    std::to_string(t.restarts()),
                    NumberText(t.has_best_validation_metric(), t.best_validation_metric()),
                    t.has_hparams() ? StructJson(t.hparams()) : ""});
  }
  PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "BEST", "HYPERPARAMETERS"}, rows);
  return kExitOk;
}

}  // namespace

int DescribeTrial(const Flags& f, Api& api) {
  v1::GetTrialRequest request;
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  request.set_trial_id(*id);
  auto r = api.Call<v1::GetTrialResponse>("GetTrial", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  const v1::Trial& t = r->message.trial();
  std::string groups;  // read each with `sf trial metrics --group NAME`
  for (const std::string& g : r->message.metric_groups()) groups += (groups.empty() ? "" : ", ") + g;
  std::string hosts;  // agents, or a Slurm job's node list
  for (const std::string& h : t.hosts()) hosts += (hosts.empty() ? "" : ", ") + h;
  const std::vector<std::pair<const char*, std::string>> lines = {
      {"id", std::to_string(t.id())},
      {"experimentId", std::to_string(t.experiment_id())},
      {"state", EnumText(t.state())},
      {"pendingReason", t.pending_reason()},
      {"jobId", t.job_id()},
      {"hosts", hosts},
      {"restarts", std::to_string(t.restarts())},
      {"totalBatches", std::to_string(t.total_batches())},
      {"targetBatches", std::to_string(t.target_batches())},
      {"latestValidationMetric",
       NumberText(t.has_latest_validation_metric(), t.latest_validation_metric())},
      {"bestValidationMetric",
       NumberText(t.has_best_validation_metric(), t.best_validation_metric())},
      {"metricGroups", groups},
      {"latestCheckpointUuid", t.latest_checkpoint_uuid()},
      {"startTime", TimeText(t.has_start_time(), t.start_time())},
      {"endTime", TimeText(t.has_end_time(), t.end_time())},
      // A trial that failed, restarted and then completed keeps the reason of its last
      // restart: shown as such, not as the error of a trial that did not fail.
      {t.state() == v1::TRIAL_STATE_ERROR || t.error().empty() ? "error" : "lastRestartReason", t.error()},
      {"hparams", t.has_hparams() ? StructJson(t.hparams()) : "{}"}};
  for (const auto& [label, text] : lines) std::cout << label << ": " << text << "\n";
  return kExitOk;
}

// `sf trial logs -f`: GetTrialLogs with follow, which the master answers as server-sent events.
static int FollowTrialLogs(const Flags& f, Api& api, int64_t trial_id) {
  // The same answer for an unknown trial as without -f (exit 2, the master's message).
  v1::GetTrialRequest trial;
  trial.set_trial_id(trial_id);
  if (!api.Call<v1::GetTrialResponse>("GetTrial", trial)) return api.exit_code;
  v1::GetTrialLogsRequest request;
  request.set_trial_id(trial_id);
  request.set_follow(true);
  auto rest = api::EncodeRestRequest("GetTrialLogs", request);
  if (!rest.ok()) {
    std::cerr << "sf: " << rest.status().message() << "\n";
    return kExitFailed;
  }
  bool ended = false, malformed = false;
  Status st =
      api.client.Stream(rest->target, [&](const std::string& event, const std::string& data) {
        if (event == "end") {
          ended = true;
          return false;
        }
        v1::LogLine line;
        if (Status read = api::DecodeRestResponse(data, &line); !read.ok()) {
          std::cerr << "sf: the master sent a log event that is " << read.message() << "\n";
          malformed = true;
          return false;
        }
        std::cout << line.message() << "\n" << std::flush;
        return true;
      });
  if (!st.ok()) {
    std::cerr << "sf: " << st.message() << "\n";
    return kExitFailed;
  }
  if (malformed) return kExitFailed;
  if (!ended) {
    std::cerr << "sf: the master closed the log stream of trial " << f.id
              << " before the trial ended\n";
    return kExitFailed;
  }
  return kExitOk;
}

int TrialLogs(const Flags& f, Api& api) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  if (f.follow) return FollowTrialLogs(f, api, *id);
  constexpr int kPage = 10000;
  v1::GetTrialLogsRequest request;
  request.set_trial_id(*id);
  request.set_limit(kPage);
  while (true) {
    auto r = api.Call<v1::GetTrialLogsResponse>("GetTrialLogs", request);
    if (!r) return api.exit_code;
    for (const v1::LogLine& l : r->message.logs()) {
      std::cout << (f.json ? MessageJson(l) : l.message()) << "\n";
      request.set_after_id(l.id());
    }
    if (r->message.logs_size() < kPage) return kExitOk;
  }
}

namespace {

int TrialMetrics(const Flags& f, Api& api) {
  v1::GetTrialMetricsRequest request;
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  request.set_trial_id(*id);
  request.set_kind(f.kind);
  auto r = api.Call<v1::GetTrialMetricsResponse>("GetTrialMetrics", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  // The columns: every metric's name, in the order they first appear (each report's sorted).
  std::vector<std::string> keys;
  for (const v1::MetricReport& m : r->message.metrics()) {
    std::vector<std::string> names;
    for (const auto& [name, value] : m.values().fields()) names.push_back(name);
    std::sort(names.begin(), names.end());
    for (const std::string& k : names) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  std::vector<std::string> header = {"BATCHES"};
  for (const auto& k : keys) header.push_back(k);
  std::vector<std::vector<std::string>> rows;
  for (const v1::MetricReport& m : r->message.metrics()) {
    std::vector<std::string> row = {std::to_string(m.batches())};
    for (const auto& k : keys) {
      auto value = m.values().fields().find(k);
      row.push_back(value == m.values().fields().end() ? "" : StructValueText(value->second));
    }
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
  metrics.app
      ->add_option("--kind,--group", metrics.flags->kind,
                   "which metrics: training, validation, or a group the trial reported (report_metrics)")
      ->type_name("GROUP")
      ->check(
          [](const std::string& group) -> std::string {
            // The master's rule (master/ingest/metric_groups.h), said before asking it.
            static const std::regex kGroup("[a-z][a-z0-9_]{0,63}");
            return std::regex_match(group, kGroup)
                       ? ""
                       : "\"" + group + "\" is no metric group: lowercase letters, digits and _, starting with a letter";
          },
          "GROUP")
      ->capture_default_str();
}

}  // namespace sf::cli
