// One call of a steadfast.v1.Api method as every `sf` cluster command makes it: the command
// builds the request message, the method's REST route comes from the proto
// (common/api/route_table.h, common/api/rest_request.h), and the reply is read into the typed
// response; or a clean message on stderr and the exit code it means (command.h: 1 for failures
// on the master's side, 2 for bad input).
#pragma once

#include <google/protobuf/message.h>

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/api/master_client.h"
#include "steadfast/v1/common.pb.h"

namespace sf::cli {

// The master a command names (--master, $SF_MASTER, the defaults file: common/api/master_endpoint.h) and
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

// How the master refused a call (its error body, master/api/rest_router.cc: {"code", "message",
// "errors"}), or why there was no answer.
struct ApiError {
  int http_status = 0;  // 0: no answer (unreachable, or a reply sf could not read)
  int code = 0;         // the gRPC status code the master named: 3 INVALID_ARGUMENT, 5 NOT_FOUND,
                        // 9 FAILED_PRECONDITION, 16 UNAUTHENTICATED, ...; 0 when it named none
  std::string message;  // as printed after "sf: "
  std::vector<steadfast::v1::ConfigError> errors = {};  // a rejected config's field errors
};

// A call's typed reply, with the master's JSON as `--json` prints it (compact, keys sorted: the
// same text sf printed before it read replies by type).
template <class Response>
struct Reply {
  Response message;
  std::string json;
};

struct Api {
  api::MasterClient client;
  int exit_code = 0;                             // set by a failed call: 2 for a 400 or 404, else 1
  std::optional<ApiError> error = std::nullopt;  // the last failed call's

  // Calls Api method `method` ("GetTrial") with `request` (its input type) over REST and reads
  // the reply into `response` (its output type), ignoring fields this sf does not know; `json`,
  // when given, gets the reply as --json prints it. false on failure, with `exit_code` and
  // `error` set and the message printed (a 401 adds how to log in; a rejected config its field
  // errors).
  bool Call(const std::string& method, const google::protobuf::Message& request,
            google::protobuf::Message* response, std::string* json = nullptr);

  // The same, returning the typed reply; nullopt on failure.
  template <class Response>
  std::optional<Reply<Response>> Call(const std::string& method,
                                      const google::protobuf::Message& request) {
    Reply<Response> reply;
    if (!Call(method, request, &reply.message, &reply.json)) return std::nullopt;
    return reply;
  }

 private:
  // Prints `e` and records it; returns false.
  bool Fail(ApiError e);
};

}  // namespace sf::cli
