// The model registry's store (master/db/model_store.h) against a real PostgreSQL: models and
// their errors, version numbering under concurrent registrations, and the protection of a model
// version's checkpoint from explicit deletion, retention passes and experiment deletion.
#include "master/db/model_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "master/housekeeping/checkpoint_retention.h"
#include "master/housekeeping/experiment_deletion.h"
#include "master/ingest/metric_writer.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {
namespace fs = std::filesystem;
namespace v1 = steadfast::v1;

class ModelStoreTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    CreateRunningTrials("registry", 1, &trials_);
    if (HasFatalFailure()) return;
    experiment_ = ExperimentOf(trials_[0]);
    experiment_dir_ = dir_.path() + "/experiment-" + std::to_string(experiment_);
  }

  // A checkpoint of the trial at `batches`, with its directory under the experiment's.
  void AddCheckpoint(const std::string& uuid, int64_t batches) {
    const std::string path = experiment_dir_ + "/" + uuid;
    fs::create_directories(path);
    std::ofstream(path + "/model.safetensors") << "weights";
    v1::Checkpoint c;
    c.set_uuid(uuid);
    c.set_trial_id(trials_[0]);
    c.set_batches(batches);
    c.set_path(path);
    ASSERT_TRUE(Store(db_.get()).InsertCheckpoint(c).ok());
  }

  void FinishExperiment() {
    TrialUpdate u;
    u.state = "COMPLETED";
    ASSERT_TRUE(Store(db_.get()).UpdateTrial(trials_[0], u).ok());
    ASSERT_TRUE(Store(db_.get()).SetExperimentState(experiment_, "COMPLETED", "", true).ok());
  }

  v1::Model Create(const std::string& name, std::vector<std::string> labels = {}) {
    NewModel m;
    m.name = name;
    m.owner = "alice";
    m.labels = std::move(labels);
    auto created = ModelStore(db_.get()).Create(m);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : v1::Model();
  }

  sf::testing::TempDir dir_;
  int64_t experiment_ = 0;
  std::string experiment_dir_;
  std::vector<int64_t> trials_;
};

