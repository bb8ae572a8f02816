// The REST server in-process against a real PostgreSQL (migrated by the master's own migrations):
// list rows are summaries (configYaml only with ?fields=config, always on the single-experiment
// route); connections beyond the cap get a clean 503 and the cap frees up again; an idle client
// is disconnected after the read timeout; slow clients hold no worker thread, so with one worker
// a request still goes through while several slow clients trickle their headers; log follows
// stream lines as they arrive, end with the trial and when the server stops; with TLS the server
// speaks HTTPS only (log follows included) and clients check its certificate's chain and name.
#include "master/api/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/cluster_certificates.h"
#include "common/api/master_client.h"
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

  // A RUNNING trial of a new experiment.
  int64_t AddRunningTrial() {
    auto trial = store_->CreateTrial(AddExperiment("follow", "name: follow\n"), 1, Value(Value::Map{}), "RUNNING");
    EXPECT_TRUE(trial.ok()) << trial.status().ToString();
    return trial.ok() ? *trial : 0;
  }
  void AddLogLine(int64_t trial, const std::string& message) {
    steadfast::v1::LogLine line;
    line.set_trial_id(trial);
    line.set_stream("stdout");
    line.set_message(message);
    line.set_agent_id("a");
    *line.mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
    ASSERT_TRUE(store_->InsertLogs({line}).ok());
  }

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

