// The REST server in-process against a real PostgreSQL (migrated by the master's own migrations):
// list rows are summaries (configYaml only with ?fields=config, always on the single-experiment
// route); connections beyond the cap get a clean 503 and the cap frees up again; an idle client
// is disconnected after the read timeout; slow clients hold no worker thread, so with one worker
// a request still goes through while several slow clients trickle their headers.
#include "master/api/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/master/migrated_database_test.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {

using Clock = std::chrono::steady_clock;

// A client socket to 127.0.0.1:port; -1 on failure. Reads give up after `recv_timeout`.
int Connect(int port, std::chrono::seconds recv_timeout = std::chrono::seconds(10)) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(recv_timeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendText(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// Everything the server sends until it closes (or the receive timeout).
std::string ReadToEnd(int fd) {
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

struct HttpReply {
  int status = 0;
  std::string head, body;
};

HttpReply Parse(const std::string& raw) {
  HttpReply r;
  size_t split = raw.find("\r\n\r\n");
  r.head = raw.substr(0, split);
  if (split != std::string::npos) r.body = raw.substr(split + 4);
  if (raw.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(raw.c_str() + 9);
  return r;
}

// GET on a fresh connection (Connection: close).
HttpReply Get(int port, const std::string& target) {
  int fd = Connect(port);
  if (fd < 0) return {};
  SendText(fd, "GET " + target + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
  HttpReply r = Parse(ReadToEnd(fd));
  ::close(fd);
  return r;
}

Value Json(const HttpReply& r) {
  auto v = Value::FromJson(r.body);
  EXPECT_TRUE(v.ok()) << r.body;
  return v.ok() ? *v : Value();
}

class HttpServerTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<Store>(db_.get());
    // No coordinator: the routes used here read the Store only.
    handlers_ = std::make_unique<ApiHandlers>(store_.get(), nullptr, MasterInfo{"test", "m", "c"});
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  void StartServer(HttpOptions options) {
    options.bind_address = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<HttpServer>(handlers_.get(), &metrics_, options);
    ASSERT_TRUE(server_->Start().ok());
  }

  int64_t AddExperiment(const std::string& name, const std::string& config) {
    NewExperiment e;
    e.name = name;
    e.config_yaml = config;
    e.searcher = "single";
    e.metric = "validation_loss";
    e.state = "PAUSED";
    auto id = store_->CreateExperiment(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  int port() const { return server_->port(); }

  std::unique_ptr<Store> store_;
  std::unique_ptr<ApiHandlers> handlers_;
  MasterMetrics metrics_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ListRowsLeaveOutTheConfigUnlessFieldsAskForIt) {
  StartServer({});
  const std::string config = "name: big\n# " + std::string(4000, 'x') + "\n";
  for (int i = 0; i < 3; ++i) AddExperiment("exp-" + std::to_string(i), config);

  HttpReply list = Get(port(), "/api/v1/experiments");
  ASSERT_EQ(list.status, 200) << list.body;
  Value v = Json(list);
  ASSERT_EQ(v.Find("experiments")->as_list().size(), 3u);
  for (const Value& e : v.Find("experiments")->as_list()) {
    EXPECT_EQ(e.Find("configYaml"), nullptr) << e.ToJson();
    EXPECT_NE(e.Find("name"), nullptr);
    EXPECT_NE(e.Find("numTrials"), nullptr);
  }
  EXPECT_LT(list.body.size(), 3000u);

  HttpReply full = Get(port(), "/api/v1/experiments?fields=config&limit=2");
  ASSERT_EQ(full.status, 200) << full.body;
  Value f = Json(full);
  ASSERT_EQ(f.Find("experiments")->as_list().size(), 2u);
  for (const Value& e : f.Find("experiments")->as_list()) {
    ASSERT_NE(e.Find("configYaml"), nullptr) << e.ToJson();
    EXPECT_EQ(e.Find("configYaml")->as_string(), config);
  }

  HttpReply one = Get(port(), "/api/v1/experiments/2");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(Json(one).Find("experiment")->Find("configYaml")->as_string(), config);

  HttpReply bad = Get(port(), "/api/v1/experiments?fields=secrets");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("fields"), std::string::npos) << bad.body;

  // Sorted descending by name, the summary query still pages correctly.
  HttpReply sorted = Get(port(), "/api/v1/experiments?sortBy=name&descending=true&limit=2&offset=1");
  ASSERT_EQ(sorted.status, 200) << sorted.body;
  Value s = Json(sorted);
  ASSERT_EQ(s.Find("experiments")->as_list().size(), 2u);
  EXPECT_EQ(s.Find("experiments")->as_list()[0].Find("name")->as_string(), "exp-1");
  EXPECT_EQ(s.Find("experiments")->as_list()[1].Find("name")->as_string(), "exp-0");
}

TEST_F(HttpServerTest, ConnectionsBeyondTheCapGet503AndTheCapFreesUp) {
  HttpOptions o;
  o.max_connections = 4;
  StartServer(o);
  AddExperiment("one", "name: one\n");
  // Four kept-alive connections, each proven open by a request answered on it.
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    int fd = Connect(port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendText(fd, "GET /health HTTP/1.1\r\nHost: test\r\n\r\n"));
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 200");
    held.push_back(fd);
  }
  // The fifth: a 503 with a JSON error and Retry-After, then closed.
  HttpReply over = Get(port(), "/api/v1/experiments");
  EXPECT_EQ(over.status, 503) << over.head;
  EXPECT_NE(over.head.find("Retry-After: 1"), std::string::npos) << over.head;
  Value err = Json(over);
  ASSERT_NE(err.Find("message"), nullptr);
  EXPECT_NE(err.Find("message")->as_string().find("too many connections"), std::string::npos);
  // The held connections still work.
  ASSERT_TRUE(SendText(held[0], "GET /api/v1/experiments HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(Parse(ReadToEnd(held[0])).status, 200);
  // Closing them frees the cap (the server notices each close asynchronously).
  for (int fd : held) ::close(fd);
  HttpReply after;
  for (auto until = Clock::now() + std::chrono::seconds(5); Clock::now() < until;) {
    after = Get(port(), "/api/v1/experiments");
    if (after.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(after.status, 200) << after.head;
  // And again up to the cap: four at once all get 200, once the server has seen all four
  // closes (it notices each asynchronously, so the first burst may still meet the old count).
  std::vector<int> codes(4);
  for (auto until = Clock::now() + std::chrono::seconds(5); Clock::now() < until;) {
    std::vector<std::thread> clients;
    for (int i = 0; i < 4; ++i) clients.emplace_back([&, i] { codes[i] = Get(port(), "/api/v1/experiments").status; });
    for (auto& t : clients) t.join();
    if (std::all_of(codes.begin(), codes.end(), [](int c) { return c == 200; })) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int c : codes) EXPECT_EQ(c, 200);
}

TEST_F(HttpServerTest, IdleClientIsDisconnectedAfterTheReadTimeout) {
  HttpOptions o;
  o.read_timeout = std::chrono::milliseconds(1000);
  StartServer(o);
  // Idle from the start.
  int fd = Connect(port(), std::chrono::seconds(10));
  ASSERT_GE(fd, 0);
  auto start = Clock::now();
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(n, 0) << "expected the server to close the connection";
  EXPECT_GE(waited, 0.8);
  EXPECT_LT(waited, 5.0);
  ::close(fd);
  // Idle after a kept-alive request, and half a request line (a slow client) alike.
  for (const std::string& first : {std::string("GET /health HTTP/1.1\r\nHost: test\r\n\r\n"), std::string("GET /he")}) {
    fd = Connect(port(), std::chrono::seconds(10));
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendText(fd, first));
    start = Clock::now();
    std::string got = ReadToEnd(fd);  // the response (if any), then the close
    waited = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(waited, 0.8) << first;
    EXPECT_LT(waited, 5.0) << first;
    ::close(fd);
  }
}

TEST_F(HttpServerTest, SlowClientsDoNotBlockOthersEvenWithOneWorker) {
  HttpOptions o;
  o.threads = 1;
  o.read_timeout = std::chrono::seconds(20);
  StartServer(o);
  AddExperiment("one", "name: one\n");
  // Eight clients trickling a request a few bytes at a time, never finishing it in this test.
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    int fd = Connect(port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendText(fd, "GET /api/v1/experiments HTTP/1.1\r\nHo"));
    slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (int fd : slow) SendText(fd, "x");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (int i = 0; i < 20; ++i) {
    auto start = Clock::now();
    HttpReply r = Get(port(), "/api/v1/experiments");
    EXPECT_EQ(r.status, 200);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  }
  done = true;
  trickle.join();
  // The slow ones still get their answer when they finish.
  for (int fd : slow) {
    ASSERT_TRUE(SendText(fd, "st: test\r\nConnection: close\r\n\r\n"));
    EXPECT_EQ(Parse(ReadToEnd(fd)).status, 200);
    ::close(fd);
  }
}

}  // namespace
}  // namespace sf::master
