// The coordinator's side of preemption, against real PostgreSQL and no processes: the agents'
// manager with a fake agent connection that records what the master sends, and the test plays
// the agent and the trainer (TaskStateChanged, ShouldStop, ReportCheckpoint). Checks that a preempted trial is asked to
// checkpoint and stop, goes back to QUEUED (not PAUSED, no restart) saying why, resumes from
// its checkpoint, is killed only after the grace period, and is left alone before min_run.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "tests/master/core/coordinator_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;
using std::chrono::seconds;

std::string Experiment(const std::string& name, int priority) {
  return "name: " + name +
         "\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
         "searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}\n"
         "resources: {slots_per_trial: 1, priority: " + std::to_string(priority) + "}\n";
}

class PreemptionTest : public testing::CoordinatorTest {
 protected:
  void StartCluster(seconds min_run, seconds grace) {
    rm::AgentManagerOptions a;
    a.min_run = min_run;
    ClusterOptions o;
    o.preemption_grace = grace;
    CoordinatorTest::StartCluster(1, a, o);
  }
  // Waits for the agent to have been sent `n` StartTasks (the manager places on its thread).
  bool Starts(size_t n) {
    return WaitFor([&] { return agent_->Starts().size() == n; });
  }

  int64_t Create(const std::string& name, int priority) {
    auto r = cluster_->CreateExperiment(Experiment(name, priority), true, false, "test");
    EXPECT_TRUE(r.id.has_value()) << (r.errors.empty() ? "" : r.errors[0].message);
    return r.id.value_or(0);
  }
  v1::ShouldStopResponse::Action ShouldStop(const v1::StartTask& s) {
    v1::ShouldStopRequest r;
    *r.mutable_who() = Who(s);
    auto answer = cluster_->ShouldStop(r);
    EXPECT_TRUE(answer.ok()) << answer.status().ToString();
    return answer.ok() ? answer->action() : v1::ShouldStopResponse::ACTION_UNSPECIFIED;
  }
};

