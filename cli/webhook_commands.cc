// `sf webhook create|list|delete|deliveries|test`: webhooks on the master (docs/webhooks.md),
// through its Api methods (cluster_command.h has what they share).
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/command_line.h"
#include "steadfast/v1/webhooks.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

// The flags only `webhook create` and `webhook deliveries` have.
struct WebhookFlags {
  std::string url;
  std::vector<std::string> events;  // --on COMPLETED,ERROR
  int64_t experiment = 0;           // --experiment; 0: every experiment (admins)
  int limit = 100;                  // deliveries' --limit
};

std::string Joined(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string ExperimentText(int64_t id) { return id == 0 ? "all" : std::to_string(id); }

// Calls `method` with `request` for the webhook the command's ID names; nullopt when ID is not
// an integer (`exit_code` 2) or the call failed (the call's exit code).
template <class Response, class Request>
std::optional<Reply<Response>> CallForWebhook(const Flags& f, Api& api, const std::string& method, Request request,
                                              int* exit_code) {
  const auto id = IntegerId(f.id);
  *exit_code = kExitUsage;
  if (!id) return std::nullopt;
  request.set_id(*id);
  auto reply = api.Call<Response>(method, request);
  *exit_code = api.exit_code;
  return reply;
}

int CreateWebhook(const Flags& f, const WebhookFlags& w, Api& api) {
  v1::CreateWebhookRequest request;
  request.set_url(w.url);
  for (const std::string& e : w.events) request.add_events(e);
  request.set_experiment_id(w.experiment);
  auto r = api.Call<v1::Webhook>("CreateWebhook", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  const v1::Webhook& made = r->message;
  std::cerr << "webhook " << made.id() << " sends " << Joined(made.events()) << " of "
            << (made.experiment_id() ? "experiment " + std::to_string(made.experiment_id()) : "every experiment")
            << " to " << made.url()
            << ". Its secret is shown once: store it now (receivers check Steadfast-Signature with it).\n";
  std::cout << "id: " << made.id() << "\nsecret: " << made.secret() << "\n";
  return kExitOk;
}

int ListWebhooks(const Flags& f, Api& api) {
  auto r = api.Call<v1::ListWebhooksResponse>("ListWebhooks", v1::ListWebhooksRequest());
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Webhook& w : r->message.webhooks()) {
    rows.push_back({std::to_string(w.id()), w.url(), Joined(w.events()), ExperimentText(w.experiment_id()),
                    w.owner(), TimeText(w.has_created_at(), w.created_at())});
  }
  PrintTable({"ID", "URL", "EVENTS", "EXPERIMENT", "OWNER", "CREATED"}, rows);
  return kExitOk;
}

int DeleteWebhook(const Flags& f, Api& api) {
  int exit_code = kExitOk;
  auto r = CallForWebhook<v1::DeleteWebhookResponse>(f, api, "DeleteWebhook", v1::DeleteWebhookRequest(), &exit_code);
  if (!r) return exit_code;
  std::cout << (f.json ? r->json : "webhook " + f.id + ": deleted") << "\n";
  return kExitOk;
}

int ListDeliveries(const Flags& f, const WebhookFlags& w, Api& api) {
  v1::ListWebhookDeliveriesRequest request;
  request.set_limit(w.limit);
  int exit_code = kExitOk;
  auto r = CallForWebhook<v1::ListWebhookDeliveriesResponse>(f, api, "ListWebhookDeliveries", request, &exit_code);
  if (!r) return exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::WebhookDelivery& d : r->message.deliveries()) {
    rows.push_back({d.id(), d.type(), d.state(), std::to_string(d.attempts()),
                    d.last_status_code() ? std::to_string(d.last_status_code()) : "",
                    TimeText(d.has_created_at(), d.created_at()), d.last_error()});
  }
  PrintTable({"DELIVERY", "TYPE", "STATE", "ATTEMPTS", "STATUS", "CREATED", "ERROR"}, rows);
  return kExitOk;
}

int TestWebhook(const Flags& f, Api& api) {
  int exit_code = kExitOk;
  auto r = CallForWebhook<v1::TestWebhookResponse>(f, api, "TestWebhook", v1::TestWebhookRequest(), &exit_code);
  if (!r) return exit_code;
  std::cout << (f.json ? r->json : "webhook " + f.id + ": queued ping " + r->message.delivery().id() +
                                       " (see `sf webhook deliveries " + f.id + "`)")
            << "\n";
  return kExitOk;
}

}  // namespace

void AddWebhookCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* webhook = sf.add_subcommand(
      "webhook", "signed HTTP POSTs to a URL when experiments change state (docs/webhooks.md)");
  webhook->require_subcommand(1);

  auto extra = std::make_shared<WebhookFlags>();
  ClusterCommand create = AddCommand(
      webhook, "create", "create a webhook; prints its id and its secret, once", action,
      [extra](const Flags& f, Api& api) { return CreateWebhook(f, *extra, api); });
  create.app->add_option("--url", extra->url, "where to POST: https://..., or http:// to a loopback address")
      ->type_name("URL")
      ->required();
  create.app->add_option("--on", extra->events, "experiment states to send, e.g. COMPLETED,ERROR")
      ->type_name("STATE,...")
      ->delimiter(',')
      ->required();
  create.app->add_option("--experiment", extra->experiment,
                         "only this experiment's changes (default: every experiment; admins only)")
      ->type_name("ID");

  AddCommand(webhook, "list", "list your webhooks (an admin: everyone's)", action, ListWebhooks);
  AddCommand(webhook, "delete", "delete a webhook and its pending deliveries", action, DeleteWebhook)
      .Id("ID", "the webhook's id");
  ClusterCommand deliveries = AddCommand(
      webhook, "deliveries", "a webhook's deliveries, newest first: state, attempts, last status and error",
      action, [extra](const Flags& f, Api& api) { return ListDeliveries(f, *extra, api); });
  deliveries.Id("ID", "the webhook's id");
  deliveries.app->add_option("--limit", extra->limit, "at most this many (1-1000, default 100)")
      ->check(CLI::Range(1, 1000));
  AddCommand(webhook, "test", "send the webhook a ping event", action, TestWebhook).Id("ID", "the webhook's id");
}

}  // namespace sf::cli
