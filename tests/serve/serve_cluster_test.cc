// `sf serve start` on a real local cluster (tests/e2e/cluster_fixture.h; master/serving/serving.h):
// a trained trial's checkpoint, registered as a model version, is served by sf-serve on an agent
// slot the master scheduled; once READY its published URL answers 200 requests from 8 concurrent
// clients exactly as `sf-trainer translate` does; a server is a task of its own (no experiment
// is made for it), its output is `sf serve logs`, and a master restart finds it still READY;
// the master's proxy (/proxy/ID/...) answers with the same bytes to whom the task's access rule
// lets in;
// `sf serve stop` ends the process and frees the slot; bad requests name what is wrong. With TLS
// on, the server answers HTTPS to the master alone, and through the proxy as the CLI translates.
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/serve/serve_process.h"
#include "tests/serve/trained_model.h"

namespace sf::serve {
namespace {
using namespace serve_testing;
using namespace std::chrono_literals;

std::string State(sf::testing::Cluster& c, int64_t id, Value* serving = nullptr) {
  auto [status, body] = c.Get("/api/v1/servings/" + std::to_string(id));
  if (status != 200 || !body.Find("serving")) return "HTTP " + std::to_string(status) + " " + body.ToJson();
  if (serving) *serving = *body.Find("serving");
  const Value* state = body.Find("serving")->Find("state");
  return state ? state->as_string() : "";
}

TEST(ServeCluster, ScheduledServerAnswersAsTheCommandLineTranslatesAndStops) {
  sf::testing::Cluster c(1, 1);
  TrainedModel model;
  ASSERT_NO_FATAL_FAILURE(TrainAndRegister(c, "cluster-de-en", &model));
  const int64_t trained = model.experiment_id;
  const std::string& uuid = model.checkpoint_uuid;
  const std::string& path = model.checkpoint_path;

  // Refusals, before anything is scheduled.
  struct Refusal {
    std::string body;
    int status;
    std::string message;
  };
  for (const Refusal& r : std::vector<Refusal>{
           {R"({"model": "nope"})", 404, "model \"nope\" does not exist"},
           {R"({"model": "cluster-de-en", "version": 7})", 404, "has no version 7"},
           {R"({"model": "cluster-de-en", "slots": 5})", 400, "slots: 5 is more than"},
           {R"({"model": "cluster-de-en", "bind": "1.2.3.4; rm -rf /"})", 400, "bind:"},
           {R"({"model": "cluster-de-en", "priority": 100})", 400, "priority: 100 must be 1..99"},
           {R"({})", 400, "model: required"},
       }) {
    auto [code, reply] = c.Post("/api/v1/servings", r.body);
    EXPECT_EQ(code, r.status) << r.body << " -> " << reply.ToJson();
    const Value* message = reply.Find("message");
    EXPECT_TRUE(message && message->as_string().find(r.message) != std::string::npos)
        << r.body << " -> " << reply.ToJson();
  }
  {
    auto [code, listed] = c.Get("/api/v1/servings");
    ASSERT_EQ(code, 200);
    EXPECT_EQ(listed.ToJson().find("cluster-de-en"), std::string::npos) << "a refused start left a server: "
                                                                       << listed.ToJson();
  }

  // The command line's translations of the sentences the clients will send.
  sf::testing::TempDir dir;
  const std::vector<std::string> all = Lines(ReadFile(sf::testing::DataCopy("multi30k-de-en-tiny") + "/test.de"));
  const std::vector<std::string> sentences(all.begin(), all.begin() + 25);
  std::string input;
  for (const auto& s : sentences) input += s + "\n";
  CommandOptions o;
  o.working_dir = dir.path();
  o.stdin_data = input;
  o.timeout = 2min;
  auto translated = RunCommand(
      {"/bin/sh", "-c", "'" + Binary("trainer/sf-trainer") + "' translate --checkpoint '" + path + "' --threads 1 > ref.txt"},
      o);
  ASSERT_TRUE(translated.ok() && translated->exit_code == 0) << (translated.ok() ? translated->output : "");
  const std::vector<std::string> reference = Lines(ReadFile(dir.path() + "/ref.txt"));
  ASSERT_EQ(reference.size(), sentences.size());

  // Scheduled on the agent's one slot by `sf serve start --wait`, which prints the URL once
  // sf-serve has loaded the weights (READY).
  CommandOptions cli;
  cli.timeout = 2min;
  auto started = RunCommand({sf::testing::Cluster::Binary("sf"), "serve", "start", "--model", "cluster-de-en",
                             "--threads", "1", "--wait", "--wait-seconds", "90", "--master", c.url()},
                            cli);
  ASSERT_TRUE(started.ok());
  if (started->exit_code != 0) {
    c.DumpLogs();
    FAIL() << "sf serve start: " << started->output;
  }
  auto [listed_code, listed] = c.Get("/api/v1/servings");
  ASSERT_EQ(listed_code, 200);
  ASSERT_EQ(listed.Find("servings")->as_list().size(), 1u) << listed.ToJson();
  Value serving = listed.Find("servings")->as_list()[0];
  const int64_t id = sf::testing::Id(serving);
  EXPECT_EQ(serving.Find("state")->as_string(), "READY") << serving.ToJson();
  EXPECT_EQ(serving.Find("modelVersion")->as_double(), 1) << serving.ToJson();
  const std::string url = serving.Find("url")->as_string();
  EXPECT_NE(started->output.find(url + "\n"), std::string::npos) << started->output;
  EXPECT_NE(started->output.find("through the master: " + c.url() + "/proxy/"), std::string::npos)
      << started->output;
  // The list leaves the bearer token out; the server's own page gives it to who may stop it.
  EXPECT_TRUE(!serving.Find("token") || serving.Find("token")->as_string().empty()) << serving.ToJson();
  Value described;
  ASSERT_EQ(State(c, id, &described), "READY");
  const std::string token = described.Find("token") ? described.Find("token")->as_string() : "";
  ASSERT_EQ(token.rfind("sfs1_", 0), 0u) << described.ToJson();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(url, m, std::regex(R"(http://127\.0\.0\.1:(\d+))"))) << url;
  const int port = std::stoi(m[1]);
  EXPECT_EQ(serving.Find("agentId")->as_string(), "e2e-agent-0") << serving.ToJson();
  EXPECT_EQ(serving.Find("checkpointUuid")->as_string(), uuid);

