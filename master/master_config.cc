#include "master/master_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "common/command_line.h"
#include "common/config/yaml_reader.h"

namespace sf::master {

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

// `v` as a whole number of `unit` in [lo, hi].
Status WholeNumberIn(const std::string& key, const std::string& v, int lo, int hi, const std::string& unit, int& out) {
  int n = 0;
  if (!ParsePort(key, v, n).ok() || n < lo || n > hi) {
    return InvalidArgument(key + ": \"" + v + "\" must be a whole number of " + unit + ", " + std::to_string(lo) + "-" +
                           std::to_string(hi));
  }
  out = n;
  return Status::Ok();
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
         return WholeNumberIn("utilization_sample_seconds", v, 1, 3600, "seconds", c.utilization_sample_seconds);
       }},
      {"utilization_retention_hours", [](MasterConfig& c, const std::string& v) {
         return WholeNumberIn("utilization_retention_hours", v, 1, 43800, "hours", c.utilization_retention_hours);
       }},
      {"http_threads", [](MasterConfig& c, const std::string& v) {
         return WholeNumberIn("http_threads", v, 0, 1024, "threads", c.http_threads);
       }},
      {"http_max_connections", [](MasterConfig& c, const std::string& v) {
         return WholeNumberIn("http_max_connections", v, 1, 65535, "connections", c.http_max_connections);
       }},
      {"http_read_timeout_seconds", [](MasterConfig& c, const std::string& v) {
         return WholeNumberIn("http_read_timeout_seconds", v, 1, 3600, "seconds", c.http_read_timeout_seconds);
       }},
      {"http_max_streams", [](MasterConfig& c, const std::string& v) {
         return WholeNumberIn("http_max_streams", v, 0, 65535, "streams", c.http_max_streams);
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

namespace {

// One line of --help per setting; a setting without one still gets its flag.
const char* Describe(const std::string& key) {
  static const std::map<std::string, const char*> kHelp = {
      {"db", "libpq connection string of the master's PostgreSQL database (env SF_DB)"},
      {"db_pool_size", "database connections (1-100)"},
      {"bind", "address the gRPC and HTTP servers listen on"},
      {"grpc_port", "gRPC port: the Api, agents (AgentLink) and trainers (TrialLink) (env SF_GRPC_PORT)"},
      {"http_port", "REST API and dashboard port (env SF_HTTP_PORT)"},
      {"advertised_address", "HOST:PORT trainers dial for TrialLink (default: the bind address and gRPC port)"},
      {"checkpoint_root", "where shared_fs checkpoints live (env SF_CHECKPOINT_ROOT)"},
      {"webui_dir", "the built dashboard to serve (env SF_WEBUI_DIR; default: found next to the binary)"},
      {"log_level", "debug | info | warn | error (env SF_LOG_LEVEL)"},
      {"cluster_name", "name shown by sf master info and the dashboard"},
      {"agent_reconnect_grace_seconds", "how long a disconnected agent's trials wait for it before failing over"},
      {"utilization_sample_seconds", "how often the cluster utilisation history is sampled (1-3600)"},
      {"utilization_retention_hours", "how long the utilisation history is kept"},
      {"http_threads", "HTTP worker threads (0: max(4, 2 x hardware threads))"},
      {"http_max_connections", "open HTTP connections; one more gets 503 with Retry-After"},
      {"http_read_timeout_seconds",
       "an HTTP request (or the wait for the next one) must arrive, and a response be taken, within this"},
      {"http_max_streams", "concurrent log follows (server-sent events), one thread each; one more gets 503"},
  };
  auto it = kHelp.find(key);
  return it == kHelp.end() ? "" : it->second;
}

// The kind of value a setting takes, for --help.
std::string TypeName(const std::string& key) {
  if (key.find("port") != std::string::npos && key != "db_pool_size") return "PORT";
  if (key == "db_pool_size" || key.find("seconds") != std::string::npos || key.find("hours") != std::string::npos ||
      key.rfind("http_", 0) == 0) {
    return "N";
  }
  if (key == "checkpoint_root" || key == "webui_dir") return "DIR";
  if (key == "advertised_address") return "HOST:PORT";
  if (key == "bind") return "ADDR";
  if (key == "log_level") return "LEVEL";
  if (key == "db") return "CONNSTRING";
  return "TEXT";
}

// The defaults as text, for --help.
std::string DefaultText(const std::string& key) {
  const MasterConfig d;
  static const std::map<std::string, std::function<std::string(const MasterConfig&)>> kGet = {
      {"db", [](const MasterConfig& c) { return c.db; }},
      {"db_pool_size", [](const MasterConfig& c) { return std::to_string(c.db_pool_size); }},
      {"bind", [](const MasterConfig& c) { return c.bind_address; }},
      {"grpc_port", [](const MasterConfig& c) { return std::to_string(c.grpc_port); }},
      {"http_port", [](const MasterConfig& c) { return std::to_string(c.http_port); }},
      {"checkpoint_root", [](const MasterConfig& c) { return c.checkpoint_root; }},
      {"log_level", [](const MasterConfig& c) { return c.log_level; }},
      {"cluster_name", [](const MasterConfig& c) { return c.cluster_name; }},
      {"agent_reconnect_grace_seconds", [](const MasterConfig& c) { return std::to_string(c.agent_reconnect_grace_seconds); }},
      {"utilization_sample_seconds", [](const MasterConfig& c) { return std::to_string(c.utilization_sample_seconds); }},
      {"utilization_retention_hours", [](const MasterConfig& c) { return std::to_string(c.utilization_retention_hours); }},
      {"http_threads", [](const MasterConfig& c) { return std::to_string(c.http_threads); }},
      {"http_max_connections", [](const MasterConfig& c) { return std::to_string(c.http_max_connections); }},
      {"http_read_timeout_seconds", [](const MasterConfig& c) { return std::to_string(c.http_read_timeout_seconds); }},
      {"http_max_streams", [](const MasterConfig& c) { return std::to_string(c.http_max_streams); }},
  };
  auto it = kGet.find(key);
  return it == kGet.end() ? "" : it->second(d);
}

// The command line: every setting as text (so the file < environment < flags precedence and the
// checks stay in Setters()), plus --config and --version. `values` must outlive the parse.
struct Flags {
  std::string config_file;
  std::map<std::string, std::string> values;
  std::map<std::string, CLI::Option*> options;
  bool version = false;
};

void BuildApp(CLI::App& app, Flags* flags) {
  cmdline::UseDefaults(app);
  app.add_option("--config", flags->config_file, "YAML file of settings (keys: the flag names with underscores)");
  for (const std::string& key : Keys()) {
    std::string flag = "--" + key;
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    CLI::Option* opt = app.add_option(flag, flags->values[key], Describe(key));
    opt->type_name(TypeName(key));
    const std::string def = DefaultText(key);
    if (!def.empty()) opt->default_str(def);
    flags->options[key] = opt;
  }
  app.add_flag("--version", flags->version, "print the version and exit");
  app.footer("Precedence: flags > environment > config file > defaults. See docs/cluster.md.");
}

}  // namespace

std::string MasterUsage() {
  CLI::App app("The Steadfast master: schedules experiments onto agents, stores everything in PostgreSQL, "
               "serves the REST API, the gRPC API and the dashboard.",
               "sf-master");
  Flags flags;
  BuildApp(app, &flags);
  return app.help();
}

Result<MasterConfig> LoadMasterConfig(const std::vector<std::string>& args) {
  CLI::App app("The Steadfast master", "sf-master");
  Flags flags;
  BuildApp(app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return Status(StatusCode::kCancelled, MasterUsage());
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string(e.what()) + " (see --help)");
  }
  if (flags.version) return Status(StatusCode::kCancelled, std::string("sf-master ") + SF_VERSION + "\n");
  MasterConfig c;
  // 1. The config file.
  if (!flags.config_file.empty()) {
    const std::string& file = flags.config_file;
    try {
      YAML::Node root = YAML::LoadFile(file);
      if (!root.IsMap()) return InvalidArgument(file + ": expected a mapping");
      for (const auto& kv : root) {
        if (!kv.second.IsScalar()) return InvalidArgument(file + ": " + kv.first.Scalar() + ": expected a value");
        SF_RETURN_IF_ERROR(Set(c, kv.first.Scalar(), kv.second.Scalar(), file));
      }
    } catch (const YAML::BadFile&) {
      return NotFound(file + ": cannot read the config file");
    } catch (const YAML::Exception& e) {
      return InvalidArgument(file + ": " + e.what());
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
  for (const auto& [key, option] : flags.options) {
    if (option->count() > 0) SF_RETURN_IF_ERROR(Set(c, key, flags.values[key], option->get_name()));
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
