// The coordinator's side of three Core API calls (docs/core-api.md), against real PostgreSQL and
// no processes (the test plays the agent and the script, as master_preemption_test does): each
// trial's seed (SF_TRIAL_SEED), a trial deleting a checkpoint of its experiment, and the
// acknowledgement that makes a clean exit after a withdrawn stop a resumption.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>

#include "tests/master/core/coordinator_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

class CoreApiCallsTest : public testing::CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    if (HasFatalFailure()) return;
    StartCluster(/*slots=*/8);
  }

  int64_t Create(const std::string& yaml) {
    auto r = cluster_->CreateExperiment(yaml, true, false, "test");
    EXPECT_TRUE(r.id.has_value()) << (r.errors.empty() ? "" : r.errors[0].path + ": " + r.errors[0].message);
    return r.id.value_or(0);
  }
  static std::string Grid(const std::string& name, const std::string& extra = "") {
    return "name: " + name +
           "\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
           "hyperparameters: {lr: {type: categorical, vals: [0.1, 0.2]}}\n"
           "searcher: {name: grid, metric: validation_loss, max_length: {batches: 100}}\n" +
           extra;
  }
  Status Checkpoint(const v1::StartTask& s, const std::string& uuid, int64_t batches) {
    v1::ReportCheckpointRequest ck;
    *ck.mutable_who() = Who(s);
    ck.mutable_checkpoint()->set_uuid(uuid);
    ck.mutable_checkpoint()->set_path(dir_.path() + "/" + uuid);
    ck.mutable_checkpoint()->set_batches(batches);
    return cluster_->ReportCheckpoint(ck);
  }
  static int64_t Seed(const v1::StartTask& s) {
    auto it = s.env().find("SF_TRIAL_SEED");
    return it == s.env().end() ? -1 : std::strtoll(it->second.c_str(), nullptr, 10);
  }
};

TEST_F(CoreApiCallsTest, EachTrialGetsAStableSeedOfItsOwnFromTheExperimentSeed) {
  ASSERT_GT(Create(Grid("a", "reproducibility: {experiment_seed: 42}\n")), 0);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts().size() == 2u; }));
  const std::vector<v1::StartTask> a = agent_->Starts();
  for (const v1::StartTask& s : a) {
    EXPECT_GE(Seed(s), 0);
    EXPECT_LT(Seed(s), int64_t{1} << 31);
  }
  EXPECT_NE(Seed(a[0]), Seed(a[1])) << "siblings get different seeds";
  // The same experiment seed gives the same seeds; another (here: the default, its id) others.
  ASSERT_GT(Create(Grid("b", "reproducibility: {experiment_seed: 42}\n")), 0);
  ASSERT_GT(Create(Grid("c")), 0);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts().size() == 6u; }));
  const std::vector<v1::StartTask> all = agent_->Starts();
  EXPECT_EQ(Seed(all[2]), Seed(a[0]));
  EXPECT_EQ(Seed(all[3]), Seed(a[1]));
  EXPECT_NE(Seed(all[4]), Seed(a[0]));
  EXPECT_NE(Seed(all[5]), Seed(a[1]));
  // A restart keeps its trial's seed.
  Exited(a[0], 1);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts(a[0].trial_id()).size() == 2u; }));
  const v1::StartTask again = agent_->Starts(a[0].trial_id())[1];
  EXPECT_EQ(again.restart(), 1);
  EXPECT_EQ(Seed(again), Seed(a[0]));
  // Bad seeds are refused, naming the key.
  auto bad = cluster_->CreateExperiment(Grid("d", "reproducibility: {experiment_seed: -1}\n"), true, false, "test");
  ASSERT_FALSE(bad.id.has_value());
  EXPECT_EQ(bad.errors[0].path, "reproducibility.experiment_seed");
}

TEST_F(CoreApiCallsTest, ATrialDeletesCheckpointsOfItsOwnExperimentOnly) {
  ASSERT_GT(Create(Grid("a")), 0);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts().size() == 2u; }));
  const std::vector<v1::StartTask> s = agent_->Starts();
  const std::string older = "0d5e3f8e-5f1c-4c1e-9a55-000000000010";
  const std::string newest = "0d5e3f8e-5f1c-4c1e-9a55-000000000020";
  ASSERT_TRUE(Checkpoint(s[0], older, 10).ok());
  ASSERT_TRUE(Checkpoint(s[0], newest, 20).ok());
  // Its sibling (same experiment) may delete the older one; not the one trial 1 would resume from.
  EXPECT_TRUE(cluster_->DeleteTrialCheckpoint(Who(s[1]), older).ok());
  auto gone = store_->GetCheckpoint(older);
  ASSERT_TRUE(gone.ok() && gone->has_value());
  EXPECT_EQ((*gone)->state(), "DELETED");
  EXPECT_EQ(cluster_->DeleteTrialCheckpoint(Who(s[0]), newest).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster_->DeleteTrialCheckpoint(Who(s[0]), "no-such-uuid").code(), StatusCode::kNotFound);
  EXPECT_EQ(cluster_->DeleteTrialCheckpoint(Who(s[0]), "").code(), StatusCode::kInvalidArgument);
  // Another experiment's trial may not.
  ASSERT_GT(Create(Grid("b")), 0);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts().size() == 4u; }));
  const Status foreign = cluster_->DeleteTrialCheckpoint(Who(agent_->Starts()[2]), newest);
  EXPECT_EQ(foreign.code(), StatusCode::kPermissionDenied) << foreign.ToString();
  // A caller that is not a live trial's task is refused before anything is read.
  v1::TrialIdentity stranger;
  stranger.set_trial_id(999);
  EXPECT_EQ(cluster_->DeleteTrialCheckpoint(stranger, older).code(), StatusCode::kNotFound);
}

