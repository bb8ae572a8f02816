// The proxy to tasks' services (master/proxy/task_proxy.h) between two real HTTP servers on
// loopback (common/http/server.h): the master's side, whose handler hands /proxy/ requests to the
// proxy as the master's HTTP server does, and a task's service that answers what it was asked
// (or streams slowly), with the task's rows in a real PostgreSQL. What is forwarded (the path
// under the task's URL, the query, the client's headers without its master credentials, the
// server token for a server), that answers stream through without being held back, the
// endpoint's states, the target checks and the in-flight bound; and, with the cluster CA, the
// hop over mutual TLS: the service proves the task it is, the master proves itself.
#include "master/proxy/task_proxy.h"

#include <gtest/gtest.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli/cluster_certificates.h"
#include "common/value.h"
#include "tests/master/migrated_database_test.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

http::Response ErrorAnswer(int status, const Status& st, const http::Request& req) {
  http::Response res{static_cast<bhttp::status>(status), req.version()};
  res.set(bhttp::field::content_type, "application/json");
  res.body() = Value(Value::Map{{"message", st.message()}}).ToJson();
  res.prepare_payload();
  return res;
}

// A handler's limits and refusals, for both servers of the test.
class TestHandler : public http::Handler {
 public:
  size_t BodyLimit(const http::RequestHeader&) override { return 1 << 20; }
  http::Response Refuse(Refusal why, const std::string& detail) override {
    http::Response r{why == Refusal::kBodyTooLarge ? bhttp::status::payload_too_large : bhttp::status::bad_request, 11};
    r.body() = detail;
    r.prepare_payload();
    return r;
  }
};

// What the service's /count route saw of the bodies it read in pieces.
struct Counted {
  std::atomic<size_t> bytes{0};  // of the body being read
  std::atomic<int> complete{0};  // bodies read to their end
  std::atomic<int> failed{0};    // bodies whose read failed
  std::mutex mu;
  std::string body;  // the last complete one
  std::string framing;  // its header's Content-Length, or "chunked"
  bool saw_expect = false;
};

// A task's service: /echo answers with what it received, /slow sends "first" at once and
// "second" once `release` is set, /teapot answers 418 with a header of its own, /count reads
// its body in pieces (up to 64 MiB) and answers how many bytes it got.
class Service : public TestHandler {
 public:
  bool StreamsBody(const http::RequestHeader& h) override { return h.target().starts_with("/base/count"); }
  size_t BodyLimit(const http::RequestHeader& h) override {
    return StreamsBody(h) ? size_t{64} << 20 : TestHandler::BodyLimit(h);
  }
  void Handle(http::Request req, std::shared_ptr<http::Exchange> exchange) override {
    const std::string target(req.target());
    if (StreamsBody(req.base())) {
      std::thread([counted = counted, exchange, chunked = req.chunked(),
                   length = std::string(req[bhttp::field::content_length]),
                   expect = req.find(bhttp::field::expect) != req.end()] {
        std::string all;
        counted->bytes = 0;
        for (std::string piece;;) {
          const auto got = exchange->ReadBody(&piece);
          if (got == http::Exchange::BodyRead::kFailed) return void(++counted->failed);
          if (got == http::Exchange::BodyRead::kEnd) break;
          all += piece;
          counted->bytes = all.size();
        }
        {
          std::lock_guard<std::mutex> lock(counted->mu);
          counted->body = all;
          counted->framing = chunked ? "chunked" : length;
          counted->saw_expect = expect;
        }
        ++counted->complete;
        http::Response res{bhttp::status::ok, 11};
        res.body() = "received " + std::to_string(all.size()) + " bytes";
        res.prepare_payload();
        exchange->Reply(std::move(res));
      }).detach();
      return;
    }
    if (target.rfind("/base/ws", 0) == 0 && req.find(bhttp::field::upgrade) != req.end()) {
      // A tunnel that answers every piece in capitals, and ends on "bye".
      exchange->OpenTunnel();
      std::thread([exchange, upgrade = std::string(req[bhttp::field::upgrade])] {
        exchange->Write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + upgrade +
                        "\r\nConnection: Upgrade\r\n\r\n");
        for (std::string bytes; exchange->ReadSome(&bytes);) {
          for (char& ch : bytes)
            ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
          if (!exchange->Write(bytes) || bytes.find("BYE") != std::string::npos) break;
        }
        exchange->CloseStream();
      }).detach();
      return;
    }
    if (target.rfind("/base/chunked", 0) == 0 || target.rfind("/base/cut", 0) == 0) {
      // A chunked answer in three pieces; or one announcing 100 bytes that closes after 10.
      const bool cut = target.rfind("/base/cut", 0) == 0;
      exchange->OpenStream();
      std::thread([exchange, cut] {
        exchange->Write(cut ? "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"
                            : "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n4\r\none \r\n");
        if (!cut) exchange->Write("4\r\ntwo \r\n5\r\nthree\r\n0\r\n\r\n");
        exchange->CloseStream();
      }).detach();
      return;
    }
    if (target.rfind("/base/slow", 0) == 0) {
      exchange->OpenStream();
      std::thread([release = release, exchange] {
        exchange->Write(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nfirst\n");
        for (int i = 0; i < 1000 && !*release; ++i) std::this_thread::sleep_for(10ms);
        exchange->Write("second\n");
        exchange->CloseStream();
      }).detach();
      return;
    }
    http::Response res{
        target.rfind("/base/teapot", 0) == 0 ? bhttp::status{418} : bhttp::status::ok, 11};
    Value::Map headers;
    for (const auto& f : req) headers[std::string(f.name_string())] = std::string(f.value());
    res.set(bhttp::field::content_type, "application/json");
    res.set("X-Service", "yes");
    res.body() = Value(Value::Map{{"method", std::string(req.method_string())},
                                  {"target", target},
                                  {"body", req.body()},
                                  {"headers", Value(std::move(headers))}})
                     .ToJson();
    res.prepare_payload();
    exchange->Reply(std::move(res));
  }
  // Held by the streaming threads too: they may outlive a test by a few milliseconds.
  std::shared_ptr<std::atomic<bool>> release = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<Counted> counted = std::make_shared<Counted>();
};

