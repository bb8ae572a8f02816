// The allocation service (master/allocation/allocation_service.h) against scripted fake
// managers and a real PostgreSQL: which manager gets a gang, the allocation rows, the order in
// which the owner hears events and that each was recorded first, kills and withdrawals, events
// for allocations nobody holds, adoption after a restart, preemption, a rank's own failure, and
// that an owner may call back into the service while it is being told something.
// (The service against the real managers: the coordinator's tests, e.g. master_preemption_test
// with the agents' manager, and e2e_slurm_test with Slurm.)
#include "master/allocation/allocation_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "tests/master/allocation/scripted_manager.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;
using Kind = rm::AllocationEvent::Kind;

class AllocationServiceTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    CreateRunningTrials("alloc", 2, &trials_);
    if (HasFatalFailure()) return;
    store_ = std::make_unique<Store>(db_.get());
    service_ = std::make_unique<AllocationService>(store_.get(), &agents_,
                                                   std::map<std::string, rm::ResourceManager*>{{"hpc", &slurm_}});
    service_->SetOwner(TaskKind::kTrial, [this](const AllocationUpdate& u) {
      // What the owner sees must already be recorded: the row, for each kind of event.
      Row row = ReadRow(u.event.allocation_id);
      std::lock_guard<std::mutex> lock(mu_);
      heard_.push_back(u);
      rows_when_heard_.push_back(row);
      if (on_update_) on_update_(u);
    });
  }

  TaskLaunch Launch(int64_t trial, const std::string& id, const std::string& pool, int world_size = 1) {
    TaskLaunch l;
    l.owner = trial;
    l.gang.allocation_id = id;
    l.gang.trial_id = trial;
    l.gang.pool = pool;
    l.gang.world_size = world_size;
    return l;
  }

  struct Row {
    bool exists = false;
    std::string state, external_id, slots;
  };
  Row ReadRow(const std::string& id) {
    Row r;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     auto rows = tx.exec_params("SELECT state, external_id, slots::text FROM allocations WHERE id = $1", id);
                     if (rows.empty()) return Status::Ok();
                     r.exists = true;
                     r.state = rows[0][0].as<std::string>();
                     r.external_id = rows[0][1].as<std::string>();
                     r.slots = rows[0][2].as<std::string>();
                     return Status::Ok();
                   }).ok());
    return r;
  }

  std::vector<Kind> HeardKinds() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Kind> out;
    for (const AllocationUpdate& u : heard_) out.push_back(u.event.kind);
    return out;
  }

  std::vector<int64_t> trials_;
  std::unique_ptr<Store> store_;
  ScriptedManager agents_{"agents"}, slurm_{"slurm"};
  std::unique_ptr<AllocationService> service_;
  std::mutex mu_;
  std::vector<AllocationUpdate> heard_;
  std::vector<Row> rows_when_heard_;
  std::function<void(const AllocationUpdate&)> on_update_;
};

TEST_F(AllocationServiceTest, AGangGoesToItsPoolsManagerWithItsRowWritten) {
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "default"));
  service_->Submit(Launch(trials_[1], "t2-r0-a1", "hpc"));
  EXPECT_EQ(agents_.submitted, std::vector<std::string>{"t1-r0-a1"});
  EXPECT_EQ(slurm_.submitted, std::vector<std::string>{"t2-r0-a1"});
  EXPECT_TRUE(ReadRow("t1-r0-a1").exists);
  EXPECT_TRUE(ReadRow("t2-r0-a1").exists);
  EXPECT_FALSE(service_->IsExternal("default"));
  EXPECT_TRUE(service_->IsExternal("hpc"));
  EXPECT_EQ(service_->ManagerKind("hpc"), "slurm");
  EXPECT_EQ(service_->ManagerKind("anything-else"), "agents");
  service_->Start();
  EXPECT_TRUE(agents_.started && slurm_.started);
  service_->Stop();
  EXPECT_TRUE(agents_.stopped && slurm_.stopped);
}

