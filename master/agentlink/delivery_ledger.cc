#include "master/agentlink/delivery_ledger.h"

#include "common/log.h"

namespace sf::master {

DeliveryLedger::DeliveryLedger(Database* db) : db_(db) {}

std::shared_ptr<DeliveryLedger::AgentState> DeliveryLedger::StateOf(const std::string& agent_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& state = agents_[agent_id];
  if (!state) {
    state = std::make_shared<AgentState>();
  }
  return state;
}

Result<int64_t> DeliveryLedger::Register(const std::string& agent_id,
                                         const std::string& incarnation) {
  auto state = StateOf(agent_id);
  std::lock_guard<std::mutex> apply_lock(state->apply_mu);
  int64_t applied = 0;
  std::string previous;
  // Keep the row of this incarnation, or start it at 0 (a new agent process).
  Status st = db_->Transact("register agent delivery", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "INSERT INTO agent_deliveries (agent_id, incarnation, applied_through) VALUES ($1, $2, 0) "
        "ON CONFLICT (agent_id) DO UPDATE SET "
        "  applied_through = CASE WHEN agent_deliveries.incarnation = EXCLUDED.incarnation "
        "                         THEN agent_deliveries.applied_through ELSE 0 END, "
        "  incarnation = EXCLUDED.incarnation, updated_at = now() "
        "RETURNING applied_through",
        agent_id, incarnation);
    applied = r[0][0].as<int64_t>();
    return Status::Ok();
  });
  if (!st.ok()) {
    return st;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    previous = state->incarnation;
    state->incarnation = incarnation;
    state->applied_through = applied;
  }
  if (previous != incarnation) {
    log::Info("agentlink", {{"event", "incarnation"},
                            {"agent", agent_id},
                            {"incarnation", incarnation},
                            {"applied_through", std::to_string(applied)}});
  }
  return applied;
}

Result<bool> DeliveryLedger::Apply(const DeliveryStamp& stamp, bool apply_records,
                                   const std::function<Status()>& apply) {
  auto state = StateOf(stamp.agent_id);
  std::lock_guard<std::mutex> apply_lock(state->apply_mu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state->incarnation != stamp.incarnation) {
      // Only a stream of a replaced incarnation (its process is gone) gets here.
      return FailedPrecondition("agent " + stamp.agent_id + " incarnation " + stamp.incarnation +
                                " was replaced by " + state->incarnation);
    }
    if (stamp.sequence <= state->applied_through) {
      return false;
    }
  }
  Status st = apply();
  if (!st.ok()) {
    return st;
  }
  if (!apply_records) {
    st = db_->Transact("record agent delivery", [&](pqxx::work& tx) {
      ClaimInTransaction(tx, stamp);
      return Status::Ok();
    });
    if (!st.ok()) {
      // The effect happened: this master must not apply it again, so it is recorded in memory
      // and acknowledged; the next event's record covers it in the database. Only a master
      // restart before then applies it again (the window described in the header).
      log::Warn("agentlink", {{"event", "delivery_not_recorded"},
                              {"agent", stamp.agent_id},
                              {"sequence", std::to_string(stamp.sequence)},
                              {"error", st.message()}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (state->incarnation == stamp.incarnation && stamp.sequence > state->applied_through) {
    state->applied_through = stamp.sequence;
  }
  return true;
}

bool DeliveryLedger::GiveUp(const DeliveryStamp& stamp, const Status& error) {
  if (error.code() == StatusCode::kUnavailable || error.code() == StatusCode::kFailedPrecondition) {
    return false;
  }
  auto state = StateOf(stamp.agent_id);
  std::lock_guard<std::mutex> lock(mu_);
  if (state->failed_sequence != stamp.sequence) {
    state->failed_sequence = stamp.sequence;
    state->failures = 0;
  }
  return ++state->failures >= kMaxAttempts;
}

int64_t DeliveryLedger::AppliedThrough(const std::string& agent_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  return it == agents_.end() ? 0 : it->second->applied_through;
}

bool DeliveryLedger::ClaimInTransaction(pqxx::work& tx, const DeliveryStamp& stamp) {
  pqxx::result r = tx.exec_params(
      "UPDATE agent_deliveries SET applied_through = $3, updated_at = now() "
      "WHERE agent_id = $1 AND incarnation = $2 AND applied_through < $3",
      stamp.agent_id, stamp.incarnation, stamp.sequence);
  return r.affected_rows() > 0;
}

}  // namespace sf::master
