// Interactive tasks on a real local cluster, reached through the master's proxy
// (master/proxy/task_proxy.h; master/api/task_methods.cc). Shells (docs/tasks.md, "Shells";
// python/steadfast/shell.py, cli/shell_session.h): `sf shell start` then `sf shell open ID` runs
// what stdin says in a terminal on the agent and exits with the shell's status; another user is
// refused; the idle timeout stops it. Notebooks (docs/tasks.md, "Notebooks";
// python/steadfast/notebook.py): `POST /api/v1/notebooks` schedules
// Debian's Jupyter Notebook server on the agent's slot; through the master's proxy, with the
// master's credentials alone, a client asks Jupyter for a kernel, runs a cell over the kernel's
// WebSocket that imports torch and steadfast, and reads its output; the idle timeout then stops
// the notebook (STOPPED, slot free, the proxy answers 503). `sf notebook start` prints the URL
// on the master once Jupyter answers, `sf notebook list` shows it, `sf notebook kill` stops it.
// A shell's host that dies under an open session ends it with the reason, the API answering
// meanwhile.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "common/value.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

int Port(const std::string& url) {
  std::smatch m;
  return std::regex_search(url, m, std::regex(R"(:(\d+)$)")) ? std::stoi(m[1]) : 0;
}

// One request to the master as the admin (Bearer), the answer's status and body.
std::pair<int, std::string> Call(Cluster& c, bhttp::verb verb, const std::string& target,
                                 const std::string& body = "") {
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), Port(c.url())));
    stream.expires_after(60s);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::authorization, "Bearer " + c.admin_token());
    if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    return {res.result_int(), res.body()};
  } catch (const std::exception& e) {
    return {0, e.what()};
  }
}

std::string TaskState(Cluster& c, int64_t id) {
  auto [status, body] = c.Get("/api/v1/tasks/" + std::to_string(id));
  const Value* t = body.Find("task");
  return status == 200 && t && t->Find("state") ? t->Find("state")->as_string()
                                                : "HTTP " + std::to_string(status);
}

// Runs `code` in kernel `kernel` of notebook `id` over the kernel's WebSocket, through the
// master's proxy; returns what the cell printed (stream messages), or the error.
std::string RunCell(Cluster& c, int64_t id, const std::string& kernel, const std::string& code) {
  try {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), Port(c.url())));
    websocket::stream<tcp::socket> ws(std::move(socket));
    ws.set_option(websocket::stream_base::decorator([&c](websocket::request_type& req) {
      req.set(bhttp::field::authorization, "Bearer " + c.admin_token());
    }));
    ws.handshake("127.0.0.1",
                 "/proxy/" + std::to_string(id) + "/api/kernels/" + kernel + "/channels");
    const std::string msg_id = "cell-1";
    Value::Map header{{"msg_id", msg_id},         {"username", "e2e"},
                      {"session", "e2e-session"}, {"msg_type", "execute_request"},
                      {"version", "5.3"},         {"date", ""}};
    Value::Map content{{"code", code},           {"silent", false},
                       {"store_history", false}, {"user_expressions", Value(Value::Map{})},
                       {"allow_stdin", false},   {"stop_on_error", true}};
    ws.write(asio::buffer(Value(Value::Map{{"header", Value(header)},
                                           {"parent_header", Value(Value::Map{})},
                                           {"metadata", Value(Value::Map{})},
                                           {"content", Value(content)},
                                           {"channel", "shell"},
                                           {"buffers", Value(Value::List{})}})
                              .ToJson()));
    std::string printed;
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    while (std::chrono::steady_clock::now() < deadline) {
      beast::flat_buffer buffer;
      ws.read(buffer);
      auto msg = Value::FromJson(beast::buffers_to_string(buffer.data()));
      if (!msg.ok()) continue;
      const Value* parent = msg->Find("parent_header");
      if (!parent || !parent->Find("msg_id") || parent->Find("msg_id")->as_string() != msg_id)
        continue;
      const std::string type = msg->Find("msg_type") ? msg->Find("msg_type")->as_string() : "";
      if (type == "stream") printed += msg->Find("content")->Find("text")->as_string();
      if (type == "error") return "error: " + msg->Find("content")->ToJson();
      if (type == "status" && msg->Find("content")->Find("execution_state")->as_string() == "idle")
        break;
    }
    ws.close(websocket::close_code::normal);
    return printed;
  } catch (const std::exception& e) {
    return std::string("websocket: ") + e.what();
  }
}

