// Webhooks against PostgreSQL and a receiver on loopback (master/webhooks/webhooks.h): the
// outbox trigger writes events in the state change's transaction, senders deliver them signed,
// retry with backoff, give up, resume after a restart, and a hanging receiver holds only its
// own delivery.
#include "master/webhooks/webhooks.h"

#include <gtest/gtest.h>

#include <ctime>
#include <pqxx/pqxx>

#include "cli/cluster_certificates.h"
#include "common/value.h"
#include "tests/master/migrated_database_test.h"
#include "tests/support/webhook_receiver.h"

namespace sf::master::webhooks {
namespace {

namespace v1 = steadfast::v1;
using sf::testing::WebhookReceiver;
using std::chrono::milliseconds;
using std::chrono::seconds;

class WebhooksTest : public testing::MigratedDatabaseTest {
 protected:
  WebhookOptions Options() {
    WebhookOptions o;
    o.retry.first = milliseconds(100);
    o.retry.cap = milliseconds(400);
    o.retry.max_attempts = 4;
    o.timeout = milliseconds(1500);
    o.listen_connection = connection_string();
    o.poll = milliseconds(200);
    return o;
  }
  int64_t MakeExperiment(const std::string& state = "ACTIVE") {
    Store store(db_.get());
    master::NewExperiment e;
    e.name = "hooked";
    e.config_yaml = "name: hooked";
    e.searcher = "single";
    e.metric = "validation_loss";
    e.state = state;
    e.owner = "ana";
    auto id = store.CreateExperiment(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  v1::Webhook Hook(Webhooks& hooks, const std::string& url, std::vector<std::string> events, int64_t experiment) {
    v1::CreateWebhookRequest r;
    r.set_url(url);
    for (const std::string& e : events) r.add_events(e);
    r.set_experiment_id(experiment);
    auto made = hooks.Create(r, "ana", 0);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? *made : v1::Webhook();
  }
  // The one number `sql` selects, committed (so an UPDATE ... RETURNING in it stays).
  int64_t Count(const std::string& sql) {
    pqxx::connection c(connection_string());
    pqxx::work tx(c);
    const int64_t n = tx.exec1(sql)[0].as<int64_t>();
    tx.commit();
    return n;
  }
};

TEST_F(WebhooksTest, StateChangesQueueOneEventPerSubscribedWebhookInTheSameTransaction) {
  Webhooks hooks(db_.get(), Options());  // not started: nothing is sent
  const int64_t experiment = MakeExperiment();
  const int64_t other = MakeExperiment();
  v1::Webhook mine = Hook(hooks, "https://example.com/a", {"COMPLETED", "ERROR"}, experiment);
  v1::Webhook all = Hook(hooks, "https://example.com/b", {"completed"}, 0);
  EXPECT_EQ(mine.secret().size(), 70u);
  Hook(hooks, "https://example.com/c", {"PAUSED"}, experiment);
  Store store(db_.get());
  ASSERT_TRUE(store.SetExperimentState(experiment, "COMPLETED", "", true).ok());
  ASSERT_TRUE(store.SetExperimentState(experiment, "COMPLETED", "", true).ok());  // no change: no event
  ASSERT_TRUE(store.SetExperimentState(other, "ERROR", "boom", true).ok());        // nobody subscribed
  // A state change rolled back leaves no event.
  {
    pqxx::connection c(connection_string());
    pqxx::work tx(c);
    tx.exec_params("UPDATE experiments SET state = 'ERROR' WHERE id = $1", experiment);
    tx.abort();
  }
  auto deliveries = hooks.Deliveries(mine.id(), 100);
  ASSERT_TRUE(deliveries.ok()) << deliveries.status().ToString();
  ASSERT_EQ(deliveries->size(), 1u);
  const v1::WebhookDelivery& d = (*deliveries)[0];
  EXPECT_EQ(d.type(), "experiment.state_changed");
  EXPECT_EQ(d.state(), "pending");
  EXPECT_EQ(d.attempts(), 0);
  auto payload = Value::FromJson(d.payload_json());
  ASSERT_TRUE(payload.ok()) << d.payload_json();
  EXPECT_EQ(payload->Find("type")->as_string(), "experiment.state_changed");
  const Value* e = payload->Find("experiment");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->Find("id")->as_int(), experiment);
  EXPECT_EQ(e->Find("state")->as_string(), "COMPLETED");
  EXPECT_EQ(e->Find("previous_state")->as_string(), "ACTIVE");
  EXPECT_EQ(e->Find("name")->as_string(), "hooked");
  EXPECT_EQ(e->Find("workspace")->as_string(), "Uncategorized");
  EXPECT_NE(payload->Find("occurred_at")->as_string().find('T'), std::string::npos);
  EXPECT_EQ(hooks.Deliveries(all.id(), 100)->size(), 1u);  // every experiment's COMPLETED
  EXPECT_EQ(Count("SELECT count(*) FROM webhook_deliveries"), 2);
}

TEST_F(WebhooksTest, RefusesBadInputAndUnknownIds) {
  Webhooks hooks(db_.get(), Options());
  v1::CreateWebhookRequest r;
  r.set_url("http://example.com/hook");
  r.add_events("COMPLETED");
  auto refused = hooks.Create(r, "ana", 0);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("http://example.com/hook"), std::string::npos);
  r.set_url("https://example.com/hook");
  r.set_experiment_id(424242);
  EXPECT_EQ(hooks.Create(r, "ana", 0).status().code(), StatusCode::kNotFound);
  r.set_experiment_id(0);
  r.clear_events();
  EXPECT_EQ(hooks.Create(r, "ana", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hooks.Delete(99).code(), StatusCode::kNotFound);
  EXPECT_EQ(hooks.Deliveries(99, 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hooks.Ping(99).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hooks.OwnerOf(99).status().code(), StatusCode::kNotFound);
}

TEST_F(WebhooksTest, DeliversSignedEventsAndRetriesUntilTheReceiverTakesThem) {
  // Fails twice with 500, then takes it: the same delivery three times, three attempts recorded.
  WebhookReceiver receiver([](const WebhookReceiver::Received&, int nth) { return nth <= 2 ? 500 : 204; });
  Webhooks hooks(db_.get(), Options());
  hooks.Start();
  const int64_t experiment = MakeExperiment();
  v1::Webhook hook = Hook(hooks, receiver.url("/in?x=1"), {"COMPLETED"}, experiment);
  Store store(db_.get());
  ASSERT_TRUE(store.SetExperimentState(experiment, "COMPLETED", "", true).ok());
  ASSERT_TRUE(receiver.WaitFor([](const auto& got) { return got.size() >= 3; }, seconds(20)));
  std::vector<v1::WebhookDelivery> list;
  for (int i = 0; i < 100; ++i) {
    list = *hooks.Deliveries(hook.id(), 10);
    if (list.size() == 1 && list[0].state() == "delivered") break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state(), "delivered");
  EXPECT_EQ(list[0].attempts(), 3);
  EXPECT_EQ(list[0].last_status_code(), 204);
  ASSERT_EQ(list[0].attempt_log_size(), 3);
  EXPECT_EQ(list[0].attempt_log(0).status_code(), 500);
  EXPECT_EQ(list[0].attempt_log(0).error(), "HTTP 500");
  EXPECT_EQ(list[0].attempt_log(2).status_code(), 204);
  const auto got = receiver.received();
  ASSERT_EQ(got.size(), 3u);
  for (const auto& r : got) {
    EXPECT_EQ(r.delivery, list[0].id());
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_EQ(r.signature, WebhookReceiver::ExpectedSignature(hook.secret(), r));
    EXPECT_LE(std::abs(std::stoll(r.timestamp) - static_cast<int64_t>(std::time(nullptr))), 60);
    auto body = Value::FromJson(r.body);
    ASSERT_TRUE(body.ok()) << r.body;
    EXPECT_EQ(body->Find("id")->as_string(), list[0].id());
    EXPECT_EQ(body->Find("type")->as_string(), "experiment.state_changed");
    EXPECT_EQ(body->Find("experiment")->Find("state")->as_string(), "COMPLETED");
  }
  // The retries waited (100 ms, then 200 ms) between attempts.
  const auto& log = list[0].attempt_log();
  const auto gap = [&](int i) {
    return (log[i + 1].time().seconds() - log[i].time().seconds()) * 1000 +
           (log[i + 1].time().nanos() - log[i].time().nanos()) / 1000000;
  };
  EXPECT_GE(gap(0), 90);
  EXPECT_GE(gap(1), 190);
}

TEST_F(WebhooksTest, FinishedDeliveriesOlderThanTheirKeepTimeArePrunedAndEveryOutcomeIsCounted) {
  // Fails each delivery's first attempt, takes its second.
  WebhookReceiver receiver([](const WebhookReceiver::Received&, int nth) { return nth == 1 ? 500 : 204; });
  WebhookOptions o = Options();
  o.keep_finished = std::chrono::hours(24);
  Webhooks hooks(db_.get(), o);
  hooks.Start();
  v1::Webhook hook = Hook(hooks, receiver.url(), {"COMPLETED"}, 0);
  ASSERT_TRUE(hooks.Ping(hook.id()).ok());
  ASSERT_TRUE(hooks.Ping(hook.id()).ok());
  ASSERT_TRUE(receiver.WaitFor([](const auto& got) { return got.size() >= 4; }, seconds(20)));
  for (int i = 0; i < 100 && hooks.Counts().delivered < 2; ++i) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(hooks.Counts().delivered, 2u);
  EXPECT_EQ(hooks.Counts().attempts_failed, 2u);
  EXPECT_EQ(hooks.Counts().given_up, 0u);
  hooks.Stop();
  // A third stays pending (no sender runs), however old; one delivered one is made two days old.
  ASSERT_TRUE(hooks.Ping(hook.id()).ok());
  const int64_t aged = Count(
      "WITH d AS (SELECT id FROM webhook_deliveries WHERE delivered_at IS NOT NULL ORDER BY created_at LIMIT 1) "
      "UPDATE webhook_deliveries SET delivered_at = now() - interval '2 days' FROM d "
      "WHERE webhook_deliveries.id = d.id RETURNING 1");
  ASSERT_EQ(aged, 1);
  Count("WITH u AS (UPDATE webhook_deliveries SET created_at = now() - interval '9 days' "
        "WHERE delivered_at IS NULL RETURNING 1) SELECT count(*) FROM u");
  const int64_t attempts_before = Count("SELECT count(*) FROM webhook_delivery_attempts");
  auto pruned = hooks.PruneFinished();
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(*pruned, 1);
  EXPECT_EQ(hooks.Counts().pruned, 1u);
  EXPECT_EQ(Count("SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NOT NULL"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NULL AND failed_at IS NULL"), 1);
  // Its two attempts went with it.
  EXPECT_EQ(Count("SELECT count(*) FROM webhook_delivery_attempts"), attempts_before - 2);
  // Nothing more is old enough; keep_finished 0 keeps everything.
  EXPECT_EQ(*hooks.PruneFinished(), 0);
  WebhookOptions keep = Options();
  keep.keep_finished = std::chrono::hours(0);
  Count("WITH u AS (UPDATE webhook_deliveries SET delivered_at = now() - interval '400 days' "
        "WHERE delivered_at IS NOT NULL RETURNING 1) SELECT count(*) FROM u");
  Webhooks keeping(db_.get(), keep);
  EXPECT_EQ(*keeping.PruneFinished(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM webhook_deliveries"), 2);
}

TEST_F(WebhooksTest, HttpsReceiversAreVerifiedByTheConfiguredCa) {
  // Two CAs, each with a certificate for 127.0.0.1; the receiver serves the first's.
  sf::testing::TempDir dir;
  auto ours = cli::EnsureClusterCertificates(dir.path() + "/ours", {"127.0.0.1"});
  auto other = cli::EnsureClusterCertificates(dir.path() + "/other", {"127.0.0.1"});
  ASSERT_TRUE(ours.ok() && other.ok());
  WebhookReceiver receiver([](const WebhookReceiver::Received&, int) { return 200; }, ours->server_cert,
                           ours->server_key);
  ASSERT_EQ(receiver.url().rfind("https://127.0.0.1:", 0), 0u);
  WebhookOptions o = Options();
  o.ca_file = ours->ca_cert;
  o.retry.max_attempts = 1;
  {
    Webhooks hooks(db_.get(), o);
    hooks.Start();
    v1::Webhook hook = Hook(hooks, receiver.url(), {"COMPLETED"}, 0);
    ASSERT_TRUE(hooks.Ping(hook.id()).ok());
    ASSERT_TRUE(receiver.WaitFor([](const auto& got) { return got.size() == 1; }, seconds(20)));
    EXPECT_EQ(receiver.received()[0].signature, WebhookReceiver::ExpectedSignature(hook.secret(), receiver.received()[0]));
    std::vector<v1::WebhookDelivery> list;
    for (int i = 0; i < 100 && (list.empty() || list[0].state() != "delivered"); ++i) {
      list = *hooks.Deliveries(hook.id(), 10);
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].state(), "delivered");
  }
  // A master that trusts another CA refuses the receiver's certificate: nothing arrives, and the
  // attempt's error says why.
  o.ca_file = other->ca_cert;
  Webhooks hooks(db_.get(), o);
  hooks.Start();
  v1::Webhook hook = Hook(hooks, receiver.url("/other"), {"COMPLETED"}, 0);
  ASSERT_TRUE(hooks.Ping(hook.id()).ok());
  std::vector<v1::WebhookDelivery> list;
  for (int i = 0; i < 200 && (list.empty() || list[0].state() != "failed"); ++i) {
    list = *hooks.Deliveries(hook.id(), 10);
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state(), "failed");
  EXPECT_NE(list[0].last_error().find("certificate"), std::string::npos) << list[0].last_error();
  EXPECT_EQ(receiver.received().size(), 1u);
}

TEST_F(WebhooksTest, GivesUpAfterTheLastAttempt) {
  WebhookReceiver receiver([](const WebhookReceiver::Received&, int) { return 503; });
  WebhookOptions o = Options();
  o.retry.max_attempts = 2;
  Webhooks hooks(db_.get(), o);
  hooks.Start();
  v1::Webhook hook = Hook(hooks, receiver.url(), {"COMPLETED"}, 0);
  ASSERT_TRUE(hooks.Ping(hook.id()).ok());
  std::vector<v1::WebhookDelivery> list;
  for (int i = 0; i < 200; ++i) {
    list = *hooks.Deliveries(hook.id(), 10);
    if (!list.empty() && list[0].state() == "failed") break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state(), "failed");
  EXPECT_EQ(list[0].attempts(), 2);
  EXPECT_EQ(list[0].last_error(), "HTTP 503");
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_EQ(receiver.received().size(), 2u);
  auto ping = Value::FromJson(receiver.received()[0].body);
  ASSERT_TRUE(ping.ok());
  EXPECT_EQ(ping->Find("type")->as_string(), "ping");
  EXPECT_EQ(ping->Find("webhook")->Find("id")->as_int(), hook.id());
}

TEST_F(WebhooksTest, PendingDeliveriesResumeAfterARestart) {
  WebhookReceiver receiver;
  int64_t hook_id = 0;
  {
    Webhooks before(db_.get(), Options());  // never started: the master died before sending
    hook_id = Hook(before, receiver.url(), {"COMPLETED"}, 0).id();
    const int64_t experiment = MakeExperiment();
    ASSERT_TRUE(Store(db_.get()).SetExperimentState(experiment, "COMPLETED", "", true).ok());
  }
  // As if an attempt had been in flight when the master died: leased for a long while.
  Count("WITH u AS (UPDATE webhook_deliveries SET attempts = 1, next_attempt_at = now() + interval '1 hour' "
        "RETURNING 1) SELECT count(*) FROM u");
  Webhooks after(db_.get(), Options());
  after.Start();
  ASSERT_TRUE(receiver.WaitFor([](const auto& got) { return got.size() == 1; }, seconds(10)));
  std::vector<v1::WebhookDelivery> list;
  for (int i = 0; i < 100; ++i) {
    list = *after.Deliveries(hook_id, 10);
    if (list.size() == 1 && list[0].state() == "delivered") break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state(), "delivered");
  EXPECT_EQ(list[0].attempts(), 2);
}

TEST_F(WebhooksTest, AHangingReceiverTimesOutAndHoldsUpNoOtherDelivery) {
  WebhookReceiver hanging([](const WebhookReceiver::Received&, int) { return 0; });
  WebhookReceiver fine;
  Webhooks hooks(db_.get(), Options());  // timeout 1.5 s
  hooks.Start();
  v1::Webhook slow = Hook(hooks, hanging.url(), {"COMPLETED"}, 0);
  v1::Webhook fast = Hook(hooks, fine.url(), {"COMPLETED"}, 0);
  ASSERT_TRUE(hooks.Ping(slow.id()).ok());
  ASSERT_TRUE(hanging.WaitFor([](const auto& got) { return got.size() == 1; }, seconds(10)));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(hooks.Ping(fast.id()).ok());
  ASSERT_TRUE(fine.WaitFor([](const auto& got) { return got.size() == 1; }, seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1400));  // not behind the hang
  std::vector<v1::WebhookDelivery> list;
  for (int i = 0; i < 100; ++i) {
    list = *hooks.Deliveries(slow.id(), 10);
    if (!list.empty() && list[0].attempt_log_size() >= 1) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_FALSE(list.empty());
  ASSERT_GE(list[0].attempt_log_size(), 1);
  EXPECT_EQ(list[0].attempt_log(0).status_code(), 0);
  EXPECT_NE(list[0].attempt_log(0).error().find("timed out after 1.5 s"), std::string::npos)
      << list[0].attempt_log(0).error();
  EXPECT_GE(list[0].attempt_log(0).duration_ms(), 1400);
  // Stopping abandons the attempt in flight at once; the delivery stays pending.
  ASSERT_TRUE(hanging.WaitFor([](const auto& got) { return got.size() >= 2; }, seconds(10)));
  const auto stop = std::chrono::steady_clock::now();
  hooks.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, milliseconds(1000));
  list = *hooks.Deliveries(slow.id(), 10);
  EXPECT_EQ(list[0].state(), "pending");
  EXPECT_EQ(list[0].attempts(), list[0].attempt_log_size());
  hanging.Release();
}

}  // namespace
}  // namespace sf::master::webhooks
