// `sf cmd run|list|logs|kill` and `sf task list|describe|logs|kill` (docs/tasks.md;
// master/tasks/task_coordinator.h). The task list also shows experiments' trials, by "t<id>" (their
// ids are numbered apart from tasks'), which describe and logs take too. Notebooks' and shells'
// own commands are cli/interactive_commands.cc.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/command_line.h"
#include "common/config/command_config.h"
#include "common/context/context_archive.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/tasks.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

// `cmd run`'s own flags.
struct RunFlags {
  v1::CreateCommandRequest request;
  std::vector<std::string> argv;  // after --
  std::string context;            // --context DIR
  std::string config_file;        // --config FILE
  bool detach = false;
};

bool Ended(const v1::Task& t) { return t.state() == "STOPPED" || t.state() == "FAILED" || t.state() == "COMPLETED"; }

std::string Joined(const v1::Task& t) {
  std::string out;
  for (const std::string& a : t.entrypoint()) out += (out.empty() ? "" : " ") + a;
  return out.size() > 60 ? out.substr(0, 57) + "..." : out;
}

// Prints the task's lines after `after_id` (stdout's to stdout, stderr's to stderr; with
// --json, each line's JSON on stdout), page by page; the last id printed stays in `after_id`.
bool PrintLogsAfter(const Flags& f, Api& api, int64_t id, int64_t& after_id) {
  constexpr int kPage = 10000;
  v1::GetTaskLogsRequest request;
  request.set_id(id);
  request.set_limit(kPage);
  while (true) {
    request.set_after_id(after_id);
    auto r = api.Call<v1::GetTrialLogsResponse>("GetTaskLogs", request);
    if (!r) return false;
    for (const v1::LogLine& l : r->message.logs()) {
      if (f.json) {
        std::cout << MessageJson(l) << "\n";
      } else {
        (l.stream() == "stderr" ? std::cerr : std::cout) << l.message() << "\n";
      }
      after_id = l.id();
    }
    std::cout.flush();
    if (r->message.logs_size() < kPage) return true;
  }
}

// What `sf cmd run` exits with once the command ended: its exit status (COMPLETED: 0), 1 when it
// failed without one, 130 when it was killed.
int ExitStatus(const v1::Task& t) {
  if (t.state() == "COMPLETED") return 0;
  if (t.has_exit_code() && t.exit_code() > 0) return t.exit_code() > 255 ? 255 : t.exit_code();
  return t.state() == "STOPPED" ? 130 : 1;
}

// The request of `sf cmd run`: its --config FILE (config/command_config.h) with the command
// line over it. False (after saying why on stderr) when the file or the command is bad.
bool BuildRequest(const Flags& f, const RunFlags& flags, v1::CreateCommandRequest& request) {
  request = flags.request;
  std::vector<std::string> argv = flags.argv;
  std::string workspace = f.workspace, context_dir = flags.context, context_flag = "--context";
  if (!flags.config_file.empty()) {
    std::ifstream in(flags.config_file, std::ios::binary);
    std::stringstream text;
    if (!in || !(text << in.rdbuf())) {
      std::cerr << "sf: --config " << flags.config_file << ": cannot read the file\n";
      return false;
    }
    config::CommandConfigResult parsed = config::ParseCommandConfig(text.str());
    if (!parsed.errors.empty()) {
      for (const auto& e : parsed.errors) std::cerr << "sf: " << e.ToStringWithLocation(flags.config_file) << "\n";
      return false;
    }
    const config::CommandConfig& c = parsed.config;
    if (argv.empty()) argv = c.entrypoint;
    if (request.slots() == 0 && c.slots) request.set_slots(static_cast<int32_t>(*c.slots));
    if (request.resource_pool().empty() && c.resource_pool) request.set_resource_pool(*c.resource_pool);
    if (request.priority() == 0 && c.priority) request.set_priority(static_cast<int32_t>(*c.priority));
    if (workspace.empty() && c.workspace) workspace = *c.workspace;
    if (context_dir.empty() && c.context) {
      // Relative to the file's directory, as an experiment's context_directory.
      const std::filesystem::path dir = std::filesystem::path(flags.config_file).parent_path();
      context_dir = std::filesystem::path(*c.context).is_absolute() || dir.empty() ? *c.context
                                                                                   : (dir / *c.context).string();
      context_flag = flags.config_file + ": context";
    }
  }
  if (argv.empty()) {
    // As CLI11 names a missing positional (the usage errors' form).
    std::cerr << "sf cmd run: command is required: the program after -- (sf cmd run -- PROGRAM ARGS...), or "
                 "entrypoint in --config FILE\nrun 'sf cmd run --help' for usage\n";
    return false;
  }
  for (const std::string& a : argv) request.add_entrypoint(a);
  request.set_workspace(workspace);
  if (!context_dir.empty()) {
    auto packed = context::PackContext(context_dir);
    if (!packed.ok()) {
      std::cerr << "sf: " << context_flag << " " << context_dir << ": " << packed.status().message() << "\n";
      return false;
    }
    request.set_context(packed->archive);
  }
  return true;
}

