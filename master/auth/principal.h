// Who is calling: the authenticated user behind a request (master/auth/accounts.h makes one
// from a token; master/auth/access_policy.h decides what it may do).
#pragma once

#include <cstdint>
#include <string>

namespace sf::master {

// Ordered: a higher role may do everything a lower one may.
enum class Role { kViewer = 0, kUser = 1, kAdmin = 2 };

struct Principal {
  int64_t user_id = 0;  // 0: nobody (not authenticated)
  std::string username;
  Role role = Role::kViewer;
  int64_t token_id = 0;      // the session or API token used
  bool via_cookie = false;   // authenticated by the dashboard's session cookie
  std::string peer;          // where the call came from (an IP address), for logs and login limits
  bool authenticated() const { return user_id != 0; }
};

}  // namespace sf::master
