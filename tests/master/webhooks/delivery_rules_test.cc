// The pure rules of a webhook delivery (master/webhooks/delivery_rules.h): the signature against
// vectors computed independently, the URL rule, event names and the retry schedule.
#include "master/webhooks/delivery_rules.h"

#include <gtest/gtest.h>

#include "common/subprocess.h"

namespace sf::master::webhooks {
namespace {

using std::chrono::milliseconds;

// Computed with `printf '%s' '1700000000.{"id":"d-1","type":"ping"}' | openssl dgst -sha256 -hmac
// whsec_test` (and python3's hmac, below).
TEST(WebhookSignatureTest, MatchesAVectorComputedWithOpenSslsCommandLine) {
  EXPECT_EQ(WebhookSignature("whsec_test", "1700000000", R"({"id":"d-1","type":"ping"})"),
            "v1=d7da29b55da82d0b6416816137cc908a205acb232716d0fd80fa4f0c6c0b2248");
}

TEST(WebhookSignatureTest, MatchesPythonsHmacOnAFreshSecretAndBody) {
  auto secret = NewWebhookSecret();
  ASSERT_TRUE(secret.ok());
  const std::string body = R"({"experiment": {"id": 7, "name": "caf\u00e9 \"x\"", "state": "COMPLETED"}})";
  const std::string script =
      "import hmac, hashlib, sys\n"
      "print(hmac.new(sys.argv[1].encode(), (sys.argv[2] + '.' + sys.argv[3]).encode(), hashlib.sha256).hexdigest())";
  auto python = RunCommand({"python3", "-c", script, *secret, "1767225600", body});
  ASSERT_TRUE(python.ok()) << "python3: " << python.status().message();
  ASSERT_EQ(python->exit_code, 0) << python->output;
  std::string hex = python->output;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  EXPECT_EQ(WebhookSignature(*secret, "1767225600", body), "v1=" + hex);
}

TEST(WebhookSecretTest, IsThirtyTwoRandomBytesInHexAndNeverRepeats) {
  auto a = NewWebhookSecret(), b = NewWebhookSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->rfind("whsec_", 0), 0u);
  EXPECT_EQ(a->size(), 6u + 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef", 6), std::string::npos);
  EXPECT_NE(*a, *b);
}

TEST(WebhookUrlTest, TakesHttpsAnywhereAndHttpOnlyToLoopback) {
  for (const char* ok : {"https://hooks.example.com/sf", "https://example.com", "HTTPS://example.com:8443/a?b=c",
                         "https://10.0.0.5/x", "http://127.0.0.1:9000/hook", "http://127.8.9.10/",
                         "http://localhost:8080/h", "http://LOCALHOST/h", "http://[::1]:7000/h"}) {
    EXPECT_TRUE(ParseWebhookUrl(ok).ok()) << ok << ": " << ParseWebhookUrl(ok).status().message();
  }
  auto t = ParseWebhookUrl("https://example.com:8443/a?b=c");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->https);
  EXPECT_EQ(t->host, "example.com");
  EXPECT_EQ(t->port, "8443");
  EXPECT_EQ(t->target, "/a?b=c");
  t = ParseWebhookUrl("http://[::1]:7000");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "::1");
  EXPECT_EQ(t->target, "/");
  EXPECT_EQ(ParseWebhookUrl("https://example.com")->port, "443");
  EXPECT_EQ(ParseWebhookUrl("http://localhost")->port, "80");
}

TEST(WebhookUrlTest, RefusesOthersNamingTheUrlAndWhy) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"http://example.com/hook", "loopback"},
      {"http://10.0.0.1/hook", "loopback"},
      {"http://127.0.0.1.example.com/", "loopback"},
      {"http://[::2]/", "loopback"},
      {"ftp://127.0.0.1/", "https://"},
      {"127.0.0.1:80/hook", "https://"},
      {"https://user:pw@example.com/", "credentials"},
      {"https://example.com/#frag", "fragment"},
      {"https://example.com:0/", "port"},
      {"https://example.com:99999/", "port"},
      {"https://example.com:x/", "port"},
      {"https://", "no host"},
      {"https://exa mple.com/", "ASCII"},
      {"https://example.com/" + std::string(3000, 'a'), "2048"},
  };
  for (const auto& [url, why] : bad) {
    auto r = ParseWebhookUrl(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(r.status().message().find("url \""), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << url << ": " << r.status().message();
    if (url.size() < 100) {
      EXPECT_NE(r.status().message().find(url), std::string::npos) << r.status().message();
    }
  }
  EXPECT_EQ(ParseWebhookUrl("").status().message(), "url: required");
}

TEST(WebhookEventsTest, AreExperimentStatesInAnyCaseOnceEach) {
  auto e = ParseWebhookEvents({"completed", "EXPERIMENT_STATE_ERROR", "Completed", "stopping_canceled"});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(*e, (std::vector<std::string>{"COMPLETED", "ERROR", "STOPPING_CANCELED"}));
  auto unknown = ParseWebhookEvents({"COMPLETED", "FINISHED"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("\"FINISHED\" is not an experiment state"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("CANCELED"), std::string::npos);
  EXPECT_FALSE(ParseWebhookEvents({}).ok());
}

TEST(RetryDelayTest, DoublesFromTheFirstDelayUpToTheCap) {
  RetryPolicy p;  // 1 s, capped at 10 min
  std::vector<int64_t> got;
  for (int attempt = 1; attempt <= 12; ++attempt) got.push_back(RetryDelay(attempt, p).count());
  EXPECT_EQ(got, (std::vector<int64_t>{1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 512000,
                                       600000, 600000}));
  p.first = milliseconds(50);
  p.cap = milliseconds(300);
  EXPECT_EQ(RetryDelay(1, p), milliseconds(50));
  EXPECT_EQ(RetryDelay(3, p), milliseconds(200));
  EXPECT_EQ(RetryDelay(4, p), milliseconds(300));
  EXPECT_EQ(RetryDelay(1000, p), milliseconds(300));  // no overflow however many attempts
}

}  // namespace
}  // namespace sf::master::webhooks
