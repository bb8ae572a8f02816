// common/http: the shared server transport and the shared client, against each other over
// loopback (the master's and sf-serve's own tests cover their routes, TLS and log follows).
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <sstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/http/client.h"
#include "common/http/server.h"

namespace sf::http {
namespace {

namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

// Answers /now at once, /later from a thread of its own 200 ms later, /stream with three
// pieces written from a thread, /slow after 3 s; bodies over 16 bytes are refused except on
// /upload. /pieces takes its body in pieces (streamed, up to 1 MiB: beyond the server's 1024)
// from a thread and answers "got N bytes"; /pieces/deny answers 403 without reading it.
class TestHandler : public Handler {
 public:
  ~TestHandler() override {
    for (std::thread& t : threads_) t.join();
  }

  size_t BodyLimit(const RequestHeader& header) override {
    if (StreamsBody(header)) return 1 << 20;
    return header.target() == "/upload" ? 1024 : 16;
  }
  bool StreamsBody(const RequestHeader& header) override { return header.target().starts_with("/pieces"); }

  void Handle(Request req, std::shared_ptr<Exchange> exchange) override {
    const std::string target(req.target());
    if (target == "/now") return exchange->Reply(Text(200, "now:" + req.body()));
    if (target == "/pieces/deny") return exchange->Reply(Text(403, "denied"));
    std::lock_guard<std::mutex> lock(mu_);
    if (target == "/pieces") {
      threads_.emplace_back([this, exchange] {
        std::string all;
        for (std::string piece;;) {
          const Exchange::BodyRead got = exchange->ReadBody(&piece);
          if (got == Exchange::BodyRead::kFailed) {
            ++bodies_failed;
            return exchange->Reply(Text(500, "unreachable: the server answered or the client left"));
          }
          if (got == Exchange::BodyRead::kEnd) break;
          EXPECT_FALSE(piece.empty());
          all += piece;
          bytes_seen = all.size();
          ++pieces_seen;
        }
        {
          std::lock_guard<std::mutex> body_lock(body_mu);
          last_body = all;
        }
        exchange->Reply(Text(200, "got " + std::to_string(all.size()) + " bytes"));
      });
      return;
    }
    if (target == "/later" || target == "/slow") {
      const auto wait = target == "/later" ? std::chrono::milliseconds(200) : std::chrono::milliseconds(3000);
      threads_.emplace_back([exchange, wait] {
        std::this_thread::sleep_for(wait);
        exchange->Reply(Text(200, "later"));
      });
      return;
    }
    if (target == "/stream") {
      exchange->OpenStream();
      threads_.emplace_back([exchange] {
        bool ok = exchange->Write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n");
        for (int i = 0; ok && i < 3; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          ok = exchange->Write("piece" + std::to_string(i) + "\n");
        }
        exchange->CloseStream();
      });
      return;
    }
    if (target == "/throw") throw std::runtime_error("boom");
    exchange->Reply(Text(404, "no route"));
  }

  Response Refuse(Refusal why, const std::string& detail) override {
    ++refusals;
    const int status = why == Refusal::kOverCapacity   ? 503
                       : why == Refusal::kBodyTooLarge ? 413
                       : why == Refusal::kMalformed    ? 400
                                                       : 500;
    return Text(status, detail);
  }

  static Response Text(int status, std::string body) {
    Response res{static_cast<bhttp::status>(status), 11};
    res.set(bhttp::field::content_type, "text/plain");
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  std::atomic<int> refusals{0};
  std::atomic<size_t> bytes_seen{0};  // of the /pieces body being read
  std::atomic<int> pieces_seen{0};
  std::atomic<int> bodies_failed{0};
  std::mutex body_mu;
  std::string last_body;  // the last /pieces body read whole

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.max_body_bytes = 1024;
    o.read_timeout = std::chrono::milliseconds(2000);
    o.max_connections = 8;
    server_ = std::make_unique<Server>(&handler_, o);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }

