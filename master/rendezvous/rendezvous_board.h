// RendezvousBoard: where the ranks of a distributed trial meet (TrialLink.Rendezvous).
//
// The coordinator opens one board entry per allocation when it starts the allocation's ranks
// (Open: world size and the agent of each rank) and closes it when the allocation ends (Close).
// A rank arrives in a named round with its payload (Arrive) and waits until every rank of the
// allocation has arrived in that round; then every rank gets all payloads, indexed by rank,
// and the agent of each rank. A bootstrap takes several rounds ("members", "mpi-server",
// "mpi-ports", "nccl-id"); payloads of a round are kept until the allocation closes, so a
// retried call gets the same answer — except that an allocation keeps at most kMaxRounds
// rounds: beyond that, the oldest rounds every rank has completed are forgotten (the Core API's
// collectives make a round per call; a retry only ever asks for a recent one).
//
// Errors: kFailedPrecondition when the allocation is not (or no longer) open, including while
// a rank is waiting (the allocation was closed: its gang failed or was killed), or when the
// wait times out; the timeout message names the round and each missing rank with its agent.
// kInvalidArgument for a rank outside [0, world size).
//
// With a journal (SetJournal; the master's is PostgreSQL, rendezvous_journal.h) every payload
// is stored before any rank can be answered with it, and a board opened again for the same
// allocation after a master restart starts from the stored rounds: a rank's retry of a round
// the others finished before the restart gets the same answer, and the gang goes on. A failed
// store is logged and the round goes on in memory (a database hiccup does not fail the gang).
//
// Thread-safe, and independent of the coordinator's lock: a long wait here never holds up
// scheduling, metric reports or API reads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/rendezvous/rendezvous_journal.h"

namespace sf::master {

class RendezvousBoard {
 public:
  struct Result {
    std::vector<std::string> payloads;  // by rank
    std::vector<std::string> agents;    // the agent running each rank
  };

  // Call before the first Open (null: memory only). Reads which allocations have stored rounds.
  void SetJournal(RendezvousJournal* journal);
  void Open(const std::string& allocation_id, std::vector<std::string> rank_agents);
  void Close(const std::string& allocation_id);
  // Wakes every waiter (master shutting down); they fail with kUnavailable.
  void Shutdown();

  sf::Result<Result> Arrive(const std::string& allocation_id, const std::string& round, int rank,
                            std::string payload, std::chrono::milliseconds wait);

  static constexpr size_t kMaxRounds = 1024;

 private:
  struct Entry {
    std::vector<std::string> agents;
    std::map<std::string, std::map<int, std::string>> rounds;
    std::deque<std::string> order;  // rounds, oldest first
    uint64_t generation = 0;
    bool journaled = false;  // has rows in the journal
  };
  sf::Result<Result> ArriveLocked(std::unique_lock<std::mutex>& lock, const std::string& allocation_id,
                                  const std::string& round, int rank, std::string payload, bool recorded,
                                  std::chrono::milliseconds wait, std::vector<std::string>* forgotten);
  RendezvousJournal* journal_ = nullptr;
  std::set<std::string> pending_;  // allocations with stored rounds not opened since the start
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Entry> open_;
  uint64_t next_generation_ = 1;
  bool shutdown_ = false;
};

}  // namespace sf::master
