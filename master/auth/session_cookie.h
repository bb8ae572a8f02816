// The dashboard's session cookie (docs/security.md, "Sessions"): its name, and reading it out of
// (or taking it out of) a Cookie header. The REST gateway authenticates by it
// (master/api/rest_router.h); the proxy to tasks strips it (master/proxy/task_proxy.h), so a
// task never sees a user's master session.
#pragma once

#include <string>
#include <string_view>

namespace sf::master {

inline constexpr char kSessionCookie[] = "sf_session";

namespace session_cookie_detail {
// Calls visit(part) for each "name=value" of a Cookie header, leading spaces trimmed.
template <class Visit>
void ForEachCookie(std::string_view cookies, Visit&& visit) {
  for (size_t i = 0; i < cookies.size();) {
    size_t end = cookies.find(';', i);
    if (end == std::string_view::npos) end = cookies.size();
    std::string_view part = cookies.substr(i, end - i);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    visit(part);
    i = end + 1;
  }
}
}  // namespace session_cookie_detail

// The session token a Cookie header carries (the last sf_session=...); "" when none.
inline std::string SessionCookieValue(std::string_view cookies) {
  const std::string key = std::string(kSessionCookie) + "=";
  std::string token;
  session_cookie_detail::ForEachCookie(cookies, [&](std::string_view part) {
    if (part.rfind(key, 0) == 0) token = std::string(part.substr(key.size()));
  });
  return token;
}

// The Cookie header without the session cookie ("" when nothing else is left).
inline std::string WithoutSessionCookie(std::string_view cookies) {
  const std::string key = std::string(kSessionCookie) + "=";
  std::string out;
  session_cookie_detail::ForEachCookie(cookies, [&](std::string_view part) {
    if (!part.empty() && part.rfind(key, 0) != 0)
      out += (out.empty() ? "" : "; ") + std::string(part);
  });
  return out;
}

}  // namespace sf::master
