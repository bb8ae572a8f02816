// What the `sf` commands that talk to the master share (cli/cluster_commands.cc for trials,
// agents, slots, pools, checkpoints, the audit log and the master; cli/experiment_commands.cc
// for experiments): the values of their flags, connecting to the master, and adding a command
// with -m/--master, --ca-file and --json. Not thread-safe (the CLI is one thread).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/command.h"
#include "common/value.h"

namespace sf::cli {

// The values of a cluster command's flags and its one positional.
struct Flags {
  std::string master;   // --master; empty: $SF_MASTER, the defaults file, ... (cli/cli_defaults.h)
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

// "EXPERIMENT_STATE_ACTIVE" -> "ACTIVE" for `prefix` "EXPERIMENT_STATE_"; "" when not a string.
std::string StateName(const Value* v, const std::string& prefix);

// Percent-encodes a query parameter's value (RFC 3986 unreserved characters stay).
std::string QueryValue(const std::string& v);

// A bulk reply's {"results": [...]}: for each, `ok_line` on stdout when it succeeded, else "sf: "
// + `error_line` on stderr (the JSON instead with --json). Returns 2 when one was not found
// (code 5), else 1 when one failed, else 0.
int PrintResults(const Value& reply, const Flags& f, const std::function<std::string(const Value&)>& ok_line,
                 const std::function<std::string(const Value&)>& error_line);

using ClusterRun = std::function<int(const Flags&, Api&)>;

// Connects to the master (--master, $SF_MASTER, the defaults file: cli/cli_defaults.h) and runs
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
// `sf trial list|describe|logs|metrics` (cli/trial_commands.cc).
void AddTrialCommands(CLI::App& sf, CommandAction& action);
// `sf agent ...`, `sf slot list`, `sf resource-pool list` (cli/agent_commands.cc).
void AddAgentCommands(CLI::App& sf, CommandAction& action);
// `sf checkpoint list|delete` (cli/checkpoint_commands.cc).
void AddCheckpointCommands(CLI::App& sf, CommandAction& action);

}  // namespace sf::cli
