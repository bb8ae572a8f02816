// The scheduler's promises, one at a time: gang allocation, packing, order, backfilling,
// release, agent loss, adoption after a restart, preemption. (Policy: scheduler_policy_test.cc.)
#include "master/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/master/scheduler/scheduler_test_helpers.h"

namespace sf::master {
namespace {
using scheduler_test::Ids;
using scheduler_test::Slots;

AllocationRequest Req(const std::string& id, int slots, int priority = 42, int64_t order = 0,
                      const std::string& pool = "default") {
  AllocationRequest r;
  r.allocation_id = id;
  r.slots = slots;
  r.priority = priority;
  r.submit_order = order;
  r.resource_pool = pool;
  return r;
}

std::set<std::string> AgentsOf(const Assignment& a) {
  std::set<std::string> out;
  for (const SlotRef& s : a.slots) out.insert(s.agent_id);
  return out;
}


TEST(SchedulerTest, GangAllocationIsAllOrNothing) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  s.AddAgent("b", "default", Slots(1));
  ASSERT_TRUE(s.Submit(Req("big", 4)).ok());
  EXPECT_TRUE(s.Schedule().empty());  // 3 slots exist; 4 are needed: nothing is taken
  EXPECT_EQ(s.Stats()["default"].used_slots, 0);
  EXPECT_EQ(s.Queue().size(), 1u);
  s.AddAgent("c", "default", Slots(1));
  auto as = s.Schedule();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].slots.size(), 4u);
  EXPECT_EQ(s.Stats()["default"].used_slots, 4);
}

TEST(SchedulerTest, PacksOnTheFewestAgentsWithBestFit) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(8));
  s.AddAgent("b", "default", Slots(2));
  s.AddAgent("c", "default", Slots(4));
  ASSERT_TRUE(s.Submit(Req("two", 2, 42, 1)).ok());
  ASSERT_TRUE(s.Submit(Req("four", 4, 42, 2)).ok());
  ASSERT_TRUE(s.Submit(Req("six", 6, 42, 3)).ok());
  auto as = s.Schedule();
  ASSERT_EQ(as.size(), 3u);
  // Best fit: "two" on b (exactly 2 free), "four" on c, "six" on a.
  EXPECT_EQ(AgentsOf(as[0]), (std::set<std::string>{"b"}));
  EXPECT_EQ(AgentsOf(as[1]), (std::set<std::string>{"c"}));
  EXPECT_EQ(AgentsOf(as[2]), (std::set<std::string>{"a"}));
}

TEST(SchedulerTest, SpansAgentsLargestFirstWhenNoSingleAgentFits) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(3));
  s.AddAgent("b", "default", Slots(1));
  s.AddAgent("c", "default", Slots(4));
  s.AddAgent("d", "default", Slots(2));
  ASSERT_TRUE(s.Submit(Req("x", 6)).ok());
  auto as = s.Schedule();
  ASSERT_EQ(as.size(), 1u);
  // Two agents suffice: c (4) and then the best fit for the remaining 2, d.
  EXPECT_EQ(AgentsOf(as[0]), (std::set<std::string>{"c", "d"}));
  // Ranks: the slots of one agent are contiguous, largest agent first.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(as[0].slots[i].agent_id, "c");
  for (int i = 4; i < 6; ++i) EXPECT_EQ(as[0].slots[i].agent_id, "d");
  EXPECT_EQ(as[0].slots[0].slot_id, "s0");
}

TEST(SchedulerTest, OrdersByPriorityThenSubmission) {
  Scheduler s;
  ASSERT_TRUE(s.Submit(Req("late-low", 1, 50, 1)).ok());
  ASSERT_TRUE(s.Submit(Req("high", 1, 10, 3)).ok());
  ASSERT_TRUE(s.Submit(Req("early-low", 1, 50, 0)).ok());
  std::vector<std::string> queue;
  for (const auto& r : s.Queue()) queue.push_back(r.allocation_id);
  EXPECT_EQ(queue, (std::vector<std::string>{"high", "early-low", "late-low"}));
  s.AddAgent("a", "default", Slots(2));
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"high", "early-low"}));
  ASSERT_EQ(s.Queue().size(), 1u);
  EXPECT_EQ(s.Queue()[0].allocation_id, "late-low");
}

