#include "cli/api_call.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common/api/master_endpoint.h"
#include "cli/command.h"
#include "common/api/rest_request.h"
#include "common/value.h"

namespace sf::cli {

namespace {

// A refusal's body ({"code", "message", "errors"}) as an ApiError; the body itself is the
// message when it is not that.
ApiError ReadError(int http_status, const std::string& body, const Result<Value>& json) {
  ApiError e{.http_status = http_status, .message = body};
  if (!json.ok() || !json->is_map()) return e;
  if (const Value* code = json->Find("code"); code && code->is_int())
    e.code = static_cast<int>(code->as_int());
  if (const Value* message = json->Find("message"); message && message->is_string())
    e.message = message->as_string();
  const Value* errors = json->Find("errors");
  for (const Value& field : errors && errors->is_list() ? errors->as_list() : Value::List{}) {
    steadfast::v1::ConfigError parsed;
    if (api::DecodeRestResponse(field.ToJson(), &parsed).ok())
      e.errors.push_back(std::move(parsed));
  }
  return e;
}

// -m/--master, --ca-file and --json as given before the command.
struct GlobalMasterFlags {
  std::string master, ca_file;
  bool json = false;
};
GlobalMasterFlags& Globals() {
  static GlobalMasterFlags flags;
  return flags;
}

}  // namespace

void AddMasterOptions(CLI::App* command, std::string* master, std::string* ca_file, bool* json) {
  command
      ->add_option("-m,--master", *master,
                   "the master's URL, http:// or https:// (default: $SF_MASTER, then the master in "
                   "~/.config/steadfast/cli.json, which `sf deploy local up` writes, then "
                   "http://127.0.0.1:8080)")
      ->type_name("URL")
      ->default_str("");  // the description says it
  command
      ->add_option(
          "--ca-file", *ca_file,
          "PEM CA certificate(s) to verify an https:// master by (default: $SF_CA_FILE, then the "
          "ca_file in cli.json when its master is used, then the system's CAs)")
      ->type_name("PATH")
      ->default_str("");
  command->add_flag("--json", *json, "print the master's JSON instead of text");
}

void ApplyGlobalMasterOptions(std::string* master, std::string* ca_file, bool* json) {
  const GlobalMasterFlags& g = Globals();
  if (master->empty()) *master = g.master;
  if (ca_file->empty()) *ca_file = g.ca_file;
  *json = *json || g.json;
}

void AddGlobalMasterOptions(CLI::App& root) {
  GlobalMasterFlags& g = Globals();
  root.add_option("-m,--master", g.master, "the master's URL, for every command that talks to it")
      ->type_name("URL")
      ->default_str("");
  root.add_option("--ca-file", g.ca_file, "PEM CA certificate(s) to verify an https:// master by")
      ->type_name("PATH")
      ->default_str("");
  root.add_flag("--json", g.json, "print the master's JSON instead of text");
}

Result<Api> ConnectToMaster(const std::string& master_flag, const std::string& ca_file_flag) {
  Result<api::MasterEndpoint> master = api::ResolveMasterEndpoint(master_flag, ca_file_flag);
  if (!master.ok()) return master.status();
  auto client = api::MasterClient::Create(master->url, master->ca_file);
  if (!client.ok()) return client.status();
  return Api{*client};
}

bool Api::Fail(ApiError e) {
  // The master's message names the first field error ("invalid experiment config: path: why"),
  // which the list below prints again: say it once.
  std::string message = e.message;
  if (!e.errors.empty()) {
    const std::string first = e.errors[0].path() + ": " + e.errors[0].message();
    if (message.size() > first.size() && message.compare(message.size() - first.size(), first.size(), first) == 0) {
      message.erase(message.size() - first.size());
      while (!message.empty() && message.back() == ' ') message.pop_back();
    }
  }
  std::cerr << "sf: " << message << "\n";
  if (e.http_status == 401) {
    std::cerr << "  log in with `sf login` (or set $SF_TOKEN to a token from `sf token create`)\n";
  }
  for (const steadfast::v1::ConfigError& field : e.errors) {
    std::cerr << "  " << field.path() << ": " << field.message() << "\n";
  }
  // 400/404: the request itself was wrong (bad input, no such id). 409: a valid request the
  // master refused in this state (pausing a canceled experiment), i.e. the operation failed.
  exit_code = (e.http_status == 400 || e.http_status == 404) ? kExitUsage : kExitFailed;
  error = std::move(e);
  return false;
}

bool Api::Call(const std::string& method, const google::protobuf::Message& request,
               google::protobuf::Message* response, std::string* json) {
  auto rest = api::EncodeRestRequest(method, request);
  if (!rest.ok()) {
    Fail(ApiError{.code = 3, .message = rest.status().message()});  // 3: INVALID_ARGUMENT
    exit_code = kExitUsage;
    return false;
  }
  auto r = rest->method == "GET"      ? client.Get(rest->target)
           : rest->method == "DELETE" ? client.Delete(rest->target)
           : rest->method == "PUT"    ? client.Put(rest->target, rest->body)
                                      : client.Post(rest->target, rest->body);
  if (!r.ok()) return Fail(ApiError{.message = r.status().message()});
  auto v = Value::FromJson(r->body);
  if (r->status != 200) return Fail(ReadError(r->status, r->body, v));
  if (!v.ok())
    return Fail(ApiError{.message = "the master sent invalid JSON: " + v.status().message()});
  if (Status st = api::DecodeRestResponse(r->body, response); !st.ok()) {
    return Fail(ApiError{.message = "the master's reply to " + method + " is " + st.message()});
  }
  if (json) *json = v->ToJson();
  error.reset();
  return true;
}

}  // namespace sf::cli
