// What the `sf` commands that talk to the master share (cli/cluster_commands.cc for the audit
// log and the master, and the files named below for the rest): the values of their flags,
// connecting to the master, and adding a command with -m/--master, --ca-file and --json. Not
// thread-safe (the CLI is one thread).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/command.h"

namespace sf::cli {

// The values of a cluster command's flags and its one positional.
struct Flags {
  std::string master;   // --master; empty: $SF_MASTER, the defaults file, ... (common/api/master_endpoint.h)
  std::string ca_file;  // --ca-file; empty: $SF_CA_FILE, the defaults file's, the system's CAs
  bool json = false;
  bool follow = false;
  bool paused = false;
  std::string kind = "training";
  std::vector<std::string> overrides;  // --config KEY=VALUE, in order
  std::string id;                      // ID, TRIAL_ID or EXPERIMENT_ID
  // Bulk experiment actions: the experiments, by id or by a filter.
  std::vector<std::string> ids;
  std::vector<std::string> states;     // --state ACTIVE (repeatable)
  std::string name, owner;             // --name, --owner
  bool include_archived = false;
  int64_t max_length = 0;              // experiment continue's --max-length
  std::string file;                    // experiment create's FILE
  int limit = 100;                     // audit list's --limit
  std::string actor;                   // audit list's --actor
  std::string workspace;               // experiment create's --workspace
};

// The command's ID as an integer (the id of an experiment, trial, token); nullopt, with the
// message printed, when it is not one (the caller exits kExitUsage).
std::optional<int64_t> IntegerId(const std::string& id);

// A bulk reply's results (BulkExperimentActionResult, DeleteCheckpointResult: ok, code): for
// each, `ok_line` on stdout when it succeeded, else "sf: " + `error_line` on stderr (the reply's
// `json` instead with --json). Returns 2 when one was not found (code 5), else 1 when one
// failed, else 0.
template <class Results, class OkLine, class ErrorLine>
int PrintResults(const Results& results, const std::string& json, const Flags& f,
                 const OkLine& ok_line, const ErrorLine& error_line) {
  if (f.json) std::cout << json << "\n";
  int exit_code = kExitOk;
  for (const auto& result : results) {
    if (result.ok()) {
      if (!f.json) std::cout << ok_line(result) << "\n";
      continue;
    }
    constexpr int kNotFound = 5;  // the gRPC code
    exit_code = result.code() == kNotFound || exit_code == kExitUsage ? kExitUsage : kExitFailed;
    if (!f.json) std::cerr << "sf: " << error_line(result) << "\n";
  }
  return exit_code;
}

// Calls `method` with `request` and prints the reply: its JSON with --json, else `text(reply)`.
// The exit code: 0, or the failed call's (api_call.h).
template <class Response, class Text>
int CallAndPrint(const Flags& f, Api& api, const std::string& method, const google::protobuf::Message& request,
                 const Text& text) {
  auto r = api.Call<Response>(method, request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
  } else {
    text(r->message);
  }
  return kExitOk;
}

using ClusterRun = std::function<int(const Flags&, Api&)>;

// Connects to the master (--master, $SF_MASTER, the defaults file: common/api/master_endpoint.h) and runs
// the command; a malformed URL or defaults file is bad usage.
int RunAgainstMaster(const Flags& f, const ClusterRun& run);

// A command under `parent` that talks to the master: it takes -m/--master and --json and, when
// selected, runs `run`. Its positional and other flags are the caller's to add, into `flags`.
struct ClusterCommand {
  CLI::App* app;
  std::shared_ptr<Flags> flags;

  // The command's one positional (ID, TRIAL_ID, EXPERIMENT_ID), required.
  ClusterCommand& Id(const std::string& name, const std::string& description) {
    app->add_option(name, flags->id, description)->type_name("")->required();
    return *this;
  }
};

ClusterCommand AddCommand(CLI::App* parent, const std::string& name, const std::string& description,
                          CommandAction& action, ClusterRun run);

// `sf experiment create|fork|continue|list|describe|kill|pause|activate|archive|unarchive|delete`
// (cli/experiment_commands.cc).
void AddExperimentCommands(CLI::App& sf, CommandAction& action);
// `sf trial list|describe|logs|metrics` (cli/trial_commands.cc). DescribeTrial and TrialLogs
// (`f.follow`: until it ended) serve the trial the command's ID names; `sf task` uses them for a
// trial in the one task list ("t12").
void AddTrialCommands(CLI::App& sf, CommandAction& action);
int DescribeTrial(const Flags& f, Api& api);
int TrialLogs(const Flags& f, Api& api);
// `sf agent ...`, `sf slot list`, `sf resource-pool list` (cli/agent_commands.cc).
void AddAgentCommands(CLI::App& sf, CommandAction& action);
// `sf checkpoint list|delete` (cli/checkpoint_commands.cc).
void AddCheckpointCommands(CLI::App& sf, CommandAction& action);
// `sf webhook create|list|delete|deliveries|test` (cli/webhook_commands.cc).
void AddWebhookCommands(CLI::App& sf, CommandAction& action);
// `sf model ...`, the model registry (cli/model_commands.cc).
void AddModelCommands(CLI::App& sf, CommandAction& action);
// `sf serve start|list|describe|stop`, servers on the cluster (cli/serve_commands.cc).
void AddServeCommands(CLI::App& sf, CommandAction& action);
// `sf cmd run|list|logs|kill`, `sf task list|describe|logs|kill` (cli/task_commands.cc).
// TaskLogs prints the output of the task the command's ID names (a command's, a server's); with
// `follow`, also what it prints after, until it ended.
int TaskLogs(const Flags& f, Api& api, bool follow = false);
// ListTasks prints the live tasks of `kind` ("": every kind; `all`: also ended ones); OneTask
// calls GetTask (prints it) or KillTask (prints its state) for the task the command's ID names.
int ListTasks(const Flags& f, Api& api, const std::string& kind, bool all);
int OneTask(const Flags& f, Api& api, const std::string& method);
void AddTaskCommands(CLI::App& sf, CommandAction& action);
// `sf notebook start|list|kill`, Jupyter notebooks on the cluster, and `sf shell
// start|open|list|kill`, terminals (cli/interactive_commands.cc).
void AddNotebookCommands(CLI::App& sf, CommandAction& action);

}  // namespace sf::cli
