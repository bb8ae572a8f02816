#include "master/master_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "common/config/daemon_config.h"
#include "common/config/experiment_sections.h"
#include "common/config/yaml_reader.h"

namespace sf::master {

bool IsLoopback(const std::string& address) {
  return address == "localhost" || address == "::1" || address == "[::1]" || address.rfind("127.", 0) == 0;
}

namespace {

using Setter = std::function<Status(MasterConfig&, const std::string&)>;

Status ParseBool(const std::string& key, const std::string& v, bool& out) {
  if (v == "true" || v == "1" || v == "yes") out = true;
  else if (v == "false" || v == "0" || v == "no") out = false;
  else return InvalidArgument(key + ": \"" + v + "\" is not true or false");
  return Status::Ok();
}

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

std::string Text(const std::string& v) { return v; }

std::string Text(int v) { return std::to_string(v); }

Status ParseSchedulingMode(const std::string& key, const std::string& v, SchedulingMode& out) {
  auto mode = SchedulingModeFromName(v);
  if (!mode) return InvalidArgument(key + ": \"" + v + "\" must be priority or fair_share");
  out = *mode;
  return Status::Ok();
}

// "gpu=fair_share,cpu=priority" (an empty value: none).
Status ParsePoolSchedulers(const std::string& v, std::map<std::string, SchedulingMode>& out) {
  std::map<std::string, SchedulingMode> pools;
  size_t start = 0;
  while (start < v.size()) {
    size_t comma = v.find(',', start);
    if (comma == std::string::npos) comma = v.size();
    const std::string entry = v.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("pool_schedulers: \"" + entry + "\" must be POOL=priority or POOL=fair_share");
    }
    SF_RETURN_IF_ERROR(ParseSchedulingMode("pool_schedulers: " + entry.substr(0, eq), entry.substr(eq + 1),
                                           pools[entry.substr(0, eq)]));
  }
  out = std::move(pools);
  return Status::Ok();
}

// In the config file, `scheduler` and `pool_schedulers` may also be mappings:
// `scheduler: {type: fair_share}`, `pool_schedulers: {gpu: {type: fair_share}, cpu: priority}`.
// Turns such a (non-scalar) node into the setting's text ("fair_share", "gpu=fair_share,...").
Result<std::string> SchedulerSettingText(const std::string& key, const YAML::Node& node) {
  auto type_of = [&](const std::string& where, const YAML::Node& n) -> Result<std::string> {
    if (n.IsScalar()) return n.Scalar();
    if (n.IsMap() && n.size() == 1 && n["type"] && n["type"].IsScalar()) return n["type"].Scalar();
    return InvalidArgument(where + ": expected {type: priority|fair_share}");
  };
  if (!node.IsMap()) return InvalidArgument(key + ": expected a mapping");
  if (key == "scheduler") return type_of(key, node);
  std::string text;
  for (const auto& pool : node) {
    SF_ASSIGN_OR_RETURN(std::string type, type_of(key + ": " + pool.first.Scalar(), pool.second));
    text += (text.empty() ? "" : ",") + pool.first.Scalar() + "=" + type;
  }
  return text;
}

std::string PoolSchedulersText(const std::map<std::string, SchedulingMode>& pools) {
  std::string out;
  for (const auto& [pool, mode] : pools) out += (out.empty() ? "" : ",") + pool + "=" + SchedulingModeName(mode);
  return out;
}

// One entry per setting: its check-and-store, and what --help shows (the kind of value, a line
// of description, the default). Every entry gets a flag, a config-file key and its checks.
struct Setting {
  Setter set;
  const char* type;
  const char* help;
  std::function<std::string(const MasterConfig&)> default_text;  // null: no default to show
};


// A checkpoint_storage mapping as the master's default: checked as an experiment's section is
// (common/config/experiment_sections.h), kept as flow YAML for the submissions it is added to.
Status ParseDefaultCheckpointStorage(const std::string& text, std::string& out) {
  if (text.empty()) {
    out.clear();
    return Status::Ok();
  }
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("checkpoint_storage: not YAML: " + std::string(e.what()));
  }
  config::ErrorSink sink;
  config::CheckpointStorageConfig parsed;
  config::ReadCheckpointStorage(sink, node, "checkpoint_storage", parsed);
  if (!sink.empty()) {
    return InvalidArgument(sink.errors()[0].path + ": " + sink.errors()[0].message);
  }
  YAML::Emitter flow;
  flow.SetMapFormat(YAML::Flow);
  flow.SetSeqFormat(YAML::Flow);
  flow << node;
  out = flow.c_str();
  return Status::Ok();
}

