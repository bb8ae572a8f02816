// `sf serve start|list|describe|stop`: translation servers the master schedules on agent slots
// (docs/serving.md "On the cluster"; master/serving/serving.h), through its Api methods
// (cluster_command.h has what they share).
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/command_line.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/serving.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

// `serve start`'s own flags (the request's knobs) and --wait.
struct ServeFlags {
  v1::StartServingRequest request;
  bool wait = false;
  int wait_seconds = 600;
};

void PrintServing(const v1::Serving& s) {
  for (const auto& [label, text] : std::vector<std::pair<const char*, std::string>>{
           {"id", std::to_string(s.id())},
           {"model", s.model_name()},
           {"version", std::to_string(s.model_version())},
           {"checkpoint", s.checkpoint_uuid()},
           {"state", s.state()},
           {"url", s.url()},
           {"slots", std::to_string(s.slots())},
           {"resourcePool", s.resource_pool()},
           {"agent", s.agent_id()},
           {"restarts", std::to_string(s.restarts())},
           {"owner", s.owner()},
           {"workspace", s.workspace()},
           {"createdAt", TimeText(s.has_created_at(), s.created_at())},
           {"endedAt", TimeText(s.has_ended_at(), s.ended_at())},
           {"error", s.error()},
           {"token", s.token()}}) {
    std::cout << label << ": " << text << "\n";
  }
}

bool Ended(const v1::Serving& s) { return s.state() == "STOPPED" || s.state() == "FAILED"; }

int StartServing(const Flags& f, const ServeFlags& flags, Api& api) {
  v1::StartServingRequest request = flags.request;
  request.set_workspace(f.workspace);
  auto started = api.Call<v1::ServingResponse>("StartServing", request);
  if (!started) return api.exit_code;
  v1::Serving s = started->message.serving();
  std::string json = started->json;
  if (!f.json) {
    std::cerr << "server " << s.id() << " of model " << s.model_name() << " version " << s.model_version()
              << " is " << s.state() << " (sf serve describe " << s.id() << " shows it"
              << (s.token().empty() ? "" : ", with the bearer token its clients send") << ")\n";
  }
  if (flags.wait) {
    // Until it answers (READY: its URL) or ends (FAILED, STOPPED: an error).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.wait_seconds);
    v1::ServingRequest get;
    get.set_id(s.id());
    while (s.state() != "READY" && !Ended(s)) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "sf: server " << s.id() << " is still " << s.state() << " after " << flags.wait_seconds
                  << " s\n";
        return kExitFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      auto now = api.Call<v1::ServingResponse>("GetServing", get);
      if (!now) return api.exit_code;
      s = now->message.serving();
      json = now->json;
    }
    if (s.state() != "READY") {
      std::cerr << "sf: server " << s.id() << " " << s.state() << (s.error().empty() ? "" : ": " + s.error()) << "\n";
      if (f.json) std::cout << json << "\n";
      return kExitFailed;
    }
  }
  if (f.json) {
    std::cout << json << "\n";
  } else if (s.state() == "READY") {
    std::cerr << "through the master: " << api.client.base_url() << "/proxy/" << s.id()
              << "/ (with your sf credentials; the master adds the server's token)\n";
    std::cout << s.url() << "\n";  // alone on stdout, for scripts: URL=$(sf serve start --wait ...)
  } else {
    std::cout << s.id() << "\n";
  }
  return kExitOk;
}

int ListServings(const Flags& f, Api& api, bool all) {
  v1::ListServingsRequest request;
  request.set_include_stopped(all);
  return CallAndPrint<v1::ListServingsResponse>(f, api, "ListServings", request, [](const v1::ListServingsResponse& r) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::Serving& s : r.servings()) {
      rows.push_back({std::to_string(s.id()), s.model_name(), std::to_string(s.model_version()), s.state(), s.url(),
                      std::to_string(s.slots()), s.agent_id(), s.owner(), TimeText(s.has_created_at(), s.created_at())});
    }
    PrintTable({"ID", "MODEL", "VERSION", "STATE", "URL", "SLOTS", "AGENT", "OWNER", "CREATED"}, rows);
  });
}

