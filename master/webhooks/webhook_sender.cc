#include "master/webhooks/webhook_sender.h"

#include <boost/beast/http.hpp>

#include <exception>

#include "common/http/client.h"

namespace sf::master::webhooks {

SendOutcome PostJson(const WebhookTarget& target, const std::vector<std::pair<std::string, std::string>>& headers,
                     const std::string& body, std::chrono::milliseconds timeout, const std::string& ca_file,
                     const std::atomic<bool>* cancel) {
  namespace bhttp = boost::beast::http;
  http::Url url;
  url.https = target.https;
  url.host = target.host;
  url.port = target.port;
  http::ClientOptions options;
  options.timeout = timeout;
  options.cancel = cancel;
  options.cancel_reason = "canceled: the master is stopping";
  options.ca_file = ca_file;
  options.ca_what = "webhook CA file";
  options.plain_http_loopback_only = true;
  http::Client client(std::move(url), std::move(options));
  bhttp::request<bhttp::string_body> request{bhttp::verb::post, target.target, 11};
  request.set(bhttp::field::user_agent, "Steadfast-Webhooks/1");
  request.set(bhttp::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  Result<http::ClientResponse> answer = client.Fetch(std::move(request), /*header_only=*/true);
  if (!answer.ok()) {
    SendOutcome out{0, answer.status().message()};
    out.canceled = client.failure() == http::Failure::kCanceled;
    return out;
  }
  SendOutcome out{answer->status, ""};
  if (!out.delivered()) out.error = "HTTP " + std::to_string(answer->status);
  return out;
}

}  // namespace sf::master::webhooks
