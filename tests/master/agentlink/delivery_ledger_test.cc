// The master's end of at-least-once AgentLink delivery, against a real PostgreSQL migrated by
// the master's own migrations: an event is applied once per (agent, incarnation, sequence), also
// by a new ledger on the same database (a restarted master); a new incarnation starts over; a
// failed effect is not recorded (so the re-sent event is applied); an event is given up only
// after repeated refusals; and a stamped log batch written twice through the LogWriter is
// stored once.
#include "master/agentlink/delivery_ledger.h"

#include <gtest/gtest.h>

#include "master/db/store.h"
#include "master/ingest/log_writer.h"
#include "tests/master/migrated_database_test.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

class DeliveryLedgerTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
  }

  // Applies `sequence` of agent-1/inc through `ledger`, counting the effect in `applied`.
  Result<bool> Deliver(DeliveryLedger& ledger, const std::string& incarnation, int64_t sequence,
                       int& applied, Status effect = Status::Ok()) {
    return ledger.Apply({"agent-1", incarnation, sequence}, false, [&] {
      if (effect.ok()) {
        ++applied;
      }
      return effect;
    });
  }

};

TEST_F(DeliveryLedgerTest, AppliesEachSequenceOnceAlsoAfterAMasterRestart) {
  int applied = 0;
  {
    DeliveryLedger ledger(db_.get());
    auto through = ledger.Register("agent-1", "inc-a");
    ASSERT_TRUE(through.ok()) << through.status().ToString();
    EXPECT_EQ(*through, 0);
    EXPECT_TRUE(*Deliver(ledger, "inc-a", 1, applied));
    EXPECT_TRUE(*Deliver(ledger, "inc-a", 2, applied));
    EXPECT_FALSE(*Deliver(ledger, "inc-a", 2, applied));  // re-sent: acknowledged, not applied
    EXPECT_FALSE(*Deliver(ledger, "inc-a", 1, applied));
    EXPECT_EQ(applied, 2);
    EXPECT_EQ(ledger.AppliedThrough("agent-1"), 2);
  }
  DeliveryLedger restarted(db_.get());  // the same database, nothing in memory
  auto through = restarted.Register("agent-1", "inc-a");
  ASSERT_TRUE(through.ok());
  EXPECT_EQ(*through, 2);  // RegisterAck.applied_through: the agent forgets 1 and 2
  EXPECT_FALSE(*Deliver(restarted, "inc-a", 2, applied));
  EXPECT_TRUE(*Deliver(restarted, "inc-a", 3, applied));
  EXPECT_EQ(applied, 3);
}

TEST_F(DeliveryLedgerTest, ANewIncarnationStartsOverAndTheOldOneIsRefused) {
  DeliveryLedger ledger(db_.get());
  int applied = 0;
  ASSERT_TRUE(ledger.Register("agent-1", "inc-a").ok());
  EXPECT_TRUE(*Deliver(ledger, "inc-a", 1, applied));
  auto through = ledger.Register("agent-1", "inc-b");  // the agent process restarted
  ASSERT_TRUE(through.ok());
  EXPECT_EQ(*through, 0);
  EXPECT_TRUE(*Deliver(ledger, "inc-b", 1, applied));
  auto stale = Deliver(ledger, "inc-a", 2, applied);  // a stream of the old process
  EXPECT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(applied, 2);
}

TEST_F(DeliveryLedgerTest, AFailedEffectIsNotRecordedSoTheResentEventIsApplied) {
  DeliveryLedger ledger(db_.get());
  int applied = 0;
  ASSERT_TRUE(ledger.Register("agent-1", "inc-a").ok());
  auto failed = Deliver(ledger, "inc-a", 1, applied, Unavailable("database down"));
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(ledger.AppliedThrough("agent-1"), 0);
  EXPECT_TRUE(*Deliver(ledger, "inc-a", 1, applied));
  EXPECT_EQ(applied, 1);
}

TEST_F(DeliveryLedgerTest, GivesUpOnAnEventOnlyAfterItIsRefusedRepeatedlyAndNeverWhileUnavailable) {
  DeliveryLedger ledger(db_.get());
  const DeliveryStamp stamp{"agent-1", "inc-a", 7};
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(ledger.GiveUp(stamp, Unavailable("database down")));
  }
  for (int i = 1; i < DeliveryLedger::kMaxAttempts; ++i) {
    EXPECT_FALSE(ledger.GiveUp(stamp, Internal("violates foreign key constraint"))) << i;
  }
  EXPECT_TRUE(ledger.GiveUp(stamp, Internal("violates foreign key constraint")));
  // Another event starts its own count.
  EXPECT_FALSE(ledger.GiveUp({"agent-1", "inc-a", 8}, Internal("violates foreign key constraint")));
}

TEST_F(DeliveryLedgerTest, AStampedLogBatchWrittenTwiceIsStoredOnce) {
  std::vector<int64_t> trials;
  CreateRunningTrials("ledger", 1, &trials);
  if (HasFatalFailure()) return;
  DeliveryLedger ledger(db_.get());
  ASSERT_TRUE(ledger.Register("agent-1", "inc-a").ok());
  LogWriter writer(db_.get());
  std::vector<v1::LogLine> lines;
  for (int i = 0; i < 3; ++i) {
    v1::LogLine line;
    line.set_trial_id(trials[0]);
    line.set_stream("stdout");
    line.set_agent_id("agent-1");
    line.set_message("line " + std::to_string(i));
    lines.push_back(line);
  }
  const DeliveryStamp stamp{"agent-1", "inc-a", 1};
  // The master died after the commit and before its Ack: the batch comes again, to a ledger
  // whose memory says nothing (written straight to the writer here, as after a restart).
  EXPECT_TRUE(writer.Write(lines, stamp).ok());
  EXPECT_TRUE(writer.Write(lines, stamp).ok());
  DeliveryLedger restarted(db_.get());
  auto through = restarted.Register("agent-1", "inc-a");
  ASSERT_TRUE(through.ok());
  EXPECT_EQ(*through, 1);
  pqxx::connection observer(connection_string());
  pqxx::work tx(observer);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM task_logs")[0].as<int64_t>(), 3);
}

}  // namespace
}  // namespace sf::master
