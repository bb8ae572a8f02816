// What the master has applied of each agent's events: the receiving end of at-least-once
// AgentLink delivery (proto/steadfast/v1/agent_link.proto, docs/cluster.md "Message delivery").
//
// The contract. An agent numbers its events (task state changes, log batches) 1, 2, 3, ... per
// incarnation (one run of the sf-agent process) and re-sends every event the master has not
// acknowledged after each reconnect. The ledger makes the master apply each (agent_id,
// incarnation, sequence) at most once, and the AgentLink service acknowledges an event only
// after Apply() returned OK for it, so together every event is applied exactly once as long as
// the agent process lives:
//   - Register() is called for each new connection; it returns how far this incarnation's events
//     were applied (RegisterAck.applied_through). A new incarnation starts at 0 and replaces the
//     old one: the old process is gone, and its unacknowledged events with it.
//   - Apply() runs the event's effect unless its sequence is at or below applied_through, then
//     records the sequence. Events of one agent are applied one at a time (across connections
//     too: an old stream still finishing its last event and the new one never interleave).
//   - The record is in PostgreSQL (table agent_deliveries, migration 004), so a restarted master
//     does not apply again what its previous life applied. For a log batch the record is written
//     in the same transaction as its lines (ClaimInTransaction, called by the LogWriter): a line
//     is stored exactly once whatever is killed when. For a task state change it is written right
//     after the change was applied (the coordinator's own writes are separate transactions, which
//     commit without waiting for the disk — database.h, DeferredFlush — because this record's
//     commit waits for it, and its flush covers every earlier commit);
//     a master killed in between applies that one change again when the agent re-sends it.
//     Harmless for STARTED, and for an EXITED after a failure (the restart gets a new
//     allocation id, so the repeated change names none and is ignored). Not harmless in one
//     case: a trainer that exited 0 after finishing its operation is resubmitted under the same
//     allocation id, and a repeated EXITED then ends that next allocation early (the trial
//     restarts from its checkpoint). Closing that needs allocation ids unique per allocation.
//
// Thread-safe. A failed database statement is returned as an error; the caller then must not
// acknowledge (the service closes the stream so that the agent re-sends).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

// Names one agent event.
struct DeliveryStamp {
  std::string agent_id;
  std::string incarnation;
  int64_t sequence = 0;
};

class DeliveryLedger {
 public:
  // `db` must outlive the ledger.
  explicit DeliveryLedger(Database* db);
  DeliveryLedger(const DeliveryLedger&) = delete;
  DeliveryLedger& operator=(const DeliveryLedger&) = delete;

  // An agent connected as `incarnation`: returns the highest sequence of it already applied.
  Result<int64_t> Register(const std::string& agent_id, const std::string& incarnation);

  // Applies one event: nothing when `stamp.sequence` was applied already (returns false);
  // otherwise runs `apply` and, when it returns OK, records the sequence (returns true).
  // `apply_records` says that `apply` records the sequence itself, in the transaction of its
  // effect (ClaimInTransaction, which also skips an effect recorded before). Errors: `apply`'s;
  // then nothing is recorded and the event must be re-sent. A failed record after a successful
  // `apply` is logged and is not an error: the event counts as applied (in memory; the next
  // event's record covers it in the database).
  Result<bool> Apply(const DeliveryStamp& stamp, bool apply_records,
                     const std::function<Status()>& apply);

  // After Apply() failed for `stamp`: whether to give the event up (acknowledge it unapplied)
  // rather than have the agent re-send it. True once the same event has failed
  // kMaxAttempts times in a row with an error other than kUnavailable (a database that refuses
  // it for good, e.g. a constraint), so that one bad event cannot hold up the agent's others
  // forever. Unavailable (database down) never gives up: the event waits for the database.
  static constexpr int kMaxAttempts = 5;
  bool GiveUp(const DeliveryStamp& stamp, const Status& error);

  // The highest applied sequence of the agent's current incarnation (0 when unknown).
  int64_t AppliedThrough(const std::string& agent_id);

  // Inside a caller's transaction: advances the agent's record to `stamp.sequence` when the
  // record is of stamp.incarnation and below it. Returns whether it did, that is whether the
  // event is new and its effect belongs in this transaction.
  static bool ClaimInTransaction(pqxx::work& tx, const DeliveryStamp& stamp);

 private:
  struct AgentState {
    std::mutex apply_mu;  // one event of this agent at a time
    std::string incarnation;
    int64_t applied_through = 0;  // guarded by the ledger's mu_
    int64_t failed_sequence = 0;  // the event that failed last, and how many times in a row
    int failures = 0;             // (both guarded by mu_)
  };
  std::shared_ptr<AgentState> StateOf(const std::string& agent_id);

  Database* db_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<AgentState>> agents_;
};

}  // namespace sf::master
