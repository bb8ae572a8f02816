// Where `sf login` keeps its session: $XDG_CONFIG_HOME/steadfast/sessions.json (default
// ~/.config/steadfast/), mode 0600 in a 0700 directory, one entry per master URL:
// {"sessions": {"http://127.0.0.1:8080": {"username": "alice", "token": "sfs_..."}}}.
//
// Which token a request carries (TokenFor): $SF_TOKEN when set (CI: an API token from
// `sf token create`), else the session saved for that master URL, else none.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace sf::api {

struct Session {
  std::string username, token;
};

std::string SessionFile();
std::optional<Session> LoadSession(const std::string& master_url);
Status SaveSession(const std::string& master_url, const Session& session);
// Removes the entry; OK when there was none.
Status RemoveSession(const std::string& master_url);
std::string TokenFor(const std::string& master_url);

}  // namespace sf::api
