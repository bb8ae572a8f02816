// The pure rules of a webhook delivery (docs/webhooks.md), kept apart from the database and the
// network so that each is unit-tested on its own (tests/master/webhooks/delivery_rules_test.cc):
// which URLs may be targets, how a body is signed, which events exist, and when a failed
// delivery is tried again. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::master::webhooks {

// Where a delivery goes, from its URL.
struct WebhookTarget {
  bool https = false;
  std::string host;    // a name or an address (IPv6 without brackets)
  std::string port;    // "443", "80" or the URL's
  std::string target;  // the path and query: "/hooks/sf?x=1" ("/" when the URL has none)
};

// Only https:// URLs, or http:// to a loopback host (127.0.0.0/8, ::1, localhost): a plain
// http:// target elsewhere would send signed events, and whatever the receiver answers, in the
// clear over the network. No user:password@, no #fragment, at most 2,048 bytes, printable
// ASCII. Anything else is kInvalidArgument naming the url and why.
Result<WebhookTarget> ParseWebhookUrl(const std::string& url);

// A host an http:// target may name: 127.0.0.0/8 (as a dotted IPv4 address), ::1 or
// "localhost" (any case).
bool IsLoopbackHost(std::string_view host);

// The event names a webhook may subscribe to: the experiment states without their prefix
// (ACTIVE, PAUSED, STOPPING_COMPLETED, STOPPING_CANCELED, STOPPING_ERROR, COMPLETED, CANCELED,
// ERROR). `names` may be in any case and carry the EXPERIMENT_STATE_ prefix; the result is
// upper case, without it, each once, in the order given. None, or an unknown name, is
// kInvalidArgument naming it and listing the known ones.
Result<std::vector<std::string>> ParseWebhookEvents(const std::vector<std::string>& names);

// "v1=" + the lower-case hex HMAC-SHA256 of `timestamp` + "." + `body` keyed with `secret`
// (its bytes as given): the Steadfast-Signature header.
std::string WebhookSignature(std::string_view secret, std::string_view timestamp, std::string_view body);

// A fresh signing secret: "whsec_" and 64 hex digits (32 random bytes from OpenSSL's
// generator). kInternal when the generator fails.
Result<std::string> NewWebhookSecret();

// The retry schedule: after the `attempts`-th failed attempt (1, 2, ...), the next comes
// `first` x 2^(attempts-1) later, at most `cap`: 1 s, 2 s, 4 s, ... with the defaults.
struct RetryPolicy {
  int max_attempts = 8;  // then the delivery is given up (failed)
  std::chrono::milliseconds first{1000};
  std::chrono::milliseconds cap{std::chrono::minutes(10)};
};
std::chrono::milliseconds RetryDelay(int attempts, const RetryPolicy& policy);

}  // namespace sf::master::webhooks