// GetServing or StopServing for the server the command's ID names.
int OneServing(const Flags& f, Api& api, const std::string& method) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  v1::ServingRequest request;
  request.set_id(*id);
  return CallAndPrint<v1::ServingResponse>(f, api, method, request, [&](const v1::ServingResponse& r) {
    if (method == "StopServing") {
      std::cout << "server " << r.serving().id() << " " << r.serving().state() << "\n";
    } else {
      PrintServing(r.serving());
    }
  });
}

}  // namespace

void AddServeCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* serve = sf.add_subcommand("serve", "translation servers of registered models, run on the cluster's slots");
  serve->require_subcommand(1);

  auto flags = std::make_shared<ServeFlags>();
  ClusterCommand start = AddCommand(serve, "start", "serve a model version on the cluster (sf-serve on agent slots)",
                                    action, [flags](const Flags& f, Api& api) { return StartServing(f, *flags, api); });
  v1::StartServingRequest* r = &flags->request;
  auto int_option = [&](const char* name, const char* help, void (v1::StartServingRequest::*set)(int32_t), int min) {
    start.app->add_option_function<int>(name, [r, set](int v) { (r->*set)(v); }, help)
        ->check(cmdline::AtLeast(min))
        ->type_name("N");
  };
  start.app->add_option_function<std::string>("--model", [r](const std::string& v) { r->set_model(v); },
                                              "the registered model, by name or id")
      ->required()
      ->type_name("NAME");
  int_option("--version", "the model's version (default: its latest)", &v1::StartServingRequest::set_version, 1);
  int_option("--slots", "slots it holds, on one agent (default 1)", &v1::StartServingRequest::set_slots, 1);
  start.app->add_option_function<std::string>("--pool", [r](const std::string& v) { r->set_resource_pool(v); },
                                              "the resource pool (default: default)");
  start.app->add_option_function<std::string>("--bind", [r](const std::string& v) { r->set_bind(v); },
                                              "address sf-serve listens on, on its agent (default 127.0.0.1; "
                                              "0.0.0.0: every interface)");
  int_option("--max-batch-tokens", "source tokens of one batch (sf-serve's default 4096)",
             &v1::StartServingRequest::set_max_batch_tokens, 1);
  int_option("--max-batch-sentences", "sentences of one batch (sf-serve's default 64)",
             &v1::StartServingRequest::set_max_batch_sentences, 1);
  start.app->add_option_function<int>("--max-wait-ms", [r](int v) { r->set_max_wait_ms(v == 0 ? -1 : v); },
                                      "longest a sentence waits for its batch to fill (sf-serve's default 5)")
      ->check(cmdline::AtLeast(0))
      ->type_name("MS");
  int_option("--threads", "OpenMP threads (default: the slot's share of the agent's cores)",
             &v1::StartServingRequest::set_threads, 1);
  int_option("--priority", "scheduling priority, 1-99, lower first (default 42)", &v1::StartServingRequest::set_priority, 1);
  int_option("--max-restarts", "times a crashed server is started again (default 5)",
             &v1::StartServingRequest::set_max_restarts, 1);
  start.app->add_option("-w,--workspace", start.flags->workspace,
                        "the workspace the server goes to (default: the model's; editor there needed)");
  start.app->add_flag("--wait", flags->wait, "wait until it answers and print its URL (exit 1 if it fails)");
  start.app->add_option("--wait-seconds", flags->wait_seconds, "how long --wait waits (default 600)")
      ->check(cmdline::AtLeast(1));

  auto all = std::make_shared<bool>(false);
  ClusterCommand list = AddCommand(serve, "list", "list the servers (live ones; --all: also ended ones)", action,
                                   [all](const Flags& f, Api& api) { return ListServings(f, api, *all); });
  list.app->add_flag("--all", *all, "also the newest 100 stopped or failed servers");

  AddCommand(serve, "describe", "show a server: its model, state, URL, agent and restarts", action,
             [](const Flags& f, Api& api) { return OneServing(f, api, "GetServing"); })
      .Id("ID", "the server's id");
  AddCommand(serve, "stop", "stop a server (its slots are freed)", action,
             [](const Flags& f, Api& api) { return OneServing(f, api, "StopServing"); })
      .Id("ID", "the server's id");
  AddCommand(serve, "logs", "print a server's output (its processes' stdout and stderr)", action,
             [](const Flags& f, Api& api) { return TaskLogs(f, api); })
      .Id("ID", "the server's id");
}

}  // namespace sf::cli
