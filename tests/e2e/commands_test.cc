// `sf cmd run` on a real local cluster (docs/tasks.md; master/tasks/task_coordinator.h): a
// command runs once on an agent's slot with its context directory as its working directory,
// its output comes back to the terminal in order and it exits with the program's status; torch
// imports in it; a command waiting for a busy slot says why; `sf cmd kill` ends one; `sf task
// list` shows them, beside the trials of experiments; bad requests name what is wrong.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
using namespace std::chrono_literals;

Result<sf::CommandResult> Sf(Cluster& c, std::vector<std::string> args, std::chrono::seconds timeout = 180s) {
  // "sf cmd run --master URL ...": the flag before `--` and the program's own arguments.
  args.insert(args.begin() + 2, {"--master", c.url()});
  args.insert(args.begin(), Cluster::Binary("sf"));
  sf::CommandOptions o;
  o.timeout = timeout;
  o.env["SF_CA_FILE"] = c.ca_file();  // a TLS cluster's CA ("" otherwise: none)
  return sf::RunCommand(args, o);
}

// The id in "command N is ..." of sf's output; 0 when there is none.
int64_t CommandId(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex(R"(command (\d+) is)")) ? std::stoll(m[1]) : 0;
}

std::string TaskState(Cluster& c, int64_t id, Value* task = nullptr) {
  auto [status, body] = c.Get("/api/v1/tasks/" + std::to_string(id));
  if (status != 200 || !body.Find("task")) return "HTTP " + std::to_string(status) + " " + body.ToJson();
  if (task) *task = *body.Find("task");
  const Value* state = body.Find("task")->Find("state");
  return state ? state->as_string() : "";
}

// TLS and users on, as a deployment runs (sf over HTTPS, with the admin's token).
ClusterLayout Deployed() {
  ClusterLayout layout;
  layout.tls = true;
  return layout;
}