// ReportCheckpointUnusable: a trial marks only a checkpoint it resumes from (its own); the
// coordinator's idea of its latest follows, so the next start restores the older one and
// offers no corrupted one as a fallback.
TEST_F(CoreApiCallsTest, ATrialReportsOnlyItsOwnCheckpointsUnusable) {
  // Retention keeps both (the default would drop the older one at once).
  ASSERT_GT(Create(Grid("a", "checkpoint_storage: {type: shared_fs, host_path: /tmp, save_trial_latest: 2}\n")), 0);
  ASSERT_TRUE(WaitFor([&] { return agent_->Starts().size() == 2u; }));
  const std::vector<v1::StartTask> s = agent_->Starts();
  const std::string older = "0d5e3f8e-5f1c-4c1e-9a55-000000000110";
  const std::string newest = "0d5e3f8e-5f1c-4c1e-9a55-000000000120";
  ASSERT_TRUE(Checkpoint(s[0], older, 10).ok());
  ASSERT_TRUE(Checkpoint(s[0], newest, 20).ok());
  // Its sibling does not resume from trial 1's checkpoint.
  auto sibling = cluster_->ReportCheckpointUnusable(Who(s[1]), newest, "x");
  EXPECT_EQ(sibling.status().code(), StatusCode::kPermissionDenied) << sibling.status().ToString();
  EXPECT_EQ(cluster_->ReportCheckpointUnusable(Who(s[0]), "no-such-uuid", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cluster_->ReportCheckpointUnusable(Who(s[0]), "", "x").status().code(), StatusCode::kInvalidArgument);
  auto latest = cluster_->ReportCheckpointUnusable(Who(s[0]), newest, "model.safetensors fails its SHA-256 check");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, older);
  auto row = store_->GetCheckpoint(newest);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->state(), "CORRUPTED");
  EXPECT_EQ(TrialRow(s[0].trial_id()).latest_checkpoint_uuid(), older);
}

TEST_F(CoreApiCallsTest, UserCodeThatAcknowledgedAWithdrawnStopResumesAndOneThatDidNotFails) {
  const std::string yaml =
      "name: user\nentrypoint: [python3, train.py]\n"
      "searcher: {name: single, metric: loss, max_length: {batches: 100}}\nmax_restarts: 0\n";
  for (bool acknowledge : {true, false}) {
    SCOPED_TRACE(acknowledge ? "acknowledged" : "not acknowledged");
    const int64_t experiment = Create(yaml);
    ASSERT_GT(experiment, 0);
    ASSERT_TRUE(WaitFor([&] {
      for (const v1::StartTask& s : agent_->Starts()) {
        if (s.experiment_id() == experiment) return true;
      }
      return false;
    }));
    v1::StartTask task;
    for (const v1::StartTask& s : agent_->Starts()) {
      if (s.experiment_id() == experiment) task = s;
    }
    // Running as far as the coordinator knows (the agent's start is acted on on its thread).
    ASSERT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
    // Paused: the script is told to checkpoint and stop; the pause is undone before it exits.
    ASSERT_TRUE(cluster_->PauseExperiment(experiment).ok());
    v1::ShouldStopRequest ask;
    *ask.mutable_who() = Who(task);
    auto answer = cluster_->ShouldStop(ask);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->action(), v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP);
    if (acknowledge) {
      ASSERT_TRUE(cluster_->AcknowledgePreemption(Who(task)).ok());
    }
    ASSERT_TRUE(cluster_->ActivateExperiment(experiment).ok());
    Exited(task, 0);
    if (acknowledge) {
      // Resumed in a new allocation, not failed.
      EXPECT_TRUE(WaitFor([&] { return agent_->Starts(task.trial_id()).size() == 2u; }));
      EXPECT_NE(TrialRow(task.trial_id()).state(), v1::TRIAL_STATE_ERROR);
    } else {
      EXPECT_EQ(TrialRow(task.trial_id()).state(), v1::TRIAL_STATE_ERROR);
      EXPECT_NE(TrialRow(task.trial_id()).error().find("exited with status 0 before completing"), std::string::npos)
          << TrialRow(task.trial_id()).error();
    }
    ASSERT_TRUE(cluster_->KillExperiment(experiment).ok());
    for (const v1::StartTask& s : agent_->Starts(task.trial_id())) {
      if (s.task_id() != task.task_id()) Exited(s, 143);
    }
  }
}

