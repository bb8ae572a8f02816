#include "cli/api_call.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/cli_defaults.h"
#include "cli/command.h"

namespace sf::cli {

std::string Str(const Value& obj, const std::string& key) {
  const Value* v = obj.Find(key);
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->as_string();
  if (v->is_double()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4g", v->as_double());
    return buf;
  }
  return v->ToDisplay();
}

namespace {

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
  Result<MasterEndpoint> master = ResolveMasterEndpoint(master_flag, ca_file_flag);
  if (!master.ok()) return master.status();
  auto client = HttpClient::Create(master->url, master->ca_file);
  if (!client.ok()) return client.status();
  return Api{*client};
}

std::optional<Value> Api::Call(const std::string& method, const std::string& path,
                               const std::string& body) {
  auto r = method == "GET"      ? client.Get(path)
           : method == "DELETE" ? client.Delete(path)
           : method == "PUT"    ? client.Put(path, body)
                                : client.Post(path, body);
  if (!r.ok()) {
    std::cerr << "sf: " << r.status().message() << "\n";
    exit_code = kExitFailed;
    return std::nullopt;
  }
  auto v = Value::FromJson(r->body);
  if (r->status != 200) {
    std::string msg = v.ok() && v->Find("message") ? v->Find("message")->as_string() : r->body;
    std::cerr << "sf: " << msg << "\n";
    if (r->status == 401) {
      std::cerr
          << "  log in with `sf login` (or set $SF_TOKEN to a token from `sf token create`)\n";
    }
    if (v.ok() && v->Find("errors") && v->Find("errors")->is_list()) {
      for (const Value& e : v->Find("errors")->as_list()) {
        std::cerr << "  " << Str(e, "path") << ": " << Str(e, "message") << "\n";
      }
    }
    // 400/404: the request itself was wrong (bad input, no such id). 409: a valid request the
    // master refused in this state (pausing a canceled experiment), i.e. the operation failed.
    exit_code = (r->status == 400 || r->status == 404) ? kExitUsage : kExitFailed;
    return std::nullopt;
  }
  if (!v.ok()) {
    std::cerr << "sf: the master sent invalid JSON: " << v.status().message() << "\n";
    exit_code = kExitFailed;
    return std::nullopt;
  }
  return *v;
}

}  // namespace sf::cli
