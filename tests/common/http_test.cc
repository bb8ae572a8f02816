// common/http: the shared server transport and the shared client, against each other over
// loopback (the master's and sf-serve's own tests cover their routes, TLS and log follows).
#include <gtest/gtest.h>

#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
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
// /upload.
class TestHandler : public Handler {
 public:
  ~TestHandler() override {
    for (std::thread& t : threads_) t.join();
  }

  size_t BodyLimit(const RequestHeader& header) override {
    return header.target() == "/upload" ? 1024 : 16;
  }

  void Handle(Request req, std::shared_ptr<Exchange> exchange) override {
    const std::string target(req.target());
    if (target == "/now") return exchange->Reply(Text(200, "now:" + req.body()));
    std::lock_guard<std::mutex> lock(mu_);
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

}  // namespace
}  // namespace sf::http