// The master's side: every request goes to the proxy (access is the HTTP layer's, not tested
// here), at its header, with the proxy's body limit, as the master's HTTP server hands it over.
class Front : public TestHandler {
 public:
  explicit Front(TaskProxy* proxy) : proxy_(proxy) {}
  bool StreamsBody(const http::RequestHeader&) override { return true; }
  size_t BodyLimit(const http::RequestHeader&) override { return proxy_->max_body_bytes(); }
  void Handle(http::Request req, std::shared_ptr<http::Exchange> exchange) override {
    auto target = TaskProxy::Parse(std::string_view(req.target().data(), req.target().size()));
    if (!target.ok()) {
      const int status = target.status().code() == StatusCode::kNotFound ? 404 : 400;
      return exchange->Reply(ErrorAnswer(status, target.status(), req));
    }
    proxy_->Forward(std::move(req), std::move(*target), std::move(exchange));
  }

 private:
  TaskProxy* proxy_;
};

struct Reply {
  int status = 0;
  std::string body;
  bhttp::fields headers;
};

class TaskProxyTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    auto tokens = TaskTokens::Load(db_.get());
    ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
    tokens_ = std::make_unique<TaskTokens>(std::move(*tokens));
    service_server_ = std::make_unique<http::Server>(&service_, http::ServerOptions{});
    ASSERT_TRUE(service_server_->Start().ok());
    StartProxy(8);
  }
  void TearDown() override {
    *service_.release = true;
    front_server_.reset();
    proxy_.reset();
    service_server_.reset();
    MigratedDatabaseTest::TearDown();
  }

  void StartProxy(int max_streams, std::chrono::milliseconds read_timeout = 30s,
                  const TaskCertificates* certificates = nullptr, int max_tunnels = 256) {
    front_server_.reset();
    proxy_.reset();
    TaskProxyOptions o;
    o.max_streams = max_streams;
    o.upstream_timeout = 5s;
    o.error_response = ErrorAnswer;
    o.certificates = certificates;
    o.max_tunnels = max_tunnels;
    o.max_body_bytes = size_t{16} << 20;
    proxy_ = std::make_unique<TaskProxy>(db_.get(), tokens_.get(), o);
    front_ = std::make_unique<Front>(proxy_.get());
    http::ServerOptions front;
    front.read_timeout = read_timeout;
    front_server_ = std::make_unique<http::Server>(front_.get(), front);
    ASSERT_TRUE(front_server_->Start().ok());
  }

  // A task of `kind` in `state`; with `url`, reported by its newest allocation, which is
  // `allocation_state`.
  int64_t Task(const std::string& kind, const std::string& state, const std::string& url,
               const std::string& allocation_state = "RUNNING") {
    int64_t id = 0;
    EXPECT_TRUE(
        db_->Transact(
               "task",
               [&](pqxx::work& tx) {
                 id = tx.exec_params1(
                            "INSERT INTO tasks (kind, state, owner, workspace_id) VALUES ($1, $2, "
                            "'owner', 1) RETURNING id",
                            kind, state)[0]
                          .as<int64_t>();
                 const std::string allocation = "task" + std::to_string(id) + "-r0-a1";
                 tx.exec_params(
                     "INSERT INTO allocations (id, task_id, restart, state) VALUES ($1, $2, 0, $3)",
                     allocation, id, allocation_state);
                 tx.exec_params("UPDATE tasks SET url = $2, url_allocation = $3 WHERE id = $1", id,
                                url, url.empty() ? std::string() : allocation);
                 return Status::Ok();
               })
            .ok());
    return id;
  }
  std::string ServiceUrl() const {
    return "http://127.0.0.1:" + std::to_string(service_server_->port()) + "/base/";
  }

  // One request to the master's side; `on_first_bytes` is called with the first piece of the
  // body as it arrives.
  Reply Call(bhttp::verb verb, const std::string& target, const std::string& body = "",
             const std::vector<std::pair<std::string, std::string>>& headers = {},
             const std::function<void(const std::string&)>& on_first_bytes = {}) {
    Reply out;
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), front_server_->port()));
    stream.expires_after(30s);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    req.set(bhttp::field::host, "master.example");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    bhttp::read_header(stream, buffer, parser);
    bool first = true;
    beast::error_code ec;
    while (!parser.is_done()) {
      bhttp::read_some(stream, buffer, parser, ec);
      if (first && on_first_bytes && !parser.get().body().empty()) {
        on_first_bytes(parser.get().body());
        first = false;
      }
      if (ec) break;
    }
    out.status = parser.get().result_int();
    out.body = parser.get().body();
    out.headers = parser.get().base();
    return out;
  }

  // A connection to the master's side, to send a request's bytes as we like.
  tcp::socket Connect(asio::io_context& io) {
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), front_server_->port()));
    return socket;
  }
  static Reply ReadReply(tcp::socket& socket) {
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    beast::error_code ec;
    bhttp::read(socket, buffer, res, ec);
    return Reply{static_cast<int>(res.result_int()), res.body(), res.base()};
  }
  static std::string Chunk(size_t size, char c) {
    std::ostringstream head;
    head << std::hex << size << "\r\n";
    return head.str() + std::string(size, c) + "\r\n";
  }
  static bool Eventually(const std::function<bool()>& done) {
    for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;) {
      if (done()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return done();
  }

  Service service_;
  std::unique_ptr<TaskTokens> tokens_;
  std::unique_ptr<http::Server> service_server_;
  std::unique_ptr<TaskProxy> proxy_;
  std::unique_ptr<Front> front_;
  std::unique_ptr<http::Server> front_server_;
};

