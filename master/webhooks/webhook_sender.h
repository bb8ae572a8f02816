// Sends one webhook delivery: an HTTP/1.1 POST of a JSON body to a WebhookTarget
// (delivery_rules.h), with Boost.Beast over plain TCP or TLS, within one deadline.
//
// Contract:
// - The whole exchange (resolve, connect, TLS handshake, request, the answer's status line and
//   headers) must finish within `timeout`; past it the connection is closed and the result is an
//   error "timed out after N s". A receiver that never answers therefore holds one sender
//   thread for at most `timeout`, and nothing else.
// - https:// verifies the receiver's certificate chain and host name against the CA
//   certificates in `ca_file` (PEM), or the system's trusted CAs when it is empty; TLS 1.2+,
//   with SNI for host names. http:// targets connect only to loopback addresses, whatever a name
//   resolves to (the URL rule of delivery_rules.h, kept at connect time too).
// - Only the status is read; the body of the answer is ignored. Redirects are not followed (a
//   3xx is not a delivery).
// - `cancel` (optional), once true, ends the exchange within about 100 ms with the error
//   "canceled" (the master is stopping; the delivery stays pending).
// - Never throws; thread-safe (each call has its own I/O context).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "master/webhooks/delivery_rules.h"

namespace sf::master::webhooks {

struct SendOutcome {
  int status = 0;     // the receiver's HTTP status; 0: no answer
  std::string error;  // "" when 2xx; else why, in one line ("HTTP 500", "connect: Connection refused")
  bool canceled = false;
  bool delivered() const { return status >= 200 && status < 300; }
};

SendOutcome PostJson(const WebhookTarget& target, const std::vector<std::pair<std::string, std::string>>& headers,
                     const std::string& body, std::chrono::milliseconds timeout, const std::string& ca_file = "",
                     const std::atomic<bool>* cancel = nullptr);

}  // namespace sf::master::webhooks
