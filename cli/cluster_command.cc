#include "cli/cluster_command.h"

#include <cctype>
#include <cstdio>
#include <iostream>

namespace sf::cli {

std::string StateName(const Value* v, const std::string& prefix) {
  if (!v || !v->is_string()) return "";
  std::string s = v->as_string();
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

std::string QueryValue(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

int PrintResults(const Value& reply, const Flags& f, const std::function<std::string(const Value&)>& ok_line,
                 const std::function<std::string(const Value&)>& error_line) {
  if (f.json) std::cout << reply.ToJson() << "\n";
  int exit_code = kExitOk;
  const Value* results = reply.Find("results");
  for (const Value& result : results && results->is_list() ? results->as_list() : Value::List{}) {
    const Value* ok = result.Find("ok");
    if (ok && ok->is_bool() && ok->as_bool()) {
      if (!f.json) std::cout << ok_line(result) << "\n";
      continue;
    }
    exit_code = Str(result, "code") == "5" || exit_code == kExitUsage ? kExitUsage : kExitFailed;
    if (!f.json) std::cerr << "sf: " << error_line(result) << "\n";
  }
  return exit_code;
}

int RunAgainstMaster(const Flags& flags, const ClusterRun& run) {
  Flags f = flags;
  ApplyGlobalMasterOptions(&f.master, &f.ca_file, &f.json);  // `sf -m URL trial ...`
  Result<Api> api = ConnectToMaster(f.master, f.ca_file);
  if (!api.ok()) {
    std::cerr << "sf: " << api.status().message() << "\n";
    return kExitUsage;
  }
  return run(f, *api);
}

ClusterCommand AddCommand(CLI::App* parent, const std::string& name, const std::string& description,
                          CommandAction& action, ClusterRun run) {
  ClusterCommand command{parent->add_subcommand(name, description), std::make_shared<Flags>()};
  AddMasterOptions(command.app, &command.flags->master, &command.flags->ca_file, &command.flags->json);
  OnSelected(command.app, action, [flags = command.flags, run = std::move(run)] {
    return RunAgainstMaster(*flags, run);
  });
  return command;
}

}  // namespace sf::cli