// Prints the task's output as it comes until the task ended and every line is printed, saying on
// stderr (without --json) why it waits while it is queued; the task as it ended in `t`. False
// when a call failed (api.exit_code says how).
bool FollowTask(const Flags& f, Api& api, v1::Task& t, const char* kind) {
  int64_t after_id = 0;
  std::string told;  // the last pending reason said
  v1::TaskRequest get;
  get.set_id(t.id());
  while (true) {
    if (!PrintLogsAfter(f, api, t.id(), after_id)) return false;
    if (Ended(t)) return true;
    if (!f.json && t.state() == "QUEUED" && !t.pending_reason().empty() && t.pending_reason() != told) {
      told = t.pending_reason();
      std::cerr << "sf: " << kind << " " << t.id() << " waits: " << told << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto now = api.Call<v1::TaskResponse>("GetTask", get);
    if (!now) return false;
    t = now->message.task();
  }
}

int RunCommand(const Flags& f, const RunFlags& flags, Api& api) {
  v1::CreateCommandRequest request;
  if (!BuildRequest(f, flags, request)) return kExitUsage;
  auto created = api.Call<v1::TaskResponse>("CreateCommand", request);
  if (!created) return api.exit_code;
  v1::Task t = created->message.task();
  if (flags.detach) {
    if (f.json) {
      std::cout << created->json << "\n";
    } else {
      std::cerr << "command " << t.id() << " is " << t.state() << " (sf cmd logs " << t.id() << " prints its output)\n";
      std::cout << t.id() << "\n";
    }
    return kExitOk;
  }
  if (!f.json) std::cerr << "sf: command " << t.id() << " is " << t.state() << "\n";
  if (!FollowTask(f, api, t, "command")) return api.exit_code;
  if (!f.json && t.state() != "COMPLETED") {
    std::cerr << "sf: command " << t.id() << " " << t.state() << (t.error().empty() ? "" : ": " + t.error()) << "\n";
  }
  return ExitStatus(t);
}

void PrintTask(const v1::Task& t) {
  std::string argv;
  for (const std::string& a : t.entrypoint()) argv += (argv.empty() ? "" : " ") + a;
  for (const auto& [label, text] : std::vector<std::pair<const char*, std::string>>{
           {"id", std::to_string(t.id())},
           {"kind", t.kind()},
           {"state", t.state()},
           {"pendingReason", t.pending_reason()},
           {"entrypoint", argv},
           {"slots", std::to_string(t.slots())},
           {"resourcePool", t.resource_pool()},
           {"priority", std::to_string(t.priority())},
           {"agent", t.agent_id()},
           {"allocation", t.allocation_id()},
           {"restarts", std::to_string(t.restarts())},
           {"exitCode", t.has_exit_code() ? std::to_string(t.exit_code()) : ""},
           {"owner", t.owner()},
           {"workspace", t.workspace()},
           {"createdAt", TimeText(t.has_created_at(), t.created_at())},
           {"endedAt", TimeText(t.has_ended_at(), t.ended_at())},
           {"error", t.error()}}) {
    std::cout << label << ": " << text << "\n";
  }
}

}  // namespace