const std::map<std::string, Setting>& Settings() {
  using C = MasterConfig;
  using V = const std::string&;
  static const auto* settings = new std::map<std::string, Setting>{
      {"db", {[](C& c, V v) { c.db = v; return Status::Ok(); }, "CONNSTRING",
              "libpq connection string of the master's PostgreSQL database (env SF_DB)",
              [](const C& c) { return Text(c.db); }}},
      {"db_pool_size", {[](C& c, V v) {
                          Status st = ParsePort("db_pool_size", v, c.db_pool_size);
                          if (st.ok() && (c.db_pool_size < 1 || c.db_pool_size > 100)) {
                            return InvalidArgument("db_pool_size: must be 1-100");
                          }
                          return st;
                        },
                        "N", "database connections of the coordinator (1-100; ingestion and API reads have their own)", [](const C& c) { return Text(c.db_pool_size); }}},
      {"db_read_pool_size",
       {[](C& c, V v) { return WholeNumberIn("db_read_pool_size", v, 1, 100, "connections", c.db_read_pool_size); },
        "N", "database connections for the API's reads (1-100)", [](const C& c) { return Text(c.db_read_pool_size); }}},
      {"db_read_wait_ms",
       {[](C& c, V v) { return WholeNumberIn("db_read_wait_ms", v, 1, 60000, "milliseconds", c.db_read_wait_ms); },
        "MS", "longest wait of an API read for a free connection before it is answered 503 with Retry-After",
        [](const C& c) { return Text(c.db_read_wait_ms); }}},
      {"experiment_list_cache_ms",
       {[](C& c, V v) {
          return WholeNumberIn("experiment_list_cache_ms", v, 0, 60000, "milliseconds", c.experiment_list_cache_ms);
        },
        "MS", "serve a repeated experiment-list page from memory for at most this long while nothing was written (0: off)",
        [](const C& c) { return Text(c.experiment_list_cache_ms); }}},
      {"bind", {[](C& c, V v) { c.bind_address = v; return Status::Ok(); }, "ADDR",
                "address the gRPC and HTTP servers listen on; a non-loopback one needs TLS (--tls-cert-file) "
                "or --insecure (docs/security.md)",
                [](const C& c) { return Text(c.bind_address); }}},
      {"insecure", {[](C& c, V v) { return ParseBool("insecure", v, c.insecure); }, "BOOL",
                    "listen on a non-loopback address without TLS or without authentication: anyone who reaches "
                    "the ports can read or act on the cluster (logged loudly)",
                    [](const C& c) { return std::string(c.insecure ? "true" : "false"); }}},
      {"tls_cert_file", {[](C& c, V v) { c.tls_cert_file = v; return Status::Ok(); }, "PATH",
                         "PEM certificate chain (the master's own first) to serve REST (HTTPS only) and gRPC "
                         "over TLS with; needs --tls-key-file (docs/security.md)",
                         nullptr}},
      {"tls_key_file", {[](C& c, V v) { c.tls_key_file = v; return Status::Ok(); }, "PATH",
                        "PEM private key of --tls-cert-file's certificate (unencrypted; keep it mode 600)", nullptr}},
      {"task_ca_cert_file", {[](C& c, V v) { c.task_ca_cert_file = v; return Status::Ok(); }, "PATH",
                             "the cluster CA's PEM certificate: tasks that serve something get a certificate from it "
                             "and the proxy reaches them over mutually authenticated TLS; needs --task-ca-key-file "
                             "(docs/security.md)",
                             nullptr}},
      {"task_ca_key_file", {[](C& c, V v) { c.task_ca_key_file = v; return Status::Ok(); }, "PATH",
                            "the cluster CA's PEM private key (unencrypted; keep it mode 600)", nullptr}},
      {"grpc_port", {[](C& c, V v) { return ParsePort("grpc_port", v, c.grpc_port); }, "PORT",
                     "gRPC port: the Api, agents (AgentLink) and trainers (TrialLink) (env SF_GRPC_PORT)",
                     [](const C& c) { return Text(c.grpc_port); }}},
      {"http_port", {[](C& c, V v) { return ParsePort("http_port", v, c.http_port); }, "PORT",
                     "REST API and dashboard port (env SF_HTTP_PORT)", [](const C& c) { return Text(c.http_port); }}},
      {"advertised_address", {[](C& c, V v) { c.advertised_address = v; return Status::Ok(); }, "HOST:PORT",
                              "HOST:PORT trainers dial for TrialLink (default: the bind address and gRPC port)",
                              nullptr}},
      {"checkpoint_root", {[](C& c, V v) { c.checkpoint_root = v; return Status::Ok(); }, "DIR",
                           "where shared_fs checkpoints live (env SF_CHECKPOINT_ROOT)",
                           [](const C& c) { return Text(c.checkpoint_root); }}},
      {"checkpoint_storage",
       {[](C& c, V v) { return ParseDefaultCheckpointStorage(v, c.checkpoint_storage); }, "YAML",
        "the checkpoint_storage of experiments that give none, e.g. \"{type: s3, bucket: ckpts, endpoint_url: "
        "'http://host:7480'}\" (a mapping in the config file; default: shared_fs under checkpoint_root)",
        [](const C& c) { return Text(c.checkpoint_storage); }}},
      {"webui_dir", {[](C& c, V v) { c.webui_dir = v; return Status::Ok(); }, "DIR",
                     "the built dashboard to serve (env SF_WEBUI_DIR; default: found next to the binary)", nullptr}},
      {"log_level", {[](C& c, V v) {
                       if (v != "debug" && v != "info" && v != "warn" && v != "error") {
                         return InvalidArgument("log_level: \"" + v + "\" must be one of debug, info, warn, error");
                       }
                       c.log_level = v;
                       return Status::Ok();
                     },
                     "LEVEL", "debug | info | warn | error (env SF_LOG_LEVEL)",
                     [](const C& c) { return Text(c.log_level); }}},
      {"cluster_name", {[](C& c, V v) { c.cluster_name = v; return Status::Ok(); }, "TEXT",
                        "name shown by sf master info and the dashboard", [](const C& c) { return Text(c.cluster_name); }}},
      {"agent_join_token_file", {[](C& c, V v) { c.agent_join_token_file = v; return Status::Ok(); }, "PATH",
                                 "file holding the token agents must present to join (empty: agents are not authenticated)",
                                 [](const C& c) { return Text(c.agent_join_token_file); }}},
      {"agent_reconnect_grace_seconds",
       {[](C& c, V v) { return ParsePort("agent_reconnect_grace_seconds", v, c.agent_reconnect_grace_seconds); }, "N",
        "how long a disconnected agent's trials wait for it before failing over",
        [](const C& c) { return Text(c.agent_reconnect_grace_seconds); }}},
      {"utilization_sample_seconds",
       {[](C& c, V v) {
          return WholeNumberIn("utilization_sample_seconds", v, 1, 3600, "seconds", c.utilization_sample_seconds);
        },
        "N", "how often the cluster utilisation history is sampled (1-3600)",
        [](const C& c) { return Text(c.utilization_sample_seconds); }}},
      {"utilization_retention_hours",
       {[](C& c, V v) {
          return WholeNumberIn("utilization_retention_hours", v, 1, 43800, "hours", c.utilization_retention_hours);
        },
        "N", "how long the utilisation history is kept", [](const C& c) { return Text(c.utilization_retention_hours); }}},
      {"bookkeeping_retention_hours",
       {[](C& c, V v) {
          return WholeNumberIn("bookkeeping_retention_hours", v, 1, 43800, "hours", c.bookkeeping_retention_hours);
        },
        "N", "how long ended tasks' delivery records and finished trials' older allocation rows are kept",
        [](const C& c) { return Text(c.bookkeeping_retention_hours); }}},
      {"http_threads", {[](C& c, V v) { return WholeNumberIn("http_threads", v, 0, 1024, "threads", c.http_threads); },
                        "N", "HTTP worker threads (0: max(4, 2 x hardware threads))",
                        [](const C& c) { return Text(c.http_threads); }}},
      {"http_max_connections",
       {[](C& c, V v) { return WholeNumberIn("http_max_connections", v, 1, 65535, "connections", c.http_max_connections); },
        "N", "open HTTP connections; one more gets 503 with Retry-After",
        [](const C& c) { return Text(c.http_max_connections); }}},
      {"http_read_timeout_seconds",
       {[](C& c, V v) {
          return WholeNumberIn("http_read_timeout_seconds", v, 1, 3600, "seconds", c.http_read_timeout_seconds);
        },
        "N", "an HTTP request (or the wait for the next one) must arrive, and a response be taken, within this",
        [](const C& c) { return Text(c.http_read_timeout_seconds); }}},
      {"scheduler", {[](C& c, V v) { return ParseSchedulingMode("scheduler", v, c.scheduler); }, "MODE",
                     "priority | fair_share: how every pool not in pool_schedulers shares its slots",
                     [](const C& c) { return Text(SchedulingModeName(c.scheduler)); }}},
      {"pool_schedulers", {[](C& c, V v) { return ParsePoolSchedulers(v, c.pool_schedulers); }, "POOL=MODE,...",
                           "the scheduler mode of named pools (e.g. gpu=fair_share,cpu=priority)",
                           [](const C& c) { return PoolSchedulersText(c.pool_schedulers); }}},
      {"preemption_grace_seconds",
       {[](C& c, V v) {
          return WholeNumberIn("preemption_grace_seconds", v, 1, 86400, "seconds", c.preemption_grace_seconds);
        },
        "N", "a preempted trial that has not checkpointed and stopped after this is killed",
        [](const C& c) { return Text(c.preemption_grace_seconds); }}},
      {"unmanaged_timeout_seconds",
       {[](C& c, V v) {
          return WholeNumberIn("unmanaged_timeout_seconds", v, 5, 604800, "seconds", c.unmanaged_timeout_seconds);
        },
        "N", "an unmanaged trial whose script has made no TrialLink call for this long ends in ERROR",
        [](const C& c) { return Text(c.unmanaged_timeout_seconds); }}},
      {"min_run_seconds",
       {[](C& c, V v) { return WholeNumberIn("min_run_seconds", v, 0, 86400, "seconds", c.min_run_seconds); }, "N",
        "a trial that has run less than this is not preempted", [](const C& c) { return Text(c.min_run_seconds); }}},
      {"disable_auth", {[](C& c, V v) { return ParseBool("disable_auth", v, c.disable_auth); }, "BOOL",
                        "serve the REST and gRPC APIs without authentication: every caller may do everything "
                        "(loopback only, or with --insecure; for benchmarks and single-user machines)",
                        [](const C& c) { return std::string(c.disable_auth ? "true" : "false"); }}},
      {"admin_password_file",
       {[](C& c, V v) { c.admin_password_file = v; return Status::Ok(); }, "PATH",
        "on the first start (no users yet): the admin's password, read from this file, which is then deleted "
        "(default: a random one, printed once)",
        [](const C& c) { return Text(c.admin_password_file); }}},
      {"metrics_require_auth",
       {[](C& c, V v) { return ParseBool("metrics_require_auth", v, c.metrics_require_auth); }, "BOOL",
        "/metrics answers only with a token (Authorization: Bearer), like the API",
        [](const C& c) { return std::string(c.metrics_require_auth ? "true" : "false"); }}},
      {"http_max_streams",
       {[](C& c, V v) { return WholeNumberIn("http_max_streams", v, 0, 65535, "streams", c.http_max_streams); }, "N",
        "concurrent log follows (server-sent events), one thread each; one more gets 503",
        [](const C& c) { return Text(c.http_max_streams); }}},
      {"proxy_max_tunnels",
       {[](C& c, V v) { return WholeNumberIn("proxy_max_tunnels", v, 0, 65535, "sessions", c.proxy_max_tunnels); },
        "N", "WebSocket sessions through the proxy to tasks (notebook kernels, terminals) open at once; one more gets 503",
        [](const C& c) { return Text(c.proxy_max_tunnels); }}},
      {"proxy_max_body_mib",
       {[](C& c, V v) { return WholeNumberIn("proxy_max_body_mib", v, 1, 1 << 20, "MiB", c.proxy_max_body_mib); },
        "MIB", "the largest request body through the proxy to a task (streamed as it arrives, never held); over it: 413",
        [](const C& c) { return Text(c.proxy_max_body_mib); }}},
      {"webhook_max_attempts",
       {[](C& c, V v) { return WholeNumberIn("webhook_max_attempts", v, 1, 100, "attempts", c.webhook_max_attempts); },
        "N", "attempts to deliver one webhook event before it is given up",
        [](const C& c) { return Text(c.webhook_max_attempts); }}},
      {"webhook_retry_first_ms",
       {[](C& c, V v) {
          return WholeNumberIn("webhook_retry_first_ms", v, 10, 3600000, "milliseconds", c.webhook_retry_first_ms);
        },
        "MS", "wait before a failed webhook delivery's first retry; each later wait doubles",
        [](const C& c) { return Text(c.webhook_retry_first_ms); }}},
      {"webhook_retry_max_seconds",
       {[](C& c, V v) {
          return WholeNumberIn("webhook_retry_max_seconds", v, 1, 86400, "seconds", c.webhook_retry_max_seconds);
        },
        "N", "the longest wait between two attempts of a webhook delivery",
        [](const C& c) { return Text(c.webhook_retry_max_seconds); }}},
      {"webhook_timeout_seconds",
       {[](C& c, V v) {
          return WholeNumberIn("webhook_timeout_seconds", v, 1, 300, "seconds", c.webhook_timeout_seconds);
        },
        "N", "one webhook attempt (connect, send, the answer's status) must finish within this",
        [](const C& c) { return Text(c.webhook_timeout_seconds); }}},
      {"webhook_ca_file", {[](C& c, V v) { c.webhook_ca_file = v; return Status::Ok(); }, "PATH",
                           "PEM CA certificates https:// webhook receivers are verified by (empty: the system's)",
                           [](const C& c) { return Text(c.webhook_ca_file); }}},
      {"webhook_senders",
       {[](C& c, V v) { return WholeNumberIn("webhook_senders", v, 1, 64, "threads", c.webhook_senders); }, "N",
        "webhook deliveries in flight at once (one thread each)", [](const C& c) { return Text(c.webhook_senders); }}},
      {"webhook_keep_days",
       {[](C& c, V v) { return WholeNumberIn("webhook_keep_days", v, 0, 3650, "days", c.webhook_keep_days); }, "N",
        "delivered or given-up webhook deliveries older than this are deleted with their attempts (0: kept)",
        [](const C& c) { return Text(c.webhook_keep_days); }}},
  };
  return *settings;
}

