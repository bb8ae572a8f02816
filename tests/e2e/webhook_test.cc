// Webhooks end to end (docs/webhooks.md): a real master, agent and trainer, and receivers in
// this process on loopback. An experiment runs to completion and each receiver gets one signed
// event per state change it subscribed to (deduped by delivery id); a receiver that fails twice
// gets the event again and the deliveries list shows 3 attempts; a receiver that hangs holds
// up neither the experiment nor the API; who may create, list and delete webhooks.
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/support/webhook_receiver.h"

namespace sf::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

class WebhookEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterLayout layout;
    // Quick retries, and a short timeout for the receiver that hangs.
    layout.master_flags = {"--webhook-retry-first-ms", "300", "--webhook-timeout-seconds", "3"};
    cluster_ = new Cluster(1, 1, layout);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }

  // `sf ARGS... --master URL` as the admin: its exit code and output.
  static std::pair<int, std::string> Sf(std::vector<std::string> args) {
    args.insert(args.begin(), Cluster::Binary("sf"));
    args.push_back("--master");
    args.push_back(cluster_->url());
    auto r = RunCommand(args);
    return r.ok() ? std::make_pair(r->exit_code, r->output) : std::make_pair(-1, r.status().message());
  }

  // A paused tiny experiment (activated by the test once its webhooks exist).
  static int64_t PausedExperiment(const std::string& name) {
    auto [code, body] = cluster_->Post(
        "/api/v1/experiments",
        Value(Value::Map{{"configYaml", TinyExperiment(1, 20, 10, name)}, {"activate", false}}).ToJson());
    EXPECT_EQ(code, 200) << body.ToJson();
    return code == 200 ? Id(*body.Find("experiment")) : 0;
  }

  // `sf webhook create ...`: its id and secret, from "id: N\nsecret: S".
  static std::pair<int64_t, std::string> CreateWithCli(const std::string& url, const std::string& on,
                                                       int64_t experiment) {
    auto [code, out] = Sf({"webhook", "create", "--url", url, "--on", on, "--experiment", std::to_string(experiment)});
    EXPECT_EQ(code, 0) << out;
    const size_t id_at = out.find("id: "), secret_at = out.find("secret: ");
    if (code != 0 || id_at == std::string::npos || secret_at == std::string::npos) return {0, ""};
    return {std::stoll(out.substr(id_at + 4)), out.substr(secret_at + 8, 70)};
  }

  // The events a receiver got, deduped by delivery id: delivery id -> the experiment's state.
  // Every request must carry a valid signature, a fresh timestamp and a body whose id is the
  // Steadfast-Delivery header.
  static std::map<std::string, std::string> Events(const WebhookReceiver& receiver, const std::string& secret) {
    std::map<std::string, std::string> by_delivery;
    for (const auto& r : receiver.received()) {
      EXPECT_EQ(r.signature, WebhookReceiver::ExpectedSignature(secret, r)) << r.body;
      EXPECT_EQ(r.content_type, "application/json");
      EXPECT_LE(std::abs(std::stoll(r.timestamp) - static_cast<int64_t>(std::time(nullptr))), 300) << r.timestamp;
      auto body = Value::FromJson(r.body);
      EXPECT_TRUE(body.ok()) << r.body;
      if (!body.ok()) continue;
      EXPECT_EQ(body->Find("id")->as_string(), r.delivery);
      EXPECT_EQ(body->Find("type")->as_string(), "experiment.state_changed");
      EXPECT_NE(body->Find("occurred_at"), nullptr);
      by_delivery[r.delivery] = body->Find("experiment")->Find("state")->as_string();
    }
    return by_delivery;
  }

  static Cluster* cluster_;
};
Cluster* WebhookEndToEnd::cluster_ = nullptr;

