// The coordinator across a master restart, against real PostgreSQL and no processes (the test
// plays the agent and the trainer): what the searcher decided before the restart still holds
// for the trials whose ranks outlive it.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "tests/master/core/coordinator_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;

class CoordinatorRestartTest : public testing::CoordinatorTest {
 protected:
  // A master restart: the coordinator and the agents' manager stop and start again on the same
  // database; the agent comes back reporting `running`.
  void Restart(const std::vector<v1::StartTask>& running) {
    Die();
    StartCluster(/*slots=*/1, {}, {}, running);
  }
  // Runs `statement` on the test's database (a failure fails the test).
  void Sql(const std::string& statement) {
    EXPECT_TRUE(db_->Transact("test", [&](pqxx::work& tx) {
                     tx.exec(statement);
                     return Status::Ok();
                   }).ok())
        << statement;
  }
  // The one number `query` selects (-1 when it cannot be read).
  int64_t Number(const std::string& query) {
    int64_t n = -1;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     n = tx.exec1(query)[0].as<int64_t>();
                     return Status::Ok();
                   }).ok())
        << query;
    return n;
  }
  // From now on every write of a searcher snapshot fails, as if the master died just before it
  // committed; AllowSnapshots() ends that.
  void RefuseSnapshots() {
    Sql("CREATE FUNCTION died_here() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the master died before this commit'; END $$");
    Sql("CREATE TRIGGER died_here BEFORE INSERT OR UPDATE ON searcher_snapshots "
        "FOR EACH ROW EXECUTE FUNCTION died_here()");
  }
  void AllowSnapshots() { Sql("DROP TRIGGER died_here ON searcher_snapshots"); }
  // The master dies: the coordinator and the agents' manager go without a word more.
  void Die() {
    cluster_->Stop();
    cluster_.reset();
    agents_.reset();
  }
  // Creates the experiment of `config` and returns its first started task once its trial runs.
  v1::StartTask FirstRunningTask(const std::string& config, int64_t* experiment) {
    auto created = cluster_->CreateExperiment(config, true, false, "test");
    EXPECT_TRUE(created.id.has_value());
    *experiment = created.id.value_or(0);
    EXPECT_TRUE(WaitFor([&] { return !agent_->Starts().empty(); }));
    if (agent_->Starts().empty()) return {};
    const v1::StartTask task = agent_->Starts()[0];
    EXPECT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
    return task;
  }
  // The first task started for a trial other than `trial_id`, once there is one.
  std::optional<v1::StartTask> OtherStart(int64_t trial_id) {
    for (const v1::StartTask& s : agent_->Starts()) {
      if (s.trial_id() != trial_id) return s;
    }
    return std::nullopt;
  }
  // Plays the trainer of every task the master starts until `experiment` ends (true when it
  // COMPLETED within 30 s): each asks for its operation, completes it with metric 0.5 and exits.
  // The tasks in `played` the test played itself.
  bool TrainToTheEnd(int64_t experiment, std::set<std::string> played = {}) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      auto e = store_->GetExperiment(experiment);
      if (e.ok() && e->has_value() && (*e)->state() == v1::EXPERIMENT_STATE_COMPLETED) return true;
      for (const v1::StartTask& s : agent_->Starts()) {
        if (played.count(s.task_id()) || TrialRow(s.trial_id()).state() != v1::TRIAL_STATE_RUNNING) continue;
        played.insert(s.task_id());
        auto op = cluster_->NextOperation(Who(s), std::chrono::milliseconds(0));
        if (op.ok() && op->has_train()) {
          EXPECT_TRUE(cluster_->CompleteOperation(Completion(s, op->train().target_length())).ok());
        }
        Exited(s, 0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The trainer of `task` says its operation to `length` batches is done, with metric 0.5.
  static v1::CompleteOperationRequest Completion(const v1::StartTask& task, int64_t length = 100) {
    v1::CompleteOperationRequest done;
    *done.mutable_who() = Who(task);
    done.mutable_op()->set_target_length(length);
    done.mutable_op()->set_unit("batches");
    done.set_searcher_metric(0.5);
    return done;
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

// Found by bench/sim/run.sh with KILL_MASTER_EVERY=3: the trial's completed length was stored
// before the searcher's snapshot, so a master that died between the two answered the trainer's
// retry "already have it", and the searcher, restored without the completion, never ended the
// trial (its trainer waited in GetNextOperation until the run's end). The snapshot's write is
// refused here as the death between the two.
TEST_F(CoordinatorRestartTest, ACompletionTheSearcherNeverStoredIsHeardWhenTheTrainerRetriesAfterTheRestart) {
  StartCluster(/*slots=*/1);
  int64_t experiment = 0;
  const v1::StartTask task = FirstRunningTask(
      "name: died\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}\n",
      &experiment);
  if (HasFailure()) return;
  const std::string completed_length =
      "SELECT completed_length FROM trials WHERE id = " + std::to_string(task.trial_id());
  RefuseSnapshots();
  const v1::CompleteOperationRequest done = Completion(task);
  ASSERT_TRUE(cluster_->CompleteOperation(done).ok());
  Die();  // its last snapshot fails too: nothing past the refused commit is stored
  AllowSnapshots();
  EXPECT_EQ(Number(completed_length), 0) << "the completion is stored with the searcher's state, or not at all";

  StartCluster(/*slots=*/1, {}, {}, {task});
  ASSERT_TRUE(cluster_->CompleteOperation(done).ok());  // the trainer's retry
  Exited(task, 0);
  ASSERT_TRUE(WaitFor([&] { return TrialRow(task.trial_id()).state() == v1::TRIAL_STATE_COMPLETED; }))
      << "state " << v1::TrialState_Name(TrialRow(task.trial_id()).state());
  auto e = store_->GetExperiment(experiment);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->state(), v1::EXPERIMENT_STATE_COMPLETED);
  EXPECT_EQ(Number(completed_length), 100);
}

// Found the same way: a trial's close made the searcher create the next trial, the master died
// after the next trial's row and before the searcher's snapshot, and the searcher, restored
// without the close, never heard it again: the next trial ran for a request it did not know, and
// the experiment never ended. The restarted master replays completed trials' closes; the request
// they create again is the trial created before, not a second row.
TEST_F(CoordinatorRestartTest, ACloseTheSearcherNeverStoredIsReplayedAndTheTrialItCreatedIsTheOneItGets) {
  StartCluster(/*slots=*/1);
  int64_t experiment = 0;
  const v1::StartTask first = FirstRunningTask(
      "name: next\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "hyperparameters: {dropout: {type: double, minval: 0.0, maxval: 0.3}}\n"
      "searcher: {name: random, metric: validation_loss, max_length: {batches: 100}, max_trials: 2,"
      " max_concurrent_trials: 1, seed: 7}\n",
      &experiment);
  if (HasFailure()) return;
  const std::string trials = "SELECT count(*) FROM trials WHERE experiment_id = " + std::to_string(experiment);
  // Stored: the searcher closes the trial when its rank exits.
  ASSERT_TRUE(cluster_->CompleteOperation(Completion(first)).ok());
  RefuseSnapshots();
  Exited(first, 0);  // closed, the next trial created; the snapshot never stored
  ASSERT_TRUE(WaitFor([&] { return Number(trials) == 2; })) << "the next trial's row";
  Die();
  AllowSnapshots();

  StartCluster(/*slots=*/1);
  ASSERT_TRUE(WaitFor([&] { return OtherStart(first.trial_id()).has_value(); })) << "the second trial never started";
  const v1::StartTask second = *OtherStart(first.trial_id());
  ASSERT_TRUE(WaitFor([&] { return TrialRow(second.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  ASSERT_TRUE(cluster_->CompleteOperation(Completion(second)).ok());
  Exited(second, 0);
  ASSERT_TRUE(WaitFor([&] {
    auto e = store_->GetExperiment(experiment);
    return e.ok() && e->has_value() && (*e)->state() == v1::EXPERIMENT_STATE_COMPLETED;
  })) << "the experiment never ended";
  EXPECT_EQ(Number(trials), 2) << "no third row";
}

// Found by cluster_sim_chaos_test (CI): the master died between an experiment's rows (the
// experiment, its trials, their operations) and the searcher's first snapshot. Restored with no
// snapshot, the searcher never began its search: the trials the restarted master queued from
// their rows completed operations it did not know, stayed QUEUED, and the experiment never
// ended. The restarted master starts the search again over the trials that exist.
TEST_F(CoordinatorRestartTest, AnExperimentWhoseSearcherNeverStoredASnapshotStartsItsSearchAgain) {
  StartCluster(/*slots=*/1);
  RefuseSnapshots();
  int64_t experiment = 0;
  const v1::StartTask first = FirstRunningTask(
      "name: unsaved\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "hyperparameters: {lr: {type: categorical, vals: [0.1, 0.2]}}\n"
      "searcher: {name: grid, metric: validation_loss, max_length: {batches: 100}}\n",
      &experiment);
  if (HasFailure()) return;
  Die();
  AllowSnapshots();
  const std::string where = " WHERE experiment_id = " + std::to_string(experiment);
  ASSERT_EQ(Number("SELECT count(*) FROM searcher_snapshots" + where), 0) << "the death is before the first snapshot";
  ASSERT_EQ(Number("SELECT count(*) FROM trials" + where), 2);

  StartCluster(/*slots=*/1, {}, {}, {first});
  EXPECT_TRUE(TrainToTheEnd(experiment)) << "the experiment never ended";
  EXPECT_EQ(Number("SELECT count(*) FROM trials" + where), 2) << "no trial created twice";
  EXPECT_EQ(Number("SELECT count(*) FROM trials" + where + " AND state = 'COMPLETED' AND completed_length = 100"), 2);
}

// A continued experiment (`sf experiment continue`) whose master died after the experiment's row
// and before its trial's (and the searcher's first snapshot): the search restarts, and the trial
// it creates must start from the checkpoint the experiment continues, not from scratch. That
// checkpoint lived only in the dead master's memory before migration 023.
TEST_F(CoordinatorRestartTest, AContinuedExperimentsTrialCreatedAfterARestartStartsFromItsCheckpoint) {
  StartCluster(/*slots=*/1);
  // What is continued: a completed trial of another experiment and its checkpoint (rows only).
  NewExperiment original;
  original.name = "original";
  original.config_yaml = "name: original\n";
  original.searcher = "single";
  original.metric = "validation_loss";
  original.state = "COMPLETED";
  auto original_id = store_->CreateExperiment(original);
  ASSERT_TRUE(original_id.ok()) << original_id.status().message();
  auto original_trial = store_->CreateTrial(*original_id, 1, Value(Value::Map{}), "COMPLETED");
  ASSERT_TRUE(original_trial.ok()) << original_trial.status().message();
  v1::Checkpoint checkpoint;
  checkpoint.set_uuid("7a1d3c52-continued-from");
  checkpoint.set_trial_id(*original_trial);
  checkpoint.set_batches(100);
  checkpoint.set_path("/checkpoints/7a1d3c52-continued-from");
  ASSERT_TRUE(store_->InsertCheckpoint(checkpoint).ok());

  // The master dies before any trial row or snapshot of the continuation commits.
  RefuseSnapshots();
  Sql("CREATE TRIGGER died_here_too BEFORE INSERT ON trials FOR EACH ROW EXECUTE FUNCTION died_here()");
  auto created = cluster_->CreateExperiment(
      "name: continued\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 200}}\n",
      true, false, "test", checkpoint.uuid());
  ASSERT_TRUE(created.id.has_value());
  const int64_t experiment = *created.id;
  Die();
  AllowSnapshots();
  Sql("DROP TRIGGER died_here_too ON trials");
  const std::string where = " WHERE experiment_id = " + std::to_string(experiment);
  ASSERT_EQ(Number("SELECT count(*) FROM trials" + where), 0) << "the death is before the trial's row";

  StartCluster(/*slots=*/1);
  ASSERT_TRUE(WaitFor([&] { return !agent_->Starts().empty(); })) << "the continuation's trial never started";
  const v1::StartTask start = agent_->Starts()[0];
  EXPECT_EQ(start.restore_checkpoint_uuid(), checkpoint.uuid()) << "the trial started from scratch";
  EXPECT_EQ(start.restore_checkpoint(), checkpoint.path());
  EXPECT_EQ(TrialRow(start.trial_id()).latest_checkpoint_uuid(), checkpoint.uuid());
  EXPECT_TRUE(TrainToTheEnd(experiment)) << "the experiment never ended";
}

// Found the same way: a completion made ASHA create the next trial, and the master died after
// that trial's row (and operation) and before the searcher's snapshot. The restarted master
// queued the new trial from its row; it trained and completed its operation for a searcher,
// restored without it, that ignored the completion; when the first trial's retried completion
// made the searcher create that request again, it waited for ever for an operation already done
// (QUEUED at 10/10 in the chaos run). The searcher hears the stored completion then.
TEST_F(CoordinatorRestartTest, ACompletionOfATrialTheSearcherDidNotKnowYetIsHeardWhenItAsksForIt) {
  StartCluster(/*slots=*/2);
  int64_t experiment = 0;
  const v1::StartTask first = FirstRunningTask(
      "name: asha\ndata: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "hyperparameters: {lr: {type: double, minval: 0.01, maxval: 0.1}}\n"
      "searcher: {name: adaptive_asha, metric: validation_loss, max_length: {batches: 100}, mode: aggressive,"
      " max_rungs: 2, divisor: 2, max_trials: 4, max_concurrent_trials: 1, seed: 3}\n",
      &experiment);
  if (HasFailure()) return;
  const std::string where = " WHERE experiment_id = " + std::to_string(experiment);
  RefuseSnapshots();
  ASSERT_TRUE(cluster_->CompleteOperation(Completion(first, 50)).ok());  // rung 0: the next trial is created
  ASSERT_EQ(Number("SELECT count(*) FROM trials" + where), 2);
  Die();
  AllowSnapshots();

  StartCluster(/*slots=*/2, {}, {}, {first});
  // The second trial runs from its row and completes its operation first.
  ASSERT_TRUE(WaitFor([&] { return OtherStart(first.trial_id()).has_value(); })) << "the second trial never started";
  const v1::StartTask second = *OtherStart(first.trial_id());
  ASSERT_TRUE(WaitFor([&] { return TrialRow(second.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  ASSERT_TRUE(cluster_->CompleteOperation(Completion(second, 50)).ok());
  Exited(second, 0);
  ASSERT_TRUE(WaitFor([&] { return TrialRow(second.trial_id()).state() == v1::TRIAL_STATE_QUEUED; }));
  // The first trial's trainer retries its completion; the searcher creates the second request
  // again, and the rest of the search runs.
  ASSERT_TRUE(cluster_->CompleteOperation(Completion(first, 50)).ok());
  Exited(first, 0);
  EXPECT_TRUE(TrainToTheEnd(experiment, {first.task_id(), second.task_id()})) << "the experiment never ended; the second trial is "
                                         << v1::TrialState_Name(TrialRow(second.trial_id()).state());
  EXPECT_EQ(Number("SELECT count(*) FROM trials" + where), 4) << "max_trials, each created once";
}

// Found by cluster_sim_chaos_test (CI, a second run): the searcher closed a trial whose
// operation was done, and its run then failed (in the chaos run, a gang's other rank), so it was
// queued to run once more, hear "complete" and end; the master died before that run started, and
// the restarted master queued only trials with an operation left: the trial stayed QUEUED
// (60/60, closing) for ever, and its experiment never ended.
TEST_F(CoordinatorRestartTest, AClosedTrialWhoseLastRunFailedRunsOnceMoreAfterARestartAndCompletes) {
  StartCluster(/*slots=*/1);
  const std::string single =
      "data: {train: {src: /data/train.de, tgt: /data/train.en}}\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}\n";
  int64_t experiment = 0;
  const v1::StartTask closed = FirstRunningTask("name: closed-then-failed\n" + single, &experiment);
  if (HasFailure()) return;
  ASSERT_TRUE(cluster_->CompleteOperation(Completion(closed)).ok());  // the single searcher closes it
  // Another experiment waits for the slot and takes it when the closed trial's run fails.
  auto waiting = cluster_->CreateExperiment("name: waiting\n" + single, true, false, "test");
  ASSERT_TRUE(waiting.id.has_value());
  Exited(closed, 1);
  ASSERT_TRUE(WaitFor([&] { return OtherStart(closed.trial_id()).has_value(); })) << "the other never started";
  const v1::StartTask other = *OtherStart(closed.trial_id());
  ASSERT_TRUE(WaitFor([&] { return TrialRow(other.trial_id()).state() == v1::TRIAL_STATE_RUNNING; }));
  ASSERT_EQ(TrialRow(closed.trial_id()).state(), v1::TRIAL_STATE_QUEUED) << "queued to run once more";
  Die();

  StartCluster(/*slots=*/1, {}, {}, {other});
  EXPECT_TRUE(TrainToTheEnd(experiment, {closed.task_id()}))
      << "the closed trial is " << v1::TrialState_Name(TrialRow(closed.trial_id()).state());
  EXPECT_EQ(TrialRow(closed.trial_id()).state(), v1::TRIAL_STATE_COMPLETED);
}

}  // namespace
}  // namespace sf::master