TEST_F(AllocationServiceTest, TheOwnerHearsEachEventInOrderAfterItIsRecorded) {
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "hpc", /*world_size=*/2));
  rm::AllocationEvent submitted = Event(Kind::kSubmitted, "t1-r0-a1");
  submitted.external_id = "4242";
  slurm_.Emit(submitted);
  rm::AllocationEvent pending = Event(Kind::kPending, "t1-r0-a1");
  pending.reason = "Slurm: Resources";
  slurm_.Emit(pending);
  EXPECT_EQ(service_->PendingReasons()["t1-r0-a1"], "Slurm: Resources");
  rm::AllocationEvent running = Event(Kind::kRunning, "t1-r0-a1");
  running.hosts = {"node1", "node2"};
  slurm_.Emit(running);
  EXPECT_TRUE(service_->PendingReasons().empty()) << "it runs: why it waited is over";
  // Running in pool "hpc", counted for the pool though its manager lists none.
  std::vector<v1::ResourcePool> pools = service_->Pools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].name(), "hpc");
  EXPECT_EQ(pools[0].scheduler(), "slurm");
  EXPECT_EQ(pools[0].running_trials(), 1);
  // An external job's ranks meet before and after it runs; the entry closes when it exits.
  auto met = service_->rendezvous().Arrive("t1-r0-a1", "r", 0, "p0", std::chrono::milliseconds(1));
  EXPECT_FALSE(met.ok()) << "rank 1 has not arrived";
  rm::AllocationEvent exited = Event(Kind::kExited, "t1-r0-a1");
  exited.exit_codes = {{0, 0}, {1, 3}};
  exited.reason = "exit 3";
  slurm_.Emit(exited);

  EXPECT_EQ(HeardKinds(), (std::vector<Kind>{Kind::kSubmitted, Kind::kPending, Kind::kRunning, Kind::kExited}));
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(rows_when_heard_.size(), 4u);
  EXPECT_EQ(rows_when_heard_[0].external_id, "4242");
  EXPECT_EQ(rows_when_heard_[2].state, "RUNNING");
  EXPECT_NE(rows_when_heard_[2].slots.find("slurm:node1,node2"), std::string::npos) << rows_when_heard_[2].slots;
  EXPECT_EQ(rows_when_heard_[3].state, "TERMINATED");
  const AllocationUpdate& run = heard_[2];
  EXPECT_EQ(run.owner, trials_[0]);
  EXPECT_EQ(run.where, "slurm:node1,node2");
  EXPECT_TRUE(run.external);
  EXPECT_EQ(run.external_id, "4242");
  EXPECT_EQ(run.rank_hosts.at(1), "slurm:node1,node2");
  EXPECT_EQ(heard_[3].event.exit_codes.at(1), 3);
  EXPECT_EQ(heard_[3].manager, "slurm");
  // Exited: forgotten, its rendezvous closed.
  EXPECT_FALSE(service_->rendezvous().Arrive("t1-r0-a1", "r", 0, "p0", std::chrono::milliseconds(1)).ok());
  EXPECT_TRUE(service_->Pools().empty()) << "no longer counted as running";
}

TEST_F(AllocationServiceTest, AgentsRanksMeetOnceTheyRunWithEachRanksAgent) {
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "default", 1));
  EXPECT_FALSE(service_->rendezvous().Arrive("t1-r0-a1", "r", 0, "p", std::chrono::milliseconds(1)).ok())
      << "not open before it runs";
  rm::AllocationEvent running = Event(Kind::kRunning, "t1-r0-a1");
  running.ranks = {{"agent-7", "cpu0"}};
  agents_.Emit(running);
  auto met = service_->rendezvous().Arrive("t1-r0-a1", "r", 0, "p", std::chrono::milliseconds(100));
  ASSERT_TRUE(met.ok()) << met.status().ToString();
  EXPECT_EQ(met->agents, std::vector<std::string>{"agent-7"});
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(heard_.size(), 1u);
  EXPECT_FALSE(heard_[0].external);
  EXPECT_EQ(heard_[0].rank_hosts.at(0), "agent-7");
  EXPECT_NE(rows_when_heard_[0].slots.find("cpu0"), std::string::npos);
}

