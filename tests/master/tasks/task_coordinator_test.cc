// Tasks that are not trials (master/tasks/task_coordinator.h) against a scripted manager
// behind the real allocation service and a real PostgreSQL: a server is stored and submitted as
// a task of its own (its ranks' StartTask, tokens and rows), runs, reports its URL, restarts up
// to max_restarts and then fails, is preempted and queued again at its place, is stopped queued
// or running, is refused, and is held again after a master restart. And migration 016 on a
// database with servers carried by experiments (the layout before it).
#include "master/tasks/task_coordinator.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "master/allocation/task_ids.h"
#include "master/serving/serving.h"
#include "tests/master/allocation/scripted_manager.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;
using Kind = rm::AllocationEvent::Kind;

rm::AllocationEvent Running(const std::string& id, int ranks) {
  rm::AllocationEvent e = Event(Kind::kRunning, id);
  for (int r = 0; r < ranks; ++r) e.ranks.push_back({"agent-" + std::to_string(r), "cpu0"});
  return e;
}

rm::AllocationEvent Exited(const std::string& id, std::map<int, int> codes) {
  rm::AllocationEvent e = Event(Kind::kExited, id);
  e.exit_codes = std::move(codes);
  return e;
}

// The task a rank is admitted as (0 when refused).
int64_t Admitted(TaskCoordinator& tasks, const v1::TrialIdentity& who) {
  auto id = tasks.Admit(who);
  return id.ok() ? *id : 0;
}

v1::TrialIdentity Rank(const std::string& allocation, int rank) {
  v1::TrialIdentity who;
  who.set_task_id(TaskId(allocation, rank));
  who.set_rank(rank);
  return who;
}

class TaskCoordinatorTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    auto tokens = TaskTokens::FromHexSecret(std::string(64, 'a'));
    ASSERT_TRUE(tokens.ok());
    tokens_ = std::make_unique<TaskTokens>(std::move(tokens).value());
    store_ = std::make_unique<Store>(db_.get());
    Boot(agents_);
  }

  // A master: the allocation service over `manager`, and the task coordinator.
  void Boot(ScriptedManager& manager) {
    tasks_.reset();
    service_ = std::make_unique<AllocationService>(store_.get(), &manager, std::map<std::string, rm::ResourceManager*>{});
    tasks_ = std::make_unique<TaskCoordinator>(db_.get(), service_.get(),
                                               TaskCoordinatorOptions{"master:8090", {}, tokens_.get()});
  }

  int64_t StartServer(int slots = 1, int max_restarts = 5) {
    TaskSpec spec;
    spec.owner = "alice";
    spec.entrypoint = {"sf-serve", "--cluster-task", "--port", "0"};
    spec.slots = slots;
    spec.priority = 30;
    spec.max_restarts = max_restarts;
    NewServing row;
    row.model_name = "wmt";
    row.model_version = 3;
    row.checkpoint_uuid = "ck";
    row.slots = slots;
    row.resource_pool = "default";
    auto id = tasks_->Create(spec, [&](pqxx::work& tx, int64_t task) { ServingStore::InsertRow(tx, task, row); });
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  std::string Query(const std::string& sql) {
    std::string out;
    EXPECT_TRUE(db_->Transact("read", [&](pqxx::work& tx) {
                     pqxx::result r = tx.exec(sql);
                     out = r.empty() || r[0][0].is_null() ? "<null>" : r[0][0].as<std::string>();
                     return Status::Ok();
                   }).ok());
    return out;
  }
  std::string TaskState(int64_t id) { return Query("SELECT state FROM tasks WHERE id = " + std::to_string(id)); }
  std::string ServingState(int64_t id) {
    auto s = ServingStore(db_.get()).Get(id);
    return s.ok() ? s->state() : s.status().ToString();
  }

  std::unique_ptr<TaskTokens> tokens_;
  std::unique_ptr<Store> store_;
  ScriptedManager agents_{"agents"};
  std::unique_ptr<AllocationService> service_;
  std::unique_ptr<TaskCoordinator> tasks_;
};

