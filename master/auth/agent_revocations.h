// Agents an admin has revoked (docs/security.md, "Agents"): a revoked agent id is refused at
// AgentLink even with the cluster's join token, and a connected one is disconnected at its next
// heartbeat, until it is restored. The join token admits a machine; revocation shuts out one
// agent without rotating the token for all.
//
// Contract: the list lives in `revoked_agents` (migration 009) and in memory (loaded by Load);
// IsRevoked reads memory only (AgentLink asks at every heartbeat). Thread-safe.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

class AgentRevocations {
 public:
  explicit AgentRevocations(Database* db) : db_(db) {}
  Status Load();
  Status Revoke(const std::string& agent_id, const std::string& by);
  // kNotFound when the agent was not revoked.
  Status Restore(const std::string& agent_id);
  bool IsRevoked(const std::string& agent_id) const;

 private:
  Database* db_;
  mutable std::mutex mu_;
  std::set<std::string> revoked_;
};

}  // namespace sf::master