TEST_F(PreemptionTest, PreemptedTrialCheckpointsQueuesSayingWhyAndResumesFromTheCheckpoint) {
  StartCluster(seconds(0), seconds(3600));
  ASSERT_GT(Create("low", 80), 0);
  ASSERT_TRUE(Starts(1));
  const v1::StartTask low = agent_->Starts()[0];
  EXPECT_EQ(ShouldStop(low), v1::ShouldStopResponse::ACTION_CONTINUE);

  const int64_t high_experiment = Create("high", 10);
  ASSERT_GT(high_experiment, 0);
  // The low trial is asked to checkpoint and stop; the high one waits for it.
  EXPECT_TRUE(WaitFor([&] { return ShouldStop(low) == v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP; }));
  ASSERT_EQ(agent_->Starts().size(), 1u);
  EXPECT_FALSE(agent_->Killed(low.task_id()));
  const int64_t high_trial = low.trial_id() + 1;
  EXPECT_TRUE(WaitFor([&] {
    return cluster_->PendingReason(high_trial) == "waiting for 1 allocation it preempted to checkpoint and stop";
  })) << cluster_->PendingReason(high_trial);

  // It checkpoints at batch 30 and exits 0: back to QUEUED, not a restart, saying why.
  v1::ReportCheckpointRequest ck;
  *ck.mutable_who() = Who(low);
  ck.mutable_checkpoint()->set_uuid("0d5e3f8e-5f1c-4c1e-9a55-000000000030");
  ck.mutable_checkpoint()->set_path(dir_.path() + "/ck-30");
  ck.mutable_checkpoint()->set_batches(30);
  ASSERT_TRUE(cluster_->ReportCheckpoint(ck).ok());
  Exited(low, 0);
  EXPECT_EQ(TrialRow(low.trial_id()).state(), v1::TRIAL_STATE_QUEUED);
  EXPECT_EQ(TrialRow(low.trial_id()).restarts(), 0);
  EXPECT_TRUE(WaitFor([&] {
    return cluster_->PendingReason(low.trial_id()) ==
           "preempted by trial " + std::to_string(high_trial) + "; resumes when slots free";
  })) << cluster_->PendingReason(low.trial_id());
  // The freed slot went to the high trial, not back to the low one.
  ASSERT_TRUE(Starts(2));
  const v1::StartTask high = agent_->Starts()[1];
  EXPECT_EQ(high.trial_id(), high_trial);
  EXPECT_EQ(cluster_->PendingReason(high_trial), "");

  // When the high trial is gone, the low one resumes from its checkpoint, in a new allocation.
  ASSERT_TRUE(cluster_->KillExperiment(high_experiment).ok());
  Exited(high, 143);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts(low.trial_id()).size() == 2u; }));
  const v1::StartTask resumed = agent_->Starts(low.trial_id())[1];
  EXPECT_EQ(resumed.restore_checkpoint(), dir_.path() + "/ck-30");
  EXPECT_EQ(resumed.restart(), 0);
  EXPECT_NE(resumed.task_id(), low.task_id());
  EXPECT_TRUE(WaitFor([&] { return TrialRow(low.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  EXPECT_EQ(ShouldStop(resumed), v1::ShouldStopResponse::ACTION_CONTINUE);
}

// After a master restart the preempted trial still waits saying for whom (the reason is
// persisted with the trial), and the preemption ends, in the database too, when it runs again.
TEST_F(PreemptionTest, APreemptedTrialsReasonSurvivesAMasterRestart) {
  StartCluster(seconds(0), seconds(3600));
  ASSERT_GT(Create("low", 80), 0);
  ASSERT_TRUE(Starts(1));
  const v1::StartTask low = agent_->Starts()[0];
  const int64_t high_experiment = Create("high", 10);
  ASSERT_GT(high_experiment, 0);
  ASSERT_TRUE(WaitFor([&] { return ShouldStop(low) == v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP; }));
  v1::ReportCheckpointRequest ck;
  *ck.mutable_who() = Who(low);
  ck.mutable_checkpoint()->set_uuid("0d5e3f8e-5f1c-4c1e-9a55-000000000040");
  ck.mutable_checkpoint()->set_path(dir_.path() + "/ck-40");
  ck.mutable_checkpoint()->set_batches(40);
  ASSERT_TRUE(cluster_->ReportCheckpoint(ck).ok());
  Exited(low, 0);
  ASSERT_TRUE(Starts(2));
  const v1::StartTask high = agent_->Starts()[1];
  const std::string waiting = "preempted by trial " + std::to_string(high.trial_id()) + "; resumes when slots free";
  ASSERT_TRUE(WaitFor([&] { return cluster_->PendingReason(low.trial_id()) == waiting; }))
      << cluster_->PendingReason(low.trial_id());

  // The master restarts; the agent comes back with the high trial still running.
  cluster_->Stop();
  cluster_.reset();
  agents_.reset();
  agent_ = std::make_shared<RecordingConnection>();
  CoordinatorTest::StartCluster(1, rm::AgentManagerOptions{}, ClusterOptions{}, {high});
  if (HasFatalFailure()) return;
  EXPECT_TRUE(WaitFor([&] { return cluster_->PendingReason(low.trial_id()) == waiting; }))
      << cluster_->PendingReason(low.trial_id());
  EXPECT_EQ(TrialRow(low.trial_id()).state(), v1::TRIAL_STATE_QUEUED);

  // When the high trial ends, the low one runs again: no longer waiting for anyone.
  ASSERT_TRUE(cluster_->KillExperiment(high_experiment).ok());
  Exited(high, 143);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts(low.trial_id()).size() == 1u; }));
  EXPECT_EQ(agent_->Starts(low.trial_id())[0].restore_checkpoint(), dir_.path() + "/ck-40");
  EXPECT_TRUE(WaitFor([&] { return TrialRow(low.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  int64_t preempted_by = -1;
  ASSERT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                   preempted_by = tx.exec_params1("SELECT preempted_by FROM trials WHERE id = $1", low.trial_id())[0]
                                      .as<int64_t>();
                   return Status::Ok();
                 }).ok());
  EXPECT_EQ(preempted_by, 0);
}

TEST_F(PreemptionTest, TrialIgnoringThePreemptionIsKilledAfterTheGracePeriodAndQueuedAgain) {
  StartCluster(seconds(0), seconds(1));
  ASSERT_GT(Create("low", 80), 0);
  ASSERT_TRUE(Starts(1));
  const v1::StartTask low = agent_->Starts()[0];
  ASSERT_GT(Create("high", 10), 0);
  // The trainer never asks ShouldStop: after the grace period the master kills its task.
  bool killed = false;
  for (int i = 0; i < 600 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    killed = agent_->Killed(low.task_id());
  }
  ASSERT_TRUE(killed) << "no KillTask within a minute of a 1 s grace period";
  Exited(low, 143);
  // Killed for a preemption, not failed: queued again, no restart, no error.
  const v1::Trial row = TrialRow(low.trial_id());
  EXPECT_EQ(row.state(), v1::TRIAL_STATE_QUEUED);
  EXPECT_EQ(row.restarts(), 0);
  EXPECT_EQ(row.error(), "");
  ASSERT_TRUE(Starts(2));
  EXPECT_EQ(agent_->Starts()[1].trial_id(), low.trial_id() + 1);
}

TEST_F(PreemptionTest, TrialYoungerThanMinRunIsNotPreempted) {
  StartCluster(seconds(3600), seconds(1));
  ASSERT_GT(Create("low", 80), 0);
  ASSERT_TRUE(Starts(1));
  const v1::StartTask low = agent_->Starts()[0];
  ASSERT_GT(Create("high", 10), 0);
  // Past a few housekeeping passes (every 0.5 s): still not asked.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(ShouldStop(low), v1::ShouldStopResponse::ACTION_CONTINUE);
  EXPECT_EQ(cluster_->PendingReason(low.trial_id() + 1), "needs 1 slot in pool default; its only slot is busy");
}

}  // namespace
}  // namespace sf::master
