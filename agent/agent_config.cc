#include "agent/agent_config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "agent/logger.h"
#include "common/command_line.h"
#include "common/secret_file.h"
#include "common/tls_files.h"

namespace sf::agent {
namespace fs = std::filesystem;

Result<SlotSpec> ParseSlotSpec(const std::string& text) {
  SlotSpec spec;
  if (text == "auto") {
    return spec;
  }
  if (text.rfind("cpu:", 0) == 0) {
    std::string number = text.substr(4);
    char* end = nullptr;
    int64_t n = number.empty() ? 0 : std::strtoll(number.c_str(), &end, 10);
    if (!number.empty() && end && *end == '\0' && n >= 1 && n <= 4096) {
      spec.auto_detect = false;
      spec.cpu_slots = static_cast<int>(n);
      return spec;
    }
  }
  return InvalidArgument("'" + text + "' is not auto or cpu:N with N >= 1");
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) {
      return std::nullopt;
    }
    return std::string(v);
  };
}

std::string SelfExecutablePath() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

int CpuThreadsPerSlot(int configured, int cores, int cpu_slots) {
  if (configured > 0) return configured;
  return std::max(1, cores / std::max(1, cpu_slots));
}

namespace {

// `text` as a whole decimal integer in [lo, hi], or nothing.
std::optional<int64_t> IntegerIn(const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const int64_t n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < lo || n > hi) return std::nullopt;
  return n;
}

Status ApplySetting(const std::string& key, const std::string& value, const std::string& where,
                    AgentConfig* config) {
  auto fail = [&](const std::string& why) { return InvalidArgument(where + ": " + why); };
  if (key == "master") {
    if (value.empty()) {
      return fail("must not be empty");
    }
    config->master = value;
  } else if (key == "agent_id") {
    if (value.empty() || value.find('/') != std::string::npos ||
        value.find(' ') != std::string::npos) {
      return fail("'" + value + "' is not a valid agent id (non-empty, no '/' or spaces)");
    }
    config->agent_id = value;
  } else if (key == "resource_pool") {
    if (value.empty()) {
      return fail("must not be empty");
    }
    config->resource_pool = value;
  } else if (key == "slots") {
    auto spec = ParseSlotSpec(value);
    if (!spec.ok()) {
      return fail(spec.status().message());
    }
    config->slots = *spec;
    config->slots_text = value;
  } else if (key == "nvml_library") {
    if (value.empty()) return fail("must not be empty");
    config->nvml_library = value;
  } else if (key == "trainer") {
    if (value.empty()) {
      return fail("must not be empty");
    }
    config->trainer = value;
  } else if (key == "serve") {
    if (value.empty()) return fail("must not be empty");
    config->serve = value;
  } else if (key == "python_path") {
    if (value.empty()) return fail("must not be empty");
    config->python_path = value;
  } else if (key == "work_dir") {
    if (value.empty()) {
      return fail("must not be empty");
    }
    config->work_dir = value;
  } else if (key == "log_level") {
    auto level = ParseLogLevel(value);
    if (!level.ok()) {
      return fail(level.status().message());
    }
    config->log_level = value;
  } else if (key == "kill_tasks_on_exit") {
    if (value == "true" || value == "1" || value == "yes") {
      config->kill_tasks_on_exit = true;
    } else if (value == "false" || value == "0" || value == "no") {
      config->kill_tasks_on_exit = false;
    } else {
      return fail("'" + value + "' is not true or false");
    }
  } else if (key == "join_token_file") {
    if (value.empty()) return fail("must not be empty");
    config->join_token_file = value;
  } else if (key == "master_ca_file") {
    if (value.empty()) return fail("must not be empty");
    config->master_ca_file = value;
  } else if (key == "kill_grace_ms") {
    const auto ms = IntegerIn(value, 0, 3600000);
    if (!ms) return fail("'" + value + "' is not a number of milliseconds in [0, 3600000]");
    config->kill_grace_ms = static_cast<int>(*ms);
  } else if (key == "task_dir_keep_hours") {
    const auto h = IntegerIn(value, 0, 24 * 3650);
    if (!h) return fail("'" + value + "' is not a number of hours in [0, 87600] (0: keep)");
    config->task_dir_keep_hours = static_cast<int>(*h);
  } else if (key == "cpu_threads_per_slot") {
    const auto n = IntegerIn(value, 0, 1024);
    if (!n) {
      return fail("'" + value + "' is not a thread count in [0, 1024] (0: cores / CPU slots)");
    }
    config->cpu_threads_per_slot = static_cast<int>(*n);
  } else {
    return InvalidArgument(where + ": unknown setting");
  }
  return Status::Ok();
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') {
    return "localhost";
  }
  return buf;
}

}  // namespace

