// The sending half of Webhooks (webhooks.h): a listener thread that wakes the senders when a
// delivery is due (PostgreSQL NOTIFY from the outbox trigger, or the earliest next_attempt_at),
// and sender threads that claim, POST and record deliveries. None of them touches the
// coordinator.
#include <pqxx/pqxx>

#include <algorithm>
#include <optional>

#include "common/log.h"
#include "master/webhooks/webhook_sender.h"
#include "master/webhooks/webhooks.h"

namespace sf::master::webhooks {
namespace {

constexpr char kChannel[] = "sf_webhook_deliveries";  // 012_webhooks.sql notifies it

class Wakeup final : public pqxx::notification_receiver {
 public:
  Wakeup(pqxx::connection_base& c, Webhooks* hooks) : pqxx::notification_receiver(c, kChannel), hooks_(hooks) {}
  void operator()(const std::string&, int) override { hooks_->Wake(); }

 private:
  Webhooks* hooks_;
};

}  // namespace

void Webhooks::Start() {
  Status st = db_->Transact("resume webhook deliveries", [](pqxx::work& tx) {
    pqxx::result r = tx.exec(
        "UPDATE webhook_deliveries SET next_attempt_at = now() "
        "WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at > now()");
    if (r.affected_rows() > 0) {
      log::Info("webhooks", {{"event", "resumed"}, {"pending", std::to_string(r.affected_rows())}});
    }
    return Status::Ok();
  });
  if (!st.ok()) log::Warn("webhooks", {{"event", "resume_failed"}, {"error", st.message()}});
  std::lock_guard<std::mutex> lock(mu_);
  if (!senders_.empty()) return;
  stopping_ = false;
  cancel_ = false;
  for (int i = 0; i < std::max(1, options_.senders); ++i) senders_.emplace_back([this] { SendLoop(); });
  listener_ = std::thread([this] { ListenLoop(); });
}

void Webhooks::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cancel_ = true;
  wake_.notify_all();
  for (std::thread& t : senders_) t.join();
  senders_.clear();
  if (listener_.joinable()) listener_.join();
}

void Webhooks::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wakes_;
  }
  wake_.notify_all();
}

