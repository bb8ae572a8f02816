// The coordinator across a master restart, against real PostgreSQL and no processes (the test
// plays the agent and the trainer): what the searcher decided before the restart still holds
// for the trials whose ranks outlive it.
#include <gtest/gtest.h>

#include <string>

#include "tests/master/core/coordinator_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

class CoordinatorRestartTest : public testing::CoordinatorTest {
 protected:
  // A master restart: the coordinator and the agents' manager stop and start again on the same
  // database; the agent comes back reporting `running`.
  void Restart(const std::vector<v1::StartTask>& running) {
    cluster_->Stop();
    cluster_.reset();
    agents_.reset();
    StartCluster(/*slots=*/1, {}, {}, running);
  }
};

// Found by bench/sim/run.sh with KILL_MASTER_EVERY: a trial whose operation was complete (the
// searcher closed it) and whose trainer exited after the restart was queued again, for an
// operation the searcher would never give, and its experiment never ended.
TEST_F(CoordinatorRestartTest, ATrialTheSearcherClosedCompletesWhenItsRankExitsAfterTheRestart) {
  StartCluster(/*slots=*/1);
  auto created = cluster_->CreateExperiment(
      "name: closed\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}\n",
      true, false, "test");
  ASSERT_TRUE(created.id.has_value());
  ASSERT_TRUE(WaitFor([&] { return !agent_->Starts().empty(); }));
  const v1::StartTask task = agent_->Starts()[0];
  ASSERT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  v1::CompleteOperationRequest done;
  *done.mutable_who() = Who(task);
  done.mutable_op()->set_target_length(100);
  done.mutable_op()->set_unit("batches");
  done.set_searcher_metric(0.5);
  ASSERT_TRUE(cluster_->CompleteOperation(done).ok());  // the single searcher closes the trial

  Restart({task});
  Exited(task, 0);
  ASSERT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_COMPLETED; }))
      << "state " << v1::TrialState_Name(TrialRow(task.trial_id()).state());
  auto e = store_->GetExperiment(*created.id);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->state(), v1::EXPERIMENT_STATE_COMPLETED);
  EXPECT_EQ(agent_->Starts(task.trial_id()).size(), 1u) << "no second run";
}

// Found by bench/sim/run.sh with KILL_MASTER_EVERY=3: the trial's completed length was stored
// before the searcher's snapshot, so a master that died between the two answered the trainer's
// retry "already have it", and the searcher, restored without the completion, never ended the
// trial (its trainer waited in GetNextOperation until the run's end). The snapshot's write is
// refused here as the death between the two.
TEST_F(CoordinatorRestartTest, ACompletionTheSearcherNeverStoredIsHeardWhenTheTrainerRetriesAfterTheRestart) {
  StartCluster(/*slots=*/1);
  auto created = cluster_->CreateExperiment(
      "name: died\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}\n",
      true, false, "test");
  ASSERT_TRUE(created.id.has_value());
  ASSERT_TRUE(WaitFor([&] { return !agent_->Starts().empty(); }));
  const v1::StartTask task = agent_->Starts()[0];
  ASSERT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  auto sql = [&](const std::string& statement) {
    ASSERT_TRUE(db_->Transact("test", [&](pqxx::work& tx) {
                     tx.exec(statement);
                     return Status::Ok();
                   }).ok())
        << statement;
  };
  auto completed_length = [&] {
    int64_t n = -1;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     n = tx.exec_params1("SELECT completed_length FROM trials WHERE id = $1", task.trial_id())[0]
                             .as<int64_t>();
                     return Status::Ok();
                   }).ok());
    return n;
  };
  sql("CREATE FUNCTION died_here() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN RAISE EXCEPTION 'the master died before this commit'; END $$");
  sql("CREATE TRIGGER died_here BEFORE INSERT OR UPDATE ON searcher_snapshots "
      "FOR EACH ROW EXECUTE FUNCTION died_here()");
  v1::CompleteOperationRequest done;
  *done.mutable_who() = Who(task);
  done.mutable_op()->set_target_length(100);
  done.mutable_op()->set_unit("batches");
  done.set_searcher_metric(0.5);
  ASSERT_TRUE(cluster_->CompleteOperation(done).ok());
  cluster_->Stop();  // its last snapshot fails too: nothing past the refused commit is stored
  cluster_.reset();
  agents_.reset();
  sql("DROP TRIGGER died_here ON searcher_snapshots");
  EXPECT_EQ(completed_length(), 0) << "the completion is stored with the searcher's state, or not at all";

  StartCluster(/*slots=*/1, {}, {}, {task});
  ASSERT_TRUE(cluster_->CompleteOperation(done).ok());  // the trainer's retry
  Exited(task, 0);
  ASSERT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_COMPLETED; }))
      << "state " << v1::TrialState_Name(TrialRow(task.trial_id()).state());
  auto e = store_->GetExperiment(*created.id);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->state(), v1::EXPERIMENT_STATE_COMPLETED);
  EXPECT_EQ(completed_length(), 100);
}