Status LoadConfigFile(const std::string& path, AgentConfig* config) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return NotFound(path + ": cannot read the config file");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) {
    return Status::Ok();
  }
  if (!root.IsMap()) {
    return InvalidArgument(path + ": expected a mapping of settings");
  }
  for (const auto& item : root) {
    std::string key = item.first.as<std::string>("");
    std::string where = path + ": " + key;
    const YAML::Node& node = item.second;
    std::string value;
    if (key == "slots" && node.IsMap()) {
      // Also accept `slots: {cpu: 2}`.
      if (node.size() != 1 || !node["cpu"]) {
        return InvalidArgument(where + ": expected auto, cpu:N or {cpu: N}");
      }
      value = "cpu:" + node["cpu"].as<std::string>("");
    } else if (node.IsScalar()) {
      value = node.as<std::string>();
    } else {
      return InvalidArgument(where + ": expected a single value");
    }
    Status st = ApplySetting(key, value, where, config);
    if (!st.ok()) {
      if (st.message() == where + ": unknown setting") {
        return InvalidArgument(path + ": unknown key '" + key + "'");
      }
      return st;
    }
  }
  return Status::Ok();
}

namespace {

// The command line as CLI11 sees it: every setting as text, so the file < environment < flags
// precedence and the checks (ApplySetting) stay in one place. A setting given on the command
// line has its option's count() > 0.
struct Flags {
  std::string config_file;
  std::vector<std::pair<CLI::Option*, std::string>> settings;  // option, key; values below
  std::map<std::string, std::string> values;                    // key -> text
  bool version = false;
};

// Builds the app; `flags` receives the values and must outlive the parse.
void BuildApp(CLI::App& app, Flags* flags) {
  sf::cmdline::UseDefaults(app);
  app.add_option("--config", flags->config_file, "YAML file with any of the settings below (snake_case keys)");
  struct Setting {
    const char* key;
    const char* flag;
    const char* type;
    const char* help;
  };
  static const Setting kSettings[] = {
      {"master", "--master", "HOST:PORT", "the master's gRPC address (env SF_MASTER; default 127.0.0.1:8090)"},
      {"agent_id", "--agent-id", "ID", "this agent's id (default: the hostname)"},
      {"resource_pool", "--resource-pool,--pool", "NAME", "resource pool to join (default: default)"},
      {"join_token_file", "--join-token-file", "PATH",
       "file (mode 600) holding the cluster's join token, when the master requires one (or env SF_JOIN_TOKEN)"},
      {"master_ca_file", "--master-ca-file", "PATH",
       "PEM CA certificate(s) to verify the master's TLS certificate by; the agent and its trainers then dial "
       "the master over TLS (env SF_MASTER_CA_FILE; default: plaintext gRPC)"},
      {"slots", "--slots", "auto|cpu:N", "auto: one slot per GPU (NVML, else the CUDA runtime), else 1 CPU slot; cpu:N: N CPU slots (default: auto)"},
      {"nvml_library", "--nvml-library", "PATH",
       "NVML library for `auto` slots, for non-standard installs and tests (env SF_NVML_LIBRARY; default: "
       "libnvidia-ml.so.1 from the loader's path)"},
      {"trainer", "--trainer", "PATH", "trainer executable (default: sf-trainer next to sf-agent)"},
      {"serve", "--serve", "PATH",
       "sf-serve executable, for servers the master schedules (default: next to sf-agent, else "
       "../serve/sf-serve beside it, else on PATH)"},
      {"python_path", "--python-path", "DIR",
       "directory holding the `steadfast` Python package that user trials import (default: ../python or "
       "../lib/steadfast/python beside sf-agent)"},
      {"work_dir", "--work-dir", "DIR", "per-task directories (default: /tmp/steadfast-agent-<agent-id>)"},
      {"log_level", "--log-level", "LEVEL", "debug | info | warn | error (default: info)"},
      {"kill_grace_ms", "--kill-grace-ms", "MS", "SIGTERM-to-SIGKILL grace for --kill-tasks-on-exit (default: 10000)"},
      {"task_dir_keep_hours", "--task-dir-keep-hours", "H",
       "ended tasks' directories (logs, unpacked code) are deleted this long after their last write "
       "(default: 24; 0: kept)"},
      {"cpu_threads_per_slot", "--cpu-threads-per-slot", "N",
       "OpenMP threads a trainer gets per CPU slot it holds (sets OMP_NUM_THREADS; default 0: this "
       "machine's cores / CPU slots)"},
  };
  for (const Setting& s : kSettings) {
    CLI::Option* opt = app.add_option(s.flag, flags->values[s.key], s.help)->type_name(s.type);
    flags->settings.emplace_back(opt, s.key);
  }
  // A bare flag means true; --kill-tasks-on-exit=false also works.
  CLI::Option* kill = app.add_flag("--kill-tasks-on-exit", flags->values["kill_tasks_on_exit"],
                                   "kill running trainers when the agent stops (default: leave them running)");
  flags->settings.emplace_back(kill, "kill_tasks_on_exit");
  app.add_flag("--version", flags->version, "print the version and exit");
  app.footer("Precedence: flags > environment > config file > defaults. See docs/agent.md.");
}

}  // namespace