TEST_F(WebhookEndToEnd, EachSubscribedStateChangeArrivesSignedAndFailuresAreRetried) {
  WebhookReceiver receiver;
  // Fails twice (500), then takes the event: at least once, three attempts on record.
  WebhookReceiver flaky([](const WebhookReceiver::Received&, int nth) { return nth <= 2 ? 500 : 200; });
  const int64_t experiment = PausedExperiment("hooked");
  ASSERT_GT(experiment, 0);
  auto [hook, secret] = CreateWithCli(receiver.url(), "active,COMPLETED,ERROR", experiment);
  auto [flaky_hook, flaky_secret] = CreateWithCli(flaky.url("/flaky"), "COMPLETED", experiment);
  ASSERT_GT(hook, 0);
  ASSERT_EQ(secret.rfind("whsec_", 0), 0u);
  ASSERT_EQ(cluster_->Post("/api/v1/experiments/" + std::to_string(experiment) + "/activate", "").first, 200);
  ASSERT_TRUE(cluster_->WaitForState(experiment, kCompleted, seconds(300))) << cluster_->ExperimentState(experiment);

  ASSERT_TRUE(receiver.WaitFor([](const auto& got) { return got.size() >= 2; }, seconds(30)));
  std::this_thread::sleep_for(milliseconds(500));  // nothing more should come
  const auto events = Events(receiver, secret);
  std::multiset<std::string> states;
  for (const auto& [id, state] : events) states.insert(state);
  EXPECT_EQ(states, (std::multiset<std::string>{"ACTIVE", "COMPLETED"}));

  ASSERT_TRUE(flaky.WaitFor([](const auto& got) { return got.size() >= 3; }, seconds(30)));
  const auto flaky_events = Events(flaky, flaky_secret);
  ASSERT_EQ(flaky_events.size(), 1u);  // the same delivery, three times
  EXPECT_EQ(flaky_events.begin()->second, "COMPLETED");
  // `sf webhook deliveries`: delivered on the third attempt, the two failures on record.
  Value delivery;
  ASSERT_TRUE(cluster_->WaitFor(
      [&, flaky_hook = flaky_hook] {
        auto [code, out] = Sf({"webhook", "deliveries", std::to_string(flaky_hook), "--json"});
        auto v = Value::FromJson(out);
        if (code != 0 || !v.ok() || !v->Find("deliveries") || v->Find("deliveries")->as_list().empty()) return false;
        delivery = v->Find("deliveries")->as_list()[0];
        return delivery.Find("state")->as_string() == "delivered";
      },
      seconds(30)))
      << delivery.ToJson();
  EXPECT_EQ(delivery.Find("id")->as_string(), flaky_events.begin()->first);
  EXPECT_EQ(delivery.Find("attempts")->as_int(), 3);
  ASSERT_EQ(delivery.Find("attemptLog")->as_list().size(), 3u);
  EXPECT_EQ(delivery.Find("attemptLog")->as_list()[0].Find("statusCode")->as_int(), 500);
  EXPECT_EQ(delivery.Find("attemptLog")->as_list()[2].Find("statusCode")->as_int(), 200);
  auto [table_code, table] = Sf({"webhook", "deliveries", std::to_string(flaky_hook)});
  EXPECT_EQ(table_code, 0);
  EXPECT_NE(table.find("delivered"), std::string::npos) << table;
  EXPECT_NE(table.find("experiment.state_changed"), std::string::npos) << table;
}

TEST_F(WebhookEndToEnd, AReceiverThatHangsHoldsUpNeitherTheExperimentNorTheApi) {
  WebhookReceiver hanging([](const WebhookReceiver::Received&, int) { return 0; });
  const int64_t experiment = PausedExperiment("hung");
  ASSERT_GT(experiment, 0);
  auto [hook, secret] = CreateWithCli(hanging.url(), "ACTIVE,COMPLETED", experiment);
  ASSERT_GT(hook, 0);
  ASSERT_EQ(cluster_->Post("/api/v1/experiments/" + std::to_string(experiment) + "/activate", "").first, 200);
  ASSERT_TRUE(hanging.WaitFor([](const auto& got) { return !got.empty(); }, seconds(30)));
  // The receiver holds the request; the API answers at once all the while.
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(cluster_->Get("/api/v1/master").first, 200);
    EXPECT_EQ(cluster_->Get("/api/v1/experiments/" + std::to_string(experiment)).first, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(2));
    std::this_thread::sleep_for(milliseconds(300));
  }
  ASSERT_TRUE(cluster_->WaitForState(experiment, kCompleted, seconds(300))) << cluster_->ExperimentState(experiment);
  // The experiment completed while the receiver held its first request; the attempts that
  // timed out are on record, and once the receiver answers, both events are delivered.
  auto deliveries = [&, hook = hook] {
    auto [code, out] = Sf({"webhook", "deliveries", std::to_string(hook), "--json"});
    EXPECT_EQ(code, 0) << out;
    return out;
  };
  std::string listed;
  EXPECT_TRUE(cluster_->WaitFor(
      [&] { return (listed = deliveries()).find("timed out after 3 s") != std::string::npos; }, seconds(30)))
      << listed;
  hanging.Release();
  ASSERT_TRUE(cluster_->WaitFor(
      [&] {
        auto v = Value::FromJson(deliveries());
        if (!v.ok() || !v->Find("deliveries")) return false;
        int delivered = 0;
        for (const Value& d : v->Find("deliveries")->as_list()) delivered += d.Find("state")->as_string() == "delivered";
        return delivered == 2;
      },
      seconds(60)));
  std::set<std::string> states;
  for (const auto& [id, state] : Events(hanging, secret)) states.insert(state);
  EXPECT_EQ(states, (std::set<std::string>{"ACTIVE", "COMPLETED"}));
}