TEST(Commands, RunOnceWithTheirContextPrintTheirOutputAndExitWithTheirStatus) {
  Cluster c(1, 1, Deployed());
  // Refusals, before anything is scheduled.
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({})", "entrypoint: required"},
           {R"({"entrypoint": ["sh"], "slots": 5})", "slots: 5 is more than"},
           {R"({"entrypoint": ["sh"], "priority": 100})", "priority: 100 must be 1..99"},
           {R"({"entrypoint": ["sh"], "context": "bm90IGEgdGFy"})", "context:"},
       }) {
    auto [code, reply] = c.Post("/api/v1/commands", body);
    EXPECT_EQ(code, 400) << body << " -> " << reply.ToJson();
    const Value* m = reply.Find("message");
    EXPECT_TRUE(m && m->as_string().find(message) != std::string::npos) << body << " -> " << reply.ToJson();
  }

  // Its context is its working directory; stdout and stderr come back; its status is sf's.
  TempDir context;
  context.WriteFile("greeting.txt", "hello from the context\n");
  auto failing = Sf(c, {"cmd", "run", "--context", context.path(), "--", "/bin/sh", "-c",
                        "cat greeting.txt; echo to-stderr >&2; exit 3"});
  ASSERT_TRUE(failing.ok()) << failing.status().ToString();
  EXPECT_EQ(failing->exit_code, 3) << failing->output;
  EXPECT_NE(failing->output.find("hello from the context\n"), std::string::npos) << failing->output;
  EXPECT_NE(failing->output.find("to-stderr\n"), std::string::npos) << failing->output;
  const int64_t failed_id = CommandId(failing->output);
  ASSERT_GT(failed_id, 0) << failing->output;
  Value failed;
  EXPECT_EQ(TaskState(c, failed_id, &failed), "FAILED");
  EXPECT_EQ(failed.Find("exitCode") ? failed.Find("exitCode")->as_double() : -1, 3) << failed.ToJson();
  EXPECT_EQ(failed.Find("kind")->as_string(), "COMMAND");
  EXPECT_EQ(failed.Find("restarts") ? failed.Find("restarts")->as_double() : 0, 0) << "a command is not restarted";

  // torch imports on the cluster, and a command that succeeds exits 0.
  // /usr/bin/python3 has python3-torch (a python3 earlier on PATH may not).
  auto torch = Sf(c, {"cmd", "run", "--", "/usr/bin/python3", "-c", "import torch; print('torch', torch.__version__)"}, 300s);
  ASSERT_TRUE(torch.ok()) << torch.status().ToString();
  EXPECT_EQ(torch->exit_code, 0) << torch->output;
  EXPECT_TRUE(std::regex_search(torch->output, std::regex(R"(torch \d+\.\d+)"))) << torch->output;

  // A command holding the one slot; another waits and says why; kill ends both.
  auto holder = Sf(c, {"cmd", "run", "--detach", "--", "sleep", "600"});
  ASSERT_TRUE(holder.ok() && holder->exit_code == 0) << (holder.ok() ? holder->output : holder.status().ToString());
  const int64_t holding = CommandId(holder->output);
  ASSERT_GT(holding, 0) << holder->output;
  ASSERT_TRUE(c.WaitFor([&] { return TaskState(c, holding) == "RUNNING"; }, 60s)) << TaskState(c, holding);
  auto waiter = Sf(c, {"cmd", "run", "--detach", "--", "true"});
  ASSERT_TRUE(waiter.ok() && waiter->exit_code == 0);
  const int64_t waiting = CommandId(waiter->output);
  ASSERT_GT(waiting, 0) << waiter->output;
  Value queued;
  ASSERT_TRUE(c.WaitFor(
      [&] {
        return TaskState(c, waiting, &queued) == "QUEUED" && queued.Find("pendingReason") &&
               !queued.Find("pendingReason")->as_string().empty();
      },
      30s))
      << queued.ToJson();
  auto listed = Sf(c, {"task", "list"});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(std::regex_search(listed->output, std::regex(std::to_string(holding) + " +COMMAND +RUNNING")))
      << listed->output;
  EXPECT_TRUE(std::regex_search(listed->output, std::regex(std::to_string(waiting) + " +COMMAND +QUEUED")))
      << listed->output;
  auto killed = Sf(c, {"cmd", "kill", std::to_string(holding)});
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->exit_code, 0) << killed->output;
  EXPECT_TRUE(c.WaitFor([&] { return TaskState(c, holding) == "STOPPED"; }, 60s)) << TaskState(c, holding);
  // The slot is free: the waiting one runs and completes.
  EXPECT_TRUE(c.WaitFor([&] { return TaskState(c, waiting) == "COMPLETED"; }, 60s)) << TaskState(c, waiting);

  // Its output stays readable; ended ones are listed with --all.
  auto logs = Sf(c, {"cmd", "logs", std::to_string(failed_id)});
  ASSERT_TRUE(logs.ok());
  EXPECT_NE(logs->output.find("hello from the context"), std::string::npos) << logs->output;
  auto all = Sf(c, {"cmd", "list", "--all"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(std::regex_search(all->output, std::regex(std::to_string(failed_id) + " +COMMAND +FAILED +3")))
      << all->output;
  EXPECT_EQ(c.Get("/api/v1/tasks/999999").first, 404);
  EXPECT_EQ(c.Post("/api/v1/tasks/999999/kill", "").first, 404);
}

// `sf cmd run --config FILE` (common/config/command_config.h): the file gives the program, the
// resources and the context (relative to the file); flags and a program after -- win over it;
// a bad file is refused naming the field and the line. `sf cmd logs ID -f` prints the output as
// it comes and returns when the command ended.
TEST(Commands, AConfigFileDescribesOneAndLogsFollowItToTheEnd) {
  Cluster c(1, 1);
  TempDir dir;
  dir.WriteFile("src/data.txt", "from the config's context\n");
  const std::string config = dir.WriteFile(
      "cmd.yaml",
      "entrypoint: 'cat data.txt; for i in 1 2 3; do echo line-$i; sleep 1; done; exit 4'\n"
      "resources:\n  slots: 1\n  priority: 30\n"
      "context: src\n");
  auto detached = Sf(c, {"cmd", "run", "--config", config, "--detach"});
  ASSERT_TRUE(detached.ok()) << detached.status().ToString();
  ASSERT_EQ(detached->exit_code, 0) << detached->output;
  const int64_t id = CommandId(detached->output);
  ASSERT_GT(id, 0) << detached->output;
  // Follows it from the start to its end: every line, in order, then returns.
  auto followed = Sf(c, {"cmd", "logs", std::to_string(id), "-f"});
  ASSERT_TRUE(followed.ok()) << followed.status().ToString();
  EXPECT_EQ(followed->exit_code, 0) << followed->output;
  EXPECT_TRUE(std::regex_search(followed->output,
                                std::regex("from the config's context\n(.|\n)*line-1\n(.|\n)*line-2\n(.|\n)*line-3\n")))
      << followed->output;
  Value task;
  EXPECT_EQ(TaskState(c, id, &task), "FAILED") << "-f returned before the command ended";
  EXPECT_EQ(task.Find("exitCode") ? task.Find("exitCode")->as_double() : -1, 4) << task.ToJson();
  EXPECT_EQ(task.Find("priority") ? task.Find("priority")->as_double() : -1, 30) << task.ToJson();

  // The command line over the file: another priority, another program.
  auto overridden = Sf(c, {"cmd", "run", "--config", config, "--priority", "20", "--", "/bin/echo", "overridden"});
  ASSERT_TRUE(overridden.ok()) << overridden.status().ToString();
  EXPECT_EQ(overridden->exit_code, 0) << overridden->output;
  EXPECT_NE(overridden->output.find("overridden\n"), std::string::npos) << overridden->output;
  EXPECT_EQ(overridden->output.find("line-1"), std::string::npos) << overridden->output;
  Value second;
  TaskState(c, CommandId(overridden->output), &second);
  EXPECT_EQ(second.Find("priority") ? second.Find("priority")->as_double() : -1, 20) << second.ToJson();

  // Refused before anything is created: a bad file names the field and its line; no program.
  const std::string bad = dir.WriteFile("bad.yaml", "entrypoint: [true]\nresources:\n  slots: 0\n  pool: gpu\n");
  auto refused = Sf(c, {"cmd", "run", "--config", bad});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit_code, 2) << refused->output;
  EXPECT_NE(refused->output.find(bad + ":3:"), std::string::npos) << refused->output;
  EXPECT_NE(refused->output.find("resources.slots"), std::string::npos) << refused->output;
  EXPECT_NE(refused->output.find("resource_pool"), std::string::npos) << "did you mean: " << refused->output;
  const std::string empty = dir.WriteFile("empty-entrypoint.yaml", "resources:\n  slots: 1\n");
  auto nothing = Sf(c, {"cmd", "run", "--config", empty});
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(nothing->exit_code, 2) << nothing->output;
  EXPECT_NE(nothing->output.find("command is required"), std::string::npos) << nothing->output;
  auto [status, list] = c.Get("/api/v1/tasks?kind=COMMAND&include_ended=true");
  ASSERT_EQ(status, 200) << list.ToJson();
  const Value* tasks = list.Find("tasks");
  EXPECT_EQ(tasks && tasks->is_list() ? tasks->as_list().size() : 0u, 2u) << "a refused config created a command: "
                                                                          << list.ToJson();
}

}  // namespace
}  // namespace sf::testing

