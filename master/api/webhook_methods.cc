// The webhook half of the method table (api_methods.h; docs/webhooks.md). The access policy has
// checked the proto's need (creator to create, signed in for the rest); these add the
// per-object rules:
// - CreateWebhook: its input is checked first (400 whoever asks); then, for one experiment: the caller may act on it (as for killing it: its owner,
//   an editor of its workspace, or an admin); for every experiment (experimentId 0): admins only.
// - ListWebhooks: the caller's own webhooks; an admin's: everyone's.
// - DeleteWebhook, ListWebhookDeliveries, TestWebhook: the webhook's owner, or an admin
//   (an unknown id: NOT_FOUND).
#include "common/log.h"
#include "common/utf8.h"
#include "master/api/api_methods.h"
#include "master/webhooks/webhooks.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;
using webhooks::Webhooks;

Status NoWebhooks() { return NotFound("this master keeps no webhooks"); }

// A reply's repeated field, from what the store read.
template <class T>
void MoveInto(std::vector<T>& from, google::protobuf::RepeatedPtrField<T>* to) {
  for (T& item : from) *to->Add() = std::move(item);
}

// The caller may manage webhook `id`: its owner, or an admin. kNotFound for an unknown one.
Status MayManage(Webhooks* hooks, int64_t id, const Principal& p, const std::string& action) {
  SF_ASSIGN_OR_RETURN(webhooks::WebhookOwner owner, hooks->OwnerOf(id));
  if (p.role == Role::kAdmin || owner.owner == p.username) return Status::Ok();
  return PermissionDenied("user " + p.username + " may not " + action + " webhook " + std::to_string(id) +
                          ": it belongs to " + (owner.owner.empty() ? "nobody" : owner.owner) +
                          " (only its owner or an admin may)");
}

}  // namespace

void ApiMethods::AddWebhookMethods() {
  Webhooks* hooks = deps_.webhooks;
  Authorizer* authz = deps_.authorizer;

  Add<v1::CreateWebhookRequest>("CreateWebhook", [hooks, authz](const v1::CreateWebhookRequest& r,
                                                                const Principal& p) -> Result<v1::Webhook> {
    if (!hooks) return NoWebhooks();
    if (!IsText(p.username)) return InvalidArgument("X-SF-User is not UTF-8 text");
    SF_RETURN_IF_ERROR(Webhooks::CheckCreate(r));  // bad input is 400 whoever asks
    if (r.experiment_id() == 0 && p.role != Role::kAdmin) {
      return PermissionDenied("user " + p.username +
                              " may not create webhooks for every experiment: admins only (name one with "
                              "experimentId)");
    }
    if (r.experiment_id() > 0 && authz && p.role != Role::kAdmin) {
      SF_RETURN_IF_ERROR(authz->MayActOnExperiment(p, r.experiment_id(), "create webhooks for"));
    }
    SF_ASSIGN_OR_RETURN(v1::Webhook made, hooks->Create(r, p.username, p.authenticated() ? p.user_id : 0));
    log::Info("webhooks", {{"event", "created"},
                           {"id", std::to_string(made.id())},
                           {"experiment", std::to_string(made.experiment_id())},
                           {"by", p.username}});
    return made;
  });
  Add<v1::ListWebhooksRequest>("ListWebhooks", [hooks](const v1::ListWebhooksRequest&,
                                                       const Principal& p) -> Result<v1::ListWebhooksResponse> {
    if (!hooks) return NoWebhooks();
    SF_ASSIGN_OR_RETURN(auto list, hooks->List(p.role == Role::kAdmin ? "" : p.username));
    v1::ListWebhooksResponse out;
    MoveInto(list, out.mutable_webhooks());
    return out;
  });
  Add<v1::DeleteWebhookRequest>("DeleteWebhook", [hooks](const v1::DeleteWebhookRequest& r,
                                                         const Principal& p) -> Result<v1::DeleteWebhookResponse> {
    if (!hooks) return NoWebhooks();
    SF_RETURN_IF_ERROR(MayManage(hooks, r.id(), p, "delete"));
    SF_RETURN_IF_ERROR(hooks->Delete(r.id()));
    log::Info("webhooks", {{"event", "deleted"}, {"id", std::to_string(r.id())}, {"by", p.username}});
    return v1::DeleteWebhookResponse();
  });
  Add<v1::ListWebhookDeliveriesRequest>(
      "ListWebhookDeliveries",
      [hooks](const v1::ListWebhookDeliveriesRequest& r, const Principal& p) -> Result<v1::ListWebhookDeliveriesResponse> {
        if (!hooks) return NoWebhooks();
        const int limit = r.has_limit() ? r.limit() : 100;
        if (limit < 1 || limit > 1000) return InvalidArgument("limit: must be 1-1000");
        SF_RETURN_IF_ERROR(MayManage(hooks, r.id(), p, "read the deliveries of"));
        SF_ASSIGN_OR_RETURN(auto list, hooks->Deliveries(r.id(), limit));
        v1::ListWebhookDeliveriesResponse out;
        MoveInto(list, out.mutable_deliveries());
        return out;
      });
  Add<v1::TestWebhookRequest>("TestWebhook", [hooks](const v1::TestWebhookRequest& r,
                                                     const Principal& p) -> Result<v1::TestWebhookResponse> {
    if (!hooks) return NoWebhooks();
    SF_RETURN_IF_ERROR(MayManage(hooks, r.id(), p, "test"));
    SF_ASSIGN_OR_RETURN(v1::WebhookDelivery queued, hooks->Ping(r.id()));
    v1::TestWebhookResponse out;
    *out.mutable_delivery() = std::move(queued);
    return out;
  });
}

}  // namespace sf::master