  // No experiment was made for it (the list has the trained one only), and its output is there
  // to read.
  {
    auto [code, experiments] = c.Get("/api/v1/experiments");
    ASSERT_EQ(code, 200);
    ASSERT_EQ(experiments.Find("experiments")->as_list().size(), 1u) << experiments.ToJson();
    EXPECT_EQ(sf::testing::Id(experiments.Find("experiments")->as_list()[0]), trained);
    std::string output;
    EXPECT_TRUE(c.WaitFor(
        [&] {
          auto logs = RunCommand({sf::testing::Cluster::Binary("sf"), "serve", "logs", std::to_string(id), "--master", c.url()}, cli);
          output = logs.ok() ? logs->output : logs.status().message();
          return logs.ok() && logs->exit_code == 0 && output.find("ready") != std::string::npos;
        },
        30s))
        << "sf serve logs: " << output;
    auto table = RunCommand({sf::testing::Cluster::Binary("sf"), "serve", "list", "--master", c.url()}, cli);
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(table->exit_code, 0) << table->output;
    EXPECT_TRUE(std::regex_search(table->output, std::regex("cluster-de-en +1 +READY +" + url))) << table->output;
  }

  // A master restart finds it running: its allocation is adopted when the agent re-registers,
  // so it stays READY at the same URL, not restarted.
  c.StopMaster(9);
  c.StartMaster();
  ASSERT_TRUE(c.WaitFor([&] { return State(c, id) == "READY"; }, 60s)) << State(c, id);
  {
    Value after_restart;
    ASSERT_EQ(State(c, id, &after_restart), "READY");
    EXPECT_EQ(after_restart.Find("url")->as_string(), url) << after_restart.ToJson();
    EXPECT_EQ(after_restart.Find("restarts") ? after_restart.Find("restarts")->as_double() : 0, 0)
        << after_restart.ToJson();
  }

