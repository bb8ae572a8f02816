// Webhooks (docs/webhooks.md): the master POSTs a signed JSON event to a URL when an experiment
// changes state. This class keeps the webhooks (PostgreSQL, migration 012) and sends their
// deliveries.
//
// Contract:
// - Events are an OUTBOX. A trigger on `experiments` (012_webhooks.sql) writes one
//   webhook_deliveries row per subscribed webhook in the same transaction as the state change
//   (the coordinator's own write, Store::SetExperimentState, or a new experiment's INSERT): an
//   event exists exactly when its change was committed, and the coordinator never waits for a
//   receiver, holds its lock over network I/O, or knows webhooks exist.
// - Delivery is AT LEAST ONCE. Sender threads (options.senders) claim due rows (a lease of
//   timeout + 60 s: a master that dies mid-attempt leaves the row to be sent again), POST them
//   (webhook_sender.h) and record each attempt (webhook_delivery_attempts) and the outcome: a 2xx
//   answer delivers it; anything else is retried after RetryDelay (delivery_rules.h) until
//   options.retry.max_attempts attempts, then it is failed. A receiver dedupes by the delivery id
//   (the body's "id" and Steadfast-Delivery, the same on every attempt). Pending deliveries
//   survive a restart: Start() makes every pending one due at once. No order is promised
//   between deliveries.
// - Each request: Content-Type: application/json, Steadfast-Delivery: <id>,
//   Steadfast-Timestamp: <unix seconds of this attempt>, Steadfast-Signature:
//   v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>.
// - Who may do what is the caller's business (master/api/webhook_methods.cc); these methods
//   check their input only: the URL rule and event names of delivery_rules.h (kInvalidArgument
//   naming the field), an unknown webhook or experiment (kNotFound).
// - Thread-safe. The sender and listener threads run between Start() and Stop() (the
//   destructor stops them); the API methods work without them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "master/db/database.h"
#include "master/webhooks/delivery_rules.h"
#include "steadfast/v1/webhooks.pb.h"

namespace sf::master::webhooks {

struct WebhookOptions {
  RetryPolicy retry;
  std::chrono::milliseconds timeout{10000};  // one attempt, connect to answer
  std::string ca_file;                       // PEM CAs for https:// targets; empty: the system's
  int senders = 4;                           // deliveries in flight at once
  // libpq connection string of a connection of its own that LISTENs for the trigger's
  // notifications, so a new event goes out at once; empty: new events are found by polling.
  std::string listen_connection;
  std::chrono::milliseconds poll{2000};      // the longest wait between looks for due deliveries
  // Delivered or given-up deliveries older than this are deleted with their attempts, hourly by
  // the listener thread (PruneFinished); zero: kept forever. Pending ones are never pruned.
  std::chrono::hours keep_finished{24 * 30};
};

// What the senders have done since Start(), for /metrics.
struct DeliveryCounts {
  uint64_t delivered = 0;       // attempts the receiver took (2xx)
  uint64_t attempts_failed = 0; // attempts that failed and will be retried
  uint64_t given_up = 0;        // deliveries failed for good after their last attempt
  uint64_t pruned = 0;          // finished deliveries deleted by PruneFinished
};

// Who a webhook belongs to, for the caller's access checks.
struct WebhookOwner {
  std::string owner;
  int64_t experiment_id = 0;  // 0: every experiment
};

class Webhooks {
 public:
  // `db`: the pool its statements use (the master gives it one of its own).
  Webhooks(Database* db, WebhookOptions options);
  ~Webhooks();
  Webhooks(const Webhooks&) = delete;
  Webhooks& operator=(const Webhooks&) = delete;

  // Makes every pending delivery due now (resumed after a restart) and starts the threads.
  void Start();
  // Stops the threads; an attempt in flight is abandoned at once (its delivery stays pending and
  // is sent again after the next Start()).
  void Stop();

  // ---- API. `owner_user_id` 0: made without authentication.
  // The request's own input (the URL rule, events, experimentId not negative): kInvalidArgument
  // naming the field, before any question of who may make it. Create checks it too.
  static Status CheckCreate(const steadfast::v1::CreateWebhookRequest& request);
  // The new webhook with its secret (the only time it is returned).
  Result<steadfast::v1::Webhook> Create(const steadfast::v1::CreateWebhookRequest& request, const std::string& owner,
                                        int64_t owner_user_id);
  // By id; `owner` empty: everyone's.
  Result<std::vector<steadfast::v1::Webhook>> List(const std::string& owner);
  // kNotFound for an unknown id.
  Result<WebhookOwner> OwnerOf(int64_t id);
  // Deletes the webhook and its deliveries, pending ones included. kNotFound.
  Status Delete(int64_t id);
  // Newest first, each with its attempts. kNotFound for an unknown webhook.
  Result<std::vector<steadfast::v1::WebhookDelivery>> Deliveries(int64_t webhook_id, int limit);
  // Queues a "ping" event for the webhook and wakes a sender. kNotFound.
  Result<steadfast::v1::WebhookDelivery> Ping(int64_t webhook_id);

  // For tests: wake the senders now.
  void Wake();

  DeliveryCounts Counts() const;
  // Deletes finished deliveries older than options.keep_finished (with their attempts); the
  // listener calls it hourly. The number deleted; 0 when keep_finished is zero.
  Result<int64_t> PruneFinished();

 private:
  // One claimed delivery, ready to send.
  struct Claimed {
    std::string id, url, secret, body;
    int64_t webhook_id = 0;
    int attempt = 0;
  };
  void ListenLoop();
  void SendLoop();
  // The next due delivery, leased to this caller; nullopt when none is due.
  Result<std::optional<Claimed>> Claim();
  void Deliver(const Claimed& c);
  // Seconds until the earliest pending delivery is due (0 when one is due; nullopt: none).
  Result<std::optional<double>> SecondsUntilDue();

  Database* db_;
  WebhookOptions options_;
  std::mutex mu_;
  std::condition_variable wake_;
  uint64_t wakes_ = 0;  // guarded by mu_: bumped by every Wake()
  bool stopping_ = false;
  std::atomic<bool> cancel_{false};  // set by Stop(): attempts in flight end at once
  std::vector<std::thread> senders_;
  std::thread listener_;
  std::atomic<uint64_t> delivered_{0}, attempts_failed_{0}, given_up_{0}, pruned_{0};
};

}  // namespace sf::master::webhooks