namespace sf::testing {
namespace {

// The one task list (master/tasks/trial_tasks.h): an experiment's trials are listed beside
// commands as tasks of kind TRIAL ("t<id>" in `sf task list`), with their experiment, slots,
// pool, agent and why a queued one waits; `sf task logs|describe t<id>` serve a trial; kill is
// refused (a trial ends with its experiment); an ended trial leaves the live list.
TEST(TaskList, ShowsTrialsBesideCommandsAndServesTheirLogs) {
  Cluster c(1, 1, Deployed());
  const int64_t experiment = c.Submit(TinyExperiment(2, 1000000, 10, "task-list-e2e"));
  ASSERT_GT(experiment, 0);
  ASSERT_TRUE(c.WaitFor([&] { return !c.TrainerPids().empty(); }, 120s));
  auto command = Sf(c, {"cmd", "run", "--detach", "--", "/bin/true"});
  ASSERT_TRUE(command.ok()) << command.status().ToString();
  const int64_t command_id = CommandId(command->output);
  ASSERT_GT(command_id, 0) << command->output;

  Value running, queued;
  ASSERT_TRUE(c.WaitFor(
      [&] {
        auto [status, list] = c.Get("/api/v1/tasks?kind=TRIAL");
        if (status != 200 || !list.Find("tasks") || list.Find("tasks")->as_list().size() != 2) return false;
        for (const Value& t : list.Find("tasks")->as_list()) {
          const std::string state = t.Find("state") ? t.Find("state")->as_string() : "";
          if (state == "RUNNING") running = t;
          if (state == "QUEUED") queued = t;
        }
        return running.Find("id") && queued.Find("id") && queued.Find("pendingReason");
      },
      120s))
      << c.Get("/api/v1/tasks?kind=TRIAL").second.ToJson();
  const std::string trial = "t" + std::to_string(Id(running));
  EXPECT_EQ(running.Find("kind")->as_string(), "TRIAL");
  EXPECT_EQ(running.Find("experimentId") ? running.Find("experimentId")->as_string() : "", std::to_string(experiment))
      << running.ToJson();
  EXPECT_EQ(running.Find("slots") ? running.Find("slots")->as_double() : 0, 1) << running.ToJson();
  EXPECT_EQ(running.Find("resourcePool") ? running.Find("resourcePool")->as_string() : "", "default");
  EXPECT_FALSE(running.Find("agentId") ? running.Find("agentId")->as_string().empty() : true) << running.ToJson();
  EXPECT_EQ(running.Find("owner") ? running.Find("owner")->as_string() : "", "admin") << running.ToJson();
  EXPECT_NE(queued.Find("pendingReason")->as_string(), "") << queued.ToJson();

  // One list in the terminal: the trials by "t<id>", the command by its id.
  auto listed = Sf(c, {"task", "list", "--all"});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->exit_code, 0) << listed->output;
  EXPECT_TRUE(std::regex_search(listed->output, std::regex(trial + R"( +TRIAL +RUNNING .*experiment )" +
                                                           std::to_string(experiment) + ": sf-trainer")))
      << listed->output;
  EXPECT_TRUE(std::regex_search(listed->output, std::regex("\nt" + std::to_string(Id(queued)) + " +TRIAL +QUEUED")))
      << listed->output;
  EXPECT_TRUE(std::regex_search(listed->output, std::regex("\n" + std::to_string(command_id) + " +COMMAND ")))
      << listed->output;
  auto commands = Sf(c, {"cmd", "list", "--all"});
  ASSERT_TRUE(commands.ok());
  EXPECT_EQ(commands->output.find("TRIAL"), std::string::npos) << commands->output;