TEST(Notebooks, RunACellThroughTheMastersProxyAndStopWhenIdle) {
  Cluster c(1, 1);
  // Refusals name the field.
  EXPECT_EQ(c.Post("/api/v1/notebooks", R"({"idleTimeoutSeconds": 5})").first, 400);
  EXPECT_EQ(c.Post("/api/v1/notebooks", R"({"priority": 100})").first, 400);

  auto [code, created] = c.Post("/api/v1/notebooks", R"({"idleTimeoutSeconds": 20})");
  ASSERT_EQ(code, 200) << created.ToJson();
  const int64_t id = Id(*created.Find("task"));
  EXPECT_EQ(created.Find("task")->Find("kind")->as_string(), "NOTEBOOK");
  const std::string proxied = "/proxy/" + std::to_string(id) + "/";

  // Jupyter answers through the master once it reported its URL.
  std::pair<int, std::string> status;
  ASSERT_TRUE(c.WaitFor(
      [&] { return (status = Call(c, bhttp::verb::get, proxied + "api/status")).first == 200; },
      180s))
      << "HTTP " << status.first << " " << status.second << " (task " << TaskState(c, id) << ")";
  EXPECT_EQ(TaskState(c, id), "RUNNING");
  // Its pages come through too (the base URL is the proxy's path), without a Jupyter login.
  auto tree = Call(c, bhttp::verb::get, proxied + "tree");
  EXPECT_EQ(tree.first, 200) << tree.second.substr(0, 300);

  // A kernel, and a cell run in it over the kernel's WebSocket.
  auto kernel = Call(c, bhttp::verb::post, proxied + "api/kernels", R"({"name": "python3"})");
  ASSERT_EQ(kernel.first, 201) << kernel.second;
  auto kernel_json = Value::FromJson(kernel.second);
  ASSERT_TRUE(kernel_json.ok() && kernel_json->Find("id")) << kernel.second;
  const std::string kernel_id = kernel_json->Find("id")->as_string();
  const std::string printed = RunCell(c, id, kernel_id,
                                      "import torch, steadfast\nprint('torch', torch.__version__, "
                                      "'steadfast', steadfast.__name__)");
  EXPECT_TRUE(std::regex_search(printed, std::regex(R"(torch \d+\.\d+\S* steadfast steadfast)")))
      << printed;
  EXPECT_EQ(Call(c, bhttp::verb::delete_, proxied + "api/kernels/" + kernel_id).first, 204);

  // Idle for 20 s: it stops, the slot is free and the proxy says so.
  ASSERT_TRUE(c.WaitFor([&] { return TaskState(c, id) == "STOPPED"; }, 120s)) << TaskState(c, id);
  auto gone = Call(c, bhttp::verb::get, proxied + "api/status");
  EXPECT_EQ(gone.first, 503) << gone.second;

  // `sf notebook start` waits until it answers and prints its URL on the master; list; kill.
  CommandOptions o;
  o.timeout = 240s;
  auto started = RunCommand({Cluster::Binary("sf"), "notebook", "start", "--idle-timeout", "600",
                             "--wait-seconds", "180", "--master", c.url()},
                            o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_EQ(started->exit_code, 0) << started->output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(started->output, m, std::regex(c.url() + R"(/proxy/(\d+)/)")))
      << started->output;
  const int64_t second = std::stoll(m[1]);
  EXPECT_EQ(Call(c, bhttp::verb::get, "/proxy/" + std::to_string(second) + "/api/status").first,
            200);
  auto listed = RunCommand({Cluster::Binary("sf"), "notebook", "list", "--master", c.url()}, o);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(std::regex_search(listed->output,
                                std::regex(std::to_string(second) + R"( +NOTEBOOK +RUNNING)")))
      << listed->output;
  auto killed = RunCommand(
      {Cluster::Binary("sf"), "notebook", "kill", std::to_string(second), "--master", c.url()}, o);
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->exit_code, 0) << killed->output;
  EXPECT_TRUE(c.WaitFor([&] { return TaskState(c, second) == "STOPPED"; }, 60s))
      << TaskState(c, second);
}