TEST(TaskProxyParse, TakesTheTaskIdAndRefusesPathsThatClimbOut) {
  auto t = TaskProxy::Parse("/proxy/12/v1/translate?beam=2&x=%2F");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->task_id, 12);
  EXPECT_EQ(t->rest, "/v1/translate");
  EXPECT_EQ(t->query, "beam=2&x=%2F");  // the query is the service's to read
  t = TaskProxy::Parse("/proxy/7");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rest, "");
  for (const char* bad :
       {"/proxy/", "/proxy//x", "/proxy/abc/x", "/proxy/-1/x", "/proxy/1234567890123456789/x"}) {
    EXPECT_EQ(TaskProxy::Parse(bad).status().code(), StatusCode::kNotFound) << bad;
  }
  for (const char* bad :
       {"/proxy/7/../api/v1/users", "/proxy/7/a/./b", "/proxy/7/..", "/proxy/7/%2e%2E/x",
        "/proxy/7/a%2Fb", "/proxy/7/a\\b", "/proxy/7/a%5cb"}) {
    EXPECT_EQ(TaskProxy::Parse(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(TaskProxy::Parse("/proxy/7/a..b/.x/x.").ok()) << "dots inside a segment are names";
}

TEST_F(TaskProxyTest, ForwardsUnderTheTasksUrlWithoutTheClientsMasterCredentials) {
  const int64_t id = Task("SERVER", "RUNNING", ServiceUrl());
  Reply r = Call(bhttp::verb::post, "/proxy/" + std::to_string(id) + "/v1/echo?q=1", "payload",
                 {{"Authorization", "Bearer user-master-token"},
                  {"Cookie", "sf_session=user-session; _xsrf=abc"},
                  {"X-Custom", "kept"},
                  {"Connection", "keep-alive, X-Custom"},
                  {"Proxy-Authorization", "Basic x"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["X-Service"], "yes");
  // No Connection of the service's: the answer has its length, and the client's connection stays.
  EXPECT_EQ(r.headers.count(bhttp::field::connection), 0u);
  auto v = Value::FromJson(r.body);
  ASSERT_TRUE(v.ok()) << r.body;
  EXPECT_EQ(v->Find("method")->as_string(), "POST");
  EXPECT_EQ(v->Find("target")->as_string(), "/base/v1/echo?q=1");
  EXPECT_EQ(v->Find("body")->as_string(), "payload");
  const Value& h = *v->Find("headers");
  // The server's own token replaces the user's credentials; other cookies stay.
  EXPECT_EQ(h.Find("Authorization")->as_string(), "Bearer " + tokens_->IssueServing(id));
  EXPECT_EQ(h.Find("Cookie")->as_string(), "_xsrf=abc");
  EXPECT_EQ(h.Find("X-Custom")->as_string(), "kept");
  EXPECT_EQ(h.Find("Proxy-Authorization"), nullptr);
  EXPECT_EQ(h.Find("X-Forwarded-Prefix")->as_string(), "/proxy/" + std::to_string(id));
  EXPECT_EQ(h.Find("X-Forwarded-Host")->as_string(), "master.example");
  EXPECT_EQ(h.Find("X-Forwarded-For")->as_string(), "127.0.0.1");
  EXPECT_EQ(h.Find("Host")->as_string(), "127.0.0.1:" + std::to_string(service_server_->port()));

  // Another kind of task gets no server token, and no Authorization at all.
  const int64_t command = Task("COMMAND", "RUNNING", ServiceUrl());
  r = Call(bhttp::verb::get, "/proxy/" + std::to_string(command), "",
           {{"Authorization", "Bearer user-master-token"}});
  ASSERT_EQ(r.status, 200) << r.body;
  v = Value::FromJson(r.body);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->Find("target")->as_string(), "/base/");
  EXPECT_EQ(v->Find("headers")->Find("Authorization"), nullptr);
  // A status of the service's own comes back as it is, with its body.
  r = Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/teapot");
  EXPECT_EQ(r.status, 418);
  EXPECT_NE(r.body.find("/base/teapot"), std::string::npos);
}

TEST_F(TaskProxyTest, AnAnswerStreamsThroughAsTheServiceSendsIt) {
  const int64_t id = Task("SERVER", "RUNNING", ServiceUrl());
  std::string first;
  Reply r = Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/slow", "", {},
                 [&](const std::string& bytes) {
                   first = bytes;
                   *service_.release = true;  // the service sends the rest only now
                 });
  EXPECT_EQ(first, "first\n") << "the first piece was held back until the service finished";
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "first\nsecond\n");
}

// A browser loads a notebook's page of many files through the proxy on a few connections: an
// answer that frames its end (a Content-Length, a chunked body, none) leaves the client's
// connection open for its next request; an answer the service cuts short ends the connection
// (the client sees it short), and one the service ends by closing goes out with Connection:
// close. Before, every proxied answer closed the connection, so Chromium opened (and over TLS
// handshook) one per file: 140-200 for a notebook's page.
TEST_F(TaskProxyTest, TheClientsConnectionServesItsNextRequestWhenTheAnswerFramesItsEnd) {
  const std::string base = "/proxy/" + std::to_string(Task("SERVER", "RUNNING", ServiceUrl()));
  asio::io_context io;
  tcp::socket socket = Connect(io);
  beast::flat_buffer buffer;  // the connection's, across answers
  auto ask = [&](bhttp::verb verb, const std::string& target, beast::error_code& ec) {
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    req.set(bhttp::field::host, "master.example");
    req.prepare_payload();
    bhttp::write(socket, req, ec);
    bhttp::response_parser<bhttp::string_body> parser;
    if (verb == bhttp::verb::head) parser.skip(true);
    if (!ec) bhttp::read(socket, buffer, parser, ec);
    return parser.release();
  };
  beast::error_code ec;
  auto echo = ask(bhttp::verb::get, base + "/echo?n=1", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(echo.result_int(), 200);
  EXPECT_TRUE(echo.keep_alive()) << echo.base();
  EXPECT_EQ(echo[bhttp::field::content_length], std::to_string(echo.body().size()));

  auto teapot = ask(bhttp::verb::post, base + "/teapot", ec);  // the same connection
  ASSERT_FALSE(ec) << "the connection ended with the first answer: " << ec.message();
  EXPECT_EQ(teapot.result_int(), 418);
  EXPECT_EQ(teapot["X-Service"], "yes");

  auto chunked = ask(bhttp::verb::get, base + "/chunked", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(chunked.result_int(), 200);
  EXPECT_TRUE(chunked.chunked()) << chunked.base();
  EXPECT_EQ(chunked.body(), "one two three");

  auto head = ask(bhttp::verb::head, base + "/echo", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_TRUE(head.body().empty());

  // Cut short by the service: the client sees 10 of the 100 bytes, then the connection's end.
  auto cut = ask(bhttp::verb::get, base + "/cut", ec);
  EXPECT_EQ(ec, bhttp::error::partial_message) << ec.message();
  EXPECT_EQ(cut.body(), "0123456789");

  // Ended by the service's close: passed on with Connection: close.
  *service_.release = true;
  Reply slow = Call(bhttp::verb::get, base + "/slow");
  EXPECT_EQ(slow.body, "first\nsecond\n");
  EXPECT_EQ(slow.headers[bhttp::field::connection], "close");
  // A client that asks for its connection's end gets it.
  Reply once = Call(bhttp::verb::get, base + "/echo", "", {{"Connection", "close"}});
  EXPECT_EQ(once.status, 200);
  EXPECT_EQ(once.headers[bhttp::field::connection], "close");
}

TEST_F(TaskProxyTest, ATaskWithoutAServiceToReachIsNamed) {
  auto expect = [&](int64_t id, int status, const std::string& says) {
    Reply r = Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/x");
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_NE(r.body.find(says), std::string::npos) << r.body;
  };
  expect(987654, 404, "task 987654 does not exist");
  const int64_t stopped = Task("SERVER", "STOPPED", ServiceUrl(), "TERMINATED");
  expect(stopped, 503,
         "task " + std::to_string(stopped) + " has no service to reach: it is STOPPED");
  const int64_t quiet = Task("SERVER", "RUNNING", "");
  expect(quiet, 503, "has not reported its URL");
  // The service is gone (nothing listens at its port): 502 naming the task and its URL.
  asio::io_context io;
  tcp::acceptor taken(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const int port = taken.local_endpoint().port();
  taken.close();
  const int64_t dead = Task("SERVER", "RUNNING", "http://127.0.0.1:" + std::to_string(port));
  expect(dead, 502,
         "task " + std::to_string(dead) + "'s service at http://127.0.0.1:" + std::to_string(port) +
             " did not answer: connect:");
}

TEST_F(TaskProxyTest, AProtocolSwitchBecomesATunnelBothWaysUntilEitherSideCloses) {
  StartProxy(8, 300ms);  // a tunnel outlives the master's read timeout: quiet sides are normal
  const int64_t id = Task("SERVER", "RUNNING", ServiceUrl());
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), front_server_->port()));
  asio::write(socket, asio::buffer("GET /proxy/" + std::to_string(id) +
                                   "/ws HTTP/1.1\r\nHost: master.example\r\nUpgrade: echo-caps\r\n"
                                   "Connection: Upgrade\r\n\r\n"));
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::empty_body> head;
  bhttp::read_header(socket, buffer, head);
  ASSERT_EQ(head.get().result_int(), 101);
  EXPECT_EQ(head.get()[bhttp::field::upgrade], "echo-caps");
  EXPECT_EQ(head.get()[bhttp::field::connection], "Upgrade");
  auto read_some = [&] {
    if (buffer.size() > 0) {
      std::string early = beast::buffers_to_string(buffer.data());
      buffer.consume(buffer.size());
      return early;
    }
    std::array<char, 256> chunk;
    beast::error_code ec;
    const size_t n = socket.read_some(asio::buffer(chunk), ec);
    return std::string(chunk.data(), n);
  };
  // Pieces go both ways, in turn, over the one connection.
  for (const std::string piece : {"hello", "quiet for a while, then", "again"}) {
    asio::write(socket, asio::buffer(piece));
    std::string back;
    while (back.size() < piece.size()) back += read_some();
    std::string want = piece;
    for (char& ch : want) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(back, want);
    std::this_thread::sleep_for(700ms);
  }
  // The service ends the tunnel: the client's connection ends too, and the proxy lets go.
  asio::write(socket, asio::buffer(std::string("bye")));
  std::string rest;
  for (std::string got; !(got = read_some()).empty();) rest += got;
  EXPECT_EQ(rest, "BYE");
  for (int i = 0; i < 300 && proxy_->in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(proxy_->in_flight(), 0);

  // The client ends one: the proxy lets go of the service's side as well.
  tcp::socket second(io);
  second.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), front_server_->port()));
  asio::write(
      second,
      asio::buffer("GET /proxy/" + std::to_string(id) +
                   "/ws HTTP/1.1\r\nHost: m\r\nUpgrade: echo-caps\r\nConnection: Upgrade\r\n\r\n"));
  beast::flat_buffer buffer2;
  bhttp::response_parser<bhttp::empty_body> head2;
  bhttp::read_header(second, buffer2, head2);
  ASSERT_EQ(head2.get().result_int(), 101);
  EXPECT_EQ(proxy_->in_flight(), 1);
  second.close();
  for (int i = 0; i < 300 && proxy_->in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(proxy_->in_flight(), 0) << "the tunnel outlived its client";
}

TEST_F(TaskProxyTest, RequestsInFlightAreBounded) {
  StartProxy(1);
  const int64_t id = Task("SERVER", "RUNNING", ServiceUrl());
  std::promise<void> started;
  auto slow = std::async(std::launch::async, [&] {
    return Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/slow", "", {},
                [&](const std::string&) { started.set_value(); });
  });
  ASSERT_EQ(started.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(proxy_->in_flight(), 1);
  Reply refused = Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/echo");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.headers[bhttp::field::retry_after], "1");
  *service_.release = true;
  EXPECT_EQ(slow.get().body, "first\nsecond\n");
  for (int i = 0; i < 200 && proxy_->in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/echo").status, 200);

  // WebSocket sessions are counted apart: an open one leaves the requests' bound free, and
  // one more than max_tunnels gets 503.
  StartProxy(1, 30s, nullptr, /*max_tunnels=*/1);
  auto open_tunnel = [&](tcp::socket& socket) {
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), front_server_->port()));
    asio::write(socket, asio::buffer("GET /proxy/" + std::to_string(id) +
                                     "/ws HTTP/1.1\r\nHost: m\r\nUpgrade: echo-caps\r\nConnection: Upgrade\r\n\r\n"));
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> head;
    bhttp::read_header(socket, buffer, head);
    return head.get().result_int();
  };
  asio::io_context io;
  tcp::socket first(io), second(io);
  ASSERT_EQ(open_tunnel(first), 101);
  EXPECT_EQ(Call(bhttp::verb::get, "/proxy/" + std::to_string(id) + "/echo").status, 200);
  EXPECT_EQ(open_tunnel(second), 503);
  first.close();
  for (int i = 0; i < 300 && proxy_->in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
  tcp::socket third(io);
  EXPECT_EQ(open_tunnel(third), 101);
}