TEST(SchedulerTest, BackfillsSmallerRequestsBehindOneThatDoesNotFit) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(4));
  ASSERT_TRUE(s.Submit(Req("running", 2, 42, 0)).ok());
  s.Schedule();
  ASSERT_TRUE(s.Submit(Req("urgent-big", 4, 1, 1)).ok());
  ASSERT_TRUE(s.Submit(Req("small", 2, 60, 2)).ok());
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"small"}));
  ASSERT_EQ(s.Queue().size(), 1u);
  EXPECT_EQ(s.Queue()[0].allocation_id, "urgent-big");
}

TEST(SchedulerTest, RequestLargerThanThePoolStaysQueued) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  ASSERT_TRUE(s.Submit(Req("huge", 3)).ok());
  ASSERT_TRUE(s.Submit(Req("other-pool", 1, 42, 1, "gpu")).ok());
  EXPECT_TRUE(s.Schedule().empty());
  EXPECT_EQ(s.Queue().size(), 2u);
  s.AddAgent("g", "gpu", Slots(1));
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"other-pool"}));
}

TEST(SchedulerTest, ReleaseFreesSlotsAndDropsQueuedRequests) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  ASSERT_TRUE(s.Submit(Req("one", 2, 42, 0)).ok());
  ASSERT_TRUE(s.Submit(Req("two", 2, 42, 1)).ok());
  ASSERT_TRUE(s.Submit(Req("three", 2, 42, 2)).ok());
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"one"}));
  EXPECT_TRUE(s.Release("two"));  // queued
  EXPECT_TRUE(s.Release("one"));  // running
  EXPECT_FALSE(s.Release("one"));
  EXPECT_FALSE(s.AssignmentOf("one").has_value());
  EXPECT_EQ(s.Stats()["default"].used_slots, 0);
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"three"}));
}

TEST(SchedulerTest, RejectsBadAndDuplicateRequests) {
  Scheduler s;
  EXPECT_EQ(s.Submit(Req("zero", 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Req("prio", 1, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Req("", 1)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Submit(Req("x", 1)).ok());
  EXPECT_EQ(s.Submit(Req("x", 1)).code(), StatusCode::kAlreadyExists);
}

TEST(SchedulerTest, AgentRemovalReportsLostAllocationsAndFreesTheirOtherSlots) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  s.AddAgent("b", "default", Slots(2));
  ASSERT_TRUE(s.Submit(Req("span", 3, 42, 0)).ok());
  ASSERT_TRUE(s.Submit(Req("solo", 1, 42, 1)).ok());
  auto as = s.Schedule();
  ASSERT_EQ(as.size(), 2u);
  const std::string solo_agent = as[1].slots[0].agent_id;
  const std::string other = solo_agent == "a" ? "b" : "a";
  EXPECT_EQ(s.RemoveAgent(other), (std::vector<std::string>{"span"}));
  EXPECT_FALSE(s.AssignmentOf("span").has_value());
  EXPECT_TRUE(s.AssignmentOf("solo").has_value());
  EXPECT_EQ(s.Stats()["default"].used_slots, 1);
  EXPECT_EQ(s.Stats()["default"].total_slots, 2);
  EXPECT_EQ(s.Stats()["default"].agents, 1);
  EXPECT_TRUE(s.RemoveAgent("nobody").empty());
}

TEST(SchedulerTest, ReAddingAnAgentKeepsAllocationsOnSlotsThatStillExist) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(4));
  ASSERT_TRUE(s.Submit(Req("low", 1, 42, 0)).ok());
  ASSERT_TRUE(s.Submit(Req("high", 2, 42, 1)).ok());
  s.Schedule();  // low -> s0, high -> s1, s2
  EXPECT_EQ(s.AddAgent("a", "default", {"s0", "s1", "s3"}), (std::vector<std::string>{"high"}));
  EXPECT_TRUE(s.AssignmentOf("low").has_value());
  EXPECT_EQ(s.Stats()["default"].used_slots, 1);
  EXPECT_EQ(s.AddAgent("a", "other", {"s0"}), (std::vector<std::string>{"low"}));
}

