// Ingestion does not wait for the coordinator: a scheduling pass held artificially long
// (ClusterOptions::scheduling_pass_hook, under the coordinator's lock) does not delay a
// trainer's metric reports or its logs, which are checked against the allocation registry
// (master/allocation/allocation_registry.h) — while a call that does need the coordinator's
// lock waits for the pass, as it must. Against real PostgreSQL; the test plays agent and trainer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "master/core/cluster.h"
#include "tests/master/core/recording_connection.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kHeldPass{3000};

class IngestionLockTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<Store>(db_.get());
    agents_ = std::make_unique<rm::AgentManager>();
    ClusterOptions o;
    o.default_manager = agents_.get();
    o.check_data_files = false;
    o.checkpoint_root = dir_.path();
    o.scheduling_pass_hook = [this] {
      if (!hold_) return;
      held_ = true;
      std::this_thread::sleep_for(kHeldPass);
    };
    cluster_ = std::make_unique<Cluster>(store_.get(), o);
    ASSERT_TRUE(cluster_->Recover().ok());
    cluster_->Start();
    Register("agent-1", agent_);
  }
  void TearDown() override {
    if (cluster_) cluster_->Stop();
    cluster_.reset();
    agents_.reset();
    MigratedDatabaseTest::TearDown();
  }

  void Register(const std::string& id, std::shared_ptr<AgentConnection> connection) {
    v1::RegisterAgent reg;
    reg.set_agent_id(id);
    reg.add_slots()->set_id("cpu0");
    agents_->Connected(reg, std::move(connection));
  }

  // A running trial's rank 0, as its StartTask names it.
  v1::TrialIdentity StartTrial() {
    auto r = cluster_->CreateExperiment(
        "name: ingest\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
        "searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}\n"
        "resources: {slots_per_trial: 1}\n",
        true, false, "test");
    EXPECT_TRUE(r.id.has_value());
    EXPECT_TRUE(WaitFor([&] { return !agent_->Starts().empty(); }));  // placed on the manager's thread
    std::vector<v1::StartTask> starts = agent_->Starts();
    EXPECT_EQ(starts.size(), 1u);
    v1::TrialIdentity who;
    if (starts.empty()) return who;
    who.set_trial_id(starts[0].trial_id());
    who.set_task_id(starts[0].task_id());
    who.set_restart(starts[0].restart());
    return who;
  }

  static v1::ReportMetricsRequest Report(const v1::TrialIdentity& who, int64_t batches) {
    v1::ReportMetricsRequest r;
    *r.mutable_who() = who;
    v1::MetricReport* m = r.add_reports();
    m->set_kind("training");
    m->set_batches(batches);
    (*m->mutable_values()->mutable_fields())["loss"].set_number_value(2.5);
    return r;
  }

  // The trainer's own output (TrialLink ReportLogs, as the Core API's log capture sends it).
  static v1::ReportLogsRequest Logs(const v1::TrialIdentity& who, int64_t sequence) {
    v1::ReportLogsRequest r;
    *r.mutable_who() = who;
    r.set_incarnation("inc-1");
    r.set_sequence(sequence);
    v1::LogLine* l = r.add_lines();
    l->set_stream("stdout");
    l->set_message("line " + std::to_string(sequence));
    return r;
  }

  sf::testing::TempDir dir_;
  std::shared_ptr<RecordingConnection> agent_ = std::make_shared<RecordingConnection>();
  std::unique_ptr<Store> store_;
  std::unique_ptr<rm::AgentManager> agents_;
  std::unique_ptr<Cluster> cluster_;
  std::atomic<bool> hold_{false}, held_{false};
};

TEST_F(IngestionLockTest, ReportsFlowWhileASchedulingPassHoldsTheCoordinator) {
  const v1::TrialIdentity who = StartTrial();
  ASSERT_TRUE(cluster_->ReportMetrics(Report(who, 10)).ok());

  // The coordinator's next pass over its queue (the housekeeping loop's, every 0.5 s, or one a
  // manager's event causes; a second agent registering here) holds its lock for 3 s.
  hold_ = true;
  auto pass = std::async(std::launch::async, [this] { Register("agent-2", std::make_shared<RecordingConnection>()); });
  for (auto until = Clock::now() + std::chrono::seconds(10); !held_ && Clock::now() < until;) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(held_);
  const auto held_since = Clock::now();

  // Twenty reports and twenty log batches, each committed to PostgreSQL, all while the pass
  // still holds the lock.
  for (int i = 1; i <= 20; ++i) {
    Status st = cluster_->ReportMetrics(Report(who, 10 + i));
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = cluster_->ReportLogs(Logs(who, i));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  const auto reported = Clock::now() - held_since;
  EXPECT_LT(reported, kHeldPass / 2) << "the reports waited for the scheduling pass";

  // A call that needs the coordinator (the searcher's next operation) waits for the pass.
  auto next = cluster_->NextOperation(who, milliseconds(0));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GE(Clock::now() - held_since, kHeldPass - milliseconds(200));
  pass.get();
  hold_ = false;

  auto count = store_->CountMetrics(who.trial_id(), "training");
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 21);
  auto row = store_->GetTrial(who.trial_id());
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->total_batches(), 30);
  auto lines = store_->GetLogs(who.trial_id(), 0, 100, "");
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 20u);
  EXPECT_EQ(lines->back().message(), "line 20");
}

TEST_F(IngestionLockTest, TheRegistryRefusesWhatTheCoordinatorWould) {
  const v1::TrialIdentity who = StartTrial();
  // An orphan of an earlier allocation of the same trial.
  v1::TrialIdentity orphan = who;
  orphan.set_task_id("t" + std::to_string(who.trial_id()) + "-r0-a99.0");
  Status st = cluster_->ReportMetrics(Report(orphan, 5));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("its current allocation is " + who.task_id().substr(0, who.task_id().rfind('.'))),
            std::string::npos)
      << st.message();
  // A trial this master does not know.
  v1::TrialIdentity stranger;
  stranger.set_trial_id(who.trial_id() + 1000);
  st = cluster_->ReportMetrics(Report(stranger, 5));
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  // Logs are checked the same way.
  st = cluster_->ReportLogs(Logs(orphan, 1));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  st = cluster_->ReportLogs(Logs(stranger, 1));
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  auto none = store_->GetLogs(who.trial_id(), 0, 100, "");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // The total only rises; a report of fewer batches keeps it.
  ASSERT_TRUE(cluster_->ReportMetrics(Report(who, 40)).ok());
  ASSERT_TRUE(cluster_->ReportMetrics(Report(who, 20)).ok());
  auto row = store_->GetTrial(who.trial_id());
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->total_batches(), 40);
  EXPECT_EQ(*store_->CountMetrics(who.trial_id(), "training"), 2);
}

}  // namespace
}  // namespace sf::master
