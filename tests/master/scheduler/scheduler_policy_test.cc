// The scheduler's policy, one rule at a time: pending reasons, max_slots, priority preemption
// (held slots, min_run_seconds, asked once) and fair share (shares, ordering, preemption).
#include <gtest/gtest.h>

#include "master/scheduler/scheduler.h"
#include "tests/master/scheduler/scheduler_test_helpers.h"

namespace sf::master {
namespace {
using scheduler_test::Ids;
using scheduler_test::Slots;

// Trial `trial` of experiment `experiment`: allocation "t<trial>".
AllocationRequest Trial(int64_t trial, int64_t experiment, int slots, int priority = 42,
                        const std::string& pool = "default") {
  static int64_t order = 0;
  AllocationRequest r;
  r.allocation_id = "t" + std::to_string(trial);
  r.trial_id = trial;
  r.experiment_id = experiment;
  r.slots = slots;
  r.priority = priority;
  r.submit_order = ++order;
  r.resource_pool = pool;
  return r;
}

TEST(SchedulerPolicyTest, PendingReasonSaysWhatTheGangLacks) {
  Scheduler s;
  s.AddAgent("a", "gpu", Slots(2));
  s.AddAgent("b", "gpu", Slots(2));
  ASSERT_TRUE(s.Submit(Trial(1, 1, 1, 42, "gpu")).ok());
  s.Schedule();
  ASSERT_TRUE(s.Submit(Trial(2, 2, 4, 42, "gpu")).ok());
  ASSERT_TRUE(s.Submit(Trial(3, 3, 9, 42, "gpu")).ok());
  ASSERT_TRUE(s.Submit(Trial(4, 4, 1, 42, "cpu")).ok());
  EXPECT_TRUE(s.Schedule().empty());
  EXPECT_EQ(s.PendingReason("t2"), "needs 4 slots in pool gpu; largest free gang is 3 across 2 agents");
  EXPECT_EQ(s.PendingReason("t3"), "needs 9 slots in pool gpu, which has only 4 slots across 2 agents");
  EXPECT_EQ(s.PendingReason("t4"), "needs 1 slot in pool cpu, which has no agents");
  EXPECT_EQ(s.PendingReason("t1"), "");  // running
  s.Release("t1");
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"t2"}));
  EXPECT_EQ(s.PendingReason("t2"), "");
  EXPECT_EQ(s.PendingReason("t3"), "needs 9 slots in pool gpu, which has only 4 slots across 2 agents");
}

TEST(SchedulerPolicyTest, PendingReasonNamesTrialsOfHigherPriorityAhead) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  ASSERT_TRUE(s.Submit(Trial(1, 1, 2, 10)).ok());
  s.Schedule();
  ASSERT_TRUE(s.Submit(Trial(2, 2, 2, 5)).ok());
  ASSERT_TRUE(s.Submit(Trial(3, 3, 2, 5)).ok());
  ASSERT_TRUE(s.Submit(Trial(4, 4, 1, 50)).ok());
  s.Schedule();
  EXPECT_EQ(s.PendingReason("t4"),
            "behind 2 trials of higher priority; needs 1 slot in pool default; all 2 slots are busy");
  EXPECT_EQ(s.PendingReason("t2"), "needs 2 slots in pool default; all 2 slots are busy");
}

TEST(SchedulerPolicyTest, MaxSlotsCapsAnExperimentAcrossItsTrials) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(8));
  for (int64_t t = 1; t <= 4; ++t) {
    AllocationRequest r = Trial(t, 7, 2);
    r.max_slots = 5;
    ASSERT_TRUE(s.Submit(r).ok());
  }
  ASSERT_TRUE(s.Submit(Trial(5, 8, 2)).ok());
  // Two gangs of 2 fit under 5; a third would make 6. The other experiment is not held back.
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"t1", "t2", "t5"}));
  EXPECT_EQ(s.PendingReason("t3"), "experiment at max_slots 5");
  s.Release("t1");
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"t3"}));
  EXPECT_EQ(s.PendingReason("t4"), "experiment at max_slots 5");
}

TEST(SchedulerPolicyTest, PreemptedSlotsAreHeldForTheTrialTheyWereFreedFor) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  ASSERT_TRUE(s.Submit(Trial(1, 1, 1, 60)).ok());
  ASSERT_TRUE(s.Submit(Trial(2, 1, 1, 60)).ok());
  s.Schedule(0);
  ASSERT_TRUE(s.Submit(Trial(3, 2, 2, 10)).ok());
  s.Schedule(1);
  EXPECT_EQ(Ids(s.Preempt(1)), (std::vector<std::string>{"t2", "t1"}));
  EXPECT_EQ(s.PendingReason("t3"), "waiting for 2 allocations it preempted to checkpoint and stop");
  // t2 exits first and is queued again: its slot is held for t3, not backfilled by t2 itself
  // or by a newcomer of lower priority.
  s.Release("t2");
  AllocationRequest again = Trial(2, 1, 1, 60);
  again.allocation_id = "t2-again";
  ASSERT_TRUE(s.Submit(again).ok());
  ASSERT_TRUE(s.Submit(Trial(4, 3, 1, 70)).ok());
  EXPECT_TRUE(s.Schedule(2).empty());
  EXPECT_EQ(s.PendingReason("t2-again"), "preempted by trial 3; resumes when slots free");
  EXPECT_TRUE(s.Preempt(2).empty());  // t1 was asked already
  s.Release("t1");
  EXPECT_EQ(Ids(s.Schedule(3)), (std::vector<std::string>{"t3"}));
  EXPECT_EQ(s.PendingReason("t2-again"), "preempted by trial 3; resumes when slots free");
  s.Release("t3");
  EXPECT_EQ(Ids(s.Schedule(4)), (std::vector<std::string>{"t2-again", "t4"}));
}