TEST(SchedulerTest, AdoptRestoresRunningAllocationsAllOrNothing) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  s.AddAgent("g", "gpu", Slots(2));
  EXPECT_TRUE(s.Adopt(Req("r1", 2), {{"a", "s0"}, {"a", "s1"}}).ok());
  EXPECT_EQ(s.AssignmentOf("r1")->slots, (std::vector<SlotRef>{{"a", "s0"}, {"a", "s1"}}));
  EXPECT_EQ(s.Adopt(Req("r2", 1), {{"a", "s0"}}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.Adopt(Req("r3", 1), {{"zz", "s0"}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(s.Adopt(Req("r4", 1), {{"g", "s0"}}).code(), StatusCode::kInvalidArgument);  // pool
  EXPECT_EQ(s.Adopt(Req("r5", 2, 42, 0, "gpu"), {{"g", "s0"}, {"g", "s0"}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Adopt(Req("r6", 2, 42, 0, "gpu"), {{"g", "s0"}}).code(),
            StatusCode::kInvalidArgument);    // count
  EXPECT_EQ(s.Stats()["gpu"].used_slots, 0);  // failed adoptions took nothing
  // A request queued before the restart is adopted rather than scheduled twice.
  ASSERT_TRUE(s.Submit(Req("q", 1, 42, 0, "gpu")).ok());
  EXPECT_TRUE(s.Adopt(Req("q", 1, 42, 0, "gpu"), {{"g", "s1"}}).ok());
  EXPECT_TRUE(s.Queue().empty());
  EXPECT_TRUE(s.Schedule().empty());
}

TEST(SchedulerTest, DisabledSlotsGetNoNewAllocations) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(2));
  ASSERT_TRUE(s.SetSlotEnabled("a", "s0", false).ok());
  EXPECT_EQ(s.SetSlotEnabled("a", "s9", false).code(), StatusCode::kNotFound);
  ASSERT_TRUE(s.Submit(Req("two", 2)).ok());
  ASSERT_TRUE(s.Submit(Req("one", 1, 42, 1)).ok());
  auto as = s.Schedule();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].allocation_id, "one");
  EXPECT_EQ(as[0].slots[0].slot_id, "s1");
  EXPECT_EQ(s.Stats()["default"].total_slots, 1);
}

TEST(SchedulerTest, PreemptionNamesLowerPriorityAllocationsToStop) {
  Scheduler s;
  s.AddAgent("a", "default", Slots(4));
  ASSERT_TRUE(s.Submit(Req("old-low", 2, 50, 0)).ok());
  ASSERT_TRUE(s.Submit(Req("new-low", 1, 50, 1)).ok());
  ASSERT_TRUE(s.Submit(Req("mid", 1, 30, 2)).ok());
  s.Schedule();
  EXPECT_TRUE(s.Preempt(0).empty());  // nothing waits
  ASSERT_TRUE(s.Submit(Req("urgent", 2, 10, 3)).ok());
  // Lowest priority first, newest first among equals: new-low frees 1; old-low is needed too.
  const std::vector<std::string> victims = Ids(s.Preempt(0));
  EXPECT_EQ(victims, (std::vector<std::string>{"new-low", "old-low"}));
  EXPECT_TRUE(s.Preempting("old-low"));
  EXPECT_FALSE(s.Preempting("mid"));
  ASSERT_TRUE(s.Submit(Req("same", 4, 50, 4)).ok());
  // Allocations already asked are not named again, and a request of priority 50 preempts
  // nobody of priority 50.
  EXPECT_TRUE(s.Preempt(0).empty());
  for (const auto& v : victims) s.Release(v);
  EXPECT_EQ(Ids(s.Schedule()), (std::vector<std::string>{"urgent"}));
}

}  // namespace
}  // namespace sf::master
