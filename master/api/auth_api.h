// The REST routes of accounts: login/logout/me, users, API tokens and workspaces
// (/api/v1/auth/*, /api/v1/users*, /api/v1/tokens*, /api/v1/workspaces*), kept out of
// http_server.cc, which routes here. What each route needs is in master/auth/access_policy.h
// and already checked when Handle runs; Handle does the rest (bodies, per-object checks such as
// "only your own tokens").
//
// Bodies and answers are JSON (camelCase keys, ids as strings, times RFC 3339, like the rest of
// the API); errors are the API's {"code","message"}.
#pragma once

#include <map>
#include <string>

#include "master/auth/access_policy.h"
#include "master/auth/accounts.h"
#include "master/auth/login_limiter.h"

namespace sf::master {

struct AuthReply {
  Status status;          // not OK: the error to send (its HTTP status follows from the code)
  std::string body;       // JSON when OK
  std::string set_cookie; // a Set-Cookie header value, when not empty
  int retry_after = 0;    // seconds, for 429
};

class AuthApi {
 public:
  AuthApi(Accounts* accounts, Authorizer* authorizer, LoginLimiter* limiter, bool secure_cookies)
      : accounts_(accounts), authorizer_(authorizer), limiter_(limiter), secure_cookies_(secure_cookies) {}

  // `route` is the matched RestRule's template, `params` its path parameters, `query_all` the
  // ?all= flag of GET /api/v1/tokens.
  AuthReply Handle(const std::string& method, const std::string& route, const std::map<std::string, std::string>& params,
                   const std::string& body, bool query_all, const Principal& caller, const std::string& peer);

  static constexpr const char* kCookie = "sf_session";

 private:
  AuthReply Login(const std::string& body, const std::string& peer);
  std::string Cookie(const std::string& token, int64_t max_age) const;

  Accounts* accounts_;
  Authorizer* authorizer_;
  LoginLimiter* limiter_;
  bool secure_cookies_;
};

}  // namespace sf::master