Result<std::optional<double>> Webhooks::SecondsUntilDue() {
  std::optional<double> out;
  Status st = db_->Transact("webhook due", [&](pqxx::work& tx) {
    pqxx::row r = tx.exec1(
        "SELECT extract(epoch FROM min(next_attempt_at) - now())::float8 FROM webhook_deliveries "
        "WHERE delivered_at IS NULL AND failed_at IS NULL");
    if (!r[0].is_null()) out = std::max(0.0, r[0].as<double>());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

DeliveryCounts Webhooks::Counts() const {
  return {delivered_.load(), attempts_failed_.load(), given_up_.load(), pruned_.load()};
}

Result<int64_t> Webhooks::PruneFinished() {
  if (options_.keep_finished.count() <= 0) return int64_t{0};
  int64_t deleted = 0;
  Status st = db_->Transact("prune webhook deliveries", [&](pqxx::work& tx) {
    // Attempts go with their delivery (ON DELETE CASCADE).
    pqxx::result r = tx.exec_params(
        "DELETE FROM webhook_deliveries WHERE coalesce(delivered_at, failed_at) < now() - make_interval(hours => $1)",
        static_cast<int>(options_.keep_finished.count()));
    deleted = r.affected_rows();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  pruned_ += static_cast<uint64_t>(deleted);
  if (deleted > 0) log::Info("webhooks", {{"event", "pruned"}, {"deliveries", std::to_string(deleted)}});
  return deleted;
}

void Webhooks::ListenLoop() {
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<Wakeup> receiver;
  bool warned = false;
  std::optional<std::chrono::steady_clock::time_point> last_prune;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    if (!last_prune || std::chrono::steady_clock::now() - *last_prune > std::chrono::hours(1)) {
      last_prune = std::chrono::steady_clock::now();
      if (auto pruned = PruneFinished(); !pruned.ok()) {
        log::Warn("webhooks", {{"event", "prune_failed"}, {"error", pruned.status().message()}});
      }
    }
    if (!conn && !options_.listen_connection.empty()) {
      try {
        conn = std::make_unique<pqxx::connection>(options_.listen_connection);
        receiver = std::make_unique<Wakeup>(*conn, this);
        warned = false;
        Wake();  // what was queued while no one listened
      } catch (const std::exception& e) {
        receiver.reset();
        conn.reset();
        if (!warned) log::Warn("webhooks", {{"event", "listen_failed"}, {"error", e.what()}, {"fallback", "polling"}});
        warned = true;
      }
    }
    // Sleep until the earliest pending delivery is due, a notification, or the poll interval.
    double wait = std::chrono::duration<double>(options_.poll).count();
    auto due = SecondsUntilDue();
    if (due.ok() && due->has_value()) {
      if (**due <= 0.0) {
        Wake();  // senders claim until nothing is due; the next look is a poll away
      } else {
        wait = std::min(wait, **due + 0.005);
      }
    }
    wait = std::max(wait, 0.01);
    if (conn) {
      try {
        const long micros = static_cast<long>(wait * 1e6);
        conn->await_notification(micros / 1000000, micros % 1000000);
        continue;
      } catch (const std::exception& e) {
        log::Warn("webhooks", {{"event", "listen_lost"}, {"error", e.what()}});
        receiver.reset();
        conn.reset();
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, std::chrono::duration<double>(wait), [this] { return stopping_; });
  }
  receiver.reset();
  conn.reset();
}

void Webhooks::SendLoop() {
  uint64_t seen = 0;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      seen = wakes_;
    }
    auto claimed = Claim();
    if (claimed.ok() && claimed->has_value()) {
      Deliver(**claimed);
      continue;
    }
    if (!claimed.ok()) log::Warn("webhooks", {{"event", "claim_failed"}, {"error", claimed.status().message()}});
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, options_.poll, [&] { return stopping_ || wakes_ != seen; });
  }
}

Result<std::optional<Webhooks::Claimed>> Webhooks::Claim() {
  std::optional<Claimed> out;
  const double lease = std::chrono::duration<double>(options_.timeout).count() + 60.0;
  Status st = db_->Transact("claim webhook delivery", [&](pqxx::work& tx) {
    out.reset();
    pqxx::result r = tx.exec_params(
        "UPDATE webhook_deliveries d SET attempts = d.attempts + 1, "
        "next_attempt_at = now() + make_interval(secs => $1) "
        "FROM webhooks w "
        "WHERE d.id = (SELECT id FROM webhook_deliveries WHERE delivered_at IS NULL AND failed_at IS NULL "
        "              AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "AND w.id = d.webhook_id "
        "RETURNING d.id::text, d.attempts, (d.payload || jsonb_build_object('id', d.id::text))::text, "
        "w.url, w.secret, w.id",
        lease);
    if (r.empty()) return Status::Ok();
    out = Claimed{r[0][0].as<std::string>(), r[0][3].as<std::string>(), r[0][4].as<std::string>(),
                  r[0][2].as<std::string>(), r[0][5].as<int64_t>(), r[0][1].as<int>()};
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

void Webhooks::Deliver(const Claimed& c) {
  const auto started = std::chrono::steady_clock::now();
  const double sent_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  SendOutcome outcome;
  Result<WebhookTarget> target = ParseWebhookUrl(c.url);
  if (!target.ok()) {
    outcome.error = target.status().message();  // stored before the rule changed: never sent
  } else {
    const std::string timestamp = std::to_string(static_cast<int64_t>(sent_at));
    outcome = PostJson(*target,
                       {{"Steadfast-Delivery", c.id},
                        {"Steadfast-Timestamp", timestamp},
                        {"Steadfast-Signature", WebhookSignature(c.secret, timestamp, c.body)}},
                       c.body, options_.timeout, options_.ca_file, &cancel_);
  }
  if (outcome.canceled) {
    // Not an attempt of the receiver's making: left pending (its lease runs out, or the next
    // Start() makes it due), and not counted against it on record.
    log::Info("webhooks", {{"event", "attempt_abandoned"}, {"delivery", c.id}, {"why", "stopping"}});
    (void)db_->Transact("abandon webhook attempt", [&](pqxx::work& tx) {
      tx.exec_params("UPDATE webhook_deliveries SET attempts = attempts - 1 WHERE id = $1::uuid", c.id);
      return Status::Ok();
    });
    return;
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  const bool delivered = outcome.delivered();
  const bool give_up = !delivered && c.attempt >= options_.retry.max_attempts;
  const double retry_in = std::chrono::duration<double>(RetryDelay(c.attempt, options_.retry)).count();
  Status st = db_->Transact("record webhook attempt", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO webhook_delivery_attempts (delivery_id, attempt, sent_at, duration_ms, status_code, error) "
        "VALUES ($1::uuid, $2, to_timestamp($3), $4, $5, $6) ON CONFLICT DO NOTHING",
        c.id, c.attempt, sent_at, static_cast<int>(took.count()), outcome.status, outcome.error);
    tx.exec_params(
        "UPDATE webhook_deliveries SET last_status = $2, last_error = $3, "
        "delivered_at = CASE WHEN $4 THEN now() END, failed_at = CASE WHEN $5 THEN now() END, "
        "next_attempt_at = CASE WHEN $4 OR $5 THEN next_attempt_at ELSE now() + make_interval(secs => $6) END "
        "WHERE id = $1::uuid",
        c.id, outcome.status, outcome.error, delivered, give_up, retry_in);
    return Status::Ok();
  });
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"event", delivered ? "delivered" : give_up ? "given_up" : "attempt_failed"},
      {"webhook", std::to_string(c.webhook_id)},
      {"delivery", c.id},
      {"attempt", std::to_string(c.attempt)},
      {"status", std::to_string(outcome.status)},
      {"ms", std::to_string(took.count())},
      {"error", outcome.error}};
  log::Write(delivered ? log::Level::kInfo : log::Level::kWarn, "webhooks", fields);
  (delivered ? delivered_ : give_up ? given_up_ : attempts_failed_)++;
  if (!st.ok()) {
    // The lease runs out and the delivery is sent again: at least once.
    log::Warn("webhooks", {{"event", "record_failed"}, {"delivery", c.id}, {"error", st.message()}});
  }
}

}  // namespace sf::master::webhooks