TEST(SchedulerPolicyTest, TrialsYoungerThanMinRunAreNotPreempted) {
  Scheduler s;
  s.SetMinRunSeconds(60);
  s.AddAgent("a", "default", Slots(1));
  ASSERT_TRUE(s.Submit(Trial(1, 1, 1, 60)).ok());
  s.Schedule(100);
  ASSERT_TRUE(s.Submit(Trial(2, 2, 1, 10)).ok());
  s.Schedule(120);
  EXPECT_TRUE(s.Preempt(120).empty());
  EXPECT_EQ(Ids(s.Preempt(160)), (std::vector<std::string>{"t1"}));
}

TEST(SchedulerPolicyTest, FairSharesFollowWeightsAndDemand) {
  // 12 slots, weights 1:2:3, all wanting plenty: 2, 4, 6.
  auto shares = FairShares(12, {{1, 1, 100}, {2, 2, 100}, {3, 3, 100}});
  EXPECT_DOUBLE_EQ(shares[1], 2);
  EXPECT_DOUBLE_EQ(shares[2], 4);
  EXPECT_DOUBLE_EQ(shares[3], 6);
  // One wants only 1: the others split the rest 1:1.
  shares = FairShares(9, {{1, 1, 1}, {2, 1, 100}, {3, 1, 100}});
  EXPECT_DOUBLE_EQ(shares[1], 1);
  EXPECT_DOUBLE_EQ(shares[2], 4);
  EXPECT_DOUBLE_EQ(shares[3], 4);
  // Less demand than slots: everyone gets what they ask.
  shares = FairShares(10, {{1, 1, 3}, {2, 5, 2}});
  EXPECT_DOUBLE_EQ(shares[1], 3);
  EXPECT_DOUBLE_EQ(shares[2], 2);
}

TEST(SchedulerPolicyTest, FairShareStartsTheExperimentFurthestBelowItsShare) {
  Scheduler s;
  s.SetPoolMode("default", SchedulingMode::kFairShare);
  s.AddAgent("a", "default", Slots(6));
  // Experiment 1 (weight 1) queues 6 trials first, experiment 2 (weight 2) 6 after it; the
  // shares are 2 and 4, whatever the order of submission or priority.
  for (int64_t t = 1; t <= 6; ++t) ASSERT_TRUE(s.Submit(Trial(t, 1, 1, 5)).ok());
  for (int64_t t = 11; t <= 16; ++t) {
    AllocationRequest r = Trial(t, 2, 1, 90);
    r.weight = 2;
    ASSERT_TRUE(s.Submit(r).ok());
  }
  EXPECT_EQ(s.Schedule().size(), 6u);
  int first = 0;
  for (int64_t t = 1; t <= 6; ++t) first += s.AssignmentOf("t" + std::to_string(t)).has_value();
  EXPECT_EQ(first, 2);
  EXPECT_EQ(s.PendingReason("t3"),
            "experiment holds 2 slots, its fair share is 2 of 6; needs 1 slot in pool default; all 6 "
            "slots are busy");
}

TEST(SchedulerPolicyTest, FairSharePreemptsAnExperimentAboveItsShareWhenAnotherArrives) {
  Scheduler s;
  s.SetPoolMode("default", SchedulingMode::kFairShare);
  s.AddAgent("a", "default", Slots(4));
  for (int64_t t = 1; t <= 4; ++t) ASSERT_TRUE(s.Submit(Trial(t, 1, 1)).ok());
  EXPECT_EQ(s.Schedule(0).size(), 4u);  // alone: it may use the whole pool
  ASSERT_TRUE(s.Submit(Trial(11, 2, 1)).ok());
  ASSERT_TRUE(s.Submit(Trial(12, 2, 1)).ok());
  s.Schedule(1);
  // Shares 2 and 2: experiment 1 gives back its two newest trials, no more.
  EXPECT_EQ(Ids(s.Preempt(1)), (std::vector<std::string>{"t4", "t3"}));
  EXPECT_TRUE(s.Preempt(1).empty());
  s.Release("t4");
  s.Release("t3");
  EXPECT_EQ(Ids(s.Schedule(2)), (std::vector<std::string>{"t11", "t12"}));
}

}  // namespace
}  // namespace sf::master
