// Pruning ended tasks' delivery records and finished trials' old allocation rows
// (master/housekeeping/bookkeeping_retention.h).
#include "master/housekeeping/bookkeeping_retention.h"

#include <pqxx/pqxx>

#include "common/log.h"

namespace sf::master {

Result<BookkeepingPruned> PruneBookkeeping(Database* db, std::chrono::system_clock::time_point cutoff) {
  const double cutoff_unix =
      std::chrono::duration<double>(cutoff.time_since_epoch()).count();
  BookkeepingPruned pruned;
  // A sender "task:<allocation id>.<rank>": its allocation is the name without the prefix and
  // the last ".<rank>".
  Status st = db->Transact("prune task deliveries", [&](pqxx::work& tx) {
    pruned.task_deliveries = static_cast<int64_t>(
        tx.exec_params(
              "DELETE FROM agent_deliveries d WHERE d.agent_id LIKE 'task:%' AND d.updated_at < to_timestamp($1) "
              "AND NOT EXISTS (SELECT 1 FROM allocations a "
              "  WHERE a.id = regexp_replace(substr(d.agent_id, 6), '\\.[0-9]+$', '') "
              "  AND (a.state <> 'TERMINATED' OR a.end_time IS NULL OR a.end_time >= to_timestamp($1)))",
              cutoff_unix)
            .affected_rows());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  st = db->Transact("prune allocations", [&](pqxx::work& tx) {
    pruned.allocations = static_cast<int64_t>(
        tx.exec_params(
              "DELETE FROM allocations a USING trials t WHERE t.id = a.trial_id "
              "AND t.state IN ('COMPLETED', 'CANCELED', 'ERROR') "
              "AND a.state = 'TERMINATED' AND a.end_time < to_timestamp($1) "
              "AND a.id <> (SELECT n.id FROM allocations n WHERE n.trial_id = a.trial_id "
              "  ORDER BY n.start_time DESC, length(n.id) DESC, n.id DESC LIMIT 1)",
              cutoff_unix)
            .affected_rows());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return pruned;
}

BookkeepingPruner::BookkeepingPruner(Database* db, std::chrono::hours retention, std::chrono::seconds interval)
    : db_(db), retention_(retention), interval_(std::max(interval, std::chrono::seconds(1))) {}

BookkeepingPruner::~BookkeepingPruner() { Stop(); }

void BookkeepingPruner::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void BookkeepingPruner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BookkeepingPruner::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto pruned = PruneBookkeeping(db_, std::chrono::system_clock::now() - retention_);
    if (!pruned.ok()) {
      log::Warn("bookkeeping", {{"event", "prune_failed"}, {"error", pruned.status().message()}});
    } else if (pruned->task_deliveries > 0 || pruned->allocations > 0) {
      log::Info("bookkeeping", {{"event", "pruned"},
                                {"task_deliveries", std::to_string(pruned->task_deliveries)},
                                {"allocations", std::to_string(pruned->allocations)}});
    }
    lock.lock();
    wake_.wait_for(lock, interval_, [&] { return stopping_; });
  }
}

}  // namespace sf::master
