#include "master/webhooks/delivery_rules.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>

#include "common/secret_file.h"
#include "common/sha256.h"
#include "common/utf8.h"

namespace sf::master::webhooks {
namespace {

constexpr size_t kMaxUrlBytes = 2048;

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  if (Upper(std::string(host)) == "LOCALHOST" || host == "::1") return true;
  in_addr v4{};
  const std::string text(host);
  return inet_pton(AF_INET, text.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

Result<WebhookTarget> ParseWebhookUrl(const std::string& url) {
  const std::string shown = "url \"" + ReplaceInvalidUtf8(url.substr(0, 200)) + (url.size() > 200 ? "...\"" : "\"");
  auto refuse = [&](const std::string& why) { return InvalidArgument(shown + ": " + why); };
  if (url.empty()) return InvalidArgument("url: required");
  if (url.size() > kMaxUrlBytes) return refuse("longer than 2048 bytes");
  for (unsigned char c : url) {
    if (c <= 0x20 || c >= 0x7f) return refuse("only printable ASCII without spaces (percent-encode the rest)");
  }
  WebhookTarget t;
  std::string rest;
  const std::string lower = [&] {
    std::string s = url.substr(0, 8);
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  }();
  if (lower.rfind("https://", 0) == 0) {
    t.https = true;
    rest = url.substr(8);
  } else if (lower.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    return refuse("only https:// URLs (or http:// to a loopback address) may be webhook targets");
  }
  if (rest.find('#') != std::string::npos) return refuse("a fragment (#...) is never sent; leave it out");
  const size_t path_at = rest.find_first_of("/?");
  std::string authority = rest.substr(0, path_at);
  t.target = path_at == std::string::npos ? "/" : rest.substr(path_at);
  if (t.target.front() == '?') t.target = "/" + t.target;
  if (authority.find('@') != std::string::npos) return refuse("credentials in the URL (user@host) are not allowed");
  std::string port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) return refuse("unbalanced [ in the host");
    t.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return refuse("unexpected text after the IPv6 address");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    t.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (t.host.empty()) return refuse("no host");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
        std::stoi(port) > 65535) {
      return refuse("port \"" + port + "\" is not 1-65535");
    }
    t.port = std::to_string(std::stoi(port));
  } else {
    t.port = t.https ? "443" : "80";
  }
  if (!t.https && !IsLoopbackHost(t.host)) {
    return refuse("http:// is allowed only to a loopback address (127.0.0.0/8, ::1, localhost); use https://");
  }
  return t;
}

Result<std::vector<std::string>> ParseWebhookEvents(const std::vector<std::string>& names) {
  static const std::vector<std::string> kKnown = {"ACTIVE",         "PAUSED",          "STOPPING_COMPLETED",
                                                  "STOPPING_CANCELED", "STOPPING_ERROR", "COMPLETED",
                                                  "CANCELED",       "ERROR"};
  auto known_list = [] {
    std::string s;
    for (const std::string& k : kKnown) s += (s.empty() ? "" : ", ") + k;
    return s;
  };
  if (names.empty()) return InvalidArgument("events: name at least one experiment state (" + known_list() + ")");
  std::vector<std::string> out;
  for (const std::string& name : names) {
    std::string e = Upper(name);
    if (e.rfind("EXPERIMENT_STATE_", 0) == 0) e = e.substr(17);
    if (std::find(kKnown.begin(), kKnown.end(), e) == kKnown.end()) {
      return InvalidArgument("events: \"" + ReplaceInvalidUtf8(name.substr(0, 100)) +
                             "\" is not an experiment state (" + known_list() + ")");
    }
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  return out;
}

std::string WebhookSignature(std::string_view secret, std::string_view timestamp, std::string_view body) {
  std::string message;
  message.reserve(timestamp.size() + 1 + body.size());
  message.append(timestamp).append(".").append(body);
  return "v1=" + ToHex(HmacSha256(secret, message));
}

Result<std::string> NewWebhookSecret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return Internal("webhook secret: the system's random generator failed");
  std::string secret = "whsec_" + ToHex(std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
  OPENSSL_cleanse(raw, sizeof raw);
  return secret;
}

std::chrono::milliseconds RetryDelay(int attempts, const RetryPolicy& policy) {
  std::chrono::milliseconds delay = policy.first;
  for (int i = 1; i < attempts && delay < policy.cap; ++i) delay *= 2;
  return std::min(delay, policy.cap);
}

}  // namespace sf::master::webhooks
