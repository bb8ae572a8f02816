// RendezvousJournal: the rendezvous rounds a restarted master needs to continue a gang's
// bootstrap (issue 45's crash gaps). The board (rendezvous_board.h) keeps rounds in memory and
// answers a retried arrival in a finished round with the same payloads; without a journal, a
// master that died after some rank heard a round's answer and before another did leaves them
// split: one waits in the next round, the other waits for ever in the old one (its retry finds
// a fresh board). With a journal every payload is stored before any rank can be answered with
// it, and a board opened again for the same allocation after a restart starts from the stored
// rounds.
//
// Contract:
// - Record(allocation, round, rank, payload): durable when it returns OK (one transaction with
//   a synchronous commit); the same (allocation, round, rank) again replaces the payload.
// - Load(allocation): every stored round of the allocation with its payloads by rank, in the
//   order the rounds were first recorded.
// - Pending(): the allocations with stored rounds, read once when the master starts, so that
//   only their boards are loaded (a fresh allocation costs no read).
// - Forget(allocation): the allocation ended; ForgetRound(allocation, round): the board dropped
//   an old completed round (RendezvousBoard::kMaxRounds). Failures are logged, not returned: a
//   row left behind goes with its allocation's row (ON DELETE CASCADE, bookkeeping retention).
// Thread-safe (each call is one transaction on the Database's pool).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sf::master {

class Database;

class RendezvousJournal {
 public:
  using Rounds = std::vector<std::pair<std::string, std::map<int, std::string>>>;
  virtual ~RendezvousJournal() = default;
  virtual Status Record(const std::string& allocation_id, const std::string& round, int rank,
                        const std::string& payload) = 0;
  virtual Result<Rounds> Load(const std::string& allocation_id) = 0;
  virtual Result<std::set<std::string>> Pending() = 0;
  virtual void Forget(const std::string& allocation_id) = 0;
  virtual void ForgetRound(const std::string& allocation_id, const std::string& round) = 0;
};

// The journal in PostgreSQL: the `rendezvous_payloads` table (migration 022).
class PostgresRendezvousJournal : public RendezvousJournal {
 public:
  explicit PostgresRendezvousJournal(Database* db) : db_(db) {}
  Status Record(const std::string& allocation_id, const std::string& round, int rank,
                const std::string& payload) override;
  Result<Rounds> Load(const std::string& allocation_id) override;
  Result<std::set<std::string>> Pending() override;
  void Forget(const std::string& allocation_id) override;
  void ForgetRound(const std::string& allocation_id, const std::string& round) override;

 private:
  Database* db_;
};

}  // namespace sf::master