// `sf shell start` (it waits until the shell answers): its id in `id`.
void StartShell(Cluster& c, int idle_timeout, std::string& id) {
  CommandOptions o;
  o.timeout = 180s;
  o.env["SF_CA_FILE"] = c.ca_file();
  auto started =
      RunCommand({Cluster::Binary("sf"), "shell", "start", "--idle-timeout",
                  std::to_string(idle_timeout), "--wait-seconds", "120", "--master", c.url()},
                 o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_EQ(started->exit_code, 0) << started->output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(started->output, m, std::regex(R"(sf shell open (\d+))")))
      << started->output;
  id = m[1];
}

TEST(Shells, ATerminalThroughTheMastersProxyRunsAndExitsWithTheShellsStatus) {
  // TLS and users on: sf reaches the master over HTTPS, the master the shell over the mutually
  // authenticated hop (docs/security.md, "The hop to tasks").
  ClusterLayout layout;
  layout.tls = true;
  Cluster c(1, 1, layout);
  EXPECT_EQ(c.Post("/api/v1/shells", R"({"idleTimeoutSeconds": 5})").first, 400);
  CommandOptions o;
  o.timeout = 180s;
  o.env["SF_CA_FILE"] = c.ca_file();
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartShell(c, 15, id));
  EXPECT_EQ(TaskState(c, std::stoll(id)), "RUNNING");

  // What stdin says runs in a terminal on the agent, in the task's directory; sf exits with the
  // shell's status.
  CommandOptions session = o;
  session.stdin_data = "echo on-$(hostname)-in-$SF_TASK_KIND; exit 3\n";
  auto opened =
      RunCommand({Cluster::Binary("sf"), "shell", "open", id, "--master", c.url()}, session);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->exit_code, 3) << opened->output;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  EXPECT_NE(opened->output.find("on-" + std::string(host) + "-in-SHELL"), std::string::npos)
      << opened->output;
  // A script that just ends: its stdin's end ends the shell, with status 0.
  session.stdin_data = "true\n";
  auto ended =
      RunCommand({Cluster::Binary("sf"), "shell", "open", id, "--master", c.url()}, session);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->exit_code, 0) << ended->output;

  // Under a terminal (script(1) gives sf one; its size is unknown there, so 24x80 is sent): the
  // shell gets a terminal of that size, and sf still exits with its status.
  CommandOptions in_terminal = session;
  in_terminal.stdin_data = "stty size; tty >/dev/null && echo has-a-tty; exit 5\n";
  auto terminal = RunCommand(
      {"script", "-qec",
       "'" + Cluster::Binary("sf") + "' shell open " + id + " --master " + c.url(), "/dev/null"},
      in_terminal);
  ASSERT_TRUE(terminal.ok()) << terminal.status().ToString();
  EXPECT_EQ(terminal->exit_code, 5) << terminal->output;
  EXPECT_NE(terminal->output.find("24 80"), std::string::npos) << terminal->output;
  EXPECT_NE(terminal->output.find("has-a-tty"), std::string::npos) << terminal->output;

  // Another user may not open it: the master refuses before anything reaches the shell.
  auto [code, created] = c.Post(
      "/api/v1/users", R"({"username": "other", "password": "other-password", "role": "user"})");
  ASSERT_EQ(code, 200) << created.ToJson();
  const std::string other = c.Login("other", "other-password");
  ASSERT_FALSE(other.empty());
  CommandOptions as_other = session;
  as_other.env["SF_TOKEN"] = other;
  auto refused =
      RunCommand({Cluster::Binary("sf"), "shell", "open", id, "--master", c.url()}, as_other);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit_code, 1) << refused->output;
  EXPECT_NE(refused->output.find("HTTP 403"), std::string::npos) << refused->output;

  auto listed = RunCommand({Cluster::Binary("sf"), "shell", "list", "--master", c.url()}, o);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(std::regex_search(listed->output, std::regex(id + R"( +SHELL +RUNNING)")))
      << listed->output;
  // No session for 15 s: it stops.
  EXPECT_TRUE(c.WaitFor([&] { return TaskState(c, std::stoll(id)) == "STOPPED"; }, 90s))
      << TaskState(c, std::stoll(id));
}

