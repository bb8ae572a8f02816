// Login rate limiting (docs/security.md, "Logins"): a token bucket per user name and one per
// client address, so neither guessing one user's password from many addresses nor many users'
// from one address goes faster than a few tries a minute.
//
// Contract:
// - Allow(user, address) is asked before a password is checked; it answers OK or
//   kResourceExhausted with the seconds to wait ("too many failed logins for alice; retry in
//   12 s"). Failed(user, address) charges one try to both buckets; a success charges none.
// - Each bucket holds `burst` tries and refills one every `refill_seconds`.
// - Bounded memory: at most `max_keys` buckets per kind. Full buckets carry no state and are
//   dropped first; when every bucket is in use, new keys are refused (counted as exhausted)
//   until some refill, so a flood of made-up names cannot grow the table.
// - Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace sf::master {

class LoginLimiter {
 public:
  struct Options {
    double burst = 10;
    double refill_seconds = 6;
    size_t max_keys = 10000;
  };
  LoginLimiter() : LoginLimiter(Options{}) {}
  explicit LoginLimiter(Options o) : o_(o) {}

  Status Allow(const std::string& user, const std::string& address);
  void Failed(const std::string& user, const std::string& address);
  size_t keys() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Bucket {
    double tokens = 0;
    Clock::time_point at;
  };
  // Brings `b` up to date; returns its tokens.
  double Refill(Bucket& b, Clock::time_point now) const;
  // The bucket for `key` in `table`, made full if new; nullptr when the table is full.
  Bucket* Find(std::map<std::string, Bucket>& table, const std::string& key, Clock::time_point now);
  Status Check(std::map<std::string, Bucket>& table, const std::string& key, const std::string& what,
               Clock::time_point now);

  Options o_;
  mutable std::mutex mu_;
  std::map<std::string, Bucket> users_, addresses_;
};

}  // namespace sf::master
