// `sf notebook start|list|kill`: Jupyter notebooks on the cluster's slots, reached through the
// master's proxy at MASTER/proxy/ID/ (docs/tasks.md, "Notebooks"; master/api/task_methods.cc,
// python/steadfast/notebook.py). A notebook is a task: `sf task logs|describe` work on it too.
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
#include "common/command_line.h"
#include "common/context/context_archive.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/tasks.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

struct NotebookFlags {
  v1::CreateNotebookRequest request;
  std::string context;  // --context DIR
  bool detach = false;  // do not wait for it to answer
  int wait_seconds = 300;
  bool open = false;
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

int StartNotebook(const Flags& f, const NotebookFlags& flags, Api& api) {
  v1::CreateNotebookRequest request = flags.request;
  request.set_workspace(f.workspace);
  if (!flags.context.empty()) {
    auto packed = context::PackContext(flags.context);
    if (!packed.ok()) {
      std::cerr << "sf: --context " << flags.context << ": " << packed.status().message() << "\n";
      return kExitUsage;
    }
    request.set_context(packed->archive);
  }
  auto created = api.Call<v1::TaskResponse>("CreateNotebook", request);
  if (!created) return api.exit_code;
  v1::Task t = created->message.task();
  const std::string path = "/proxy/" + std::to_string(t.id()) + "/";
  const std::string url = api.client.base_url() + path;
  if (!f.json) std::cerr << "sf: notebook " << t.id() << " is " << t.state() << "\n";
  if (!flags.detach) {
    // Until Jupyter answers through the master (it reported its URL), or the task ended.
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
        std::cerr << "sf: notebook " << t.id() << " " << t.state()
                  << (t.error().empty() ? "" : ": " + t.error()) << " (sf task logs " << t.id()
                  << " shows its output)\n";
        return kExitFailed;
      }
      if (t.state() == "RUNNING") {
        auto answer = api.client.Get(path + "api/status");
        if (answer.ok() && answer->status == 200) break;
      } else if (!f.json && !t.pending_reason().empty() && t.pending_reason() != told) {
        told = t.pending_reason();
        std::cerr << "sf: notebook " << t.id() << " waits: " << told << "\n";
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "sf: notebook " << t.id() << " does not answer after " << flags.wait_seconds
                  << " s (it is " << t.state() << "; sf task logs " << t.id()
                  << " shows its output)\n";
        return kExitFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  if (f.json) {
    std::cout << created->json << "\n";
  } else {
    std::cerr << "sf: open it signed in to the dashboard (your session is its only password); sf "
                 "notebook kill "
              << t.id() << " stops it\n";
    std::cout << url << "\n";  // alone on stdout, for scripts
  }
  if (flags.open && !OpenInBrowser(url))
    std::cerr << "sf: --open: no browser to open (xdg-open failed)\n";
  return kExitOk;
}

}  // namespace

void AddNotebookCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* notebook =
      sf.add_subcommand("notebook", "Jupyter notebooks on the cluster's slots, through the master");
  notebook->require_subcommand(1);
  auto flags = std::make_shared<NotebookFlags>();
  ClusterCommand start = AddCommand(
      notebook, "start", "start a notebook on a slot and print its URL on the master", action,
      [flags](const Flags& f, Api& api) { return StartNotebook(f, *flags, api); });
  v1::CreateNotebookRequest* r = &flags->request;
  start.app
      ->add_option_function<int>(
          "--slots", [r](int v) { r->set_slots(v); }, "slots it holds (default 1)")
      ->check(cmdline::AtLeast(1))
      ->type_name("N");
  start.app->add_option_function<std::string>(
      "--pool", [r](const std::string& v) { r->set_resource_pool(v); },
      "the resource pool (default: default)");
  start.app
      ->add_option_function<int>(
          "--priority", [r](int v) { r->set_priority(v); },
          "scheduling priority, 1-99, lower first (default 42)")
      ->check(cmdline::AtLeast(1))
      ->type_name("N");
  start.app
      ->add_option_function<int>(
          "--idle-timeout", [r](int v) { r->set_idle_timeout_seconds(v); },
          "seconds without activity after which it stops (default 3600)")
      ->check(cmdline::AtLeast(10))
      ->type_name("S");
  start.app
      ->add_option(
          "--context", flags->context,
          "a directory whose files are the notebook's working directory (.sfignore applies)")
      ->type_name("DIR");
  start.app->add_option("-w,--workspace", start.flags->workspace,
                        "the workspace it goes to (editor there needed)");
  start.app->add_flag("--detach", flags->detach,
                      "print its URL at once; do not wait for it to answer");
  start.app
      ->add_option("--wait-seconds", flags->wait_seconds,
                   "how long to wait for it to answer (default 300)")
      ->check(cmdline::AtLeast(1));
  start.app->add_flag("--open", flags->open, "open the URL in the desktop's browser (xdg-open)");

  auto all = std::make_shared<bool>(false);
  AddCommand(notebook, "list", "list the notebooks (live ones; --all: also ended ones)", action,
             [all](const Flags& f, Api& api) { return ListTasks(f, api, "NOTEBOOK", *all); })
      .app->add_flag("--all", *all, "also the newest 100 ended notebooks");
  AddCommand(notebook, "kill", "stop a notebook", action, [](const Flags& f, Api& api) {
    return OneTask(f, api, "KillTask");
  }).Id("ID", "the notebook's id");
}

}  // namespace sf::cli