TEST_F(TaskCoordinatorTest, AServerIsStoredAndSubmittedAsATaskOfItsOwn) {
  const int64_t id = StartServer(/*slots=*/2);
  ASSERT_GT(id, 0);
  const std::string a1 = TaskAllocationId(id, 0, 1);
  ASSERT_EQ(agents_.submitted, std::vector<std::string>{a1});
  const rm::GangLaunch& gang = agents_.gangs[0];
  EXPECT_EQ(gang.world_size, 2);
  EXPECT_EQ(gang.trial_id, 0);
  EXPECT_EQ(gang.experiment_id, -id) << "a task is a fair-share group of its own";
  EXPECT_EQ(gang.priority, 30);
  ASSERT_EQ(gang.ranks.size(), 2u);
  const v1::StartTask& rank1 = gang.ranks[1];
  EXPECT_EQ(rank1.task_id(), a1 + ".1");
  EXPECT_EQ(rank1.trial_id(), 0);
  EXPECT_EQ(rank1.master_address(), "master:8090");
  EXPECT_EQ(std::vector<std::string>(rank1.entrypoint().begin(), rank1.entrypoint().end()),
            (std::vector<std::string>{"sf-serve", "--cluster-task", "--port", "0"}));
  EXPECT_EQ(rank1.env().at("SF_SERVE_TOKEN"), tokens_->IssueServing(id));
  EXPECT_EQ(rank1.env().at("SF_TASK_KIND"), "SERVER");
  EXPECT_TRUE(tokens_->Verify(rank1.task_token(), {0, 1, 0, a1 + ".1"}).ok());
  EXPECT_FALSE(tokens_->Verify(rank1.task_token(), {0, 0, 0, a1 + ".0"}).ok());

  // Its rows: the task QUEUED, its allocation naming the task (not a trial), its server.
  EXPECT_EQ(TaskState(id), "QUEUED");
  EXPECT_EQ(Query("SELECT task_id FROM allocations WHERE id = '" + a1 + "'"), std::to_string(id));
  EXPECT_EQ(Query("SELECT trial_id FROM allocations WHERE id = '" + a1 + "'"), "<null>");
  EXPECT_EQ(ServingState(id), "QUEUED");

  agents_.Emit(Running(a1, 2));
  EXPECT_EQ(TaskState(id), "RUNNING");
  EXPECT_EQ(ServingState(id), "STARTING");
  EXPECT_EQ(ServingStore(db_.get()).Get(id)->agent_id(), "agent-0");

  // A rank of the current run reports the URL: READY there.
  v1::ReportEndpointRequest endpoint;
  *endpoint.mutable_who() = Rank(a1, 0);
  endpoint.set_url("http://agent-0:4242");
  ASSERT_TRUE(tasks_->ReportEndpoint(endpoint).ok());
  auto ready = ServingStore(db_.get()).Get(id);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->state(), "READY");
  EXPECT_EQ(ready->url(), "http://agent-0:4242");
  auto stop = tasks_->ShouldStop(Rank(a1, 1));
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->action(), v1::ShouldStopResponse::ACTION_CONTINUE);

  // Who may speak for it: a rank of its current run only.
  EXPECT_EQ(Admitted(*tasks_, Rank(a1, 1)), id);
  EXPECT_EQ(tasks_->Admit(Rank(a1, 2)).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(tasks_->Admit(Rank(TaskAllocationId(id, 0, 7), 0)).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(tasks_->Admit(Rank(TaskAllocationId(id + 100, 0, 1), 0)).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(TaskCoordinator::Names(Rank(a1, 0)));
  v1::TrialIdentity trial_rank;
  trial_rank.set_trial_id(12);
  trial_rank.set_task_id("t12-r0-a1.0");
  EXPECT_FALSE(TaskCoordinator::Names(trial_rank));
}

TEST_F(TaskCoordinatorTest, AFailedRunRestartsUntilMaxRestartsThenTheServerFails) {
  const int64_t id = StartServer(1, /*max_restarts=*/1);
  const std::string a1 = TaskAllocationId(id, 0, 1);
  agents_.Emit(Running(a1, 1));
  rm::AllocationEvent crash = Exited(a1, {{0, 1}});
  crash.first_failure = "rank 0 on agent-0: bad checkpoint";
  agents_.Emit(crash);
  // Started again as restart 1, the failure kept.
  const std::string a2 = TaskAllocationId(id, 1, 2);
  ASSERT_EQ(agents_.submitted, (std::vector<std::string>{a1, a2}));
  EXPECT_EQ(TaskState(id), "QUEUED");
  EXPECT_EQ(Query("SELECT restarts FROM tasks WHERE id = " + std::to_string(id)), "1");
  auto restarted = ServingStore(db_.get()).Get(id);
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ(restarted->restarts(), 1);
  EXPECT_NE(restarted->error().find("bad checkpoint"), std::string::npos) << restarted->error();
  // The earlier run's ranks speak for nothing now.
  EXPECT_EQ(tasks_->Admit(Rank(a1, 0)).status().code(), StatusCode::kFailedPrecondition);

  agents_.Emit(Running(a2, 1));
  agents_.Emit(Exited(a2, {{0, 137}}));
  EXPECT_EQ(agents_.submitted.size(), 2u) << "no restart past max_restarts";
  EXPECT_EQ(TaskState(id), "FAILED");
  EXPECT_NE(Query("SELECT end_time FROM tasks WHERE id = " + std::to_string(id)), "<null>");
  auto failed = ServingStore(db_.get()).Get(id);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state(), "FAILED");
  EXPECT_EQ(failed->error(), "task " + std::to_string(id) + ": exited with rank 0=137");
  EXPECT_EQ(tasks_->Admit(Rank(a2, 0)).status().code(), StatusCode::kNotFound);
}

TEST_F(TaskCoordinatorTest, APreemptedServerIsKilledAndQueuedAgainAtItsPlaceWithoutARestart) {
  const int64_t id = StartServer();
  const std::string a1 = TaskAllocationId(id, 0, 1);
  const int64_t order = agents_.gangs[0].submit_order;
  agents_.Emit(Running(a1, 1));
  agents_.Emit(Event(Kind::kPreempt, a1));
  EXPECT_EQ(agents_.killed, std::vector<std::string>{a1});
  EXPECT_EQ(tasks_->ShouldStop(Rank(a1, 0))->action(), v1::ShouldStopResponse::ACTION_STOP_NOW);
  agents_.Emit(Exited(a1, {{0, 0}}));
  const std::string a2 = TaskAllocationId(id, 0, 2);
  ASSERT_EQ(agents_.submitted, (std::vector<std::string>{a1, a2}));
  EXPECT_EQ(agents_.gangs[1].submit_order, order) << "a preempted task keeps its place";
  EXPECT_EQ(TaskState(id), "QUEUED");
  EXPECT_EQ(Query("SELECT restarts FROM tasks WHERE id = " + std::to_string(id)), "0");
}

TEST_F(TaskCoordinatorTest, StopTakesBackAQueuedServerAndEndsARunningOneWhenItExits) {
  const int64_t queued = StartServer();
  const std::string q1 = TaskAllocationId(queued, 0, 1);
  ASSERT_TRUE(tasks_->Stop(queued).ok());
  EXPECT_EQ(agents_.killed, std::vector<std::string>{q1}) << "taken back from its manager";
  EXPECT_EQ(TaskState(queued), "STOPPED");
  EXPECT_EQ(Query("SELECT state FROM allocations WHERE id = '" + q1 + "'"), "TERMINATED");
  EXPECT_EQ(tasks_->Stop(queued).code(), StatusCode::kNotFound);

  const int64_t running = StartServer();
  const std::string r1 = TaskAllocationId(running, 0, 1);
  agents_.Emit(Running(r1, 1));
  ASSERT_TRUE(tasks_->Stop(running).ok());
  EXPECT_EQ(agents_.killed, (std::vector<std::string>{q1, r1}));
  EXPECT_EQ(TaskState(running), "STOPPING");
  EXPECT_EQ(ServingState(running), "STOPPING");
  EXPECT_EQ(tasks_->ShouldStop(Rank(r1, 0))->action(), v1::ShouldStopResponse::ACTION_STOP_NOW);
  EXPECT_TRUE(tasks_->Stop(running).ok()) << "stopping twice is harmless";
  agents_.Emit(Exited(r1, {{0, 143}}));  // SIGTERM: a stop, not a failure
  EXPECT_EQ(TaskState(running), "STOPPED");
  EXPECT_EQ(ServingState(running), "STOPPED");
  EXPECT_EQ(agents_.submitted.size(), 2u) << "a stopped server is not started again";
}

TEST_F(TaskCoordinatorTest, AServerItsManagerRefusesFailsAtOnce) {
  const int64_t id = StartServer(1, 5);
  rm::AllocationEvent refused = Exited(TaskAllocationId(id, 0, 1), {});
  refused.refused = true;
  refused.reason = "pool \"gpu\" has no such partition";
  agents_.Emit(refused);
  EXPECT_EQ(TaskState(id), "FAILED");
  EXPECT_EQ(Query("SELECT error FROM tasks WHERE id = " + std::to_string(id)),
            "task " + std::to_string(id) + ": pool \"gpu\" has no such partition");
  EXPECT_EQ(agents_.submitted.size(), 1u);
}

TEST_F(TaskCoordinatorTest, AfterAMasterRestartLiveServersAreHeldAgain) {
  const int64_t running = StartServer(), queued = StartServer(), stopping = StartServer();
  const std::string r1 = TaskAllocationId(running, 0, 1), s1 = TaskAllocationId(stopping, 0, 1);
  agents_.Emit(Running(r1, 1));
  agents_.Emit(Running(s1, 1));
  ASSERT_TRUE(tasks_->Stop(stopping).ok());

  // A new master over the same database and a fresh manager.
  ScriptedManager after("agents");
  Boot(after);
  ASSERT_TRUE(tasks_->Recover().ok());
  // The running one's allocation is watched again (the agents re-report its ranks); the
  // stopping one's too, and killed; the queued one is submitted anew, as a new allocation.
  EXPECT_EQ(after.adopted, (std::vector<std::string>{r1 + "@", s1 + "@"}));
  EXPECT_EQ(after.killed, std::vector<std::string>{s1});
  EXPECT_EQ(after.submitted, std::vector<std::string>{TaskAllocationId(queued, 0, 2)});
  EXPECT_EQ(TaskState(running), "RUNNING");
  EXPECT_EQ(Admitted(*tasks_, Rank(r1, 0)), running) << "its ranks still speak for it";
  after.Emit(Running(r1, 1));
  EXPECT_EQ(TaskState(running), "RUNNING");
  after.Emit(Exited(s1, {{0, 143}}));
  EXPECT_EQ(TaskState(stopping), "STOPPED");
  // A rank none re-reported is lost: the run ends as a failure and the server restarts.
  after.Emit(Exited(r1, {{0, -1}}));
  EXPECT_EQ(after.submitted.back(), TaskAllocationId(running, 1, 2));
}

TEST_F(TaskCoordinatorTest, ACommandRunsOnceWithItsContextAndKeepsItsExitStatus) {
  TaskSpec spec;
  spec.kind = "COMMAND";
  spec.owner = "alice";
  spec.entrypoint = {"/bin/sh", "-c", "exit 3"};
  spec.max_restarts = 0;
  spec.context = "archive bytes";
  spec.context_sha256 = std::string(64, 'c');
  spec.context_bytes = 13;
  auto created = tasks_->Create(spec);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const int64_t id = *created;
  const std::string a1 = TaskAllocationId(id, 0, 1);
  ASSERT_EQ(agents_.gangs.size(), 1u);
  const v1::StartTask& rank0 = agents_.gangs[0].ranks[0];
  EXPECT_EQ(rank0.context_sha256(), std::string(64, 'c'));
  EXPECT_EQ(rank0.context_bytes(), 13);
  EXPECT_EQ(rank0.env().count("SF_SERVE_TOKEN"), 0u) << "only a server's clients need a token";
  // The agent fetches its context as its rank.
  auto archive = tasks_->Context(Rank(a1, 0));
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  EXPECT_EQ(*archive, "archive bytes");

  agents_.Emit(Running(a1, 1));
  // Not preempted: it holds its slot until it ends.
  agents_.Emit(Event(Kind::kPreempt, a1));
  EXPECT_TRUE(agents_.killed.empty());
  agents_.Emit(Exited(a1, {{0, 3}}));
  EXPECT_EQ(TaskState(id), "FAILED");
  EXPECT_EQ(Query("SELECT exit_code FROM tasks WHERE id = " + std::to_string(id)), "3");
  EXPECT_EQ(agents_.submitted.size(), 1u) << "a command runs once";

  spec.entrypoint = {"true"};
  spec.context.clear();
  spec.context_sha256.clear();
  auto ok = tasks_->Create(spec);
  ASSERT_TRUE(ok.ok());
  const std::string b1 = TaskAllocationId(*ok, 0, 1);
  EXPECT_EQ(tasks_->Context(Rank(b1, 0)).status().code(), StatusCode::kNotFound);
  agents_.Emit(Running(b1, 1));
  agents_.Emit(Exited(b1, {{0, 0}}));
  EXPECT_EQ(TaskState(*ok), "COMPLETED");
  auto shown = TaskStore(db_.get()).Get(*ok);
  ASSERT_TRUE(shown.ok() && shown->has_value());
  EXPECT_EQ((*shown)->state(), "COMPLETED");
  EXPECT_EQ((*shown)->exit_code(), 0);
  EXPECT_TRUE((*shown)->has_exit_code());
  auto listed = TaskStore(db_.get()).List("COMMAND", /*include_ended=*/true);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);
  // Any int64 id is looked up (the API's path parameter is one): none there, no error.
  auto none = TaskStore(db_.get()).Get(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  auto live = TaskStore(db_.get()).List("", /*include_ended=*/false);
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty());
}