TEST_F(AllocationServiceTest, AGangPlacedInPartMeetsWithAllItsRanks) {
  // After a master restart the agents' manager may report a gang running when only rank 0's
  // agent re-registered; rank 1 must still take part in the rendezvous.
  service_->Adopt(Launch(trials_[0], "t1-r0-a4", "default", 2), "", /*running=*/false);
  rm::AllocationEvent running = Event(Kind::kRunning, "t1-r0-a4");
  running.ranks = {{"agent-1", "cpu0"}};
  agents_.Emit(running);
  auto first = std::async(std::launch::async, [&] {
    return service_->rendezvous().Arrive("t1-r0-a4", "r", 0, "a", std::chrono::milliseconds(5000));
  });
  auto second = service_->rendezvous().Arrive("t1-r0-a4", "r", 1, "b", std::chrono::milliseconds(5000));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(first.get().ok());
  EXPECT_EQ(second->payloads, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ReadRow("t1-r0-a4").slots.find("\"agent_id\": \"\""), std::string::npos)
      << "no slot recorded for the rank not yet placed: " << ReadRow("t1-r0-a4").slots;
}

TEST_F(AllocationServiceTest, EventsForAllocationsNobodyHoldsGoNowhereAndARunningOneIsKilled) {
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "default"));
  service_->Withdraw("t1-r0-a1");
  EXPECT_EQ(agents_.killed, std::vector<std::string>{"t1-r0-a1"});
  EXPECT_EQ(ReadRow("t1-r0-a1").state, "TERMINATED");
  agents_.Emit(Event(Kind::kRunning, "t1-r0-a1"));  // it had been placed meanwhile
  EXPECT_EQ(agents_.killed, (std::vector<std::string>{"t1-r0-a1", "t1-r0-a1"}));
  agents_.Emit(Event(Kind::kExited, "t1-r0-a1"));
  agents_.Emit(Event(Kind::kPending, "never-submitted"));
  EXPECT_TRUE(HeardKinds().empty());
  // Kill and Withdraw of ids nobody holds ask no manager.
  service_->Kill("never-submitted");
  service_->Withdraw("never-submitted");
  EXPECT_EQ(agents_.killed.size(), 2u);
  // An event from a manager that does not hold the allocation is not taken for it.
  service_->Submit(Launch(trials_[1], "t2-r0-a1", "default"));
  slurm_.Emit(Event(Kind::kExited, "t2-r0-a1"));
  EXPECT_TRUE(HeardKinds().empty());
  // Release forgets it without asking its manager.
  service_->Release("t2-r0-a1");
  EXPECT_EQ(agents_.killed.size(), 2u);
  EXPECT_EQ(ReadRow("t2-r0-a1").state, "TERMINATED");
  agents_.Emit(Event(Kind::kExited, "t2-r0-a1"));
  EXPECT_TRUE(HeardKinds().empty());
}

TEST_F(AllocationServiceTest, KillGoesToTheManagerHoldingItAndExitedFollows) {
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "default"));
  service_->Submit(Launch(trials_[1], "t2-r0-a1", "hpc"));
  service_->Kill("t2-r0-a1");
  EXPECT_TRUE(agents_.killed.empty());
  EXPECT_EQ(slurm_.killed, std::vector<std::string>{"t2-r0-a1"});
  rm::AllocationEvent exited = Event(Kind::kExited, "t2-r0-a1");
  exited.cancelled = true;
  slurm_.Emit(exited);
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(heard_.size(), 1u);
  EXPECT_TRUE(heard_[0].event.cancelled);
  EXPECT_EQ(heard_[0].owner, trials_[1]);
}

