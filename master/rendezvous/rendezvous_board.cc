#include "master/rendezvous/rendezvous_board.h"

#include "common/log.h"

namespace sf::master {

void RendezvousBoard::SetJournal(RendezvousJournal* journal) {
  std::set<std::string> pending;
  if (journal) {
    auto stored = journal->Pending();
    if (stored.ok()) {
      pending = std::move(*stored);
    } else {
      log::Warn("rendezvous", {{"event", "journal_unreadable"}, {"error", stored.status().message()}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  journal_ = journal;
  pending_ = std::move(pending);
}

void RendezvousBoard::Open(const std::string& allocation_id, std::vector<std::string> rank_agents) {
  // An allocation a restarted master adopts starts from its stored rounds.
  bool stored = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stored = journal_ && pending_.erase(allocation_id) > 0;
  }
  RendezvousJournal::Rounds rounds;
  if (stored) {
    auto loaded = journal_->Load(allocation_id);
    if (loaded.ok()) {
      rounds = std::move(*loaded);
    } else {
      log::Warn("rendezvous", {{"event", "journal_unreadable"}, {"allocation", allocation_id},
                               {"error", loaded.status().message()}});
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = open_[allocation_id];
    e = Entry{};
    e.agents = std::move(rank_agents);
    e.generation = next_generation_++;
    e.journaled = stored;
    for (auto& [round, payloads] : rounds) {
      e.order.push_back(round);
      e.rounds[round] = std::move(payloads);
    }
  }
  changed_.notify_all();
}

void RendezvousBoard::Close(const std::string& allocation_id) {
  bool journaled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(allocation_id);
    journaled = (it != open_.end() && it->second.journaled) || pending_.erase(allocation_id) > 0;
    if (it != open_.end()) open_.erase(it);
  }
  changed_.notify_all();
  if (journal_ && journaled) journal_->Forget(allocation_id);
}

void RendezvousBoard::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  changed_.notify_all();
}

sf::Result<RendezvousBoard::Result> RendezvousBoard::Arrive(const std::string& allocation_id,
                                                            const std::string& round, int rank,
                                                            std::string payload,
                                                            std::chrono::milliseconds wait) {
  // Stored first (outside the lock: a transaction), unless this rank's payload is there already
  // (a retry): no rank is answered with a payload a restart could lose.
  bool record = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(allocation_id);
    if (journal_ && it != open_.end() && rank >= 0 && rank < static_cast<int>(it->second.agents.size())) {
      auto r = it->second.rounds.find(round);
      record = r == it->second.rounds.end() || !r->second.count(rank) || r->second.at(rank) != payload;
    }
  }
  bool recorded = false;
  if (record) {
    Status st = journal_->Record(allocation_id, round, rank, payload);
    recorded = st.ok();
    if (!st.ok()) {
      log::Warn("rendezvous", {{"event", "record_failed"}, {"allocation", allocation_id}, {"round", round},
                               {"rank", std::to_string(rank)}, {"error", st.message()}});
    }
  }
  std::vector<std::string> forgotten;
  sf::Result<Result> met = [&] {
    std::unique_lock<std::mutex> lock(mu_);
    return ArriveLocked(lock, allocation_id, round, rank, std::move(payload), recorded, wait, &forgotten);
  }();
  for (const std::string& old : forgotten) journal_->ForgetRound(allocation_id, old);
  return met;
}

sf::Result<RendezvousBoard::Result> RendezvousBoard::ArriveLocked(std::unique_lock<std::mutex>& lock,
                                                                  const std::string& allocation_id,
                                                                  const std::string& round, int rank,
                                                                  std::string payload, bool recorded,
                                                                  std::chrono::milliseconds wait,
                                                                  std::vector<std::string>* forgotten) {
  auto it = open_.find(allocation_id);
  if (it == open_.end()) {
    return FailedPrecondition("rendezvous: allocation " + allocation_id + " is not running");
  }
  const int world = static_cast<int>(it->second.agents.size());
  if (rank < 0 || rank >= world) {
    return InvalidArgument("rendezvous: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(world) +
                           ")");
  }
  const uint64_t generation = it->second.generation;
  Entry& entry = it->second;
  entry.journaled = entry.journaled || recorded;
  if (!entry.rounds.count(round)) {
    entry.order.push_back(round);
    // Forget the oldest rounds every rank completed; never one still gathering.
    while (entry.order.size() > kMaxRounds) {
      auto oldest = entry.rounds.find(entry.order.front());
      if (oldest != entry.rounds.end() && static_cast<int>(oldest->second.size()) < world) break;
      if (oldest != entry.rounds.end()) {
        entry.rounds.erase(oldest);
        if (entry.journaled && journal_) forgotten->push_back(entry.order.front());
      }
      entry.order.pop_front();
    }
  }
  entry.rounds[round][rank] = std::move(payload);
  changed_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    it = open_.find(allocation_id);
    if (it == open_.end() || it->second.generation != generation) {
      return FailedPrecondition("rendezvous \"" + round + "\": allocation " + allocation_id +
                                " ended while rank " + std::to_string(rank) + " waited");
    }
    if (shutdown_) return Unavailable("rendezvous: the master is shutting down");
    const auto& arrived = it->second.rounds[round];
    if (static_cast<int>(arrived.size()) >= world) break;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      it = open_.find(allocation_id);
      if (it == open_.end()) continue;  // reported as ended above
      const auto& now = it->second.rounds[round];
      if (static_cast<int>(now.size()) >= world) break;
      std::string missing;
      for (int r = 0; r < world; ++r) {
        if (now.count(r)) continue;
        missing += (missing.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " on " +
                   (it->second.agents[static_cast<size_t>(r)].empty() ? std::string("an agent not yet re-registered")
                                                                     : it->second.agents[static_cast<size_t>(r)]);
      }
      return FailedPrecondition("rendezvous \"" + round + "\" timed out after " +
                                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(wait).count()) +
                                " s: " + std::to_string(now.size()) + " of " + std::to_string(world) +
                                " ranks arrived (missing: " + missing + ")");
    }
  }
  Result r;
  r.agents = it->second.agents;
  const auto& arrived = it->second.rounds[round];
  for (int k = 0; k < world; ++k) r.payloads.push_back(arrived.at(k));
  return r;
}

}  // namespace sf::master
