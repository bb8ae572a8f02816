// sf-agent's configuration: defaults < YAML file (--config FILE) < environment (SF_MASTER)
// < command-line flags. Parsed once, validated, then passed around by value.
//
// Flags (each also accepted as --flag=value):
//   --config FILE           YAML file with any of the keys below (snake_case)
//   --master HOST:PORT      the master's gRPC address (key `master`; env SF_MASTER);
//                           default 127.0.0.1:8090
//   --agent-id ID           default: the hostname                       (key `agent_id`)
//   --resource-pool NAME    default "default"; also --pool              (key `resource_pool`)
//   --join-token-file PATH  the cluster's join token, when the master requires one
//                           (key `join_token_file`; or the token itself in env SF_JOIN_TOKEN;
//                           never on the command line; the file must be mode 600)
//   --master-ca-file PATH   PEM CA certificate(s) to verify a TLS master by; with it the agent
//                           and its trainers dial the master over TLS (key `master_ca_file`;
//                           env SF_MASTER_CA_FILE); without it, plaintext gRPC
//   --slots auto|cpu:N      default auto                                (key `slots`)
//   --nvml-library PATH     NVML to load for `auto` slots, for non-standard installs and tests
//                           (key `nvml_library`; env SF_NVML_LIBRARY); default libnvidia-ml.so.1
//   --trainer PATH          default: sf-trainer next to the sf-agent binary (key `trainer`)
//   --serve PATH            sf-serve, for servers the master schedules (key `serve`); default:
//                           next to sf-agent, else ../serve/sf-serve (a build tree), else PATH
//   --work-dir DIR          default /tmp/steadfast-agent-<agent-id>     (key `work_dir`)
//   --log-level LEVEL       debug|info|warn|error, default info         (key `log_level`)
//   --kill-tasks-on-exit    kill trainers when the agent stops           (key `kill_tasks_on_exit`)
//   --kill-grace-ms MS      grace for those kills, default 10000          (key `kill_grace_ms`)
//   --task-dir-keep-hours H ended tasks' directories (their logs, unpacked code) are deleted
//                           this long after their last write, default 24, 0: kept
//                           (key `task_dir_keep_hours`)
//   --cpu-threads-per-slot N  OpenMP threads a trainer gets per CPU slot; default 0 = this
//                           machine's cores / the agent's CPU slots  (key `cpu_threads_per_slot`)
//   --help, --version
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf::agent {

// How the agent's slots are chosen.
struct SlotSpec {
  bool auto_detect = true;  // `auto`: one slot per GPU if any (slot_detector.h), else one CPU slot
  int cpu_slots = 0;        // `cpu:N` (auto_detect false)
};

// "auto" or "cpu:N" (N >= 1).
Result<SlotSpec> ParseSlotSpec(const std::string& text);

struct AgentConfig {
  std::string master = "127.0.0.1:8090";
  std::string agent_id;  // filled with the hostname when not given
  std::string resource_pool = "default";
  SlotSpec slots;
  std::string slots_text = "auto";
  std::string nvml_library;  // empty: GpuMonitor::kDefaultLibrary
  std::string trainer;   // filled by ResolveDefaults when not given
  std::string serve;     // sf-serve; filled by ResolveDefaults when not given
  // Where user trials import the `steadfast` package from (the agent prepends it to their
  // PYTHONPATH; docs/core-api.md): the directory holding `steadfast/`. Default: `../python`
  // beside sf-agent (a build tree), else `../lib/steadfast/python` (an install); empty when
  // neither exists.
  std::string python_path;
  std::string work_dir;  // filled by ResolveDefaults when not given
  std::string log_level = "info";
  bool kill_tasks_on_exit = false;
  int kill_grace_ms = 10000;
  int task_dir_keep_hours = 24;  // 0: ended tasks' directories are kept
  int cpu_threads_per_slot = 0;  // 0: cores / CPU slots (CpuThreadsPerSlot)
  std::string join_token_file;
  std::string join_token;  // read from join_token_file or SF_JOIN_TOKEN; never logged
  // TLS to the master (docs/security.md): the CA file (an absolute path, passed on to trainers
  // as SF_MASTER_CA_FILE) and its certificates, read at start. Empty: plaintext gRPC.
  std::string master_ca_file;
  std::string master_ca_pem;
};

// The OpenMP threads per CPU slot: `configured` when > 0, else max(1, cores / cpu_slots).
int CpuThreadsPerSlot(int configured, int cores, int cpu_slots);

// What the command line asked for besides a configuration.
enum class CommandLineAction { kRun, kHelp, kVersion };

struct ParsedCommandLine {
  CommandLineAction action = CommandLineAction::kRun;
  AgentConfig config;
};

// Reads an environment variable; returns nullopt when unset. Injected so tests need not touch
// the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

// Parses argv (argv[0] is the program) plus the optional config file and environment, and
// fills the defaults (hostname, trainer next to `self_exe`, work dir). Errors name the flag
// or the config key ("--slots: 'gpu:2' is not auto or cpu:N", "agent.yaml: unknown key 'mastr'").
Result<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& argv,
                                           const EnvLookup& env, const std::string& self_exe);

// Loads a YAML config file over `config` (keys as above).
Status LoadConfigFile(const std::string& path, AgentConfig* config);

// The --help text.
std::string UsageText();

// The running binary's path (/proc/self/exe), or "" when unknown.
std::string SelfExecutablePath();

}  // namespace sf::agent