// The settings as the shared daemon loader takes them (common/config/daemon_config.h): the table
// above, the environment variables, `scheduler`/`pool_schedulers` also as mappings in the file,
// and `resource_pools` (file only: a list of pools, master/rm/pool_config.h).
const config::DaemonConfigLoader<MasterConfig>& Loader() {
  static const auto* loader = [] {
    const std::map<std::string, std::string> env = {
        {"db", "SF_DB"}, {"grpc_port", "SF_GRPC_PORT"}, {"http_port", "SF_HTTP_PORT"},
        {"checkpoint_root", "SF_CHECKPOINT_ROOT"}, {"webui_dir", "SF_WEBUI_DIR"}, {"log_level", "SF_LOG_LEVEL"}};
    std::vector<config::DaemonSetting<MasterConfig>> settings;
    for (const auto& [key, s] : Settings()) {
      config::DaemonSetting<MasterConfig> d{key, s.type, s.help, s.set, s.default_text};
      if (auto it = env.find(key); it != env.end()) d.env = {it->second};
      if (key == "checkpoint_storage") {  // a mapping in the file
        d.from_node = [set = s.set](MasterConfig& c, const YAML::Node& node, const std::string& where) -> Status {
          YAML::Emitter flow;
          flow.SetMapFormat(YAML::Flow);
          flow << node;
          return set(c, flow.c_str()).WithContext(where);
        };
      }
      if (key == "scheduler" || key == "pool_schedulers") {
        d.from_node = [key, set = s.set](MasterConfig& c, const YAML::Node& node, const std::string& where) -> Status {
          Result<std::string> text = SchedulerSettingText(key, node);
          if (!text.ok()) return text.status().WithContext(where);
          return set(c, *text).WithContext(where);
        };
      }
      settings.push_back(std::move(d));
    }
    config::DaemonSetting<MasterConfig> pools{"resource_pools", "", "", nullptr};
    pools.file_only = true;
    pools.from_node = [](MasterConfig& c, const YAML::Node& node, const std::string& where) -> Status {
      SF_ASSIGN_OR_RETURN(c.resource_pools, rm::ParsePoolConfigs(node, where));
      return Status::Ok();
    };
    settings.push_back(std::move(pools));
    return new config::DaemonConfigLoader<MasterConfig>(
        "sf-master",
        "The Steadfast master: schedules experiments onto agents, stores everything in PostgreSQL, serves the "
        "REST API, the gRPC API and the dashboard.",
        "Precedence: flags > environment > config file > defaults. See docs/cluster.md.", std::move(settings));
  }();
  return *loader;
}

}  // namespace

