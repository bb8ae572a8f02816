#include "master/master_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "common/config/yaml_reader.h"

namespace sf::master {

std::string MasterUsage() {
  return "usage: sf-master [--config FILE] [--db CONNSTRING] [--bind ADDR] [--grpc-port N]\n"
         "                 [--http-port N] [--advertised-address HOST:PORT] [--checkpoint-root DIR]\n"
         "                 [--webui-dir DIR] [--log-level debug|info|warn|error] [--cluster-name NAME]\n"
         "\n"
         "Config file keys are the flag names with underscores (db, grpc_port, ...). Environment:\n"
         "SF_DB, SF_GRPC_PORT, SF_HTTP_PORT, SF_CHECKPOINT_ROOT, SF_WEBUI_DIR, SF_LOG_LEVEL.\n";
}

namespace {

using Setter = std::function<Status(MasterConfig&, const std::string&)>;

Status ParsePort(const std::string& key, const std::string& v, int& out) {
  try {
    size_t used = 0;
    int p = std::stoi(v, &used);
    if (used != v.size() || p < 0 || p > 65535) throw std::out_of_range(v);
    out = p;
    return Status::Ok();
  } catch (...) {
    return InvalidArgument(key + ": \"" + v + "\" is not a port (0-65535)");
  }
}

const std::map<std::string, Setter>& Setters() {
  static const auto* setters = new std::map<std::string, Setter>{
      {"db", [](MasterConfig& c, const std::string& v) { c.db = v; return Status::Ok(); }},
      {"db_pool_size", [](MasterConfig& c, const std::string& v) {
         Status st = ParsePort("db_pool_size", v, c.db_pool_size);
         if (st.ok() && (c.db_pool_size < 1 || c.db_pool_size > 100)) return InvalidArgument("db_pool_size: must be 1-100");
         return st;
       }},
      {"bind", [](MasterConfig& c, const std::string& v) { c.bind_address = v; return Status::Ok(); }},
      {"grpc_port", [](MasterConfig& c, const std::string& v) { return ParsePort("grpc_port", v, c.grpc_port); }},
      {"http_port", [](MasterConfig& c, const std::string& v) { return ParsePort("http_port", v, c.http_port); }},
      {"advertised_address", [](MasterConfig& c, const std::string& v) { c.advertised_address = v; return Status::Ok(); }},
      {"checkpoint_root", [](MasterConfig& c, const std::string& v) { c.checkpoint_root = v; return Status::Ok(); }},
      {"webui_dir", [](MasterConfig& c, const std::string& v) { c.webui_dir = v; return Status::Ok(); }},
      {"log_level", [](MasterConfig& c, const std::string& v) {
         if (v != "debug" && v != "info" && v != "warn" && v != "error") {
           return InvalidArgument("log_level: \"" + v + "\" must be one of debug, info, warn, error");
         }
         c.log_level = v;
         return Status::Ok();
       }},
      {"cluster_name", [](MasterConfig& c, const std::string& v) { c.cluster_name = v; return Status::Ok(); }},
      {"agent_reconnect_grace_seconds", [](MasterConfig& c, const std::string& v) {
         return ParsePort("agent_reconnect_grace_seconds", v, c.agent_reconnect_grace_seconds);
       }},
      {"utilization_sample_seconds", [](MasterConfig& c, const std::string& v) {
         int seconds = 0;
         if (!ParsePort("utilization_sample_seconds", v, seconds).ok() || seconds < 1 || seconds > 3600) {
           return InvalidArgument("utilization_sample_seconds: \"" + v + "\" must be a whole number of seconds, 1-3600");
         }
         c.utilization_sample_seconds = seconds;
         return Status::Ok();
       }},
      {"utilization_retention_hours", [](MasterConfig& c, const std::string& v) {
         int hours = 0;
         if (!ParsePort("utilization_retention_hours", v, hours).ok() || hours < 1 || hours > 43800) {
           return InvalidArgument("utilization_retention_hours: \"" + v + "\" must be a whole number of hours, 1-43800 (5 years)");
         }
         c.utilization_retention_hours = hours;
         return Status::Ok();
       }},
  };
  return *setters;
}

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  for (const auto& [k, s] : Setters()) keys.push_back(k);
  return keys;
}

Status Set(MasterConfig& c, const std::string& key, const std::string& value, const std::string& where) {
  auto it = Setters().find(key);
  if (it == Setters().end()) {
    std::string msg = where + ": unknown setting \"" + key + "\"";
    std::string s = config::ClosestMatch(key, Keys());
    if (!s.empty()) msg += " (did you mean \"" + s + "\"?)";
    return InvalidArgument(msg);
  }
  return it->second(c, value).WithContext(where);
}

}  // namespace

Result<MasterConfig> LoadMasterConfig(const std::vector<std::string>& args) {
  MasterConfig c;
  // 1. The config file.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--config") continue;
    if (i + 1 >= args.size()) return InvalidArgument("--config needs a file");
    try {
      YAML::Node root = YAML::LoadFile(args[i + 1]);
      if (!root.IsMap()) return InvalidArgument(args[i + 1] + ": expected a mapping");
      for (const auto& kv : root) {
        if (!kv.second.IsScalar()) return InvalidArgument(args[i + 1] + ": " + kv.first.Scalar() + ": expected a value");
        SF_RETURN_IF_ERROR(Set(c, kv.first.Scalar(), kv.second.Scalar(), args[i + 1]));
      }
    } catch (const YAML::Exception& e) {
      return InvalidArgument(args[i + 1] + ": " + e.what());
    }
  }
  // 2. The environment.
  const std::map<std::string, std::string> env = {
      {"SF_DB", "db"}, {"SF_GRPC_PORT", "grpc_port"}, {"SF_HTTP_PORT", "http_port"},
      {"SF_CHECKPOINT_ROOT", "checkpoint_root"}, {"SF_WEBUI_DIR", "webui_dir"}, {"SF_LOG_LEVEL", "log_level"}};
  for (const auto& [var, key] : env) {
    if (const char* v = std::getenv(var.c_str())) SF_RETURN_IF_ERROR(Set(c, key, v, var));
  }
  // 3. Flags.
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") return Status(StatusCode::kCancelled, MasterUsage());
    if (a.rfind("--", 0) != 0) return InvalidArgument("unexpected argument \"" + a + "\"\n" + MasterUsage());
    std::string key = a.substr(2), value;
    size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) return InvalidArgument(a + " needs a value");
      value = args[++i];
    }
    if (key == "config") continue;
    for (char& ch : key) ch = ch == '-' ? '_' : ch;
    SF_RETURN_IF_ERROR(Set(c, key, value, "--" + key));
  }
  if (c.advertised_address.empty()) {
    // Trainers dial what the master listens on; a wildcard bind has no one address to give.
    const bool wildcard = c.bind_address.empty() || c.bind_address == "0.0.0.0" || c.bind_address == "::";
    const std::string host = wildcard ? "127.0.0.1"
                             : c.bind_address.find(':') != std::string::npos ? "[" + c.bind_address + "]"
                                                                             : c.bind_address;
    c.advertised_address = host + ":" + std::to_string(c.grpc_port);
  }
  return c;
}

}  // namespace sf::master