// report_early_exit (docs/core-api.md): the chief's reason decides how a clean exit with the
// operation unfinished ends the trial, with no restart whatever max_restarts allows.
TEST_F(CoreApiCallsTest, AnEarlyExitsReasonDecidesTheTrialsEndWithoutARestart) {
  const std::string yaml =
      "name: early\nentrypoint: [python3, train.py]\n"
      "searcher: {name: single, metric: loss, max_length: {batches: 100}}\nmax_restarts: 5\n";
  using Reason = v1::ReportEarlyExitRequest;
  for (auto [reason, state, words] :
       {std::tuple{Reason::REASON_ERRORED, v1::TRIAL_STATE_ERROR, "report_early_exit ERRORED"},
        std::tuple{Reason::REASON_USER_REQUESTED_STOP, v1::TRIAL_STATE_COMPLETED, ""}}) {
    SCOPED_TRACE(Reason::Reason_Name(reason));
    const int64_t experiment = Create(yaml);
    ASSERT_GT(experiment, 0);
    v1::StartTask task;
    ASSERT_TRUE(WaitFor([&] {
      for (const v1::StartTask& s : agent_->Starts()) {
        if (s.experiment_id() == experiment) task = s;
      }
      return task.trial_id() != 0 && TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_RUNNING;
    }));
    v1::ReportEarlyExitRequest early;
    *early.mutable_who() = Who(task);
    early.set_reason(reason);
    ASSERT_TRUE(cluster_->ReportEarlyExit(early).ok());
    Exited(task, 0);
    const v1::Trial row = TrialRow(task.trial_id());
    EXPECT_EQ(row.state(), state);
    EXPECT_NE(row.error().find(words), std::string::npos) << row.error();
    EXPECT_EQ(row.restarts(), 0);
    EXPECT_EQ(agent_->Starts(task.trial_id()).size(), 1u) << "no restart";
    // The experiment ends with its only trial; its outcome is the searcher's (a search in which
    // no trial validated, as here, ends in ERROR either way).
    auto e = store_->GetExperiment(experiment);
    ASSERT_TRUE(e.ok() && e->has_value());
    EXPECT_EQ((*e)->state(), v1::EXPERIMENT_STATE_ERROR);
  }
  // A reason is required.
  v1::ReportEarlyExitRequest none;
  none.mutable_who()->set_trial_id(1);
  EXPECT_EQ(cluster_->ReportEarlyExit(none).code(), StatusCode::kInvalidArgument);
}

// An unmanaged trial is alive while its script calls (the library's stop poll calls every
// second); one whose script went quiet past unmanaged_timeout ends in ERROR with its experiment.
class UnmanagedLivenessTest : public testing::CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    if (HasFatalFailure()) return;
    ClusterOptions o;
    o.unmanaged_timeout = std::chrono::milliseconds(1500);
    StartCluster(1, {}, o);
  }
  v1::TrialIdentity Unmanaged(const std::string& name) {
    Cluster::UnmanagedTrial made = cluster_->CreateUnmanagedTrial(
        "name: " + name + "\nentrypoint: python3 train.py\nsearcher: {name: single, metric: loss, max_length: {batches: 10}}\n",
        "test");
    EXPECT_TRUE(made.created.id.has_value())
        << (made.created.errors.empty() ? "" : made.created.errors[0].path + ": " + made.created.errors[0].message);
    v1::TrialIdentity who;
    who.set_trial_id(made.trial_id);
    who.set_task_id(made.task_id);
    return who;
  }
};

TEST_F(UnmanagedLivenessTest, AScriptThatStopsCallingEndsInErrorAndOneThatCallsStays) {
  const v1::TrialIdentity quiet = Unmanaged("quiet");
  const v1::TrialIdentity busy = Unmanaged("busy");
  v1::ShouldStopRequest poll;
  *poll.mutable_who() = busy;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3500);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(cluster_->ShouldStop(poll).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const v1::Trial ended = TrialRow(quiet.trial_id());
  EXPECT_EQ(ended.state(), v1::TRIAL_STATE_ERROR);
  EXPECT_NE(ended.error().find("unmanaged script made no call for"), std::string::npos) << ended.error();
  auto experiment = store_->GetExperiment(ExperimentOf(quiet.trial_id()));
  ASSERT_TRUE(experiment.ok() && experiment->has_value());
  EXPECT_EQ((*experiment)->state(), v1::EXPERIMENT_STATE_ERROR);
  EXPECT_EQ(TrialRow(busy.trial_id()).state(), v1::TRIAL_STATE_RUNNING) << "it kept calling";
  // Once it too goes quiet, it ends the same way.
  EXPECT_TRUE(WaitFor([&] { return TrialRow(busy.trial_id()).state() == v1::TRIAL_STATE_ERROR; }));
}

}  // namespace
}  // namespace sf::master