  // 200 requests from 8 concurrent clients, one sentence each: exactly the command line's.
  std::atomic<int> next{0}, wrong{0}, failed{0};
  std::vector<std::string> first_error(8);
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i; (i = next.fetch_add(1)) < 200;) {
        const size_t k = static_cast<size_t>(i) % sentences.size();
        const HttpReply r = Call(port, http::verb::post, "/v1/translate",
                                 "{\"text\": " + Value(Value::List{Value(sentences[k])}).ToJson() + "}", token);
        auto parsed = Value::FromJson(r.body);
        if (r.status != 200 || !parsed.ok() || !parsed->Find("translations")) {
          if (failed++ == 0) first_error[t] = std::to_string(r.status) + " " + r.error + " " + r.body;
          continue;
        }
        if (parsed->Find("translations")->as_list()[0].Find("text")->as_string() != reference[k]) wrong++;
      }
    });
  }
  for (auto& th : clients) th.join();
  std::string errors;
  for (const auto& e : first_error) errors += e;
  EXPECT_EQ(failed.load(), 0) << errors;
  EXPECT_EQ(wrong.load(), 0);

  // Without the token (or with another): 401; /health needs none. Bad requests get a 4xx and
  // the server goes on serving.
  const std::string one = "{\"text\": " + Value(Value::List{Value(sentences[0])}).ToJson() + "}";
  EXPECT_EQ(Call(port, http::verb::post, "/v1/translate", one).status, 401);
  EXPECT_EQ(Call(port, http::verb::post, "/v1/translate", one, "sfs1_" + std::string(64, '0')).status, 401);
  EXPECT_EQ(Call(port, http::verb::get, "/health").status, 200);
  EXPECT_EQ(Call(port, http::verb::post, "/v1/translate", "{\"text\": [\"x\"], \"beam\": 0}", token).status, 400);
  EXPECT_EQ(Call(port, http::verb::post, "/v1/translate", "{not json", token).status, 400);
  EXPECT_EQ(Call(port, http::verb::post, "/v1/translate", one, token).status, 200);

  // Through the master's proxy (master/proxy/task_proxy.h): the same bytes with the master's
  // credentials alone (the server's token is the proxy's to add); the task's access rule holds.
  std::smatch master_port_match;
  const std::string master_url = c.url();
  ASSERT_TRUE(std::regex_search(master_url, master_port_match, std::regex(R"(:(\d+)$)"))) << master_url;
  const int master_port = std::stoi(master_port_match[1]);
  const std::string proxied = "/proxy/" + std::to_string(id);
  {
    const HttpReply direct = Call(port, http::verb::post, "/v1/translate", one, token);
    const HttpReply through = Call(master_port, http::verb::post, proxied + "/v1/translate", one, c.admin_token());
    EXPECT_EQ(through.status, 200) << through.body << through.error;
    EXPECT_EQ(through.body, direct.body);
    EXPECT_EQ(Call(master_port, http::verb::get, proxied + "/health", "", c.admin_token()).status, 200);
    // The server's own refusal of a bad request comes back as it answered it.
    const HttpReply bad = Call(master_port, http::verb::post, proxied + "/v1/translate", "{not json", c.admin_token());
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_EQ(bad.body, Call(port, http::verb::post, "/v1/translate", "{not json", token).body);
    // No master credentials: the master's 401; another user and a viewer: 403.
    EXPECT_EQ(Call(master_port, http::verb::post, proxied + "/v1/translate", one).status, 401);
    for (const auto& [user, role] : std::vector<std::pair<std::string, std::string>>{{"stranger", "user"},
                                                                                     {"watcher", "viewer"}}) {
      auto [code, created] = c.Post("/api/v1/users", Value(Value::Map{{"username", user},
                                                                      {"password", user + "-password"},
                                                                      {"role", role}})
                                                         .ToJson());
      ASSERT_EQ(code, 200) << created.ToJson();
      const std::string session = c.Login(user, user + "-password");
      ASSERT_FALSE(session.empty()) << user;
      const HttpReply refused = Call(master_port, http::verb::post, proxied + "/v1/translate", one, session);
      EXPECT_EQ(refused.status, 403) << user << ": " << refused.body;
    }
    // Forged task ids and paths that climb out of the task's service.
    EXPECT_EQ(Call(master_port, http::verb::get, "/proxy/999999/health", "", c.admin_token()).status, 404);
    EXPECT_EQ(Call(master_port, http::verb::get, "/proxy/abc/health", "", c.admin_token()).status, 404);
    EXPECT_EQ(Call(master_port, http::verb::get, proxied + "/../../api/v1/users", "", c.admin_token()).status, 400);
    EXPECT_EQ(Call(master_port, http::verb::get, proxied + "/%2E%2e/health", "", c.admin_token()).status, 400);
  }

  // Stopped: the task is STOPPED, the process gone, the slot free for a trial again.
  auto stopped = RunCommand({sf::testing::Cluster::Binary("sf"), "serve", "stop", std::to_string(id), "--master", c.url()}, cli);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->exit_code, 0) << stopped->output;
  EXPECT_NE(stopped->output.find("server " + std::to_string(id) + " STOPP"), std::string::npos) << stopped->output;
  ASSERT_TRUE(c.WaitFor([&] { return State(c, id) == "STOPPED"; }, 60s)) << State(c, id);
  EXPECT_TRUE(c.WaitFor([&] { return !Call(port, http::verb::get, "/health").error.empty(); }, 30s))
      << "sf-serve still answers after the stop";
  {
    const HttpReply gone = Call(master_port, http::verb::get, proxied + "/health", "", c.admin_token());
    EXPECT_EQ(gone.status, 503) << gone.body;
    EXPECT_NE(gone.body.find("task " + std::to_string(id) + " has no service to reach: it is STOPPED"),
              std::string::npos)
        << gone.body;
  }
  {
    auto [code, listed] = c.Get("/api/v1/servings");
    ASSERT_EQ(code, 200);
    EXPECT_TRUE(!listed.Find("servings") || listed.Find("servings")->as_list().empty()) << listed.ToJson();
    auto [all_code, with_stopped] = c.Get("/api/v1/servings?include_stopped=true");
    ASSERT_EQ(all_code, 200);
    EXPECT_NE(with_stopped.ToJson().find("STOPPED"), std::string::npos) << with_stopped.ToJson();
  }
  const int64_t after = c.Submit(sf::testing::TinyExperiment(1, 10, 10, "after-serving"));
  EXPECT_TRUE(c.WaitForState(after, "EXPERIMENT_STATE_COMPLETED", 60s)) << "the slot was not freed";
  // Stopping a stopped server is harmless; an unknown one is 404.
  EXPECT_EQ(c.Post("/api/v1/servings/" + std::to_string(id) + "/stop", "").first, 200);
  EXPECT_EQ(c.Post("/api/v1/servings/999999/stop", "").first, 404);
  EXPECT_EQ(c.Get("/api/v1/tasks/999999/logs").first, 404);
}