TEST_F(ModelStoreTest, ModelsAreCreatedListedEditedArchivedAndDeleted) {
  ModelStore store(db_.get());
  const v1::Model m = Create("wmt-de-en", {"nlp", "de", "nlp"});
  EXPECT_EQ(m.name(), "wmt-de-en");
  EXPECT_EQ(m.owner(), "alice");
  EXPECT_EQ(m.workspace(), "Uncategorized");
  EXPECT_EQ(std::vector<std::string>(m.labels().begin(), m.labels().end()), (std::vector<std::string>{"de", "nlp"}));
  Create("imagenet.resnet_50");

  ModelFilter f;
  auto all = store.List(f);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->second, 2);
  f.label = "nlp";
  auto nlp = store.List(f);
  ASSERT_TRUE(nlp.ok());
  ASSERT_EQ(nlp->first.size(), 1u);
  EXPECT_EQ(nlp->first[0].name(), "wmt-de-en");
  f = ModelFilter();
  f.name_contains = "RESNET";
  f.limit = 1;
  auto by_name = store.List(f);
  ASSERT_TRUE(by_name.ok());
  ASSERT_EQ(by_name->first.size(), 1u);
  EXPECT_EQ(by_name->first[0].name(), "imagenet.resnet_50");

  // By id as well as by name.
  ModelEdit edit;
  edit.description = "German to English";
  edit.add_labels = {"prod"};
  edit.remove_labels = {"de"};
  auto edited = store.Update(std::to_string(m.id()), edit);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_EQ(edited->description(), "German to English");
  EXPECT_EQ(std::vector<std::string>(edited->labels().begin(), edited->labels().end()),
            (std::vector<std::string>{"nlp", "prod"}));

  ASSERT_TRUE(store.SetArchived("wmt-de-en", true).ok());
  auto unarchived_only = store.List(ModelFilter());
  ASSERT_TRUE(unarchived_only.ok());
  EXPECT_EQ(unarchived_only->second, 1) << "archived models are left out by default";
  ASSERT_TRUE(store.SetArchived("wmt-de-en", false).ok());

  EXPECT_TRUE(store.Delete("imagenet.resnet_50", false).ok());
  EXPECT_EQ(store.Get("imagenet.resnet_50").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelStoreTest, BadInputIsRefusedNamingTheFieldOrTheModel) {
  ModelStore store(db_.get());
  Create("taken");
  NewModel m;
  m.name = "taken";
  Status dup = store.Create(m).status();
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.message().find("\"taken\" already exists"), std::string::npos) << dup.message();
  for (const std::string& bad : {std::string(), std::string(129, 'a'), std::string("has space"), std::string("a/b"),
                                 std::string("-leading"), std::string("12345"), std::string("ü")}) {
    m.name = bad;
    Status st = store.Create(m).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(st.message().rfind("name: ", 0), 0u) << st.message();
  }
  m.name = std::string(128, 'a');
  EXPECT_TRUE(store.Create(m).ok()) << "128 characters is the limit, not over it";
  m.name = "labelled";
  m.labels = {"a,b"};
  EXPECT_EQ(store.Create(m).status().code(), StatusCode::kInvalidArgument);

  Status unknown = store.Get("nope").status();
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("model \"nope\" does not exist"), std::string::npos) << unknown.message();
  Status no_checkpoint = store.RegisterVersion("taken", "no-such-uuid", "", "alice").status();
  EXPECT_EQ(no_checkpoint.code(), StatusCode::kNotFound);
  EXPECT_NE(no_checkpoint.message().find("checkpoint no-such-uuid does not exist"), std::string::npos);
  EXPECT_EQ(store.RegisterVersion("nope", "x", "", "alice").status().code(), StatusCode::kNotFound);
  Status no_version = store.GetVersion("taken", 3).status();
  EXPECT_EQ(no_version.code(), StatusCode::kNotFound);
  EXPECT_NE(no_version.message().find("has no version 3"), std::string::npos) << no_version.message();
  EXPECT_EQ(store.DeleteVersion("taken", 0).code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelStoreTest, VersionsAreNumberedFromOneAndNeverReused) {
  ModelStore store(db_.get());
  Create("m");
  for (const char* uuid : {"c1", "c2", "c3"}) AddCheckpoint(uuid, 10);
  if (HasFatalFailure()) return;
  auto v1 = store.RegisterVersion("m", "c1", "first", "alice");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->version(), 1);
  EXPECT_EQ(v1->trial_id(), trials_[0]);
  EXPECT_EQ(v1->experiment_id(), experiment_);
  EXPECT_EQ(v1->notes(), "first");
  EXPECT_EQ(store.RegisterVersion("m", "c1", "", "alice").status().code(), StatusCode::kAlreadyExists);
  ASSERT_EQ(store.RegisterVersion("m", "c2", "", "bob")->version(), 2);
  ASSERT_TRUE(store.DeleteVersion("m", 2).ok());
  EXPECT_EQ(store.RegisterVersion("m", "c3", "", "bob")->version(), 3) << "2 was given once: never again";
  auto got = store.Get("m");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->versions_size(), 2);
  EXPECT_EQ(got->versions(0).version(), 1);
  EXPECT_EQ(got->versions(1).version(), 3);
  EXPECT_EQ(got->model().latest_version(), 3);
  // Archived: no new versions. Delete: refused while it has versions, unless forced.
  AddCheckpoint("c4", 40);
  ASSERT_TRUE(store.SetArchived("m", true).ok());
  EXPECT_EQ(store.RegisterVersion("m", "c4", "", "bob").status().code(), StatusCode::kFailedPrecondition);
  Status refused = store.Delete("m", false);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("has 2 versions"), std::string::npos) << refused.message();
  EXPECT_TRUE(store.Delete("m", true).ok());
  EXPECT_EQ(CheckpointState("c1"), "ACTIVE") << "the checkpoints stay";
}

TEST_F(ModelStoreTest, ConcurrentRegistrationsGetOneToNExactly) {
  constexpr int kThreads = 16;
  Create("busy");
  for (int i = 0; i < kThreads; ++i) AddCheckpoint("ck-" + std::to_string(i), 10 + i);
  if (HasFatalFailure()) return;
  // A pool of its own, one connection per thread, so the registrations really overlap.
  auto db = Database::Open(connection_string(), kThreads, std::chrono::seconds(10));
  ASSERT_TRUE(db.ok());
  ModelStore store(db->get());
  std::vector<int> versions(kThreads, 0);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      auto v = store.RegisterVersion("busy", "ck-" + std::to_string(i), "", "t" + std::to_string(i));
      EXPECT_TRUE(v.ok()) << v.status().ToString();
      if (v.ok()) versions[i] = v->version();
    });
  }
  for (auto& t : threads) t.join();
  std::sort(versions.begin(), versions.end());
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(versions[i], i + 1);
  auto got = store.Get("busy");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->versions_size(), kThreads);
}

