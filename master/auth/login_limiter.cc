#include "master/auth/login_limiter.h"

#include <algorithm>
#include <cmath>

#include "common/utf8.h"

namespace sf::master {

double LoginLimiter::Refill(Bucket& b, Clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - b.at).count();
  b.tokens = std::min(o_.burst, b.tokens + elapsed / o_.refill_seconds);
  b.at = now;
  return b.tokens;
}

LoginLimiter::Bucket* LoginLimiter::Find(std::map<std::string, Bucket>& table,
                                         const std::string& key, Clock::time_point now) {
  auto it = table.find(key);
  if (it != table.end()) return &it->second;
  if (table.size() >= o_.max_keys) {
    for (auto i = table.begin(); i != table.end();) {
      i = Refill(i->second, now) >= o_.burst ? table.erase(i) : std::next(i);
    }
    if (table.size() >= o_.max_keys) return nullptr;
  }
  return &(table[key] = Bucket{o_.burst, now});
}

Status LoginLimiter::Check(std::map<std::string, Bucket>& table, const std::string& key,
                           const std::string& what, Clock::time_point now) {
  Bucket* b = Find(table, key, now);
  if (!b)
    return ResourceExhausted("too many failed logins from too many clients; retry in " +
                             std::to_string(static_cast<int>(std::ceil(o_.refill_seconds))) + " s");
  if (Refill(*b, now) >= 1) return Status::Ok();
  const int wait = static_cast<int>(std::ceil((1 - b->tokens) * o_.refill_seconds));
  return ResourceExhausted("too many failed logins for " + what + "; retry in " +
                           std::to_string(std::max(1, wait)) + " s");
}

Status LoginLimiter::Allow(const std::string& user, const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  const std::string shown = user.size() <= 64 && IsText(user) ? user : "this user";
  SF_RETURN_IF_ERROR(Check(users_, user.substr(0, 256), shown, now));
  return Check(addresses_, address, address, now);
}

void LoginLimiter::Failed(const std::string& user, const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  if (Bucket* b = Find(users_, user.substr(0, 256), now))
    b->tokens = std::max(0.0, Refill(*b, now) - 1);
  if (Bucket* b = Find(addresses_, address, now)) b->tokens = std::max(0.0, Refill(*b, now) - 1);
}

size_t LoginLimiter::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return users_.size() + addresses_.size();
}

}  // namespace sf::master