// Request bodies are limited per route: creating an experiment may carry a user trial's context
// (docs/core-api.md), so it takes more than the rest. A Content-Length over the route's limit is
// refused from the header alone; a chunked body over it as it arrives.
TEST_F(HttpServerTest, BodyLimitsArePerRoute) {
  HttpOptions o;
  o.max_body_bytes = 1000;
  o.max_experiment_body_bytes = 5000;
  StartServer(o);
  auto send = [&](const std::string& request) {
    int fd = Connect(port(), std::chrono::seconds(10));
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(SendText(fd, request));
    HttpReply r = Parse(ReadToEnd(fd));
    ::close(fd);
    return r.head.substr(0, r.head.find("\r\n"));
  };
  auto post = [](const std::string& target, size_t length, const std::string& body) {
    return "POST " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n"
           "Content-Length: " + std::to_string(length) + "\r\n\r\n" + body;
  };
  const std::string body3000 = R"({"configYaml": ")" + std::string(2980, 'x') + "\"}";
  // 3,000 bytes: too many for the bulk kill, fine for an experiment (then an invalid config).
  EXPECT_EQ(send(post("/api/v1/experiments/kill", body3000.size(), body3000)), "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(send(post("/api/v1/experiments", body3000.size(), body3000)), "HTTP/1.1 400 Bad Request");
  // Over the experiment limit: refused on the header's Content-Length, before any body.
  EXPECT_EQ(send(post("/api/v1/experiments", 6000, "")), "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(send(post("/api/v1/experiments?x=1", 6000, "")), "HTTP/1.1 413 Payload Too Large");
  // Chunked, without a length: counted as it comes.
  const std::string chunk(1500, 'y');
  char size[16];
  std::snprintf(size, sizeof size, "%zx", chunk.size());
  EXPECT_EQ(send("POST /api/v1/checkpoints/delete HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n" + std::string(size) + "\r\n" + chunk + "\r\n0\r\n\r\n"),
            "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(Get(port(), "/health").head.substr(0, 15), "HTTP/1.1 200 OK");
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

// `sf trial logs -f` as a thread: follows a trial's logs with `client`, keeping what arrives.
class Follower {
 public:
  Follower(api::MasterClient client, int64_t trial) {
    thread_ = std::thread([this, client, trial]() mutable {
      Status st = client.Stream("/api/v1/trials/" + std::to_string(trial) + "/logs?follow=true",
                                [this](const std::string& event, const std::string& data) {
                                  std::lock_guard<std::mutex> lock(mu_);
                                  (event.empty() ? data_ : events_).push_back(data.empty() ? event : data);
                                  return true;
                                });
      std::lock_guard<std::mutex> lock(mu_);
      status_ = st;
      ended_ = true;
    });
  }
  ~Follower() { thread_.join(); }
  // Waits up to 10 s for `n` data events; all of them.
  std::vector<std::string> WaitForData(size_t n) {
    for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (data_.size() >= n) return data_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::lock_guard<std::mutex> lock(mu_);
    return data_;
  }
  // Waits up to `wait` for the stream to end; whether it did.
  bool WaitForEnd(std::chrono::seconds wait) {
    for (auto until = Clock::now() + wait; Clock::now() < until;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (ended_) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> data_, events_;
  Status status_;
  bool ended_ = false;
  std::thread thread_;
};

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(HttpServerTest, LogFollowStreamsLinesAsTheyArriveAndEndsWithTheTrialOrTheServer) {
  StartServer({});
  const int64_t trial = AddRunningTrial();
  AddLogLine(trial, "first line");
  {
    Follower follower(*api::MasterClient::Create("http://127.0.0.1:" + std::to_string(port())), trial);
    ASSERT_EQ(follower.WaitForData(1).size(), 1u);
    AddLogLine(trial, "second line");
    std::vector<std::string> data = follower.WaitForData(2);
    ASSERT_EQ(data.size(), 2u);
    EXPECT_TRUE(Contains(data[0], "first line")) << data[0];
    EXPECT_TRUE(Contains(data[1], "second line")) << data[1];
    // The trial ends: the stream says so and closes.
    TrialUpdate done;
    done.state = "COMPLETED";
    ASSERT_TRUE(store_->UpdateTrial(trial, done).ok());
    ASSERT_TRUE(follower.WaitForEnd(std::chrono::seconds(10)));
    EXPECT_EQ(follower.events(), std::vector<std::string>{"{}"});
  }
  // A follow of a running trial ends when the server stops, and Stop() does not wait long.
  const int64_t running = AddRunningTrial();
  AddLogLine(running, "still running");
  Follower follower(*api::MasterClient::Create("http://127.0.0.1:" + std::to_string(port())), running);
  ASSERT_EQ(follower.WaitForData(1).size(), 1u);
  auto start = Clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_TRUE(follower.WaitForEnd(std::chrono::seconds(10)));
}

TEST_F(HttpServerTest, WithTlsOnlyHttpsIsServedAndClientsCheckTheCertificate) {
  // A certificate for "localhost" only: https://localhost is right, https://127.0.0.1 is not.
  sf::testing::TempDir dir;
  auto files = cli::EnsureClusterCertificates(dir.path() + "/tls", {"localhost"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto tls = LoadServerCertificate(files->server_cert, files->server_key);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  HttpOptions o;
  o.tls = *tls;
  o.read_timeout = std::chrono::milliseconds(1500);
  StartServer(o);
  const std::string url = "https://localhost:" + std::to_string(port());

  auto client = api::MasterClient::Create(url, files->ca_cert);
  ASSERT_TRUE(client.ok());
  auto health = client->Get("/health");
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->status, 200) << health->body;

  // The certificate does not name 127.0.0.1; another CA is not this one.
  auto by_address = api::MasterClient::Create("https://127.0.0.1:" + std::to_string(port()), files->ca_cert)->Get("/health");
  ASSERT_FALSE(by_address.ok());
  EXPECT_TRUE(Contains(by_address.status().message(), "certificate verify failed: the master's certificate is not for "
                                                      "127.0.0.1"))
      << by_address.status().message();
  auto other = cli::EnsureClusterCertificates(dir.path() + "/other", {"localhost"});
  ASSERT_TRUE(other.ok());
  auto wrong_ca = api::MasterClient::Create(url, other->ca_cert)->Get("/health");
  ASSERT_FALSE(wrong_ca.ok());
  EXPECT_TRUE(Contains(wrong_ca.status().message(), "certificate verify failed")) << wrong_ca.status().message();

  // Plaintext HTTP gets no HTTP answer, only a close; so does a client that never handshakes,
  // within the read timeout.
  EXPECT_EQ(Get(port(), "/health").status, 0);
  int idle = Connect(port(), std::chrono::seconds(10));
  ASSERT_GE(idle, 0);
  auto start = Clock::now();
  char buf[256];
  EXPECT_LE(::recv(idle, buf, sizeof buf, 0), 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  ::close(idle);

  // A log follow goes through the TLS stream, line by line, and ends with the trial.
  const int64_t trial = AddRunningTrial();
  AddLogLine(trial, "over tls");
  Follower follower(*client, trial);
  ASSERT_EQ(follower.WaitForData(1).size(), 1u);
  AddLogLine(trial, "still over tls");
  std::vector<std::string> data = follower.WaitForData(2);
  ASSERT_EQ(data.size(), 2u);
  EXPECT_TRUE(Contains(data[1], "still over tls")) << data[1];
  TrialUpdate done;
  done.state = "COMPLETED";
  ASSERT_TRUE(store_->UpdateTrial(trial, done).ok());
  EXPECT_TRUE(follower.WaitForEnd(std::chrono::seconds(10)));
  EXPECT_EQ(follower.events(), std::vector<std::string>{"{}"});
}

}  // namespace
}  // namespace sf::master
