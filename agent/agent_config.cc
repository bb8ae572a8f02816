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
#include "common/config/daemon_config.h"
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

EnvLookup ProcessEnv() { return config::ProcessEnvironment(); }

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

// Every setting: its check-and-store (errors name the key), what --help shows, the environment
// variables that set it (common/config/daemon_config.h loads them all the same way).
const config::DaemonConfigLoader<AgentConfig>& Loader() {
  using C = AgentConfig;
  using V = const std::string&;
  // A non-empty text stored in `field`.
  auto text = [](const char* key, std::string C::*field) {
    return [key, field](C& c, V v) -> Status {
      if (v.empty()) return InvalidArgument(std::string(key) + ": must not be empty");
      c.*field = v;
      return Status::Ok();
    };
  };
  // A whole number in [lo, hi] stored in `field`; `what` says what it counts.
  auto number = [](const char* key, int C::*field, int64_t lo, int64_t hi, const std::string& what) {
    return [key, field, lo, hi, what](C& c, V v) -> Status {
      const auto n = IntegerIn(v, lo, hi);
      if (!n) return InvalidArgument(std::string(key) + ": '" + v + "' is not " + what);
      c.*field = static_cast<int>(*n);
      return Status::Ok();
    };
  };
  static const auto* loader = new config::DaemonConfigLoader<C>(
      "sf-agent", "Runs Steadfast trainer processes on this machine for the master.",
      "Precedence: flags > environment > config file > defaults. See docs/agent.md.",
      {
          {"master", "HOST:PORT", "the master's gRPC address (env SF_MASTER; default 127.0.0.1:8090)",
           text("master", &C::master), nullptr, {"SF_MASTER"}},
          {"agent_id", "ID", "this agent's id (default: the hostname)",
           [](C& c, V v) -> Status {
             if (v.empty() || v.find('/') != std::string::npos || v.find(' ') != std::string::npos) {
               return InvalidArgument("agent_id: '" + v + "' is not a valid agent id (non-empty, no '/' or spaces)");
             }
             c.agent_id = v;
             return Status::Ok();
           }},
          {"resource_pool", "NAME", "resource pool to join (default: default)", text("resource_pool", &C::resource_pool),
           nullptr, {}, {"--pool"}},
          {"join_token_file", "PATH",
           "file (mode 600) holding the cluster's join token, when the master requires one (or env SF_JOIN_TOKEN)",
           text("join_token_file", &C::join_token_file)},
          {"master_ca_file", "PATH",
           "PEM CA certificate(s) to verify the master's TLS certificate by; the agent and its trainers then dial "
           "the master over TLS (env SF_MASTER_CA_FILE; default: plaintext gRPC)",
           text("master_ca_file", &C::master_ca_file), nullptr, {"SF_MASTER_CA_FILE"}},
          {"slots", "auto|cpu:N",
           "auto: one slot per GPU (NVML, else the CUDA runtime), else 1 CPU slot; cpu:N: N CPU slots (default: auto)",
           [](C& c, V v) -> Status {
             auto spec = ParseSlotSpec(v);
             if (!spec.ok()) return InvalidArgument("slots: " + spec.status().message());
             c.slots = *spec;
             c.slots_text = v;
             return Status::Ok();
           },
           nullptr, {}, {},
           // Also `slots: {cpu: 2}` in the file.
           [](C& c, const YAML::Node& node, const std::string& where) -> Status {
             if (!node.IsMap() || node.size() != 1 || !node["cpu"]) {
               return InvalidArgument(where + ": slots: expected auto, cpu:N or {cpu: N}");
             }
             return Loader().Set(c, "slots", "cpu:" + node["cpu"].as<std::string>(""), where);
           }},
          {"nvml_library", "PATH",
           "NVML library for `auto` slots, for non-standard installs and tests (env SF_NVML_LIBRARY; default: "
           "libnvidia-ml.so.1 from the loader's path)",
           text("nvml_library", &C::nvml_library), nullptr, {"SF_NVML_LIBRARY"}},
          {"trainer", "PATH", "trainer executable (default: sf-trainer next to sf-agent)", text("trainer", &C::trainer)},
          {"serve", "PATH",
           "sf-serve executable, for servers the master schedules (default: next to sf-agent, else "
           "../serve/sf-serve beside it, else on PATH)",
           text("serve", &C::serve)},
          {"python_path", "DIR",
           "directory holding the `steadfast` Python package that user trials import (default: ../python or "
           "../lib/steadfast/python beside sf-agent)",
           text("python_path", &C::python_path)},
          {"work_dir", "DIR", "per-task directories (default: /tmp/steadfast-agent-<agent-id>)",
           text("work_dir", &C::work_dir)},
          {"log_level", "LEVEL", "debug | info | warn | error (default: info)",
           [](C& c, V v) -> Status {
             auto level = ParseLogLevel(v);
             if (!level.ok()) return InvalidArgument("log_level: " + level.status().message());
             c.log_level = v;
             return Status::Ok();
           }},
          {"kill_grace_ms", "MS", "SIGTERM-to-SIGKILL grace for --kill-tasks-on-exit (default: 10000)",
           number("kill_grace_ms", &C::kill_grace_ms, 0, 3600000, "a number of milliseconds in [0, 3600000]")},
          {"task_dir_keep_hours", "H",
           "ended tasks' directories (logs, unpacked code) are deleted this long after their last write "
           "(default: 24; 0: kept)",
           number("task_dir_keep_hours", &C::task_dir_keep_hours, 0, 24 * 3650,
                  "a number of hours in [0, 87600] (0: keep)")},
          {"cpu_threads_per_slot", "N",
           "OpenMP threads a trainer gets per CPU slot it holds (sets OMP_NUM_THREADS; default 0: this "
           "machine's cores / CPU slots)",
           number("cpu_threads_per_slot", &C::cpu_threads_per_slot, 0, 1024,
                  "a thread count in [0, 1024] (0: cores / CPU slots)")},
          {"kill_tasks_on_exit", "BOOL", "kill running trainers when the agent stops (default: leave them running)",
           [](C& c, V v) -> Status {
             if (v == "true" || v == "1" || v == "yes") {
               c.kill_tasks_on_exit = true;
             } else if (v == "false" || v == "0" || v == "no") {
               c.kill_tasks_on_exit = false;
             } else {
               return InvalidArgument("kill_tasks_on_exit: '" + v + "' is not true or false");
             }
             return Status::Ok();
           }},
      });
  return *loader;
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') {
    return "localhost";
  }
  return buf;
}

}  // namespace

Status LoadConfigFile(const std::string& path, AgentConfig* config) { return Loader().LoadFile(path, *config); }

std::string UsageText() { return Loader().Usage(); }

Result<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& argv,
                                           const EnvLookup& env, const std::string& self_exe) {
  ParsedCommandLine parsed;
  std::vector<std::string> args(argv.begin() + (argv.empty() ? 0 : 1), argv.end());  // not the program
  SF_ASSIGN_OR_RETURN(auto loaded, Loader().Load(args, env));
  if (loaded.action == config::DaemonAction::kHelp) {
    parsed.action = CommandLineAction::kHelp;
    return parsed;
  }
  if (loaded.action == config::DaemonAction::kVersion) {
    parsed.action = CommandLineAction::kVersion;
    return parsed;
  }
  AgentConfig& config = parsed.config;
  config = std::move(loaded.config);

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