// A request's body goes to the service as the client sends it, never held whole in the master:
// 10 MiB (over the 8 MiB a whole body may have) arrive, the first part before the client sent
// the rest; a Content-Length stays, "Expect: 100-continue" is answered by the master's side;
// past the proxy's limit 413; a client that leaves mid-body never gives the service a whole one.
TEST_F(TaskProxyTest, ARequestBodyStreamsToTheServiceAsTheClientSendsIt) {
  const int64_t id = Task("SERVER", "RUNNING", ServiceUrl());
  const std::string head = "POST /proxy/" + std::to_string(id) + "/count HTTP/1.1\r\nHost: m\r\n";
  const std::shared_ptr<Counted> counted = service_.counted;
  asio::io_context io;

  tcp::socket chunked = Connect(io);
  asio::write(chunked, asio::buffer(head + "Transfer-Encoding: chunked\r\n\r\n" + Chunk(3 << 20, 'a')));
  ASSERT_TRUE(Eventually([&] { return counted->bytes == (3u << 20); }))
      << "the service had " << counted->bytes << " bytes while the client waited";
  asio::write(chunked, asio::buffer(Chunk(7 << 20, 'b') + "0\r\n\r\n"));
  Reply r = ReadReply(chunked);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "received 10485760 bytes");
  {
    std::lock_guard<std::mutex> lock(counted->mu);
    EXPECT_TRUE(counted->body == std::string(3 << 20, 'a') + std::string(7 << 20, 'b'));
    EXPECT_EQ(counted->framing, "chunked");
  }

  tcp::socket waiting = Connect(io);
  asio::write(waiting, asio::buffer(head + "Content-Length: 1048576\r\nExpect: 100-continue\r\n\r\n"));
  const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  std::string interim(kContinue.size(), '\0');
  asio::read(waiting, asio::buffer(interim));
  EXPECT_EQ(interim, kContinue);
  asio::write(waiting, asio::buffer(std::string(1 << 20, 'c')));
  r = ReadReply(waiting);
  EXPECT_EQ(r.body, "received 1048576 bytes");
  {
    std::lock_guard<std::mutex> lock(counted->mu);
    EXPECT_EQ(counted->framing, "1048576");
    EXPECT_FALSE(counted->saw_expect) << "the master answered Expect; the service must not too";
  }
  EXPECT_EQ(counted->complete, 2);

  // Over the proxy's limit (16 MiB here): declared, refused before a byte is forwarded; chunked,
  // refused on the way, and the service's read fails.
  tcp::socket declared = Connect(io);
  asio::write(declared, asio::buffer(head + "Content-Length: 17000000\r\n\r\n"));
  r = ReadReply(declared);
  EXPECT_EQ(r.status, 413) << r.body;
  tcp::socket endless = Connect(io);
  asio::write(endless, asio::buffer(head + "Transfer-Encoding: chunked\r\n\r\n"));
  std::thread sender([&] {
    beast::error_code ec;
    const std::string piece = Chunk(1 << 20, 'e');
    for (int i = 0; i < 24 && !ec; ++i) asio::write(endless, asio::buffer(piece), ec);
  });
  r = ReadReply(endless);
  sender.join();
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("request body larger than 16777216 bytes"), std::string::npos) << r.body;
  EXPECT_TRUE(Eventually([&] { return counted->failed == 1; }));

  // A client that leaves mid-body: the service's read fails too; it never got a whole body.
  tcp::socket leaving = Connect(io);
  asio::write(leaving, asio::buffer(head + "Content-Length: 5000000\r\n\r\n" + std::string(1 << 20, 'l')));
  ASSERT_TRUE(Eventually([&] { return counted->bytes == (1u << 20); }));
  leaving.close();
  EXPECT_TRUE(Eventually([&] { return counted->failed == 2; }));
  EXPECT_EQ(counted->complete, 2);
  EXPECT_TRUE(Eventually([&] { return proxy_->in_flight() == 0; }));
}