  // A trial's logs and description through the task commands, as through the trial's.
  ASSERT_TRUE(c.WaitFor(
      [&] {
        auto l = Sf(c, {"trial", "logs", std::to_string(Id(running))});
        return l.ok() && !l->output.empty();
      },
      60s));
  auto logs = Sf(c, {"task", "logs", trial});
  ASSERT_TRUE(logs.ok());
  EXPECT_EQ(logs->exit_code, 0) << logs->output;
  EXPECT_FALSE(logs->output.empty());
  auto described = Sf(c, {"task", "describe", trial});
  ASSERT_TRUE(described.ok());
  EXPECT_NE(described->output.find("experimentId: " + std::to_string(experiment)), std::string::npos)
      << described->output;
  auto kill = Sf(c, {"task", "kill", trial});
  ASSERT_TRUE(kill.ok());
  EXPECT_EQ(kill->exit_code, 2) << kill->output;
  EXPECT_NE(kill->output.find("sf experiment kill"), std::string::npos) << kill->output;
  EXPECT_EQ(c.Get("/api/v1/tasks?kind=EXPERIMENT").first, 400);

  // Ended trials leave the live list and stay in the full one, in the tasks' words.
  ASSERT_EQ(c.Post("/api/v1/experiments/" + std::to_string(experiment) + "/kill", "").first, 200);
  ASSERT_TRUE(c.WaitForState(experiment, "EXPERIMENT_STATE_CANCELED", 60s));
  auto [status, live] = c.Get("/api/v1/tasks?kind=TRIAL");
  ASSERT_EQ(status, 200);
  EXPECT_TRUE(!live.Find("tasks") || live.Find("tasks")->as_list().empty()) << live.ToJson();
  auto [all_status, all] = c.Get("/api/v1/tasks?kind=TRIAL&include_ended=true");
  ASSERT_EQ(all_status, 200);
  ASSERT_TRUE(all.Find("tasks") && all.Find("tasks")->as_list().size() == 2) << all.ToJson();
  for (const Value& t : all.Find("tasks")->as_list()) EXPECT_EQ(t.Find("state")->as_string(), "STOPPED") << t.ToJson();
}

}  // namespace
}  // namespace sf::testing