TEST_F(WebhookEndToEnd, WhoMayCreateListAndDeleteWebhooks) {
  ASSERT_EQ(cluster_->Post("/api/v1/users", R"({"username":"bob","password":"bob-password-1","role":"user"})").first,
            200);
  const std::string bob = cluster_->Login("bob", "bob-password-1");
  ASSERT_FALSE(bob.empty());
  auto as_bob = [&](const std::string& method, const std::string& path, const std::string& body) {
    auto client = api::MasterClient::Create(cluster_->url());
    client->set_token(bob);
    auto r = method == "GET" ? client->Get(path) : method == "DELETE" ? client->Delete(path) : client->Post(path, body);
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  const int64_t admins = PausedExperiment("admins");  // the admin's: bob may not act on it
  const std::string url = "https://hooks.example.com/sf";
  auto body = [&](int64_t experiment) {
    return Value(Value::Map{{"url", url}, {"events", Value(Value::List{Value("COMPLETED")})},
                            {"experimentId", std::to_string(experiment)}})
        .ToJson();
  };
  auto [code, text] = as_bob("POST", "/api/v1/webhooks", body(admins));
  EXPECT_EQ(code, 403) << text;
  EXPECT_NE(text.find("may not create webhooks for experiment"), std::string::npos) << text;
  std::tie(code, text) = as_bob("POST", "/api/v1/webhooks", body(0));
  EXPECT_EQ(code, 403) << text;
  EXPECT_NE(text.find("admins only"), std::string::npos) << text;
  // bob's own experiment: allowed.
  auto client = api::MasterClient::Create(cluster_->url());
  client->set_token(bob);
  auto made = client->Post("/api/v1/experiments",
                           Value(Value::Map{{"configYaml", TinyExperiment(1, 20, 10, "bobs")}, {"activate", false}})
                               .ToJson());
  ASSERT_TRUE(made.ok() && made->status == 200) << (made.ok() ? made->body : made.status().message());
  const int64_t bobs = Id(*Value::FromJson(made->body)->Find("experiment"));
  std::tie(code, text) = as_bob("POST", "/api/v1/webhooks", body(bobs));
  ASSERT_EQ(code, 200) << text;
  const std::string bob_hook = Value::FromJson(text)->Find("id")->as_string();
  EXPECT_NE(text.find("whsec_"), std::string::npos);
  // A plain-http target off loopback: 400 naming the url.
  std::tie(code, text) = as_bob(
      "POST", "/api/v1/webhooks",
      R"({"url":"http://hooks.example.com/sf","events":["COMPLETED"],"experimentId":")" + std::to_string(bobs) + "\"}");
  EXPECT_EQ(code, 400) << text;
  EXPECT_NE(text.find("url \\\"http://hooks.example.com/sf\\\""), std::string::npos) << text;
  // The secret is never shown again; bob lists his own only, the admin everyone's.
  std::tie(code, text) = as_bob("GET", "/api/v1/webhooks", "");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(text.find("whsec_"), std::string::npos) << text;
  EXPECT_EQ(Value::FromJson(text)->Find("webhooks")->as_list().size(), 1u) << text;
  auto [all_code, all] = cluster_->Get("/api/v1/webhooks");
  EXPECT_EQ(all_code, 200);
  EXPECT_GE(all.Find("webhooks")->as_list().size(), 2u);
  auto [list_code, listed] = Sf({"webhook", "list"});
  EXPECT_EQ(list_code, 0);
  EXPECT_NE(listed.find("bob"), std::string::npos) << listed;
  // Someone else's webhook: bob may not delete it or read its deliveries; the admin may delete his.
  const std::string admins_hook = all.Find("webhooks")->as_list()[0].Find("id")->as_string();
  EXPECT_EQ(as_bob("DELETE", "/api/v1/webhooks/" + admins_hook, "").first, 403);
  EXPECT_EQ(as_bob("GET", "/api/v1/webhooks/" + admins_hook + "/deliveries", "").first, 403);
  EXPECT_EQ(as_bob("DELETE", "/api/v1/webhooks/999999", "").first, 404);
  auto [deleted, deleted_out] = Sf({"webhook", "delete", bob_hook});
  EXPECT_EQ(deleted, 0) << deleted_out;
  EXPECT_NE(deleted_out.find("webhook " + bob_hook + ": deleted"), std::string::npos) << deleted_out;
  EXPECT_EQ(Sf({"webhook", "delete", bob_hook}).first, 2);  // gone: not found
}

}  // namespace
}  // namespace sf::testing