std::string UsageText() {
  CLI::App app("Runs Steadfast trainer processes on this machine for the master.", "sf-agent");
  Flags flags;
  BuildApp(app, &flags);
  return app.help();
}

Result<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& argv,
                                           const EnvLookup& env, const std::string& self_exe) {
  ParsedCommandLine parsed;
  CLI::App app("Runs Steadfast trainer processes on this machine for the master.", "sf-agent");
  Flags flags;
  BuildApp(app, &flags);
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());
  if (!reversed.empty()) reversed.pop_back();  // the program
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    parsed.action = CommandLineAction::kHelp;
    return parsed;
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string(e.what()) + " (see --help)");
  }
  if (flags.version) {
    parsed.action = CommandLineAction::kVersion;
    return parsed;
  }
  const std::string& config_file = flags.config_file;
  AgentConfig& config = parsed.config;
  if (!config_file.empty()) {
    SF_RETURN_IF_ERROR(LoadConfigFile(config_file, &config));
  }
  if (auto master = env("SF_MASTER"); master && !master->empty()) {
    SF_RETURN_IF_ERROR(ApplySetting("master", *master, "SF_MASTER", &config));
  }
  if (auto ca = env("SF_MASTER_CA_FILE"); ca && !ca->empty()) {
    SF_RETURN_IF_ERROR(ApplySetting("master_ca_file", *ca, "SF_MASTER_CA_FILE", &config));
  }
  if (auto nvml = env("SF_NVML_LIBRARY"); nvml && !nvml->empty()) {
    SF_RETURN_IF_ERROR(ApplySetting("nvml_library", *nvml, "SF_NVML_LIBRARY", &config));
  }
  for (const auto& [option, key] : flags.settings) {
    if (option->count() == 0) continue;
    SF_RETURN_IF_ERROR(ApplySetting(key, flags.values[key], option->get_name(), &config));
  }

  // The join token: the environment's, else the file's (a secret never comes from argv).
  if (auto token = env("SF_JOIN_TOKEN"); token && !token->empty()) {
    if (token->size() < 32) return InvalidArgument("SF_JOIN_TOKEN: the join token must be at least 32 characters");
    config.join_token = *token;
  } else if (!config.join_token_file.empty()) {
    SF_ASSIGN_OR_RETURN(config.join_token, ReadSecretFile(config.join_token_file, "join token"));
  }

  // TLS to the master: the CA is read now, so a wrong file stops the agent at start.
  if (!config.master_ca_file.empty()) {
    std::error_code absolute_ec;
    config.master_ca_file = fs::absolute(config.master_ca_file, absolute_ec).lexically_normal().string();
    SF_ASSIGN_OR_RETURN(config.master_ca_pem, LoadCaCertificates(config.master_ca_file, "master CA file"));
  }

  // Defaults that depend on the machine.
  if (config.agent_id.empty()) {
    config.agent_id = Hostname();
  }
  if (config.work_dir.empty()) {
    config.work_dir = "/tmp/steadfast-agent-" + config.agent_id;
  }
  if (config.trainer.empty()) {
    fs::path beside = fs::path(self_exe).parent_path() / "sf-trainer";
    std::error_code ec;
    if (!self_exe.empty() && fs::exists(beside, ec)) {
      config.trainer = beside.string();
    } else {
      config.trainer = "sf-trainer";  // looked up on PATH at spawn time
    }
  }
  if (config.serve.empty()) {
    config.serve = "sf-serve";  // looked up on PATH at spawn time
    if (!self_exe.empty()) {
      const fs::path bin = fs::path(self_exe).parent_path();
      for (const fs::path& candidate : {bin / "sf-serve", bin / ".." / "serve" / "sf-serve"}) {
        std::error_code exists_ec;
        if (fs::exists(candidate, exists_ec)) {
          config.serve = candidate.lexically_normal().string();
          break;
        }
      }
    }
  }
  if (config.python_path.empty() && !self_exe.empty()) {
    const fs::path bin = fs::path(self_exe).parent_path();
    for (const fs::path& candidate : {bin / ".." / "python", bin / ".." / "lib" / "steadfast" / "python"}) {
      std::error_code exists_ec;
      if (fs::exists(candidate / "steadfast" / "__init__.py", exists_ec)) {
        config.python_path = candidate.lexically_normal().string();
        break;
      }
    }
  }
  // Tasks run in their own directories: paths must not depend on the agent's cwd.
  std::error_code ec;
  if (!config.python_path.empty()) config.python_path = fs::absolute(config.python_path, ec).lexically_normal().string();
  config.work_dir = fs::absolute(config.work_dir, ec).lexically_normal().string();
  if (config.trainer.find('/') != std::string::npos) {
    config.trainer = fs::absolute(config.trainer, ec).lexically_normal().string();
  }
  if (config.serve.find('/') != std::string::npos) {
    config.serve = fs::absolute(config.serve, ec).lexically_normal().string();
  }
  return parsed;
}

}  // namespace sf::agent
