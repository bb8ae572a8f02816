// The rendezvous journal against a real PostgreSQL (master/rendezvous/rendezvous_journal.h): a
// round some ranks finished before the master died answers another rank's retry after the
// restart with the same payloads, so the gang goes on instead of waiting out its timeout; a
// payload is stored byte for byte; an allocation's rows go when it closes.
#include "master/rendezvous/rendezvous_journal.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "master/db/store.h"
#include "master/rendezvous/rendezvous_board.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master::testing {
namespace {

using std::chrono::milliseconds;

class RendezvousJournalTest : public MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    std::vector<int64_t> trials;
    CreateRunningTrials("gang", 1, &trials);
    if (HasFatalFailure()) return;
    Store store(db_.get());
    ASSERT_TRUE(store.CreateAllocation(kAllocation, trials[0], 0).ok());
  }
  int StoredRows() {
    int n = -1;
    EXPECT_TRUE(
        db_->Transact("count",
                      [&](pqxx::work& tx) {
                        n = tx.exec1("SELECT count(*) FROM rendezvous_payloads")[0].as<int>();
                        return Status::Ok();
                      })
            .ok());
    return n;
  }
  static constexpr const char* kAllocation = "t1-r0";
  const std::vector<std::string> agents_{"agent-a", "agent-b"};
};

TEST_F(RendezvousJournalTest, ARoundFinishedBeforeARestartAnswersARanksRetryAfterIt) {
  // NCCL's unique id is binary: NUL bytes and all must come back.
  const std::string nccl_id("\0\x01\xffid", 5);
  {
    PostgresRendezvousJournal journal(db_.get());
    RendezvousBoard board;  // the master before it dies
    board.SetJournal(&journal);
    board.Open(kAllocation, agents_);
    auto rank1 = std::async(std::launch::async, [&] {
      return board.Arrive(kAllocation, "members", 1, "m1", milliseconds(5000));
    });
    auto rank0 = board.Arrive(kAllocation, "members", 0, "m0", milliseconds(5000));
    ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();
    ASSERT_TRUE(rank1.get().ok());
    // Rank 0 goes on to the next round; the master dies before rank 1 hears "members" (here:
    // its answer is lost) and while rank 0 waits.
    auto waiting = std::async(std::launch::async, [&] {
      return board.Arrive(kAllocation, "nccl-id", 0, nccl_id, milliseconds(5000));
    });
    std::this_thread::sleep_for(milliseconds(200));
    board.Shutdown();
    EXPECT_EQ(waiting.get().status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(StoredRows(), 3);

  // Without the journal, the restarted master's board has nothing: rank 1's retry waits for a
  // rank 0 that has moved on.
  RendezvousBoard memory_only;
  memory_only.Open(kAllocation, agents_);
  EXPECT_EQ(memory_only.Arrive(kAllocation, "members", 1, "m1", milliseconds(50)).status().code(),
            StatusCode::kFailedPrecondition);

  PostgresRendezvousJournal journal(db_.get());
  RendezvousBoard restarted;
  restarted.SetJournal(&journal);
  restarted.Open(kAllocation, agents_);  // the agents re-registered: the allocation is adopted
  auto retry = restarted.Arrive(kAllocation, "members", 1, "m1", milliseconds(50));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(retry->payloads, (std::vector<std::string>{"m0", "m1"}));
  EXPECT_EQ(retry->agents, agents_);
  // Both go on into the round rank 0 had begun.
  auto rank0 = std::async(std::launch::async, [&] {
    return restarted.Arrive(kAllocation, "nccl-id", 0, nccl_id, milliseconds(5000));
  });
  auto rank1 = restarted.Arrive(kAllocation, "nccl-id", 1, "", milliseconds(5000));
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();
  EXPECT_EQ(rank1->payloads, (std::vector<std::string>{nccl_id, ""}));
  ASSERT_TRUE(rank0.get().ok());

  // The allocation ends: its rows go, and a later start has nothing to load.
  restarted.Close(kAllocation);
  EXPECT_EQ(StoredRows(), 0);
  auto pending = journal.Pending();
  ASSERT_TRUE(pending.ok());
  EXPECT_TRUE(pending->empty());
}

TEST_F(RendezvousJournalTest, RoundsComeBackInTheOrderTheyBegan) {
  PostgresRendezvousJournal journal(db_.get());
  for (const char* round : {"zeta", "alpha", "mid"}) {
    ASSERT_TRUE(journal.Record(kAllocation, round, 1, std::string(round) + "-1").ok());
  }
  ASSERT_TRUE(journal.Record(kAllocation, "zeta", 0, "zeta-0").ok());
  ASSERT_TRUE(journal.Record(kAllocation, "alpha", 1, "alpha-1 again").ok());  // a retry replaces
  auto rounds = journal.Load(kAllocation);
  ASSERT_TRUE(rounds.ok()) << rounds.status().ToString();
  ASSERT_EQ(rounds->size(), 3u);
  EXPECT_EQ((*rounds)[0].first, "zeta");
  EXPECT_EQ((*rounds)[0].second, (std::map<int, std::string>{{0, "zeta-0"}, {1, "zeta-1"}}));
  EXPECT_EQ((*rounds)[1].first, "alpha");
  EXPECT_EQ((*rounds)[1].second.at(1), "alpha-1 again");
  EXPECT_EQ((*rounds)[2].first, "mid");
  journal.ForgetRound(kAllocation, "zeta");
  EXPECT_EQ(StoredRows(), 2);
  auto pending = journal.Pending();
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, std::set<std::string>{kAllocation});
}

}  // namespace
}  // namespace sf::master::testing