  Client MakeClient(ClientOptions o = {}) {
    return Client(*Url::Parse("http://127.0.0.1:" + std::to_string(server_->port()), "test URL"), o);
  }
  static bhttp::request<bhttp::string_body> Req(bhttp::verb verb, const std::string& target,
                                                const std::string& body = "") {
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    req.body() = body;
    return req;
  }

  // A connection of our own, to send a request's bytes as we like.
  boost::asio::ip::tcp::socket Connect() {
    boost::asio::ip::tcp::socket socket(io_);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_->port())});
    return socket;
  }
  static void Send(boost::asio::ip::tcp::socket& socket, const std::string& bytes) {
    boost::asio::write(socket, boost::asio::buffer(bytes));
  }
  // The answer on `socket` (read to the server's close), or "" when it closed without one.
  static std::string Answer(boost::asio::ip::tcp::socket& socket) {
    std::string all;
    std::array<char, 4096> chunk;
    boost::system::error_code ec;
    for (size_t n; (n = socket.read_some(boost::asio::buffer(chunk), ec)) > 0 && !ec;) all.append(chunk.data(), n);
    return all;
  }
  static std::string Chunk(const std::string& data) {
    std::ostringstream size;
    size << std::hex << data.size();
    return size.str() + "\r\n" + data + "\r\n";
  }
  // Until `done` holds, for at most 5 s.
  static bool Eventually(const std::function<bool()>& done) {
    for (auto end = Clock::now() + std::chrono::seconds(5); Clock::now() < end;) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }

  boost::asio::io_context io_;
  TestHandler handler_;
  std::unique_ptr<Server> server_;
};

TEST_F(HttpTest, AnswersNowOrLaterFromAnotherThread) {
  Client client = MakeClient();
  auto now = client.Fetch(Req(bhttp::verb::post, "/now", "hi"));
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(now->status, 200);
  EXPECT_EQ(now->body, "now:hi");
  auto start = Clock::now();
  auto later = client.Fetch(Req(bhttp::verb::get, "/later"));
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(later->body, "later");
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(190));
  auto thrown = client.Fetch(Req(bhttp::verb::get, "/throw"));
  ASSERT_TRUE(thrown.ok());
  EXPECT_EQ(thrown->status, 500);
  EXPECT_EQ(thrown->body, "internal error: boom");
}

TEST_F(HttpTest, BodyLimitIsTheRoutesAndIsCheckedBeforeTheBody) {
  Client client = MakeClient();
  auto small = client.Fetch(Req(bhttp::verb::post, "/now", std::string(17, 'x')));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->status, 413);
  EXPECT_EQ(small->body, "request body larger than 16 bytes");
  auto upload = client.Fetch(Req(bhttp::verb::post, "/upload", std::string(1000, 'x')));
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ(upload->status, 404);  // through the limit, to the route
  auto too_big = client.Fetch(Req(bhttp::verb::post, "/upload", std::string(1025, 'x')));
  ASSERT_TRUE(too_big.ok());
  EXPECT_EQ(too_big->status, 413);
  EXPECT_EQ(handler_.refusals, 2);
}

TEST_F(HttpTest, StreamsArriveAsWrittenAndEndWithTheServersClose) {
  Client client = MakeClient();
  std::vector<std::string> pieces;
  std::vector<Clock::time_point> times;
  auto streamed = client.Stream(Req(bhttp::verb::get, "/stream"), [&](const std::string& bytes) {
    pieces.push_back(bytes);
    times.push_back(Clock::now());
    return true;
  });
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  EXPECT_EQ(streamed->status, 200);
  std::string all;
  for (const std::string& p : pieces) all += p;
  EXPECT_EQ(all, "piece0\npiece1\npiece2\n");
  // Handed on as they came, not at the end.
  ASSERT_GE(pieces.size(), 2u);
  EXPECT_GE(times.back() - times.front(), std::chrono::milliseconds(50));
}