// The pids of processes whose command line holds `needle` and whose working directory is under
// `dir` (this test's cluster: an earlier test's tasks may still be winding down).
std::vector<pid_t> PidsRunning(const std::string& needle, const std::string& dir) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::error_code ec;
    const std::string cwd = std::filesystem::read_symlink(entry.path() / "cwd", ec).string();
    if (cmdline.find(needle) != std::string::npos && !ec && cwd.rfind(dir, 0) == 0)
      out.push_back(std::stoi(name));
  }
  return out;
}

// The host of a shell dies under an open session: its agent is killed and the shell's server
// frozen, so no FIN ever comes from it. The master's API keeps answering while the session
// hangs; once the master has given the agent up (its reconnect grace, 5 s here), the proxy
// closes the tunnel (master/proxy/task_proxy.h) and `sf shell open` exits 1 saying what became
// of the shell.
TEST(Shells, ALostHostEndsTheSessionWithTheReasonWhileTheApiAnswers) {
  ClusterLayout layout;
  layout.master_flags = {"--agent-reconnect-grace-seconds", "5"};
  layout.tls = true;
  Cluster c(1, 1, layout);
  CommandOptions o;
  o.timeout = 180s;
  o.env["SF_CA_FILE"] = c.ca_file();
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartShell(c, 600, id));
  const std::vector<pid_t> servers = PidsRunning("steadfast.shell", c.dir());
  ASSERT_EQ(servers.size(), 1u);
  const pid_t server = servers.front();

  // A session that stays busy: a loop the test sees tick in a file.
  const std::string ticks = c.dir() + "/ticks";
  CommandOptions session = o;
  session.stdin_data = "while true; do echo tick >> " + ticks + "; sleep 0.2; done\n";
  Result<CommandResult> opened = Unavailable("not run");
  std::thread user([&] {
    opened = RunCommand({Cluster::Binary("sf"), "shell", "open", id, "--master", c.url()}, session);
  });
  ASSERT_TRUE(c.WaitFor(
      [&] { return std::filesystem::exists(ticks) && std::filesystem::file_size(ticks) > 20; },
      60s));

  // The host goes: no process of the agent's answers, and nothing closes the connections.
  ASSERT_EQ(kill(server, SIGSTOP), 0);
  c.StopAgent(0, SIGKILL);
  const auto lost = std::chrono::steady_clock::now();
  int answered = 0;
  while (std::chrono::steady_clock::now() - lost < 3s) {
    if (c.Get("/api/v1/tasks").first == 200 && c.Get("/api/v1/experiments").first == 200)
      ++answered;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(answered, 5) << "the master's API did not answer while a session hung";
  user.join();
  kill(server, SIGKILL);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->exit_code, 1) << opened->output;
  EXPECT_NE(opened->output.find("the shell's connection ended without an exit status"),
            std::string::npos)
      << opened->output;
  EXPECT_TRUE(std::regex_search(opened->output, std::regex("shell " + id + " is [A-Z]+")))
      << opened->output;
  // Ended within the grace and a check of the proxy's (5 s each), not at the command's timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - lost, 60s);
  EXPECT_NE(TaskState(c, std::stoll(id)), "RUNNING");
}

}  // namespace
}  // namespace sf::testing
