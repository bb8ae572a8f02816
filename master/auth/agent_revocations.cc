#include "master/auth/agent_revocations.h"

#include "common/utf8.h"

namespace sf::master {

Status AgentRevocations::Load() {
  std::set<std::string> ids;
  SF_RETURN_IF_ERROR(db_->Transact("load revoked agents", [&](pqxx::work& tx) {
    for (const auto& row : tx.exec("SELECT agent_id FROM revoked_agents")) ids.insert(row[0].as<std::string>());
    return Status::Ok();
  }));
  std::lock_guard<std::mutex> lock(mu_);
  revoked_ = std::move(ids);
  return Status::Ok();
}

Status AgentRevocations::Revoke(const std::string& agent_id, const std::string& by) {
  if (agent_id.empty() || agent_id.size() > 256 || !IsText(agent_id)) {
    return InvalidArgument("agent id: 1-256 characters of UTF-8 text");
  }
  SF_RETURN_IF_ERROR(db_->Transact("revoke agent", [&](pqxx::work& tx) {
    tx.exec_params("INSERT INTO revoked_agents (agent_id, revoked_by) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                   agent_id, by);
    return Status::Ok();
  }));
  std::lock_guard<std::mutex> lock(mu_);
  revoked_.insert(agent_id);
  return Status::Ok();
}

Status AgentRevocations::Restore(const std::string& agent_id) {
  if (!IsText(agent_id)) return InvalidArgument("agent id: not UTF-8 text");
  bool found = false;
  SF_RETURN_IF_ERROR(db_->Transact("restore agent", [&](pqxx::work& tx) {
    found = !tx.exec_params("DELETE FROM revoked_agents WHERE agent_id = $1 RETURNING 1", agent_id).empty();
    return Status::Ok();
  }));
  std::lock_guard<std::mutex> lock(mu_);
  revoked_.erase(agent_id);
  if (!found) return NotFound("agent " + agent_id + " is not revoked");
  return Status::Ok();
}

bool AgentRevocations::IsRevoked(const std::string& agent_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return revoked_.count(agent_id) > 0;
}

}  // namespace sf::master
