// Base fixture for the coordinator's tests without processes: a real PostgreSQL (migrated), the
// agents' resource manager, and one agent whose connection records what the master sends
// (RecordingConnection); the test plays the agent (Exited) and the trainer (TrialLink calls by
// hand, Who). Derived fixtures call StartCluster() from their test or SetUp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "master/core/cluster.h"
#include "tests/master/core/recording_connection.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master::testing {

class CoordinatorTest : public MigratedDatabaseTest {
 protected:
  // Starts the coordinator over the agents' manager (`manager`'s options) and registers
  // "agent-1" with `slots` CPU slots (cpu0, cpu1, ...), running `running` (a master restart:
  // the agent comes back with these tasks). `options` may set anything but the store, the
  // manager and the checkpoint root.
  void StartCluster(int slots = 1, rm::AgentManagerOptions manager = {}, ClusterOptions options = {},
                    const std::vector<steadfast::v1::StartTask>& running = {}) {
    store_ = std::make_unique<Store>(db_.get());
    agents_ = std::make_unique<rm::AgentManager>(manager);
    options.check_data_files = false;
    options.checkpoint_root = dir_.path();
    options.default_manager = agents_.get();
    cluster_ = std::make_unique<Cluster>(store_.get(), options);
    ASSERT_TRUE(cluster_->Recover().ok());
    cluster_->Start();
    steadfast::v1::RegisterAgent reg;
    reg.set_agent_id("agent-1");
    for (int slot = 0; slot < slots; ++slot) reg.add_slots()->set_id("cpu" + std::to_string(slot));
    for (const steadfast::v1::StartTask& s : running) {
      steadfast::v1::RunningTask* r = reg.add_running_tasks();
      r->set_task_id(s.task_id());
      r->set_trial_id(s.trial_id());
      r->set_rank(s.rank());
      *r->mutable_slot_ids() = s.slot_ids();
    }
    agents_->Connected(reg, agent_);
  }
  void TearDown() override {
    if (cluster_) cluster_->Stop();
    cluster_.reset();
    agents_.reset();
    MigratedDatabaseTest::TearDown();
  }

  // The trainer of `s`, as its TrialLink calls name it.
  static steadfast::v1::TrialIdentity Who(const steadfast::v1::StartTask& s) {
    steadfast::v1::TrialIdentity who;
    who.set_trial_id(s.trial_id());
    who.set_task_id(s.task_id());
    who.set_restart(s.restart());
    return who;
  }
  // The agent reports that `s` exited with `code`; returns once the coordinator has acted on it.
  void Exited(const steadfast::v1::StartTask& s, int code) {
    steadfast::v1::TaskStateChange c;
    c.set_task_id(s.task_id());
    c.set_trial_id(s.trial_id());
    c.set_state(steadfast::v1::TaskStateChange::STATE_EXITED);
    c.set_exit_code(code);
    agents_->TaskStateChanged("agent-1", c);
  }
  steadfast::v1::Trial TrialRow(int64_t id) {
    auto t = store_->GetTrial(id);
    EXPECT_TRUE(t.ok() && t->has_value());
    return t.ok() && t->has_value() ? **t : steadfast::v1::Trial();
  }

  sf::testing::TempDir dir_;
  std::shared_ptr<RecordingConnection> agent_ = std::make_shared<RecordingConnection>();
  std::unique_ptr<Store> store_;
  std::unique_ptr<rm::AgentManager> agents_;
  std::unique_ptr<Cluster> cluster_;
};

}  // namespace sf::master::testing
