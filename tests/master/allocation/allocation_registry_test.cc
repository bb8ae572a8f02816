// The allocation registry: what TrialLink calls are checked against without the coordinator's
// lock (master/allocation/allocation_registry.h) — Admit's identity check, and Undisturbed, the
// lock-free "continue" ShouldStop answers with.
#include "master/allocation/allocation_registry.h"

#include <gtest/gtest.h>

#include "master/allocation/task_ids.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

v1::TrialIdentity Who(int64_t trial, const std::string& task) {
  v1::TrialIdentity who;
  who.set_trial_id(trial);
  who.set_task_id(task);
  return who;
}

TEST(AllocationRegistry, AdmitsOnlyRanksOfTheTrialsCurrentAllocation) {
  AllocationRegistry r;
  EXPECT_EQ(r.Admit(Who(7, "")).status().code(), StatusCode::kNotFound);
  r.Track(7, 0);
  r.SetAllocation(7, AllocationId(7, 0, 1));
  // Not yet said to run by its manager: only the coordinator may act on a call from it.
  auto early = r.Admit(Who(7, TaskId(AllocationId(7, 0, 1), 0)));
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(*early, AllocationRegistry::Admission::kAskCoordinator);
  r.SetRunning(7, true);
  auto admitted = r.Admit(Who(7, TaskId(AllocationId(7, 0, 1), 1)));
  ASSERT_TRUE(admitted.ok());
  EXPECT_EQ(*admitted, AllocationRegistry::Admission::kAdmitted);
  // A rank of the trial's earlier allocation (an orphan) is refused and named.
  auto orphan = r.Admit(Who(7, TaskId(AllocationId(7, 0, 0), 0)));
  EXPECT_EQ(orphan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(orphan.status().message().find("t7-r0-a1"), std::string::npos) << orphan.status().message();
}

TEST(AllocationRegistry, UndisturbedOnlyForARunningRankWithNoStopAsked) {
  AllocationRegistry r;
  const std::string current = AllocationId(3, 0, 1);
  const v1::TrialIdentity rank0 = Who(3, TaskId(current, 0));
  EXPECT_FALSE(r.Undisturbed(rank0));  // an unknown trial
  r.Track(3, 0);
  r.SetAllocation(3, current);
  EXPECT_FALSE(r.Undisturbed(rank0));  // its manager has not said it runs
  r.SetRunning(3, true);
  EXPECT_TRUE(r.Undisturbed(rank0));
  EXPECT_FALSE(r.Undisturbed(Who(3, "")));                             // no task: an unmanaged script
  EXPECT_FALSE(r.Undisturbed(Who(3, TaskId(AllocationId(3, 0, 0), 0))));  // an earlier allocation
  for (const char* stop : {"pause", "kill", "preempt"}) {
    r.SetStop(3, stop);
    EXPECT_FALSE(r.Undisturbed(rank0)) << stop;
  }
  r.SetStop(3, "");
  EXPECT_TRUE(r.Undisturbed(rank0));
  r.SetRunning(3, false);  // it exited
  EXPECT_FALSE(r.Undisturbed(rank0));
  r.SetRunning(3, true);
  r.Forget(3);
  EXPECT_FALSE(r.Undisturbed(rank0));
}

}  // namespace
}  // namespace sf::master
