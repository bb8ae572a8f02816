// One REST call to the master as every `sf` cluster command makes it: the JSON answer, or a
// clean message on stderr and the exit code it means (command.h: 1 for failures on the
// master's side, 2 for bad input).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "cli/http_client.h"
#include "common/value.h"

namespace sf::cli {

// obj[key] as display text ("" when absent or null; doubles to 4 significant digits).
std::string Str(const Value& obj, const std::string& key);

// The master a command names (--master, $SF_MASTER, the defaults file: cli/cli_defaults.h) and
// a client for it; a malformed URL or defaults file is bad usage (the message is printed, and
// the result is the exit code 2).
struct Api;

// The options of every command that talks to the master: -m/--master, --ca-file, --json. The
// same given before the command (`sf -m URL experiment list`, where `det -m URL` users put them)
// count when the command's own are not given (AddGlobalMasterOptions).
void AddMasterOptions(CLI::App* command, std::string* master, std::string* ca_file, bool* json);
// Adds -m/--master, --ca-file and --json to the root `sf` app, before its commands.
void AddGlobalMasterOptions(CLI::App& root);
// After parsing (CLI11 sets the root's values last): fills in what the command did not give
// from what was given before it.
void ApplyGlobalMasterOptions(std::string* master, std::string* ca_file, bool* json);
Result<Api> ConnectToMaster(const std::string& master_flag, const std::string& ca_file_flag);

struct Api {
  HttpClient client;
  int exit_code = 0;
  // `method` GET, POST, PUT or DELETE. nullopt on failure, with exit_code set and the message
  // printed (a 401 adds how to log in).
  std::optional<Value> Call(const std::string& method, const std::string& path, const std::string& body = "");
};

}  // namespace sf::cli