// Found the same way: a trial's close made the searcher create the next trial, the master died
// after the next trial's row and before the searcher's snapshot, and the searcher, restored
// without the close, never heard it again: the next trial ran for a request it did not know, and
// the experiment never ended. The restarted master replays completed trials' closes; the request
// they create again is the trial created before, not a second row.
TEST_F(CoordinatorRestartTest, ACloseTheSearcherNeverStoredIsReplayedAndTheTrialItCreatedIsTheOneItGets) {
  StartCluster(/*slots=*/1);
  auto created = cluster_->CreateExperiment(
      "name: next\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "hyperparameters: {dropout: {type: double, minval: 0.0, maxval: 0.3}}\n"
      "searcher: {name: random, metric: validation_loss, max_length: {batches: 100}, max_trials: 2,"
      " max_concurrent_trials: 1, seed: 7}\n",
      true, false, "test");
  ASSERT_TRUE(created.id.has_value());
  ASSERT_TRUE(WaitFor([&] { return !agent_->Starts().empty(); }));
  const v1::StartTask first = agent_->Starts()[0];
  ASSERT_TRUE(WaitFor([&] { return TrialRow(first.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  auto sql = [&](const std::string& statement) {
    ASSERT_TRUE(db_->Transact("test", [&](pqxx::work& tx) {
                     tx.exec(statement);
                     return Status::Ok();
                   }).ok())
        << statement;
  };
  auto trials = [&] {
    int n = -1;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     n = tx.exec_params1("SELECT count(*) FROM trials WHERE experiment_id = $1", *created.id)[0].as<int>();
                     return Status::Ok();
                   }).ok());
    return n;
  };
  auto complete = [&](const v1::StartTask& task) {
    v1::CompleteOperationRequest done;
    *done.mutable_who() = Who(task);
    done.mutable_op()->set_target_length(100);
    done.mutable_op()->set_unit("batches");
    done.set_searcher_metric(0.5);
    ASSERT_TRUE(cluster_->CompleteOperation(done).ok());
  };
  complete(first);  // stored: the searcher closes the trial when its rank exits
  sql("CREATE FUNCTION died_here() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN RAISE EXCEPTION 'the master died before this commit'; END $$");
  sql("CREATE TRIGGER died_here BEFORE INSERT OR UPDATE ON searcher_snapshots "
      "FOR EACH ROW EXECUTE FUNCTION died_here()");
  Exited(first, 0);  // closed, the next trial created; the snapshot never stored
  ASSERT_TRUE(WaitFor([&] { return trials() == 2; })) << "the next trial's row";
  cluster_->Stop();
  cluster_.reset();
  agents_.reset();
  sql("DROP TRIGGER died_here ON searcher_snapshots");

  StartCluster(/*slots=*/1);
  ASSERT_TRUE(WaitFor([&] {
    for (const v1::StartTask& s : agent_->Starts()) {
      if (s.trial_id() != first.trial_id()) return true;
    }
    return false;
  })) << "the second trial never started";
  v1::StartTask second;
  for (const v1::StartTask& s : agent_->Starts()) {
    if (s.trial_id() != first.trial_id()) second = s;
  }
  ASSERT_TRUE(WaitFor([&] { return TrialRow(second.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  complete(second);
  Exited(second, 0);
  ASSERT_TRUE(WaitFor([&] {
    auto e = store_->GetExperiment(*created.id);
    return e.ok() && e->has_value() && (*e)->state() == v1::EXPERIMENT_STATE_COMPLETED;
  })) << "the experiment never ended";
  EXPECT_EQ(trials(), 2) << "no third row";
}

}  // namespace
}  // namespace sf::master
