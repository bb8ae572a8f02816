// The API half of Webhooks (webhooks.h): creating, listing and deleting webhooks, reading their
// deliveries, and queueing a ping. The senders are in webhook_dispatcher.cc.
#include "master/webhooks/webhooks.h"

#include <google/protobuf/util/time_util.h>

#include <map>
#include <sstream>

#include "master/db/pg_array.h"

namespace sf::master::webhooks {
namespace {

namespace v1 = steadfast::v1;
using google::protobuf::util::TimeUtil;

void SetTime(double seconds, google::protobuf::Timestamp* out) {
  *out = TimeUtil::NanosecondsToTimestamp(static_cast<int64_t>(seconds * 1e9));
}

std::vector<std::string> SplitComma(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The columns of a webhook, in the order WebhookFrom reads them.
constexpr char kWebhookColumns[] =
    "w.id, w.url, array_to_string(w.events, ','), COALESCE(w.experiment_id, 0), w.owner, "
    "extract(epoch FROM w.created_at)::float8";

v1::Webhook WebhookFrom(const pqxx::row& r) {
  v1::Webhook w;
  w.set_id(r[0].as<int64_t>());
  w.set_url(r[1].as<std::string>());
  for (const std::string& e : SplitComma(r[2].as<std::string>())) w.add_events(e);
  w.set_experiment_id(r[3].as<int64_t>());
  w.set_owner(r[4].as<std::string>());
  SetTime(r[5].as<double>(), w.mutable_created_at());
  return w;
}

// The columns of a delivery, in the order DeliveryFrom reads them.
constexpr char kDeliveryColumns[] =
    "d.id::text, d.webhook_id, d.event_type, d.attempts, d.last_status, d.last_error, "
    "extract(epoch FROM d.created_at)::float8, extract(epoch FROM d.next_attempt_at)::float8, "
    "COALESCE(extract(epoch FROM d.delivered_at)::float8, 0), d.failed_at IS NOT NULL, d.payload::text";

v1::WebhookDelivery DeliveryFrom(const pqxx::row& r) {
  v1::WebhookDelivery d;
  d.set_id(r[0].as<std::string>());
  d.set_webhook_id(r[1].as<int64_t>());
  d.set_type(r[2].as<std::string>());
  d.set_attempts(r[3].as<int>());
  d.set_last_status_code(r[4].as<int>());
  d.set_last_error(r[5].as<std::string>());
  SetTime(r[6].as<double>(), d.mutable_created_at());
  const double delivered = r[8].as<double>();
  if (delivered > 0) {
    d.set_state("delivered");
    SetTime(delivered, d.mutable_delivered_at());
  } else if (r[9].as<bool>()) {
    d.set_state("failed");
  } else {
    d.set_state("pending");
    SetTime(r[7].as<double>(), d.mutable_next_attempt_at());
  }
  d.set_payload_json(r[10].as<std::string>());
  return d;
}

// Fills each delivery's attempt_log (one query for all).
void AddAttempts(pqxx::work& tx, std::vector<v1::WebhookDelivery>& deliveries) {
  if (deliveries.empty()) return;
  std::string ids = "{";
  std::map<std::string, v1::WebhookDelivery*> by_id;
  for (v1::WebhookDelivery& d : deliveries) {
    ids += (ids.size() > 1 ? "," : "") + d.id();
    by_id[d.id()] = &d;
  }
  ids += "}";
  pqxx::result r = tx.exec_params(
      "SELECT delivery_id::text, attempt, extract(epoch FROM sent_at)::float8, duration_ms, status_code, error "
      "FROM webhook_delivery_attempts WHERE delivery_id = ANY($1::uuid[]) ORDER BY delivery_id, attempt",
      ids);
  for (const auto& row : r) {
    v1::WebhookDeliveryAttempt* a = by_id[row[0].as<std::string>()]->add_attempt_log();
    a->set_attempt(row[1].as<int>());
    SetTime(row[2].as<double>(), a->mutable_time());
    a->set_duration_ms(row[3].as<int>());
    a->set_status_code(row[4].as<int>());
    a->set_error(row[5].as<std::string>());
  }
}

Status NoSuchWebhook(int64_t id) { return NotFound("webhook " + std::to_string(id) + " does not exist"); }

}  // namespace

Webhooks::Webhooks(Database* db, WebhookOptions options) : db_(db), options_(std::move(options)) {}

Webhooks::~Webhooks() { Stop(); }

Status Webhooks::CheckCreate(const v1::CreateWebhookRequest& request) {
  SF_RETURN_IF_ERROR(ParseWebhookUrl(request.url()).status());
  SF_RETURN_IF_ERROR(ParseWebhookEvents({request.events().begin(), request.events().end()}).status());
  if (request.experiment_id() < 0) return InvalidArgument("experimentId: must be an experiment's id, or 0 for all");
  return Status::Ok();
}

Result<v1::Webhook> Webhooks::Create(const v1::CreateWebhookRequest& request, const std::string& owner,
                                     int64_t owner_user_id) {
  SF_RETURN_IF_ERROR(CheckCreate(request));
  SF_ASSIGN_OR_RETURN(std::vector<std::string> events,
                      ParseWebhookEvents({request.events().begin(), request.events().end()}));
  SF_ASSIGN_OR_RETURN(std::string secret, NewWebhookSecret());
  const std::string events_array = TextArray(events);
  v1::Webhook out;
  Status st = db_->Transact("create webhook", [&](pqxx::work& tx) {
    if (request.experiment_id() > 0 &&
        tx.exec_params("SELECT 1 FROM experiments WHERE id = $1", request.experiment_id()).empty()) {
      return NotFound("experiment " + std::to_string(request.experiment_id()) + " does not exist");
    }
    pqxx::row r = tx.exec_params1(
        std::string("INSERT INTO webhooks AS w (url, events, experiment_id, secret, owner, owner_user_id) "
                    "VALUES ($1, $2::text[], NULLIF($3::bigint, 0), $4, $5, NULLIF($6::bigint, 0)) RETURNING ") +
            kWebhookColumns,
        request.url(), events_array, request.experiment_id(), secret, owner, owner_user_id > 0 ? owner_user_id : 0);
    out = WebhookFrom(r);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  out.set_secret(secret);
  return out;
}

Result<std::vector<v1::Webhook>> Webhooks::List(const std::string& owner) {
  std::vector<v1::Webhook> out;
  Status st = db_->Transact("list webhooks", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kWebhookColumns +
                                        " FROM webhooks w WHERE $1 = '' OR w.owner = $1 ORDER BY w.id",
                                    owner);
    for (const auto& row : r) out.push_back(WebhookFrom(row));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<WebhookOwner> Webhooks::OwnerOf(int64_t id) {
  WebhookOwner out;
  Status st = db_->Transact("webhook owner", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT owner, COALESCE(experiment_id, 0) FROM webhooks WHERE id = $1", id);
    if (r.empty()) return NoSuchWebhook(id);
    out.owner = r[0][0].as<std::string>();
    out.experiment_id = r[0][1].as<int64_t>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status Webhooks::Delete(int64_t id) {
  return db_->Transact("delete webhook", [&](pqxx::work& tx) {
    if (tx.exec_params("DELETE FROM webhooks WHERE id = $1", id).affected_rows() == 0) return NoSuchWebhook(id);
    return Status::Ok();
  });
}

Result<std::vector<v1::WebhookDelivery>> Webhooks::Deliveries(int64_t webhook_id, int limit) {
  std::vector<v1::WebhookDelivery> out;
  Status st = db_->Transact("webhook deliveries", [&](pqxx::work& tx) {
    out.clear();
    if (tx.exec_params("SELECT 1 FROM webhooks WHERE id = $1", webhook_id).empty()) return NoSuchWebhook(webhook_id);
    pqxx::result r = tx.exec_params(std::string("SELECT ") + kDeliveryColumns +
                                        " FROM webhook_deliveries d WHERE d.webhook_id = $1 "
                                        "ORDER BY d.created_at DESC, d.id LIMIT $2",
                                    webhook_id, limit);
    for (const auto& row : r) out.push_back(DeliveryFrom(row));
    AddAttempts(tx, out);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<v1::WebhookDelivery> Webhooks::Ping(int64_t webhook_id) {
  v1::WebhookDelivery out;
  Status st = db_->Transact("ping webhook", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        std::string("INSERT INTO webhook_deliveries AS d (webhook_id, event_type, payload) "
                    "SELECT w.id, 'ping', jsonb_build_object('type', 'ping', 'occurred_at', webhook_time(now()), "
                    "'webhook', jsonb_build_object('id', w.id, 'url', w.url, 'events', to_jsonb(w.events), "
                    "'experiment_id', w.experiment_id)) "
                    "FROM webhooks w WHERE w.id = $1 RETURNING ") +
            kDeliveryColumns,
        webhook_id);
    if (r.empty()) return NoSuchWebhook(webhook_id);
    out = DeliveryFrom(r[0]);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  Wake();
  return out;
}

}  // namespace sf::master::webhooks
