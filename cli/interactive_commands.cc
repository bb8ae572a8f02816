// `sf notebook start|list|kill` and `sf shell start|open|list|kill`: interactive tasks on the
// cluster's slots, reached through the master's proxy at MASTER/proxy/ID/ (docs/tasks.md,
// "Notebooks" and "Shells"; master/api/task_methods.cc; python/steadfast/notebook.py, shell.py).
// Each is a task: `sf task logs|describe` work on them too.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/shell_session.h"
#include "common/command_line.h"
#include "common/context/context_archive.h"
#include "common/value.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/tasks.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

// `notebook start`'s and `shell start`'s flags.
struct StartFlags {
  v1::InteractiveTaskRequest request;  // slots, pool, priority, idle timeout
  std::string context;                 // --context DIR
  bool detach = false;                 // do not wait for it to answer
  int wait_seconds = 300;
  bool open = false;
};

// What differs between the kinds: the API method, the path that answers once it is up, and the
// words.
struct Kind {
  const char* noun;    // "notebook"
  const char* method;  // "CreateNotebook"
  const char* ready;   // "api/status": a GET of /proxy/ID/<ready> answers 200 once it is up
};

// Opens `url` in the desktop's browser (xdg-open), without waiting for it; false when there is
// none to run.
bool OpenInBrowser(const std::string& url) {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    execlp("xdg-open", "xdg-open", url.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int Start(const Flags& f, const StartFlags& flags, const Kind& kind, Api& api) {
  v1::InteractiveTaskRequest request = flags.request;
  request.set_workspace(f.workspace);
  if (!flags.context.empty()) {
    auto packed = context::PackContext(flags.context);
    if (!packed.ok()) {
      std::cerr << "sf: --context " << flags.context << ": " << packed.status().message() << "\n";
      return kExitUsage;
    }
    request.set_context(packed->archive);
  }
  auto created = api.Call<v1::TaskResponse>(kind.method, request);
  if (!created) return api.exit_code;
  v1::Task t = created->message.task();
  const std::string path = "/proxy/" + std::to_string(t.id()) + "/";
  const std::string url = api.client.base_url() + path;
  if (!f.json) std::cerr << "sf: " << kind.noun << " " << t.id() << " is " << t.state() << "\n";
  if (!flags.detach) {
    // Until it answers through the master (it reported its URL), or the task ended.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(flags.wait_seconds);
    std::string told;
    v1::TaskRequest get;
    get.set_id(t.id());
    while (true) {
      auto now = api.Call<v1::TaskResponse>("GetTask", get);
      if (!now) return api.exit_code;
      t = now->message.task();
      if (t.state() == "STOPPED" || t.state() == "FAILED" || t.state() == "COMPLETED") {
        std::cerr << "sf: " << kind.noun << " " << t.id() << " " << t.state()
                  << (t.error().empty() ? "" : ": " + t.error()) << " (sf task logs " << t.id()
                  << " shows its output)\n";
        return kExitFailed;
      }
      if (t.state() == "RUNNING") {
        auto answer = api.client.Get(path + kind.ready);
        if (answer.ok() && answer->status == 200) break;
      } else if (!f.json && !t.pending_reason().empty() && t.pending_reason() != told) {
        told = t.pending_reason();
        std::cerr << "sf: " << kind.noun << " " << t.id() << " waits: " << told << "\n";
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "sf: " << kind.noun << " " << t.id() << " does not answer after "
                  << flags.wait_seconds << " s (it is " << t.state() << "; sf task logs " << t.id()
                  << " shows its output)\n";
        return kExitFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  if (f.json) {
    std::cout << created->json << "\n";
  } else if (std::string(kind.noun) == "shell") {
    std::cerr << "sf: sf shell open " << t.id() << " opens a terminal on it; sf shell kill "
              << t.id() << " stops it\n";
    std::cout << t.id() << "\n";  // alone on stdout, for scripts
    return kExitOk;
  } else {
    std::cerr << "sf: open it signed in to the dashboard (your session is its only password); sf "
              << kind.noun << " kill " << t.id() << " stops it\n";
    std::cout << url << "\n";  // alone on stdout, for scripts
  }
  if (flags.open && !OpenInBrowser(url))
    std::cerr << "sf: --open: no browser to open (xdg-open failed)\n";
  return kExitOk;
}

// `shell open ID`: a terminal on the shell until it ends; sf exits with the shell's status.
int OpenShell(const Flags& f, Api& api) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  // Whether it answers, and to us: the master's refusal (401, 403), a shell that does not exist
  // (404) or does not run (503), in the master's words, before any terminal is touched.
  const std::string path = "/proxy/" + std::to_string(*id) + "/";
  auto probe = api.client.Get(path);
  if (!probe.ok()) {
    std::cerr << "sf: " << probe.status().message() << "\n";
    return kExitFailed;
  }
  if (probe->status != 200) {
    auto body = Value::FromJson(probe->body);
    const Value* message = body.ok() ? body->Find("message") : nullptr;
    std::cerr << "sf: shell " << *id << ": HTTP " << probe->status
              << (message && message->is_string() ? ": " + message->as_string() : std::string())
              << "\n";
    return kExitFailed;
  }
  Result<int> status =
      OpenTerminal(api.client.url(), api.client.ca_file(), api.client.token(), *id);
  if (!status.ok()) {
    // Why, when the master knows: a shell whose host was lost, or that was killed, ended there.
    std::string now;
    v1::TaskRequest get;
    get.set_id(*id);
    if (auto task = api.Call<v1::TaskResponse>("GetTask", get)) {
      const v1::Task& t = task->message.task();
      now = "; shell " + std::to_string(*id) + " is " + t.state() + (t.error().empty() ? "" : ": " + t.error());
    }
    std::cerr << "sf: " << status.status().message() << now << "\n";
    return kExitFailed;
  }
  return *status > 255 ? 255 : *status;
}

// `start`'s flags on `app`.
void AddStartFlags(CLI::App* app, StartFlags* flags, std::string* workspace,
                   bool opens_in_browser) {
  v1::InteractiveTaskRequest* r = &flags->request;
  app->add_option_function<int>(
         "--slots", [r](int v) { r->set_slots(v); }, "slots it holds (default 1)")
      ->check(cmdline::AtLeast(1))
      ->type_name("N");
  app->add_option_function<std::string>(
      "--pool", [r](const std::string& v) { r->set_resource_pool(v); },
      "the resource pool (default: default)");
  app->add_option_function<int>(
         "--priority", [r](int v) { r->set_priority(v); },
         "scheduling priority, 1-99, lower first (default 42)")
      ->check(cmdline::AtLeast(1))
      ->type_name("N");
  app->add_option_function<int>(
         "--idle-timeout", [r](int v) { r->set_idle_timeout_seconds(v); },
         "seconds without use after which it stops (default 3600)")
      ->check(cmdline::AtLeast(10))
      ->type_name("S");
  app->add_option("--context", flags->context,
                  "a directory whose files are its working directory (.sfignore applies)")
      ->type_name("DIR");
  app->add_option("-w,--workspace", *workspace, "the workspace it goes to (editor there needed)");
  app->add_flag("--detach", flags->detach, "do not wait for it to answer");
  app->add_option("--wait-seconds", flags->wait_seconds,
                  "how long to wait for it to answer (default 300)")
      ->check(cmdline::AtLeast(1));
  if (opens_in_browser)
    app->add_flag("--open", flags->open, "open the URL in the desktop's browser (xdg-open)");
}

// `list` and `kill` of one kind.
void AddListAndKill(CLI::App* parent, CommandAction& action, const std::string& kind,
                    const std::string& noun) {
  auto all = std::make_shared<bool>(false);
  AddCommand(parent, "list", "list the " + noun + "s (live ones; --all: also ended ones)", action,
             [all, kind](const Flags& f, Api& api) { return ListTasks(f, api, kind, *all); })
      .app->add_flag("--all", *all, "also the newest 100 ended " + noun + "s");
  AddCommand(parent, "kill", "stop a " + noun, action, [](const Flags& f, Api& api) {
    return OneTask(f, api, "KillTask");
  }).Id("ID", "the " + noun + "'s id");
}

// `sf <noun> start|list|kill` for one kind; the command group, for more.
CLI::App* AddKind(CLI::App& sf, CommandAction& action, const Kind& kind,
                  const std::string& task_kind, const std::string& description,
                  const std::string& start_description, bool opens_in_browser) {
  CLI::App* group = sf.add_subcommand(kind.noun, description);
  group->require_subcommand(1);
  auto flags = std::make_shared<StartFlags>();
  ClusterCommand start =
      AddCommand(group, "start", start_description, action,
                 [flags, &kind](const Flags& f, Api& api) { return Start(f, *flags, kind, api); });
  AddStartFlags(start.app, flags.get(), &start.flags->workspace, opens_in_browser);
  AddListAndKill(group, action, task_kind, kind.noun);
  return group;
}

}  // namespace

void AddNotebookCommands(CLI::App& sf, CommandAction& action) {
  static const Kind kNotebook{"notebook", "CreateNotebook", "api/status"};
  AddKind(sf, action, kNotebook, "NOTEBOOK",
          "Jupyter notebooks on the cluster's slots, through the master",
          "start a notebook on a slot and print its URL on the master",
          /*opens_in_browser=*/true);
  static const Kind kShell{"shell", "CreateShell", ""};
  CLI::App* shell = AddKind(sf, action, kShell, "SHELL",
                            "terminals on the cluster's slots, through the master (no sshd)",
                            "start a shell task on a slot and print its id (sf shell open ID)",
                            /*opens_in_browser=*/false);
  AddCommand(shell, "open", "a terminal on a shell task (exits with the shell's status)", action,
             [](const Flags& f, Api& api) { return OpenShell(f, api); })
      .Id("ID", "the shell's id");
}

}  // namespace sf::cli
