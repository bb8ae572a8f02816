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

}  // namespace
}  // namespace sf::master
