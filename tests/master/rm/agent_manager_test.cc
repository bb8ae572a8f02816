// The agents' resource manager (master/rm/agents/agent_manager.h) on its own: what it sends
// each agent (StartTask with slot and local rank, KillTask), and the events it gives the
// coordinator — placement, pending reasons, preemption, a failing rank stopping its gang,
// adoption after a master restart, lost agents and ranks, refusals — in order, including events
// caused while events are being delivered. The agents here are AgentLink connections that keep
// what they are sent; the e2e suites run the same manager with real agents.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "master/allocation/task_ids.h"
#include "master/rm/agents/agent_manager.h"

namespace sf::master::rm {
namespace {
namespace v1 = steadfast::v1;
using Kind = AllocationEvent::Kind;

class Connection final : public AgentConnection {
 public:
  void Send(const v1::MasterMessage& message) override { sent.push_back(message); }
  std::vector<v1::MasterMessage> sent;
  std::vector<v1::StartTask> Started() const {
    std::vector<v1::StartTask> out;
    for (const auto& m : sent) {
      if (m.has_start_task()) out.push_back(m.start_task());
    }
    return out;
  }
  std::vector<std::string> Killed() const {
    std::vector<std::string> out;
    for (const auto& m : sent) {
      if (m.has_kill_task()) out.push_back(m.kill_task().task_id());
    }
    return out;
  }
};

struct Harness {
  explicit Harness(AgentManagerOptions options = {}) : manager(options) {
    manager.SetEventSink([this](const AllocationEvent& e) { events.push_back(e); });
  }
  std::shared_ptr<Connection> Agent(const std::string& id, int slots, const std::string& pool = "default",
                                    std::vector<std::pair<std::string, int>> running = {}, int64_t trial = 0) {
    v1::RegisterAgent reg;
    reg.set_agent_id(id);
    reg.set_hostname(id + ".example");
    reg.set_resource_pool(pool);
    reg.set_incarnation("i-" + id);
    for (int s = 0; s < slots; ++s) {
      v1::Slot* slot = reg.add_slots();
      slot->set_id("cpu" + std::to_string(s));
      slot->set_type(v1::SLOT_TYPE_CPU);
    }
    for (const auto& [task, slot] : running) {
      v1::RunningTask* t = reg.add_running_tasks();
      t->set_task_id(task);
      t->set_trial_id(trial);
      t->add_slot_ids("cpu" + std::to_string(slot));
    }
    auto conn = std::make_shared<Connection>();
    manager.Connected(reg, conn);
    return conn;
  }
  void Exit(const std::string& agent, const std::string& task, int64_t trial, int code, const std::string& message = "") {
    v1::TaskStateChange change;
    change.set_task_id(task);
    change.set_trial_id(trial);
    change.set_state(v1::TaskStateChange::STATE_EXITED);
    change.set_exit_code(code);
    change.set_message(message);
    manager.TaskStateChanged(agent, change);
  }
  std::vector<Kind> Kinds() const {
    std::vector<Kind> out;
    for (const auto& e : events) out.push_back(e.kind);
    return out;
  }
  AgentManager manager;
  std::vector<AllocationEvent> events;
};

GangLaunch Gang(int64_t trial, int world, int priority = 42) {
  GangLaunch g;
  g.allocation_id = AllocationId(trial, 0, 1);
  g.trial_id = trial;
  g.experiment_id = 1;
  g.pool = "default";
  g.world_size = world;
  g.priority = priority;
  g.submit_order = trial;
  for (int rank = 0; rank < world; ++rank) {
    v1::StartTask s;
    s.set_task_id(TaskId(g.allocation_id, rank));
    s.set_trial_id(trial);
    s.set_rank(rank);
    s.set_world_size(world);
    s.set_task_token("token-" + std::to_string(rank));
    g.ranks.push_back(s);
  }
  return g;
}

TEST(AgentManager, PlacesAGangAndStartsEachRankWithItsSlotLocalRankAndToken) {
  Harness h;
  auto a1 = h.Agent("a1", 2);
  auto a2 = h.Agent("a2", 1);
  h.manager.Submit(Gang(5, 3));
  EXPECT_TRUE(h.events.empty()) << "nothing is placed before a scheduling pass";
  h.manager.Schedule(0);
  ASSERT_EQ(h.Kinds(), std::vector<Kind>{Kind::kRunning});
  const AllocationEvent& running = h.events[0];
  EXPECT_EQ(running.allocation_id, "t5-r0-a1");
  ASSERT_EQ(running.ranks.size(), 3u);
  // Spans the agents largest first: ranks 0 and 1 on a1, rank 2 on a2.
  EXPECT_EQ(running.ranks[0].host, "a1");
  EXPECT_EQ(running.ranks[1].host, "a1");
  EXPECT_EQ(running.ranks[2].host, "a2");
  auto on_a1 = a1->Started();
  auto on_a2 = a2->Started();
  ASSERT_EQ(on_a1.size(), 2u);
  ASSERT_EQ(on_a2.size(), 1u);
  EXPECT_EQ(on_a1[0].rank(), 0);
  EXPECT_EQ(on_a1[0].local_rank(), 0);
  EXPECT_EQ(on_a1[1].local_rank(), 1);
  EXPECT_EQ(on_a1[1].local_size(), 2);
  EXPECT_EQ(on_a2[0].rank(), 2);
  EXPECT_EQ(on_a2[0].local_rank(), 0);
  EXPECT_EQ(on_a2[0].local_size(), 1);
  EXPECT_EQ(on_a2[0].task_token(), "token-2");
  ASSERT_EQ(on_a1[1].slot_ids_size(), 1);
  EXPECT_EQ(on_a1[1].slot_ids(0), running.ranks[1].slot);
  EXPECT_EQ(h.manager.Size().used_slots, 3);
  // Busy slots name their trial.
  int busy = 0;
  for (const auto& agent : h.manager.Agents()) {
    for (const auto& slot : agent.slots()) busy += slot.trial_id() == 5;
  }
  EXPECT_EQ(busy, 3);
}

// A rank may start and call the master at once (a fast trainer, the cluster simulator's): its
// StartTask goes out only after the coordinator took the Running event, so the trial is running
// and its rendezvous open by then. A gang killed while that event was delivered is started and
// killed, in that order.
TEST(AgentManager, RanksStartOnlyAfterTheCoordinatorTookTheRunningEvent) {
  AgentManager manager;
  std::shared_ptr<Connection> a1;
  std::vector<size_t> starts_seen_by_sink;
  bool kill_in_sink = false;
  manager.SetEventSink([&](const AllocationEvent& e) {
    if (e.kind != Kind::kRunning) return;
    starts_seen_by_sink.push_back(a1->Started().size());
    if (kill_in_sink) manager.Kill(e.allocation_id);
  });
  v1::RegisterAgent reg;
  reg.set_agent_id("a1");
  reg.set_incarnation("i-a1");
  for (int s = 0; s < 4; ++s) {
    v1::Slot* slot = reg.add_slots();
    slot->set_id("cpu" + std::to_string(s));
    slot->set_type(v1::SLOT_TYPE_CPU);
  }
  a1 = std::make_shared<Connection>();
  manager.Connected(reg, a1);
  manager.Submit(Gang(5, 2));
  manager.Schedule(0);
  ASSERT_EQ(starts_seen_by_sink, std::vector<size_t>{0}) << "a rank was started before its trial ran";
  EXPECT_EQ(a1->Started().size(), 2u);

  kill_in_sink = true;
  manager.Submit(Gang(6, 2));
  manager.Schedule(1);
  ASSERT_EQ(starts_seen_by_sink.size(), 2u);
  EXPECT_EQ(starts_seen_by_sink[1], 2u);  // only trial 5's
  // Trial 6's ranks: started, then killed (a kill before the start would find nothing).
  std::vector<std::string> order;
  for (const auto& m : a1->sent) {
    if (m.has_start_task() && m.start_task().trial_id() == 6) order.push_back("start " + m.start_task().task_id());
    if (m.has_kill_task() && m.kill_task().task_id().rfind("t6-", 0) == 0) order.push_back("kill " + m.kill_task().task_id());
  }
  ASSERT_GE(order.size(), 4u);
  EXPECT_EQ(order[order.size() - 4].rfind("start ", 0), 0u);
  EXPECT_EQ(order[order.size() - 3].rfind("start ", 0), 0u);
  EXPECT_EQ(order[order.size() - 2].rfind("kill ", 0), 0u);
  EXPECT_EQ(order[order.size() - 1].rfind("kill ", 0), 0u);
}

TEST(AgentManager, AFailingRankStopsItsGangAndTheExitNamesIt) {
  Harness h;
  auto a1 = h.Agent("a1", 1);
  auto a2 = h.Agent("a2", 1);
  h.manager.Submit(Gang(7, 2));
  h.manager.Schedule(0);
  const std::string r0 = TaskId("t7-r0-a1", 0), r1 = TaskId("t7-r0-a1", 1);
  const std::string failing_agent = h.events[0].ranks[1].host;
  const std::string other_agent = h.events[0].ranks[0].host;
  h.Exit(failing_agent, r1, 7, 1, "ValueError: bad shape");
  // The other rank is told to stop; the gang has not ended yet.
  auto& other = other_agent == "a1" ? a1 : a2;
  EXPECT_EQ(other->Killed(), std::vector<std::string>{r0});
  ASSERT_EQ(h.Kinds(), std::vector<Kind>{Kind::kRunning});
  h.Exit(other_agent, r0, 7, 143);
  ASSERT_EQ(h.Kinds(), (std::vector<Kind>{Kind::kRunning, Kind::kExited}));
  const AllocationEvent& exited = h.events[1];
  EXPECT_EQ(exited.first_failure, "rank 1 on " + failing_agent + ": ValueError: bad shape");
  EXPECT_EQ(exited.exit_codes, (std::map<int, int>{{0, 143}, {1, 1}}));
  EXPECT_EQ(exited.reason, "trainer exited with rank 0=143 rank 1=1");
  EXPECT_EQ(h.manager.Size().used_slots, 0);
  // A late event of the ended allocation changes nothing.
  h.Exit(other_agent, r0, 7, 0);
  EXPECT_EQ(h.events.size(), 2u);
}

TEST(AgentManager, AQueuedGangSaysWhyOnceAndKillWithdrawsIt) {
  Harness h;
  auto a1 = h.Agent("a1", 2);
  h.manager.Submit(Gang(1, 2));
  h.manager.Submit(Gang(2, 1));
  h.manager.Schedule(0);
  ASSERT_EQ(h.Kinds(), (std::vector<Kind>{Kind::kRunning, Kind::kPending}));
  EXPECT_EQ(h.events[1].allocation_id, "t2-r0-a1");
  EXPECT_FALSE(h.events[1].reason.empty());
  h.manager.Schedule(1);
  EXPECT_EQ(h.events.size(), 2u) << "an unchanged reason is not said again";
  h.manager.Kill("t2-r0-a1");
  // Trial 1 ends; its slots are free, but the withdrawn gang is not placed.
  h.Exit("a1", "t1-r0-a1.0", 1, 0);
  h.Exit("a1", "t1-r0-a1.1", 1, 0);
  h.manager.Schedule(2);
  ASSERT_EQ(h.Kinds(), (std::vector<Kind>{Kind::kRunning, Kind::kPending, Kind::kExited}));
  EXPECT_TRUE(h.events[2].reason.empty()) << "a clean exit has no reason";
  EXPECT_EQ(a1->Started().size(), 2u);
}

TEST(AgentManager, AHigherPriorityGangPreemptsAndKillStopsTheRanks) {
  AgentManagerOptions options;
  options.min_run = std::chrono::seconds(0);
  Harness h(options);
  auto a1 = h.Agent("a1", 1);
  h.manager.Submit(Gang(1, 1, /*priority=*/80));
  h.manager.Schedule(0);
  h.manager.Submit(Gang(2, 1, /*priority=*/10));
  h.manager.Schedule(1);
  ASSERT_GE(h.events.size(), 2u);
  EXPECT_EQ(h.events[1].kind, Kind::kPreempt);
  EXPECT_EQ(h.events[1].allocation_id, "t1-r0-a1");
  EXPECT_EQ(h.events[1].reason, "trial 2");
  // The coordinator's grace period passes: Kill stops the rank; its exit ends the gang (a
  // failure after Kill is not the gang's own failure), and the high one is placed.
  h.manager.Kill("t1-r0-a1");
  EXPECT_EQ(a1->Killed(), std::vector<std::string>{"t1-r0-a1.0"});
  h.Exit("a1", "t1-r0-a1.0", 1, 137);
  h.manager.Schedule(2);
  std::vector<Kind> kinds = h.Kinds();
  ASSERT_GE(kinds.size(), 4u);
  auto exited = std::find_if(h.events.begin(), h.events.end(), [](const auto& e) { return e.kind == Kind::kExited; });
  ASSERT_NE(exited, h.events.end());
  EXPECT_TRUE(exited->first_failure.empty());
  EXPECT_TRUE(exited->cancelled);
  EXPECT_EQ(h.events.back().kind, Kind::kRunning);
  EXPECT_EQ(h.events.back().allocation_id, "t2-r0-a1");
}

TEST(AgentManager, AfterARestartAgentsReportingTheirRanksReadoptTheGangAndStaleTasksAreKilled) {
  Harness h;
  GangLaunch gang = Gang(9, 2);
  gang.ranks.clear();
  h.manager.Adopt(gang, "");
  auto a1 = h.Agent("a1", 1, "default", {{"t9-r0-a1.0", 0}, {"t4-r0-a1.0", 0}}, 9);
  ASSERT_EQ(h.Kinds(), std::vector<Kind>{Kind::kRunning}) << "running from the first rank reported";
  EXPECT_EQ(h.events[0].ranks[0].host, "a1");
  // The event names the whole gang, so its rendezvous opens for both ranks (a 1-rank board
  // refused rank 1 once it re-registered: "rank 1 is not in [0, 1)").
  ASSERT_EQ(h.events[0].ranks.size(), 2u);
  EXPECT_EQ(h.events[0].ranks[1].host, "") << "rank 1's agent is not back yet";
  // A task of an allocation the master no longer has is stopped.
  EXPECT_EQ(a1->Killed(), std::vector<std::string>{"t4-r0-a1.0"});
  auto a2 = h.Agent("a2", 1, "default", {{"t9-r0-a1.1", 0}}, 9);
  EXPECT_EQ(h.events.size(), 1u) << "Running is said once";
  EXPECT_TRUE(a2->Killed().empty());
  // The scheduler holds both slots again: a new gang waits.
  EXPECT_EQ(h.manager.Size().used_slots, 2);
  h.manager.Submit(Gang(10, 1));
  h.manager.Schedule(0);
  EXPECT_EQ(h.events.back().kind, Kind::kPending);
}

// A master closed trial 9 while its agent was away (its adopted allocation withdrawn before any
// rank was reported), or was killed right after a trial ended and a new master knows nothing of
// its task: the agent still runs the task when it re-registers. The task is killed, and its slot
// stays taken until its exit arrives; before this, the pass right after the registration gave
// the slot to a queued gang while the old task ran (the simulator's double_booked under
// KILL_MASTER_EVERY=3).
TEST(AgentManager, AStaleTasksSlotIsGivenToNoOtherTaskUntilItsExitArrives) {
  Harness h;
  GangLaunch adopted = Gang(9, 1);
  adopted.ranks.clear();
  h.manager.Adopt(adopted, "");
  h.manager.Kill(adopted.allocation_id);  // closed before its agent came back
  h.manager.Submit(Gang(10, 1));
  auto a1 = h.Agent("a1", 1, "default", {{"t9-r0-a1.0", 0}}, 9);
  EXPECT_EQ(a1->Killed(), std::vector<std::string>{"t9-r0-a1.0"});
  EXPECT_TRUE(a1->Started().empty()) << "cpu0 still runs t9-r0-a1.0";
  h.manager.Schedule(0);
  EXPECT_TRUE(a1->Started().empty());
  ASSERT_FALSE(h.events.empty());
  EXPECT_EQ(h.events.back().kind, Kind::kPending);
  // Re-registering with the task still running holds the slot still (and kills it again).
  auto again = h.Agent("a1", 1, "default", {{"t9-r0-a1.0", 0}}, 9);
  EXPECT_EQ(again->Killed(), std::vector<std::string>{"t9-r0-a1.0"});
  EXPECT_TRUE(again->Started().empty());
  // Its exit frees the slot, and the queued gang gets it.
  h.Exit("a1", "t9-r0-a1.0", 9, 143);
  ASSERT_EQ(again->Started().size(), 1u);
  EXPECT_EQ(again->Started()[0].task_id(), TaskId(AllocationId(10, 0, 1), 0));
  EXPECT_EQ(h.events.back().kind, Kind::kRunning);

  // A task of a trial this master never knew (it ended before the restart), on an agent that
  // then re-registers without it (it ended while the agent was apart): free from then on.
  auto a2 = h.Agent("a2", 1, "default", {{"t4-r0-a3.0", 0}}, 4);
  EXPECT_EQ(a2->Killed(), std::vector<std::string>{"t4-r0-a3.0"});
  h.manager.Submit(Gang(11, 1));
  h.manager.Schedule(0);
  EXPECT_TRUE(a2->Started().empty()) << "cpu0 still runs t4-r0-a3.0";
  auto back = h.Agent("a2", 1);
  ASSERT_EQ(back->Started().size(), 1u);
  EXPECT_EQ(back->Started()[0].task_id(), TaskId(AllocationId(11, 0, 1), 0));
}

// A two-rank gang re-adopted in part (rank 1's agent not back yet): the scheduler takes a gang's
// slots all at once, so rank 0's slot is held on its own meanwhile, and no queued gang gets it.
TEST(AgentManager, ARankOfAGangReadoptedInPartKeepsItsSlotUntilTheWholeGangIsBack) {
  Harness h;
  GangLaunch adopted = Gang(9, 2);
  adopted.ranks.clear();
  h.manager.Adopt(adopted, "");
  h.manager.Submit(Gang(10, 1));
  auto a1 = h.Agent("a1", 1, "default", {{"t9-r0-a1.0", 0}}, 9);
  h.manager.Schedule(0);
  EXPECT_TRUE(a1->Started().empty()) << "cpu0 runs rank 0 of t9-r0-a1";
  auto a2 = h.Agent("a2", 2, "default", {{"t9-r0-a1.1", 0}}, 9);
  // The whole gang is back (held as one); a2's other slot takes the queued gang.
  ASSERT_EQ(a2->Started().size(), 1u);
  EXPECT_EQ(a2->Started()[0].slot_ids(0), "cpu1");
  EXPECT_TRUE(a1->Started().empty());
  // The gang's end frees both of its slots.
  h.Exit("a1", "t9-r0-a1.0", 9, 0);
  h.Exit("a2", "t9-r0-a1.1", 9, 0);
  h.manager.Submit(Gang(11, 2));
  h.manager.Schedule(0);
  EXPECT_EQ(h.events.back().kind, Kind::kRunning);
}

TEST(AgentManager, RanksNoAgentReportsInTimeAndRanksOfALostAgentExitAsLost) {
  AgentManagerOptions options;
  options.reconnect_grace = std::chrono::seconds(30);
  Harness h(options);
  GangLaunch gang = Gang(3, 2);
  gang.ranks.clear();
  h.manager.Adopt(gang, "");
  auto a1 = h.Agent("a1", 1, "default", {{"t3-r0-a1.0", 0}}, 3);
  h.manager.Tick(AgentManager::Clock::now() + std::chrono::seconds(31));
  // Rank 1 never came back: lost, and rank 0 is stopped.
  EXPECT_EQ(a1->Killed(), std::vector<std::string>{"t3-r0-a1.0"});
  h.Exit("a1", "t3-r0-a1.0", 3, 143);
  ASSERT_EQ(h.Kinds(), (std::vector<Kind>{Kind::kRunning, Kind::kExited}));
  EXPECT_EQ(h.events[1].exit_codes, (std::map<int, int>{{0, 143}, {1, -1}}));

  // An agent gone past the grace period: its rank exits -1, naming it.
  auto a2 = h.Agent("a2", 1);
  h.manager.Submit(Gang(4, 1));
  h.manager.Schedule(0);
  ASSERT_EQ(h.events.back().kind, Kind::kRunning);
  const std::string host = h.events.back().ranks[0].host;
  h.manager.Disconnected(host, host == "a1" ? a1.get() : a2.get());
  h.manager.Tick(AgentManager::Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(h.events.back().kind, Kind::kRunning) << "within the grace period nothing ends";
  h.manager.Tick(AgentManager::Clock::now() + std::chrono::seconds(31));
  ASSERT_EQ(h.events.back().kind, Kind::kExited);
  EXPECT_EQ(h.events.back().reason, "trainer exited with rank 0=-1 (agent " + host + " lost)");
}

TEST(AgentManager, ARefusedGangEndsAtOnceAndEventsCausedWhileDeliveringFollowInOrder) {
  Harness h;
  auto a1 = h.Agent("a1", 1);
  GangLaunch bad = Gang(1, 1, /*priority=*/0);
  h.manager.Submit(bad);
  EXPECT_TRUE(h.events.empty()) << "the coordinator's calls never deliver (it may hold its lock)";
  h.manager.Schedule(0);  // the manager's next pass (its thread's, or a test's) delivers it
  ASSERT_EQ(h.Kinds(), std::vector<Kind>{Kind::kExited});
  EXPECT_TRUE(h.events[0].refused);
  EXPECT_NE(h.events[0].reason.find("priority"), std::string::npos) << h.events[0].reason;

  // The coordinator answers an Exited by submitting the next run and scheduling, from inside
  // the sink: the new run's events come after the Exited, never inside it.
  std::vector<std::string> order;
  bool in_sink = false;
  h.manager.SetEventSink([&](const AllocationEvent& e) {
    EXPECT_FALSE(in_sink) << "an event delivered inside another";
    in_sink = true;
    order.push_back(e.allocation_id + (e.kind == Kind::kExited ? " exited" : e.kind == Kind::kRunning ? " running" : " other"));
    if (e.kind == Kind::kExited && e.allocation_id == "t2-r0-a1") {
      GangLaunch next = Gang(2, 1);
      next.allocation_id = "t2-r1-a2";
      for (auto& r : next.ranks) r.set_task_id(TaskId(next.allocation_id, r.rank()));
      h.manager.Submit(next);
      h.manager.Schedule(1);
      order.push_back("after resubmit");
    }
    in_sink = false;
  });
  h.manager.Submit(Gang(2, 1));
  h.manager.Schedule(0);
  h.Exit("a1", "t2-r0-a1.0", 2, 1, "boom");
  EXPECT_EQ(order, (std::vector<std::string>{"t2-r0-a1 running", "t2-r0-a1 exited", "after resubmit",
                                             "t2-r1-a2 running"}));
  EXPECT_EQ(a1->Started().back().task_id(), "t2-r1-a2.0");
}

// The threading contract (resource_manager.h): a caller holding the lock the sink takes (the
// coordinator) may Submit and Kill without deadlock, and what those calls cause is delivered on
// the manager's own thread, in order; an AgentLink call returns only once the events it caused
// were delivered.
TEST(AgentManager, ItsThreadDeliversWhatACallerHoldingTheSinksLockCausedAndAgentLinkCallsWaitForTheirs) {
  AgentManagerOptions options;
  options.pass_interval = std::chrono::milliseconds(50);
  AgentManager manager(options);
  std::mutex coordinator;  // what the coordinator's mu_ is to the real sink
  std::vector<AllocationEvent> events;
  std::vector<std::thread::id> delivered_on;
  manager.SetEventSink([&](const AllocationEvent& e) {
    std::lock_guard<std::mutex> lock(coordinator);
    events.push_back(e);
    delivered_on.push_back(std::this_thread::get_id());
  });
  manager.Start();
  auto conn = std::make_shared<Connection>();
  v1::RegisterAgent reg;
  reg.set_agent_id("a1");
  reg.add_slots()->set_id("cpu0");
  manager.Connected(reg, conn);
  {
    std::lock_guard<std::mutex> lock(coordinator);  // as the coordinator submits: under its lock
    manager.Submit(Gang(1, 1));
    manager.Kill("t9-r0-a1");  // unknown: ignored
    EXPECT_TRUE(events.empty()) << "nothing is delivered inside the caller's call";
  }
  auto count = [&] {
    std::lock_guard<std::mutex> lock(coordinator);
    return events.size();
  };
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       count() == 0 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> lock(coordinator);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, Kind::kRunning);
    EXPECT_EQ(events[0].allocation_id, "t1-r0-a1");
    EXPECT_NE(delivered_on[0], std::this_thread::get_id()) << "delivered on the manager's thread";
  }
  EXPECT_EQ(conn->Started().size(), 1u);
  // The rank's exit: delivered before TaskStateChanged returns, on the caller's thread.
  v1::TaskStateChange change;
  change.set_task_id("t1-r0-a1.0");
  change.set_trial_id(1);
  change.set_state(v1::TaskStateChange::STATE_EXITED);
  manager.TaskStateChanged("a1", change);
  {
    std::lock_guard<std::mutex> lock(coordinator);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].kind, Kind::kExited);
  }
  manager.Stop();
}

}  // namespace
}  // namespace sf::master::rm