TEST_F(AllocationServiceTest, AnAdoptedAllocationIsWatchedAgainByItsJob) {
  service_->Adopt(Launch(trials_[0], "t1-r0-a3", "hpc", 2), "777", /*running=*/true);
  service_->Adopt(Launch(trials_[1], "t2-r1-a2", "default", 1), "", /*running=*/false);
  EXPECT_EQ(slurm_.adopted, std::vector<std::string>{"t1-r0-a3@777"});
  EXPECT_EQ(agents_.adopted, std::vector<std::string>{"t2-r1-a2@"});
  // The external job's ranks may meet at once, each placed as its job.
  std::vector<v1::ResourcePool> pools = service_->Pools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].running_trials(), 1) << "adopted running";
  auto first = std::async(std::launch::async, [&] {
    return service_->rendezvous().Arrive("t1-r0-a3", "r", 0, "a", std::chrono::milliseconds(5000));
  });
  auto second = service_->rendezvous().Arrive("t1-r0-a3", "r", 1, "b", std::chrono::milliseconds(5000));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->agents, (std::vector<std::string>{"slurm job 777", "slurm job 777"}));
  EXPECT_TRUE(first.get().ok());
  // Running again (already known to run): the owner hears it, the row keeps its places.
  slurm_.Emit(Event(Kind::kRunning, "t1-r0-a3"));
  agents_.Emit(Event(Kind::kExited, "t2-r1-a2"));
  EXPECT_EQ(HeardKinds(), (std::vector<Kind>{Kind::kRunning, Kind::kExited}));
}

TEST_F(AllocationServiceTest, PreemptionAndARanksOwnFailureReachTheOwner) {
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "hpc", 2));
  EXPECT_TRUE(service_->MarkRunning("t1-r0-a1")) << "a rank called in first";
  EXPECT_FALSE(service_->MarkRunning("t1-r0-a1"));
  EXPECT_EQ(ReadRow("t1-r0-a1").state, "RUNNING");
  rm::AllocationEvent preempt = Event(Kind::kPreempt, "t1-r0-a1");
  preempt.reason = "trial 9";
  slurm_.Emit(preempt);
  service_->RecordRankFailure("t1-r0-a1", 1, "slurm:node2", "ValueError: bad shape");
  service_->RecordRankFailure("t1-r0-a1", 0, "", "exit status 1");  // the first one is kept
  slurm_.Emit(Event(Kind::kExited, "t1-r0-a1"));
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(heard_.size(), 2u);
  EXPECT_EQ(heard_[0].event.kind, Kind::kPreempt);
  EXPECT_EQ(heard_[0].event.reason, "trial 9");
  EXPECT_EQ(heard_[1].reported_failure, "rank 1 on slurm:node2: ValueError: bad shape");
}

TEST_F(AllocationServiceTest, AnOwnerMayCallTheServiceWhileBeingTold) {
  // The coordinator acts on an update by submitting the next allocation or killing one: the
  // service's lock is not held while it is told.
  service_->Submit(Launch(trials_[0], "t1-r0-a1", "default"));
  service_->Submit(Launch(trials_[1], "t2-r0-a1", "default"));
  on_update_ = [this](const AllocationUpdate& u) {
    if (u.event.kind != Kind::kExited) return;
    service_->Kill("t2-r0-a1");
    service_->Submit(Launch(u.owner, "t1-r1-a2", "default"));
    (void)service_->PendingReasons();
  };
  agents_.Emit(Event(Kind::kExited, "t1-r0-a1"));
  EXPECT_EQ(agents_.killed, std::vector<std::string>{"t2-r0-a1"});
  EXPECT_EQ(agents_.submitted, (std::vector<std::string>{"t1-r0-a1", "t2-r0-a1", "t1-r1-a2"}));
}

}  // namespace
}  // namespace sf::master