TEST_F(ModelStoreTest, AVersionsCheckpointIsKeptByDeleteRetentionAndExperimentDeletion) {
  ModelStore store(db_.get());
  Create("wmt-de-en");
  AddCheckpoint("old", 10);
  AddCheckpoint("mid", 20);
  AddCheckpoint("new", 30);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(store.RegisterVersion("wmt-de-en", "mid", "", "alice").ok());
  ASSERT_EQ(store.RegisterVersion("wmt-de-en", "old", "", "alice")->version(), 2);

  // Explicit deletion names the model and the version.
  Status refused = DeleteCheckpoint(db_.get(), "old", dir_.path());
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), "checkpoint old is version 2 of model \"wmt-de-en\"; delete that version first");
  EXPECT_EQ(CheckpointState("old"), "ACTIVE");
  EXPECT_TRUE(fs::exists(experiment_dir_ + "/old/model.safetensors"));

  // Retention keeping only the latest keeps the registered ones too.
  FinishExperiment();
  if (HasFatalFailure()) return;
  auto marked = MarkCheckpointsForRetention(db_.get(), experiment_, RetentionPolicy{1, 0, 0, true});
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  EXPECT_TRUE(marked->empty()) << marked->size() << " marked, first " << (*marked)[0].uuid;
  EXPECT_EQ(CheckpointState("old"), "ACTIVE");
  EXPECT_EQ(CheckpointState("mid"), "ACTIVE");

  // Experiment deletion is refused, rows and files kept.
  Status experiment = DeleteExperimentRows(db_.get(), experiment_, dir_.path()).status();
  EXPECT_EQ(experiment.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(experiment.message().find("version 1 of model \"wmt-de-en\""), std::string::npos) << experiment.message();
  EXPECT_EQ(CheckpointState("mid"), "ACTIVE");

  // A deleted checkpoint cannot be registered; with its versions gone, a checkpoint goes.
  ASSERT_TRUE(DeleteCheckpoint(db_.get(), "new", dir_.path()).ok());
  EXPECT_EQ(store.RegisterVersion("wmt-de-en", "new", "", "alice").status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store.DeleteVersion("wmt-de-en", 2).ok());
  EXPECT_TRUE(DeleteCheckpoint(db_.get(), "old", dir_.path()).ok());
  EXPECT_FALSE(fs::exists(experiment_dir_ + "/old"));
  ASSERT_TRUE(store.Delete("wmt-de-en", true).ok());
  EXPECT_TRUE(DeleteExperimentRows(db_.get(), experiment_, dir_.path()).ok());
}

TEST_F(ModelStoreTest, AVersionCarriesItsTrialsValidationResults) {
  ModelStore store(db_.get());
  Create("scored");
  AddCheckpoint("ck", 50);
  if (HasFatalFailure()) return;
  v1::MetricReport report;
  report.set_trial_id(trials_[0]);
  report.set_batches(50);
  report.set_kind("validation");
  (*report.mutable_values()->mutable_fields())["validation_loss"].set_number_value(0.25);
  ASSERT_TRUE(MetricWriter(db_.get()).Write({trials_[0], 50, {report}}).ok());
  TrialUpdate u;
  u.best_validation_metric = 0.25;
  u.latest_validation_metric = 0.25;
  ASSERT_TRUE(Store(db_.get()).UpdateTrial(trials_[0], u).ok());
  ASSERT_TRUE(store.RegisterVersion("scored", "ck", "", "alice").ok());
  auto d = store.GetVersion("scored", 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->metric, "validation_loss");
  EXPECT_EQ(d->best_validation_metric, 0.25);
  ASSERT_TRUE(d->latest_validation.has_value());
  EXPECT_EQ(d->latest_validation->batches(), 50);
  EXPECT_EQ(d->latest_validation->values().fields().at("validation_loss").number_value(), 0.25);
  // The model's list of versions carries the same (a page of versions needs no call per version).
  auto listed = store.Get("scored");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->versions_size(), 1);
  const v1::ModelVersion& v = listed->versions(0);
  EXPECT_EQ(v.metric(), "validation_loss");
  EXPECT_TRUE(v.smaller_is_better());
  ASSERT_TRUE(v.has_best_validation_metric());
  EXPECT_EQ(v.best_validation_metric(), 0.25);
  EXPECT_EQ(v.latest_validation_metric(), 0.25);
  EXPECT_FALSE(v.checkpoint_path().empty());
  EXPECT_EQ(v.checkpoint_path(), d->version.checkpoint_path());
}

}  // namespace
}  // namespace sf::master