std::string MasterUsage() { return Loader().Usage(); }

// A file key that needs its partner (a certificate and its key): kInvalidArgument naming the one
// given, when only one is.
static Status BothOrNeither(const std::string& a, const std::string& a_value, const std::string& b, const std::string& b_value) {
  if (a_value.empty() == b_value.empty()) return Status::Ok();
  auto flag = [](std::string key) {
    for (char& ch : key) ch = ch == '_' ? '-' : ch;
    return "--" + key;
  };
  const bool has_a = !a_value.empty();
  return InvalidArgument((has_a ? a : b) + ": " + (has_a ? a_value : b_value) + " is given without " + (has_a ? b : a) +
                         "; give both (" + flag(a) + " and " + flag(b) + ") or neither");
}

Result<MasterConfig> LoadMasterConfig(const std::vector<std::string>& args) {
  SF_ASSIGN_OR_RETURN(auto loaded, Loader().Load(args, config::ProcessEnvironment()));
  if (loaded.action == config::DaemonAction::kHelp) return Status(StatusCode::kCancelled, MasterUsage());
  if (loaded.action == config::DaemonAction::kVersion) {
    return Status(StatusCode::kCancelled, std::string("sf-master ") + SF_VERSION + "\n");
  }
  MasterConfig c = std::move(loaded.config);
  // TLS: both files or neither, each readable, the key the certificate's; the task CA likewise.
  SF_RETURN_IF_ERROR(BothOrNeither("tls_cert_file", c.tls_cert_file, "tls_key_file", c.tls_key_file));
  SF_RETURN_IF_ERROR(BothOrNeither("task_ca_cert_file", c.task_ca_cert_file, "task_ca_key_file", c.task_ca_key_file));
  if (c.tls_enabled()) {
    Result<ServerCertificate> tls = LoadServerCertificate(c.tls_cert_file, c.tls_key_file);
    if (!tls.ok()) return tls.status();
    c.tls = std::move(tls).value();
  }
  // The safe default (docs/security.md): on a non-loopback address the APIs must be protected,
  // unless the operator says --insecure (main.cc logs that loudly).
  // The APIs are protected only with TLS on *and* authentication on (docs/security.md).
  const bool protected_api = c.tls_enabled() && !c.disable_auth;
  if (!IsLoopback(c.bind_address) && !protected_api && !c.insecure) {
    return InvalidArgument("bind: " + c.bind_address + " is not a loopback address, and " +
                           (c.disable_auth ? std::string("authentication is off (--disable-auth)")
                                           : std::string("TLS is off, so the REST and gRPC APIs would go in "
                                                         "plaintext")) +
                           " to anyone who reaches the ports (docs/security.md): give --tls-cert-file and "
                           "--tls-key-file with authentication on, bind 127.0.0.1, or give --insecure to accept "
                           "the risk");
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
