#include "master/rendezvous/rendezvous_journal.h"

#include <pqxx/pqxx>

#include "common/log.h"
#include "master/db/database.h"

namespace sf::master {

Status PostgresRendezvousJournal::Record(const std::string& allocation_id, const std::string& round,
                                         int rank, const std::string& payload) {
  return db_->Transact("record rendezvous payload", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO rendezvous_payloads (allocation_id, round, rank, payload) VALUES ($1, $2, $3, "
        "$4) "
        "ON CONFLICT (allocation_id, round, rank) DO UPDATE SET payload = EXCLUDED.payload",
        allocation_id, round, rank, pqxx::binarystring(payload.data(), payload.size()));
    return Status::Ok();
  });
}

Result<RendezvousJournal::Rounds> PostgresRendezvousJournal::Load(
    const std::string& allocation_id) {
  Rounds rounds;
  Status st = db_->Transact("load rendezvous rounds", [&](pqxx::work& tx) {
    rounds.clear();
    // Rounds in the order of their first payload (ties by name), ranks within a round by rank.
    pqxx::result r = tx.exec_params(
        "SELECT round, rank, payload FROM rendezvous_payloads WHERE allocation_id = $1 "
        "ORDER BY min(seq) OVER (PARTITION BY round), round, rank",
        allocation_id);
    for (const auto& row : r) {
      const std::string round = row[0].as<std::string>();
      if (rounds.empty() || rounds.back().first != round) rounds.push_back({round, {}});
      pqxx::binarystring bytes(row[2]);
      rounds.back().second[row[1].as<int>()] = std::string(bytes.get(), bytes.size());
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return rounds;
}

Result<std::set<std::string>> PostgresRendezvousJournal::Pending() {
  std::set<std::string> out;
  Status st = db_->Transact("pending rendezvous", [&](pqxx::work& tx) {
    for (const auto& row : tx.exec("SELECT DISTINCT allocation_id FROM rendezvous_payloads")) {
      out.insert(row[0].as<std::string>());
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

void PostgresRendezvousJournal::Forget(const std::string& allocation_id) {
  Status st = db_->Transact("forget rendezvous", [&](pqxx::work& tx) {
    tx.exec_params("DELETE FROM rendezvous_payloads WHERE allocation_id = $1", allocation_id);
    return Status::Ok();
  });
  if (!st.ok())
    log::Warn("rendezvous",
              {{"event", "forget_failed"}, {"allocation", allocation_id}, {"error", st.message()}});
}

void PostgresRendezvousJournal::ForgetRound(const std::string& allocation_id,
                                            const std::string& round) {
  Status st = db_->Transact("forget rendezvous round", [&](pqxx::work& tx) {
    tx.exec_params("DELETE FROM rendezvous_payloads WHERE allocation_id = $1 AND round = $2",
                   allocation_id, round);
    return Status::Ok();
  });
  if (!st.ok()) {
    log::Warn("rendezvous", {{"event", "forget_failed"},
                             {"allocation", allocation_id},
                             {"round", round},
                             {"error", st.message()}});
  }
}

}  // namespace sf::master