int ListTasks(const Flags& f, Api& api, const std::string& kind, bool all) {
  v1::ListTasksRequest request;
  request.set_kind(kind);
  request.set_include_ended(all);
  return CallAndPrint<v1::ListTasksResponse>(f, api, "ListTasks", request, [&](const v1::ListTasksResponse& r) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::Task& t : r.tasks()) {
      const bool trial = t.kind() == "TRIAL";
      rows.push_back({(trial ? "t" : "") + std::to_string(t.id()), t.kind(), t.state(),
                      t.has_exit_code() ? std::to_string(t.exit_code()) : "", std::to_string(t.slots()), t.agent_id(),
                      t.owner(), TimeText(t.has_created_at(), t.created_at()),
                      trial ? "experiment " + std::to_string(t.experiment_id()) + ": " + Joined(t) : Joined(t)});
    }
    PrintTable({"ID", "KIND", "STATE", "EXIT", "SLOTS", "AGENT", "OWNER", "CREATED", "ENTRYPOINT"}, rows);
  });
}

// The trial a task command's ID names ("t12", as `sf task list` prints a trial), else nullopt.
std::optional<int64_t> TrialRef(const std::string& id) {
  if (id.size() < 2 || id.size() > 19 || id[0] != 't' || id[1] == '0') return std::nullopt;
  for (size_t i = 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return std::nullopt;
  }
  return std::stoll(id.substr(1));
}

// The command's flags with ID the trial's number, for the trial commands.
Flags ForTrial(const Flags& f, int64_t trial, bool follow) {
  Flags g = f;
  g.id = std::to_string(trial);
  g.follow = follow;
  return g;
}

// GetTask or KillTask for the task the command's ID names (a trial's "t12": its description;
// kill is refused, a trial ends with its experiment).
int OneTask(const Flags& f, Api& api, const std::string& method) {
  if (auto trial = TrialRef(f.id)) {
    if (method == "GetTask") return DescribeTrial(ForTrial(f, *trial, false), api);
    std::cerr << "sf: " << f.id << " is trial " << *trial
              << ": a trial is stopped with its experiment (sf experiment kill, or pause; sf trial describe " << *trial
              << " names it)\n";
    return kExitUsage;
  }
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  v1::TaskRequest request;
  request.set_id(*id);
  return CallAndPrint<v1::TaskResponse>(f, api, method, request, [&](const v1::TaskResponse& r) {
    if (method == "KillTask") {
      std::cout << "task " << r.task().id() << " " << r.task().state() << "\n";
    } else {
      PrintTask(r.task());
    }
  });
}

// `logs ID [-f]`: the task's output so far; with -f, also what follows until the task ended.
int TaskLogs(const Flags& f, Api& api, bool follow) {
  if (auto trial = TrialRef(f.id)) return TrialLogs(ForTrial(f, *trial, follow), api);
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  if (!follow) {
    int64_t after_id = 0;
    return PrintLogsAfter(f, api, *id, after_id) ? kExitOk : api.exit_code;
  }
  v1::TaskRequest get;
  get.set_id(*id);
  auto now = api.Call<v1::TaskResponse>("GetTask", get);
  if (!now) return api.exit_code;
  v1::Task t = now->message.task();
  return FollowTask(f, api, t, "task") ? kExitOk : api.exit_code;
}

void AddTaskCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* cmd = sf.add_subcommand("cmd", "commands: a program run once on the cluster's slots");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<RunFlags>();
  ClusterCommand run = AddCommand(cmd, "run", "run PROGRAM ARGS... on the cluster, print its output, exit with its status",
                                  action, [flags](const Flags& f, Api& api) { return RunCommand(f, *flags, api); });
  v1::CreateCommandRequest* r = &flags->request;
  run.app->add_option_function<int>("--slots", [r](int v) { r->set_slots(v); }, "slots it holds, one process each (default 1)")
      ->check(cmdline::AtLeast(1))
      ->type_name("N");
  run.app->add_option_function<std::string>("--pool", [r](const std::string& v) { r->set_resource_pool(v); },
                                            "the resource pool (default: default)");
  run.app->add_option_function<int>("--priority", [r](int v) { r->set_priority(v); },
                                    "scheduling priority, 1-99, lower first (default 42)")
      ->check(cmdline::AtLeast(1))
      ->type_name("N");
  run.app->add_option("--context", flags->context,
                      "a directory whose files are the command's working directory (.sfignore applies)")
      ->type_name("DIR");
  run.app->add_option("-w,--workspace", run.flags->workspace, "the workspace it goes to (editor there needed)");
  run.app->add_option("--config", flags->config_file,
                      "a YAML file with its entrypoint, resources, workspace and context (docs/tasks.md); "
                      "flags and a program after -- override it")
      ->type_name("FILE");
  run.app->add_flag("--detach", flags->detach, "print its id and exit; do not wait for it");
  run.app->add_option("command", flags->argv, "-- PROGRAM ARGS...: what it runs (or entrypoint in --config)")
      ->expected(-1);

  auto all = std::make_shared<bool>(false);
  AddCommand(cmd, "list", "list the commands (live ones; --all: also ended ones)", action,
             [all](const Flags& f, Api& api) { return ListTasks(f, api, "COMMAND", *all); })
      .app->add_flag("--all", *all, "also the newest 100 ended commands");
  auto follow_cmd = std::make_shared<bool>(false);
  AddCommand(cmd, "logs", "print a command's output (-f: and follow it until the command ends)", action,
             [follow_cmd](const Flags& f, Api& api) { return TaskLogs(f, api, *follow_cmd); })
      .Id("ID", "the command's id")
      .app->add_flag("-f,--follow", *follow_cmd, "keep printing its output until it ends");
  AddCommand(cmd, "kill", "kill a command", action,
             [](const Flags& f, Api& api) { return OneTask(f, api, "KillTask"); })
      .Id("ID", "the command's id");

  CLI::App* task =
      sf.add_subcommand("task", "every task: trials, servers, commands, notebooks and shells");
  task->require_subcommand(1);
  auto every = std::make_shared<bool>(false);
  AddCommand(task, "list", "list the tasks (live ones; --all: also ended ones)", action,
             [every](const Flags& f, Api& api) { return ListTasks(f, api, "", *every); })
      .app->add_flag("--all", *every, "also the newest 100 ended tasks and 100 ended trials");
  AddCommand(task, "describe", "show a task: what it runs, its state, why it waits, where it runs", action,
             [](const Flags& f, Api& api) { return OneTask(f, api, "GetTask"); })
      .Id("ID", "the task's id (a trial's: t<id>, as the list prints it)");
  auto follow_task = std::make_shared<bool>(false);
  AddCommand(task, "logs", "print a task's output (-f: and follow it until the task ends)", action,
             [follow_task](const Flags& f, Api& api) { return TaskLogs(f, api, *follow_task); })
      .Id("ID", "the task's id (a trial's: t<id>)")
      .app->add_flag("-f,--follow", *follow_task, "keep printing its output until it ends");
  AddCommand(task, "kill", "kill a task (a server: as sf serve stop)", action,
             [](const Flags& f, Api& api) { return OneTask(f, api, "KillTask"); })
      .Id("ID", "the task's id");
}

}  // namespace sf::cli