TEST_F(HttpTest, ClientDeadlineAndCancelEndTheCallNamingTheStep) {
  ClientOptions quick;
  quick.timeout = std::chrono::milliseconds(500);
  Client client = MakeClient(quick);
  auto start = Clock::now();
  auto slow = client.Fetch(Req(bhttp::verb::get, "/slow"));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(client.failure(), Failure::kTimedOut);
  EXPECT_EQ(slow.status().message(), "timed out after 0.5 s (read the answer)");
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));

  std::atomic<bool> cancel{false};
  ClientOptions cancelable;
  cancelable.cancel = &cancel;
  cancelable.cancel_reason = "canceled: stopping";
  Client canceled = MakeClient(cancelable);
  std::thread flip([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  start = Clock::now();
  auto r = canceled.Fetch(Req(bhttp::verb::get, "/slow"));
  flip.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(canceled.failure(), Failure::kCanceled);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(r.status().message(), "canceled: stopping (read the answer)");
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
}

TEST_F(HttpTest, ClientNamesTheStepThatFailedAndKeepsPlainHttpOnLoopbackWhenAsked) {
  ClientOptions o;
  Client refused(*Url::Parse("http://127.0.0.1:1", "test URL"), o);
  auto r = refused.Fetch(Req(bhttp::verb::get, "/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(refused.failure(), Failure::kNetwork);
  EXPECT_EQ(r.status().message().rfind("connect: ", 0), 0u) << r.status().message();

  o.plain_http_loopback_only = true;
  Client outside(*Url::Parse("http://192.0.2.1:80", "test URL"), o);
  auto blocked = outside.Fetch(Req(bhttp::verb::get, "/"));
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(outside.failure(), Failure::kSetup);
  EXPECT_NE(blocked.status().message().find("http:// goes to loopback only"), std::string::npos);

  auto bad = Url::Parse("ftp://x", "master URL");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "master URL \"ftp://x\": only http:// and https:// are supported");
  auto v6 = Url::Parse("https://[::1]:8443/", "u");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "8443");
  EXPECT_EQ(v6->HostHeader(), "[::1]:8443");
}

TEST_F(HttpTest, ConnectionsOverTheCapAreRefusedAndTheRestServed) {
  // Eight connections held open by slow answers; the ninth is refused at once.
  std::vector<std::thread> holders;
  std::atomic<int> served{0};
  for (int i = 0; i < 8; ++i) {
    holders.emplace_back([&] {
      Client c = MakeClient();
      auto r = c.Fetch(Req(bhttp::verb::get, "/slow"));
      if (r.ok() && r->status == 200) ++served;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Client extra = MakeClient();
  auto refused = extra.Fetch(Req(bhttp::verb::get, "/now"));
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->body, "too many connections (8 open); retry later");
  for (std::thread& t : holders) t.join();
  EXPECT_EQ(served, 8);
  auto after = extra.Fetch(Req(bhttp::verb::get, "/now"));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpTest, AStreamedBodyReachesTheHandlerInPiecesAsItArrives) {
  // Chunked, from a connection of our own: the first half is with the handler before the
  // second is sent, and the whole (8000 bytes, over the server's 1024 for a whole body) arrives.
  auto socket = Connect();
  Send(socket, "POST /pieces HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunk(std::string(4000, 'a')));
  ASSERT_TRUE(Eventually([&] { return handler_.bytes_seen == 4000; })) << handler_.bytes_seen;
  Send(socket, Chunk(std::string(4000, 'b')) + "0\r\n\r\n");
  const std::string answer = Answer(socket);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("got 8000 bytes"), std::string::npos) << answer;
  EXPECT_GE(handler_.pieces_seen, 2);
  {
    std::lock_guard<std::mutex> lock(handler_.body_mu);
    EXPECT_EQ(handler_.last_body, std::string(4000, 'a') + std::string(4000, 'b'));
  }

  // The client's side of the same: Relay with a body from a source, by Content-Length and
  // chunked; the source is asked for a piece only when the last one went out.
  for (const bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "content-length");
    std::vector<std::string> pieces = {std::string(3000, 'x'), "", std::string(5000, 'y'), "z"};
    size_t next = 0;
    BodySource source = [&](std::string* piece) -> Result<bool> {
      if (next == pieces.size()) return false;
      *piece = pieces[next++];
      return true;
    };
    auto req = Req(bhttp::verb::put, "/pieces");
    if (!chunked) req.content_length(8001);
    int status = 0;
    std::string body;
    Client client = MakeClient();
    auto relayed = client.Relay(
        req, source,
        [&](const ResponseHeader& h) {
          status = h.result_int();
          return true;
        },
        [&](const std::string& bytes) {
          body += bytes;
          return true;
        });
    ASSERT_TRUE(relayed.ok()) << relayed.status().ToString();
    EXPECT_EQ(status, 200);
    EXPECT_EQ(body, "got 8001 bytes");
    std::lock_guard<std::mutex> lock(handler_.body_mu);
    EXPECT_EQ(handler_.last_body, pieces[0] + pieces[2] + pieces[3]);
  }

  // A source that fails ends the call with its error; the server never sees the body whole.
  const int failed_before = handler_.bodies_failed;
  bool first = true;
  BodySource broken = [&](std::string* piece) -> Result<bool> {
    if (!first) return Unavailable("the source broke");
    first = false;
    *piece = std::string(100, 'q');
    return true;
  };
  Client client = MakeClient();
  auto cut = client.Relay(Req(bhttp::verb::put, "/pieces"), broken, [](const ResponseHeader&) { return true; },
                          [](const std::string&) { return true; });
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(client.failure(), Failure::kRequestBody);
  EXPECT_EQ(cut.status().message(), "the source broke");
  EXPECT_TRUE(Eventually([&] { return handler_.bodies_failed == failed_before + 1; }));
}

TEST_F(HttpTest, AStreamedBodyOverItsLimitOrCutShortIsNeverTakenAsWhole) {
  // A Content-Length over the route's limit: 413 before the handler hears of it.
  auto declared = Connect();
  Send(declared, "POST /pieces HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
  std::string answer = Answer(declared);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  EXPECT_NE(answer.find("request body larger than 1048576 bytes"), std::string::npos) << answer;
  EXPECT_EQ(handler_.refusals, 1);

  // Chunked past the limit: the handler's read fails and the server answers 413.
  auto chunked = Connect();
  Send(chunked, "POST /pieces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::thread sender([&] {
    boost::system::error_code ec;
    const std::string piece = Chunk(std::string(64 << 10, 'c'));
    for (int i = 0; i < 20 && !ec; ++i) boost::asio::write(chunked, boost::asio::buffer(piece), ec);
  });
  answer = Answer(chunked);
  sender.join();
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  EXPECT_TRUE(Eventually([&] { return handler_.bodies_failed == 1; }));
  EXPECT_EQ(handler_.refusals, 2);

  // A client that leaves mid-body: the handler's read fails, nobody is answered.
  auto leaving = Connect();
  Send(leaving, "POST /pieces HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + std::string(1000, 'l'));
  ASSERT_TRUE(Eventually([&] { return handler_.bytes_seen == 1000; }));
  leaving.close();
  EXPECT_TRUE(Eventually([&] { return handler_.bodies_failed == 2; }));

  // A handler that answers without reading the body: the answer arrives, the body is dropped.
  auto denied = Connect();
  Send(denied, "POST /pieces/deny HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n" + std::string(3000, 'd'));
  answer = Answer(denied);
  EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
}

TEST_F(HttpTest, ExpectContinueIsAnsweredWhenTheHandlerFirstAsksForTheBody) {
  auto socket = Connect();
  Send(socket, "POST /pieces HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  std::array<char, 64> interim{};
  size_t got = 0;
  const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  while (got < kContinue.size()) got += socket.read_some(boost::asio::buffer(interim.data() + got, kContinue.size() - got));
  EXPECT_EQ(std::string(interim.data(), got), kContinue);
  Send(socket, "hello");
  const std::string answer = Answer(socket);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("got 5 bytes"), std::string::npos) << answer;

  // One answered at once gets no "100 Continue", only the answer.
  auto denied = Connect();
  Send(denied, "POST /pieces/deny HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  const std::string refused = Answer(denied);
  EXPECT_EQ(refused.rfind("HTTP/1.1 403", 0), 0u) << refused;
}

}  // namespace
}  // namespace sf::http