// A TLS cluster holds the cluster CA, so the server gets its own certificate and serves HTTPS to
// the master alone (master/auth/task_certificates.h; docs/security.md, "The hop to tasks"):
// through the proxy it translates as the command line does; straight to it, neither plain HTTP
// nor TLS without the master's certificate gets an answer.
TEST(ServeCluster, OverTheTlsHopTheServerAnswersTheMasterAlone) {
  sf::testing::ClusterLayout layout;
  layout.tls = true;
  sf::testing::Cluster c(1, 1, layout);
  TrainedModel model;
  ASSERT_NO_FATAL_FAILURE(TrainAndRegister(c, "tls-de-en", &model));
  const std::string sentence = Lines(ReadFile(sf::testing::DataCopy("multi30k-de-en-tiny") + "/test.de")).front();
  sf::testing::TempDir dir;
  CommandOptions o;
  o.working_dir = dir.path();
  o.stdin_data = sentence + "\n";
  o.timeout = 2min;
  auto translated = RunCommand({Binary("trainer/sf-trainer"), "translate", "--checkpoint", model.checkpoint_path,
                                "--threads", "1"},
                               o);
  ASSERT_TRUE(translated.ok() && translated->exit_code == 0) << (translated.ok() ? translated->output : "");
  const std::string reference = Lines(translated->output).back();

  CommandOptions cli;
  cli.timeout = 2min;
  auto started = RunCommand({sf::testing::Cluster::Binary("sf"), "serve", "start", "--model", "tls-de-en", "--threads",
                             "1", "--wait", "--wait-seconds", "90", "--master", c.url(), "--ca-file", c.ca_file()},
                            cli);
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->exit_code, 0) << started->output;
  auto [listed_code, listed] = c.Get("/api/v1/servings");
  ASSERT_EQ(listed_code, 200);
  ASSERT_EQ(listed.Find("servings")->as_list().size(), 1u) << listed.ToJson();
  const Value serving = listed.Find("servings")->as_list()[0];
  const std::string url = serving.Find("url")->as_string();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(url, m, std::regex(R"(https://127\.0\.0\.1:(\d+))"))) << url;
  const std::string port = m[1];

  auto [code, through] = c.Post("/proxy/" + std::to_string(sf::testing::Id(serving)) + "/v1/translate",
                                "{\"text\": " + Value(Value::List{Value(sentence)}).ToJson() + "}");
  ASSERT_EQ(code, 200) << through.ToJson();
  const Value* translations = through.Find("translations");
  ASSERT_TRUE(translations && translations->as_list().size() == 1) << through.ToJson();
  EXPECT_EQ(translations->as_list()[0].Find("text")->as_string(), reference) << through.ToJson();

  for (const std::vector<std::string>& direct :
       {std::vector<std::string>{"curl", "-sS", "-m", "10", "http://127.0.0.1:" + port + "/health"},
        std::vector<std::string>{"curl", "-sS", "-m", "10", "--cacert", c.ca_file(), "https://127.0.0.1:" + port + "/health"}}) {
    CommandOptions curl;
    curl.timeout = 30s;
    auto r = RunCommand(direct, curl);
    ASSERT_TRUE(r.ok());
    EXPECT_NE(r->exit_code, 0) << direct.back() << " answered without the master's certificate: " << r->output;
  }
}

}  // namespace
}  // namespace sf::serve
