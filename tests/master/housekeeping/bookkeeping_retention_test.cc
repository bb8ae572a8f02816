// Bookkeeping retention (master/housekeeping/bookkeeping_retention.h) against PostgreSQL: what
// goes once the cutoff is past and what always stays.
#include "master/housekeeping/bookkeeping_retention.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "master/db/store.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {

using std::chrono::hours;
using std::chrono::system_clock;

class BookkeepingRetention : public testing::MigratedDatabaseTest {
 protected:
  // Runs `sql` (setting up rows the way the master would have written them).
  void Exec(const std::string& sql) {
    ASSERT_TRUE(db_->Transact("setup", [&](pqxx::work& tx) {
                     tx.exec(sql);
                     return Status::Ok();
                   }).ok())
        << sql;
  }
  std::set<std::string> Column(const std::string& sql) {
    std::set<std::string> out;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     for (const auto& row : tx.exec(sql)) out.insert(row[0].as<std::string>());
                     return Status::Ok();
                   }).ok());
    return out;
  }
  // An allocation of `trial`, ended `ended_hours_ago` (negative: still RUNNING), started before.
  void Allocation(const std::string& id, int64_t trial, int ended_hours_ago) {
    Store store(db_.get());
    ASSERT_TRUE(store.CreateAllocation(id, trial, 0).ok());
    const std::string start = "now() - interval '" + std::to_string(std::max(ended_hours_ago, 0) + 1) + " hours'";
    if (ended_hours_ago < 0) {
      Exec("UPDATE allocations SET state = 'RUNNING', start_time = " + start + " WHERE id = '" + id + "'");
    } else {
      Exec("UPDATE allocations SET state = 'TERMINATED', start_time = " + start + ", end_time = now() - interval '" +
           std::to_string(ended_hours_ago) + " hours' WHERE id = '" + id + "'");
    }
  }
  // A sf-task sender's delivery record, last advanced `hours_ago`.
  void Delivery(const std::string& sender, int hours_ago) {
    Exec("INSERT INTO agent_deliveries (agent_id, incarnation, applied_through, updated_at) VALUES ('" + sender +
         "', 'inc', 5, now() - interval '" + std::to_string(hours_ago) + " hours')");
  }
};

TEST_F(BookkeepingRetention, EndedTasksRecordsAndFinishedTrialsOlderAllocationsGoTheRestStays) {
  std::vector<int64_t> trials;
  CreateRunningTrials("bookkeeping", 2, &trials);
  if (HasFatalFailure()) return;
  const int64_t done = trials[0], running = trials[1];
  Exec("UPDATE trials SET state = 'COMPLETED' WHERE id = " + std::to_string(done));
  const std::string d = "t" + std::to_string(done), r = "t" + std::to_string(running);
  // The finished trial ran three times long ago (a2 restarted, a10 its newest: ids sort by
  // length too); the running one too, and runs now.
  Allocation(d + "-r0-a1", done, 300);
  Allocation(d + "-r0-a2", done, 250);
  Allocation(d + "-r0-a10", done, 200);
  Allocation(r + "-r0-a1", running, 300);
  Allocation(r + "-r0-a2", running, -1);
  // Delivery records: ranks of ended allocations (old and recent), of a live one, of one whose
  // allocation is gone, an agent's own, and a recent one without an allocation.
  Allocation(r + "-r0-a3", running, 1);  // ended an hour ago: within the retention
  if (HasFatalFailure()) return;
  for (const std::string& a : {d + "-r0-a1", d + "-r0-a10"}) Delivery("task:" + a + ".0", 200);
  Delivery("task:" + d + "-r0-a10.1", 200);
  Delivery("task:" + r + "-r0-a2.0", 300);  // live allocation, quiet for long: kept
  Delivery("task:" + r + "-r0-a3.0", 300);  // ended within the retention: kept
  Delivery("task:t999-r0-a1.0", 300);       // its allocation is gone: pruned
  Delivery("task:t998-r0-a1.0", 1);         // recent: kept
  Delivery("agent-1", 5000);                // an agent's own record: kept
  if (HasFatalFailure()) return;

  auto pruned = PruneBookkeeping(db_.get(), system_clock::now() - hours(168));
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->task_deliveries, 4);
  EXPECT_EQ(pruned->allocations, 2);
  EXPECT_EQ(Column("SELECT agent_id FROM agent_deliveries"),
            (std::set<std::string>{"task:" + r + "-r0-a2.0", "task:" + r + "-r0-a3.0", "task:t998-r0-a1.0",
                                   "agent-1"}));
  EXPECT_EQ(Column("SELECT id FROM allocations"),
            (std::set<std::string>{d + "-r0-a10", r + "-r0-a1", r + "-r0-a2", r + "-r0-a3"}));
  // A second pass finds nothing more; a shorter retention takes the rest of the ended.
  auto again = PruneBookkeeping(db_.get(), system_clock::now() - hours(168));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->task_deliveries + again->allocations, 0);
  auto shorter = PruneBookkeeping(db_.get(), system_clock::now());
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ(shorter->task_deliveries, 2);  // r-a3's (ended) and t998's (no allocation)
  EXPECT_EQ(Column("SELECT agent_id FROM agent_deliveries"),
            (std::set<std::string>{"task:" + r + "-r0-a2.0", "agent-1"}));
  EXPECT_EQ(shorter->allocations, 0);  // the running trial's rows all stay
}

TEST_F(BookkeepingRetention, ThePrunerRunsAPassAtStartAndStopsPromptly) {
  Delivery("task:t999-r0-a1.0", 300);
  if (HasFatalFailure()) return;
  BookkeepingPruner pruner(db_.get(), hours(168), std::chrono::seconds(3600));
  const auto started = std::chrono::steady_clock::now();
  pruner.Start();
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gone = Column("SELECT agent_id FROM agent_deliveries").empty();
  }
  pruner.Stop();
  EXPECT_TRUE(gone);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10)) << "Stop waited for the interval";
}

}  // namespace
}  // namespace sf::master