// Migration 016 on the layout before it: each server's experiment becomes a task (a live one is
// stopped with its experiment canceled), and those experiments stay out of the list.
class TaskUpgradeTest : public sf::testing::PostgresTest {};

TEST_F(TaskUpgradeTest, MigrationSixteenTurnsEachServersExperimentIntoAStoppedTask) {
  auto db = Database::Open(connection_string(), 2, std::chrono::seconds(10));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  // The schema as a master before migration 016 left it, with two servers and an experiment.
  int64_t ended = 0, live = 0, plain = 0, live_trial = 0;
  Status before = (*db)->Transact("before 016", [&](pqxx::work& tx) {
                      tx.exec("CREATE TABLE schema_migrations (version INT PRIMARY KEY, name TEXT NOT NULL, "
                              "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
                      for (const Migration& m : Migrations()) {
                        if (m.version >= 16) continue;
                        tx.exec(m.sql);
                        tx.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                                       m.name);
                      }
                      auto experiment = [&](const std::string& state, const std::string& owner) {
                        return tx.exec_params1(
                                     "INSERT INTO experiments (name, state, config_yaml, owner, searcher, metric, smaller_is_better, priority) "
                                     "VALUES ('x', $1, '', $2, 'single', 'serving', true, 42) RETURNING id",
                                     state, owner)[0]
                            .as<int64_t>();
                      };
                      ended = experiment("CANCELED", "bob");
                      live = experiment("ACTIVE", "carol");
                      plain = experiment("ACTIVE", "dave");
                      live_trial = tx.exec_params1("INSERT INTO trials (experiment_id, request_id, state, hparams) "
                                                   "VALUES ($1, 1, 'RUNNING', '{}') RETURNING id",
                                                   live)[0]
                                       .as<int64_t>();
                      for (int64_t e : {ended, live}) {
                        tx.exec_params(
                            "INSERT INTO servings (experiment_id, model_id, model_name, model_version, "
                            "checkpoint_uuid, slots, resource_pool) VALUES ($1, 1, 'wmt', 2, 'ck', 1, 'default')",
                            e);
                      }
                      return Status::Ok();
                    });
  ASSERT_TRUE(before.ok()) << before.ToString();
  Status migrated = (*db)->Migrate();
  ASSERT_TRUE(migrated.ok()) << migrated.ToString();
  EXPECT_GE((*db)->SchemaVersion(), 16);
  auto read = [&](const std::string& sql) {
    std::vector<std::string> out;
    EXPECT_TRUE((*db)->Transact("read", [&](pqxx::work& tx) {
                        for (const auto& row : tx.exec(sql)) {
                          std::string line;
                          for (const auto& field : row) line += (line.empty() ? "" : "|") + field.as<std::string>("<null>");
                          out.push_back(line);
                        }
                        return Status::Ok();
                      }).ok());
    return out;
  };
  const std::vector<std::string> tasks =
      read("SELECT t.kind, t.state, t.owner, s.legacy_experiment_id, t.end_time IS NOT NULL, "
           "t.error LIKE '%migration 016%' FROM servings s JOIN tasks t ON t.id = s.task_id ORDER BY t.id");
  EXPECT_EQ(tasks, (std::vector<std::string>{"SERVER|STOPPED|bob|" + std::to_string(ended) + "|t|f",
                                             "SERVER|STOPPED|carol|" + std::to_string(live) + "|t|t"}));
  EXPECT_EQ(read("SELECT state FROM experiments WHERE id = " + std::to_string(live)), std::vector<std::string>{"CANCELED"});
  EXPECT_EQ(read("SELECT state FROM trials WHERE id = " + std::to_string(live_trial)),
            std::vector<std::string>{"CANCELED"});
  EXPECT_EQ(read("SELECT state FROM experiments WHERE id = " + std::to_string(plain)), std::vector<std::string>{"ACTIVE"});
  // The servers' old experiments stay out of the list; the user's is in it.
  ExperimentFilter filter;
  auto listed = Store(db->get()).ListExperiments(filter);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->first.size(), 1u);
  EXPECT_EQ(listed->first[0].id(), plain);
  // Servers list as tasks now.
  auto servers = ServingStore(db->get()).List(/*include_stopped=*/true);
  ASSERT_TRUE(servers.ok()) << servers.status().ToString();
  EXPECT_EQ(servers->size(), 2u);
}

}  // namespace
}  // namespace sf::master