// The hop over mutual TLS (master/auth/task_certificates.h): with the cluster CA the proxy
// reaches a task's service only over TLS, showing the master's certificate, and only when the
// service proves it is that task; requests and a tunnel go through as over plain HTTP.
TEST_F(TaskProxyTest, WithTheClusterCaTheHopIsMutualTlsToTheTaskItNames) {
  sf::testing::TempDir dir;
  auto files = cli::EnsureClusterCertificates(dir.path() + "/tls", {"127.0.0.1"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto loaded = TaskCertificates::Load(files->ca_cert, files->ca_key);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const std::unique_ptr<TaskCertificates> ca = std::move(*loaded);
  StartProxy(8, 300ms, ca.get());

  // A task's service with the certificate the master issues it, taking only the master.
  auto serve_as = [&](int64_t task, Service* handler) {
    http::ServerOptions o;
    auto cert = ca->IssueTask(task);
    EXPECT_TRUE(cert.ok());
    o.tls = *cert;
    o.clients = http::PeerIdentity{ca->ca_pem(), kMasterIdentityUri};
    auto server = std::make_unique<http::Server>(handler, o);
    EXPECT_TRUE(server->Start().ok());
    return server;
  };
  auto point = [&](int64_t task, const std::string& url) {
    ASSERT_TRUE(db_->Transact("url",
                              [&](pqxx::work& tx) {
                                tx.exec_params("UPDATE tasks SET url = $2 WHERE id = $1", task,
                                               url);
                                return Status::Ok();
                              })
                    .ok());
  };
  Service tls_service;
  const int64_t id = Task("NOTEBOOK", "RUNNING", ServiceUrl());
  auto server = serve_as(id, &tls_service);
  const std::string https = "https://127.0.0.1:" + std::to_string(server->port()) + "/base/";
  point(id, https);

  Reply r = Call(bhttp::verb::post, "/proxy/" + std::to_string(id) + "/echo?x=1", "over tls");
  ASSERT_EQ(r.status, 200) << r.body;
  auto echoed = Value::FromJson(r.body);
  ASSERT_TRUE(echoed.ok());
  EXPECT_EQ(echoed->Find("target")->as_string(), "/base/echo?x=1");
  EXPECT_EQ(echoed->Find("body")->as_string(), "over tls");

  // A tunnel over TLS: both ways, in turn, then the client's close ends it.
  {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), front_server_->port()));
    asio::write(
        socket,
        asio::buffer(
            "GET /proxy/" + std::to_string(id) +
            "/ws HTTP/1.1\r\nHost: m\r\nUpgrade: echo-caps\r\nConnection: Upgrade\r\n\r\n"));
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::empty_body> head;
    bhttp::read_header(socket, buffer, head);
    ASSERT_EQ(head.get().result_int(), 101);
    for (const std::string piece : {"one", "and two"}) {
      asio::write(socket, asio::buffer(piece));
      std::string back = beast::buffers_to_string(buffer.data());
      buffer.consume(buffer.size());
      while (back.size() < piece.size()) {
        std::array<char, 256> chunk;
        beast::error_code ec;
        const size_t n = socket.read_some(asio::buffer(chunk), ec);
        ASSERT_FALSE(ec) << ec.message();
        back.append(chunk.data(), n);
      }
      std::string want = piece;
      for (char& ch : want) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      EXPECT_EQ(back, want);
    }
    socket.close();
    for (int i = 0; i < 300 && proxy_->in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(proxy_->in_flight(), 0) << "the TLS tunnel outlived its client";
  }

  // A service proving another task's identity is not reached; nor a plain one.
  Service impostor_service;
  const int64_t other = Task("SHELL", "RUNNING", ServiceUrl());
  auto impostor = serve_as(other + 1000, &impostor_service);
  point(other, "https://127.0.0.1:" + std::to_string(impostor->port()) + "/base/");
  Reply refused = Call(bhttp::verb::get, "/proxy/" + std::to_string(other) + "/echo");
  EXPECT_EQ(refused.status, 502) << refused.body;
  EXPECT_NE(refused.body.find("is not for urn:steadfast:task:" + std::to_string(other)),
            std::string::npos)
      << refused.body;
  const int64_t plain = Task("SERVER", "RUNNING", ServiceUrl());
  Reply in_clear = Call(bhttp::verb::get, "/proxy/" + std::to_string(plain) + "/echo");
  EXPECT_EQ(in_clear.status, 502) << in_clear.body;
  EXPECT_NE(in_clear.body.find("plain HTTP"), std::string::npos) << in_clear.body;

  // The service itself takes nobody but the master: no client certificate, or a task's.
  auto direct = [&](const ServerCertificate& own) {
    http::ClientOptions o;
    o.timeout = 5s;
    o.peer = http::PeerIdentity{ca->ca_pem(), TaskIdentityUri(id)};
    o.client_certificate = own;
    auto url = http::Url::Parse("https://127.0.0.1:" + std::to_string(server->port()), "url");
    http::Client client(*url, o);
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/base/echo", 11};
    return client.Fetch(std::move(req));
  };
  auto anonymous = direct({});
  ASSERT_FALSE(anonymous.ok()) << "a client without a certificate got in";
  EXPECT_EQ(anonymous.status().message().find("resolve"), std::string::npos)
      << anonymous.status().message();
  auto as_task = ca->IssueTask(other);
  ASSERT_TRUE(as_task.ok());
  auto posing = direct(*as_task);
  ASSERT_FALSE(posing.ok()) << "a task's certificate passed as the master's";
  EXPECT_EQ(posing.status().message().find("resolve"), std::string::npos)
      << posing.status().message();
  auto as_master = direct(ca->master_client());
  ASSERT_TRUE(as_master.ok()) << as_master.status().ToString();
  EXPECT_EQ(as_master->status, 200);
}

}  // namespace
}  // namespace sf::master
