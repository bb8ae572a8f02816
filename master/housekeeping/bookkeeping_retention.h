// Pruning the master's bookkeeping, which would otherwise grow with every task ever run
// (docs/cluster.md "Bookkeeping retention"; issue: a master left up for months).
//
// Contract:
// - PruneBookkeeping deletes, each in one transaction, rows that nothing reads any more once
//   `cutoff` is past:
//   * the delivery records of sf-task log senders (agent_deliveries rows named
//     "task:<allocation id>.<rank>", one per rank of every allocation run outside an agent, e.g.
//     under Slurm) whose allocation ended (TERMINATED) before the cutoff, or no longer exists.
//     A sender re-sends only while its task lives, so an ended allocation's record is dead.
//     Agents' own records (one per agent) are kept.
//   * allocation rows of finished trials (COMPLETED, CANCELED, ERROR) that ended before the
//     cutoff, except each trial's newest (a trial's job id and hosts are read from it). A
//     finished trial never gets another allocation, so its allocation count (which numbers an
//     unfinished trial's next allocation id) is never read again.
//   Rows of unfinished trials and live allocations are never touched.
// - BookkeepingPruner runs it every `interval` on a thread of its own (never under the
//   coordinator's lock), with cutoff = now - retention; a failed pass is logged and tried again
//   at the next interval. Stop() joins it; the destructor calls Stop().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

struct BookkeepingPruned {
  int64_t task_deliveries = 0;  // agent_deliveries rows of ended sf-task senders
  int64_t allocations = 0;      // allocation rows of finished trials (not their newest)
};

Result<BookkeepingPruned> PruneBookkeeping(Database* db, std::chrono::system_clock::time_point cutoff);

class BookkeepingPruner {
 public:
  // `db` must outlive the pruner.
  BookkeepingPruner(Database* db, std::chrono::hours retention,
                    std::chrono::seconds interval = std::chrono::seconds(600));
  ~BookkeepingPruner();
  BookkeepingPruner(const BookkeepingPruner&) = delete;
  BookkeepingPruner& operator=(const BookkeepingPruner&) = delete;

  void Start();  // a pass at once, then every interval
  void Stop();

 private:
  void Loop();

  Database* db_;
  std::chrono::hours retention_;
  std::chrono::seconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sf::master
