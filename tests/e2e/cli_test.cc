// End to end, through the `sf` binary a user runs: experiment create (--follow), list, pause,
// activate and kill, and trial logs (-f), against one real cluster (PostgreSQL, sf-master, one
// sf-agent with two CPU slots, real sf-trainer processes) shared by every test of this file.
// The tests check what the CLI promises (cli/command.h, docs/cluster.md): its stdout, its
// stderr and its exit code (0 ok, 1 failed, 2 bad usage or input), and that the cluster's state
// as the REST API reports it matches what the CLI said.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/reported_parameters.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr char kUnknownId[] = "987654";

// One run of `sf`: its exit code and its stdout and stderr kept apart.
struct SfRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string out, err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) {
    out.push_back(w);
  }
  return out;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// "created experiment 12" -> 12; 0 when the line is missing.
int64_t CreatedId(const std::string& out) {
  const std::string marker = "created experiment ";
  const size_t at = out.find(marker);
  return at == std::string::npos ? 0 : std::atoll(out.c_str() + at + marker.size());
}

std::string Field(const Value& v, const std::string& key) {
  const Value* f = v.Find(key);
  return f && f->is_string() ? f->as_string() : "";
}

class CliEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster(1, 2);
    scratch_ = new TempDir();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete scratch_;
    scratch_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(cluster_->db().empty()) << "the shared cluster did not start (no PostgreSQL)";
  }
  void TearDown() override {
    if (HasFailure()) {
      cluster_->DumpLogs();
    }
  }

  // Runs `sf ARGS...` against the shared cluster (the master from $SF_MASTER, as documented),
  // stdout and stderr captured apart; a run that outlives `timeout` fails the test.
  static SfRun Sf(const std::vector<std::string>& args, seconds timeout = seconds(60)) {
    static int runs = 0;
    const std::string err_file = scratch_->path() + "/sf-stderr-" + std::to_string(runs++);
    // A shell sends sf's stderr to err_file; RunCommand captures its stdout.
    std::vector<std::string> argv = {"/bin/sh", "-c", R"(err=$1; shift; exec "$@" 2>"$err")"};
    argv.insert(argv.end(), {"sh", err_file, Cluster::Binary("sf")});
    argv.insert(argv.end(), args.begin(), args.end());
    CommandOptions o;
    o.env["SF_MASTER"] = cluster_->url();
    o.timeout = timeout;
    SfRun run;
    auto r = RunCommand(argv, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) {
      return run;
    }
    run.exit_code = r->exit_code;
    run.timed_out = r->timed_out;
    run.out = r->output;
    run.err = ReadAll(err_file);
    EXPECT_FALSE(run.timed_out) << "sf " << JoinCommand(args) << " ran past " << timeout.count()
                                << " s\n"
                                << run.out << run.err;
    return run;
  }

  // Writes an experiment file for `sf experiment create`.
  static std::string WriteExperiment(const std::string& name, const std::string& yaml) {
    return scratch_->WriteFile(name + ".yaml", yaml);
  }

  static Value Trial(int64_t experiment_id) {
    Value trials = cluster_->Trials(experiment_id);
    return trials.as_list().size() == 1 ? trials.as_list()[0] : Value();
  }
  static std::string TrialState(int64_t experiment_id) {
    return Field(Trial(experiment_id), "state");
  }
  static int64_t TrialBatches(int64_t experiment_id) {
    const std::string b = Field(Trial(experiment_id), "totalBatches");
    return b.empty() ? -1 : std::stoll(b);
  }
  // Waits until the experiment's one trial is RUNNING and has reported at least `batches`.
  static bool WaitForTraining(int64_t experiment_id, int64_t batches) {
    return cluster_->WaitFor(
        [&] {
          return TrialState(experiment_id) == "TRIAL_STATE_RUNNING" &&
                 TrialBatches(experiment_id) >= batches;
        },
        seconds(120));
  }

  static Cluster* cluster_;
  static TempDir* scratch_;
};

Cluster* CliEndToEnd::cluster_ = nullptr;
TempDir* CliEndToEnd::scratch_ = nullptr;

TEST_F(CliEndToEnd, CreateFollowPrintsProgressAndExitsZeroWhenTheExperimentCompletes) {
  const std::string file = WriteExperiment("follow-ok", TinyExperiment(2, 20, 10, "cli-follow-ok"));
  SfRun run = Sf({"experiment", "create", file, "--follow"}, seconds(300));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.err, "") << "nothing goes to stderr when all is well";
  const int64_t id = CreatedId(run.out);
  ASSERT_GT(id, 0) << run.out;
  const std::string exp = "experiment " + std::to_string(id) + ": ";
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_GE(lines.size(), 4u) << run.out;
  EXPECT_EQ(lines.front(), "created experiment " + std::to_string(id));
  // Progress: the experiment is first seen ACTIVE, each trial's progress is shown as it
  // changes, and the final state is the last line.
  size_t first_state = 0;
  while (first_state < lines.size() && lines[first_state].rfind(exp, 0) != 0) {
    ++first_state;
  }
  ASSERT_LT(first_state, lines.size()) << run.out;
  EXPECT_EQ(lines[first_state], exp + "ACTIVE") << run.out;
  EXPECT_EQ(lines.back(), exp + "COMPLETED") << run.out;
  EXPECT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_COMPLETED");
  const Value trials = cluster_->Trials(id);
  ASSERT_EQ(trials.as_list().size(), 2u);
  for (const Value& t : trials.as_list()) {
    const std::string done = "  trial " + std::to_string(Id(t)) + ": COMPLETED batches=20 metric=";
    EXPECT_TRUE(Contains(run.out, done)) << "no line starting \"" << done << "\" in\n" << run.out;
  }
}

// A trial that fails at run time, for a reason submit validation cannot see: the training
// corpus is readable (so the master accepts it) but its target side has fewer lines than its
// source side, which the real trainer finds when it loads the data.
TEST_F(CliEndToEnd, CreateFollowExitsOneWhenTheTrainerFailsAtRunTime) {
  const std::string tiny = TinyExperiment(1, 20, 10, "cli-follow-error");
  // The corpus TinyExperiment trains on: "train: {src: DIR/train.de, ...".
  const size_t src = tiny.find("train: {src: ") + 13;
  const std::string data = tiny.substr(src, tiny.find("/train.de", src) - src);
  ASSERT_TRUE(fs::exists(data + "/train.de")) << tiny;
  const std::string broken = scratch_->path() + "/uneven-corpus";
  fs::create_directories(broken);
  for (const char* f : {"train.de", "valid.de", "valid.en"}) {
    fs::copy_file(data + "/" + f, broken + "/" + f);
  }
  std::vector<std::string> targets = Lines(ReadAll(data + "/train.en"));
  ASSERT_GT(targets.size(), 10u);
  {
    std::ofstream half(broken + "/train.en");
    for (size_t i = 0; i < targets.size() / 2; ++i) {
      half << targets[i] << "\n";
    }
  }
  std::string yaml = tiny;
  for (size_t at; (at = yaml.find(data)) != std::string::npos;) {
    yaml.replace(at, data.size(), broken);
  }
  yaml.replace(yaml.find("max_restarts: 2"), 15, "max_restarts: 0");

  SfRun run =
      Sf({"experiment", "create", WriteExperiment("follow-error", yaml), "--follow"}, seconds(300));
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const int64_t id = CreatedId(run.out);
  ASSERT_GT(id, 0) << run.out << run.err;
  const std::string exp = "experiment " + std::to_string(id);
  EXPECT_EQ(Lines(run.out).back(), exp + ": ERROR") << run.out;
  const Value trial = Trial(id);
  ASSERT_TRUE(trial.is_map());
  EXPECT_TRUE(Contains(run.out, "  trial " + std::to_string(Id(trial)) + ": ERROR")) << run.out;
  // stderr says why the experiment failed, and why its trial did (the trainer's own line).
  EXPECT_TRUE(Contains(run.err, "sf: " + exp + ": ")) << run.err;
  EXPECT_TRUE(Contains(run.err, "sf: trial " + std::to_string(Id(trial)) + ": ")) << run.err;
  EXPECT_TRUE(Contains(run.err, "line counts differ")) << run.err;
  EXPECT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_ERROR");
  // It failed for the reason we gave it, in the trainer.
  auto [code, t] = cluster_->Get("/api/v1/trials/" + std::to_string(Id(trial)));
  ASSERT_EQ(code, 200);
  const std::string why = Field(*t.Find("trial"), "error");
  EXPECT_TRUE(Contains(why, "line counts differ")) << why;
  EXPECT_EQ(t.Find("trial")->Find("restarts")->as_int(), 0);
}

TEST_F(CliEndToEnd, CreateRejectsBadInputWithExitTwoAndSubmitsNothing) {
  const int64_t before = Count(cluster_->db(), "SELECT count(*) FROM experiments");
  // Not YAML at all: refused by the CLI's own validation, which names the file.
  const std::string bad = WriteExperiment("not-yaml", "name: [unclosed\nsearcher: {name: grid\n");
  SfRun local = Sf({"experiment", "create", bad, "--follow"});
  EXPECT_EQ(local.exit_code, 2) << local.out << local.err;
  EXPECT_EQ(local.out, "");
  EXPECT_TRUE(Contains(local.err, bad)) << local.err;
  // Valid YAML the master refuses: a data file the cluster cannot read. The master's error,
  // with the field path, reaches the user.
  std::string missing = TinyExperiment(1, 10, 10, "cli-missing-data");
  missing.replace(missing.find("train.de"), 8, "nope.de");
  SfRun remote = Sf({"experiment", "create", WriteExperiment("missing-data", missing), "--follow"});
  EXPECT_EQ(remote.exit_code, 2) << remote.out << remote.err;
  EXPECT_EQ(remote.out, "");
  EXPECT_TRUE(Contains(remote.err, "data.train.src")) << remote.err;
  EXPECT_TRUE(Contains(remote.err, "nope.de")) << remote.err;
  // A file that does not exist.
  SfRun absent = Sf({"experiment", "create", scratch_->path() + "/absent.yaml", "--follow"});
  EXPECT_EQ(absent.exit_code, 2) << absent.out << absent.err;
  EXPECT_TRUE(Contains(absent.err, "absent.yaml")) << absent.err;
  EXPECT_EQ(Count(cluster_->db(), "SELECT count(*) FROM experiments"), before);
}

// A language model (arch transformer_lm_small) on one-sided text given by paths relative to the
// experiment file: `sf config validate` checks the files under the keys written, `sf experiment
// create` sends them absolute under those keys, the master checks them, and the trial trains,
// validates by perplexity and checkpoints weights that say arch transformer_lm, and reports the
// size of the model they hold.
TEST_F(CliEndToEnd, CreateFollowTrainsALanguageModelOnOneSidedTextGivenRelatively) {
  const std::string data = DataCopy("multi30k-de-en-tiny");
  fs::create_directories(scratch_->path() + "/lm-data");
  for (const char* f : {"train.en", "valid.en"}) fs::copy_file(data + "/" + f, scratch_->path() + "/lm-data/" + f);
  const std::string yaml = "name: cli-lm\n"
                           "data:\n"
                           "  train: {text: lm-data/train.en}\n"
                           "  valid: {text: lm-data/valid.en}\n"
                           "  tokenizer: {type: sentencepiece, vocab_size: 300, model_type: bpe}\n"
                           "hyperparameters:\n"
                           "  arch: transformer_lm_small\n"
                           "  d_model: 32\n  heads: 2\n  decoder_layers: 1\n  ffn_dim: 64\n"
                           "  lr: 0.002\n"
                           "  lr_schedule: {type: inverse_sqrt, warmup: 4}\n"
                           "  max_tokens: 400\n"
                           "searcher: {name: single, metric: validation_perplexity, max_length: {batches: 8}}\n"
                           "scheduling_unit: 4\n"
                           "min_checkpoint_period: {batches: 8}\n";
  const std::string file = WriteExperiment("lm", yaml);
  SfRun valid = Sf({"config", "validate", file});
  EXPECT_EQ(valid.exit_code, 0) << valid.out << valid.err;
  SfRun run = Sf({"experiment", "create", file, "--follow"}, seconds(300));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const int64_t id = CreatedId(run.out);
  ASSERT_GT(id, 0) << run.out;
  const Value trial = Trial(id);
  ASSERT_EQ(Field(trial, "state"), "TRIAL_STATE_COMPLETED") << trial.ToJson();
  auto [code, m] = cluster_->Get("/api/v1/trials/" + std::to_string(Id(trial)) + "/metrics?kind=validation");
  ASSERT_EQ(code, 200);
  ASSERT_FALSE(m.Find("metrics")->as_list().empty()) << m.ToJson();
  const Value* ppl = m.Find("metrics")->as_list().back().Find("values")->Find("validation_perplexity");
  ASSERT_NE(ppl, nullptr) << m.ToJson();
  EXPECT_GT(ppl->as_double(), 1.0);
  EXPECT_TRUE(std::isfinite(ppl->as_double()));
  auto [ck_code, cks] = cluster_->Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(ck_code, 200);
  ASSERT_FALSE(cks.Find("checkpoints")->as_list().empty()) << cks.ToJson();
  const std::string weights = cks.Find("checkpoints")->as_list().back().Find("path")->as_string() + "/model.safetensors";
  EXPECT_TRUE(Contains(ReadAll(weights).substr(0, 4096), "\"arch\":\"transformer_lm\"")) << weights;
  // Its training reports carry the language model's size: what those weights hold.
  EXPECT_EQ(ExpectReportedParametersAreTheCheckpointedModels(*cluster_, id).size(), 1u);
}

TEST_F(CliEndToEnd, ListShowsIdNameAndStateInTheTableAndAsJson) {
  SfRun create =
      Sf({"experiment", "create", WriteExperiment("list", TinyExperiment(1, 20, 10, "cli-list-me")),
          "--paused"});
  ASSERT_EQ(create.exit_code, 0) << create.out << create.err;
  const int64_t id = CreatedId(create.out);
  ASSERT_GT(id, 0) << create.out;
  ASSERT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_PAUSED");
  auto [code, rest] = cluster_->Get("/api/v1/experiments?limit=1000");
  ASSERT_EQ(code, 200);
  const size_t total = rest.Find("experiments")->as_list().size();

  SfRun table = Sf({"experiment", "list"});
  ASSERT_EQ(table.exit_code, 0) << table.out << table.err;
  EXPECT_EQ(table.err, "");
  const std::vector<std::string> lines = Lines(table.out);
  ASSERT_GE(lines.size(), 3u) << table.out;
  const std::vector<std::string> header = Words(lines[0]);
  ASSERT_GE(header.size(), 3u) << table.out;
  EXPECT_EQ(std::vector<std::string>(header.begin(), header.begin() + 3),
            (std::vector<std::string>{"ID", "NAME", "STATE"}));
  EXPECT_EQ(lines.size(), 2 + total) << "a header, a rule and one row per experiment\n"
                                     << table.out;
  int rows_for_id = 0;
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::vector<std::string> w = Words(lines[i]);
    if (w.empty() || w[0] != std::to_string(id)) {
      continue;
    }
    ++rows_for_id;
    ASSERT_GE(w.size(), 3u) << lines[i];
    EXPECT_EQ(w[1], "cli-list-me") << lines[i];
    EXPECT_EQ(w[2], "PAUSED") << lines[i];
  }
  EXPECT_EQ(rows_for_id, 1) << table.out;

  SfRun json = Sf({"experiment", "list", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.out << json.err;
  auto parsed = Value::FromJson(json.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << json.out;
  const Value* experiments = parsed->Find("experiments");
  ASSERT_TRUE(experiments && experiments->is_list()) << json.out;
  EXPECT_EQ(experiments->as_list().size(), total);
  int found = 0;
  for (const Value& e : experiments->as_list()) {
    if (Field(e, "id") != std::to_string(id)) {
      continue;
    }
    ++found;
    EXPECT_EQ(Field(e, "name"), "cli-list-me");
    EXPECT_EQ(Field(e, "state"), "EXPERIMENT_STATE_PAUSED");
  }
  EXPECT_EQ(found, 1) << json.out;
  EXPECT_EQ(cluster_->Post("/api/v1/experiments/" + std::to_string(id) + "/kill", "").first, 200);
}

TEST_F(CliEndToEnd, TrialLogsFollowPrintsTheTrainersLinesAndExitsWhenTheTrialEnds) {
  constexpr int64_t kBatches = 200;
  const int64_t id = cluster_->Submit(TinyExperiment(1, kBatches, 10, "cli-logs"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitForTraining(id, 10)) << TrialState(id) << " at " << TrialBatches(id);
  const int64_t tid = Id(Trial(id));
  const int64_t at_start = TrialBatches(id);

  SfRun follow = Sf({"trial", "logs", std::to_string(tid), "-f"}, seconds(300));
  // The command returned because the trial ended, not before.
  const std::string state_after = TrialState(id);
  EXPECT_EQ(follow.exit_code, 0) << follow.out << follow.err;
  EXPECT_EQ(follow.err, "");
  EXPECT_EQ(state_after, "TRIAL_STATE_COMPLETED");
  EXPECT_LT(at_start, kBatches)
      << "the trial ended before `sf trial logs -f` started: nothing was followed";
  // Lines the trainer wrote before and after the command started, up to its last one.
  EXPECT_TRUE(Contains(follow.out, "step 10 loss ")) << follow.out;
  EXPECT_TRUE(Contains(follow.out, "step " + std::to_string(kBatches) + " loss ")) << follow.out;
  EXPECT_TRUE(Contains(follow.out, "validation at step " + std::to_string(kBatches))) << follow.out;
  // Following lost nothing: once the trial is over, it printed exactly what the stored log has.
  SfRun all = Sf({"trial", "logs", std::to_string(tid)});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(follow.out, all.out);
}

TEST_F(CliEndToEnd, TrialLogsOfAnUnknownTrialFailsNamingIt) {
  for (bool follow : {false, true}) {
    std::vector<std::string> args = {"trial", "logs", kUnknownId};
    if (follow) {
      args.push_back("-f");
    }
    SfRun run = Sf(args);
    EXPECT_EQ(run.exit_code, 2) << "-f: " << follow;  // an id that does not exist is bad input
    EXPECT_EQ(run.out, "") << "-f: " << follow;
    EXPECT_TRUE(Contains(run.err, std::string("trial ") + kUnknownId + " does not exist"))
        << "-f: " << follow << "\n"
        << run.err;
  }
}

TEST_F(CliEndToEnd, PauseActivateAndKillSayWhatHappenedAndTheStateFollows) {
  const int64_t id = cluster_->Submit(TinyExperiment(1, 1000000, 10, "cli-control"));
  ASSERT_GT(id, 0);
  const std::string sid = std::to_string(id);
  ASSERT_TRUE(WaitForTraining(id, 10)) << TrialState(id);

  SfRun pause = Sf({"experiment", "pause", sid});
  EXPECT_EQ(pause.exit_code, 0) << pause.out << pause.err;
  EXPECT_EQ(pause.out, "experiment " + sid + ": PAUSED\n");
  EXPECT_EQ(pause.err, "");
  EXPECT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_PAUSED");
  // The trainer checkpoints and exits at its next scheduling unit.
  EXPECT_TRUE(
      cluster_->WaitFor([&] { return TrialState(id) == "TRIAL_STATE_PAUSED"; }, seconds(60)))
      << TrialState(id);

  SfRun activate = Sf({"experiment", "activate", sid});
  EXPECT_EQ(activate.exit_code, 0) << activate.out << activate.err;
  EXPECT_EQ(activate.out, "experiment " + sid + ": ACTIVE\n");
  EXPECT_EQ(activate.err, "");
  EXPECT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_ACTIVE");
  const int64_t paused_at = TrialBatches(id);
  EXPECT_TRUE(WaitForTraining(id, paused_at + 10)) << "training did not resume: " << TrialState(id);

  SfRun kill = Sf({"experiment", "kill", sid});
  EXPECT_EQ(kill.exit_code, 0) << kill.out << kill.err;
  // Kill stops the trainer asynchronously: the answer is the state the master is in by then.
  EXPECT_TRUE(kill.out == "experiment " + sid + ": STOPPING_CANCELED\n" ||
              kill.out == "experiment " + sid + ": CANCELED\n")
      << kill.out;
  EXPECT_EQ(kill.err, "");
  EXPECT_TRUE(cluster_->WaitForState(id, "EXPERIMENT_STATE_CANCELED", seconds(60)))
      << cluster_->ExperimentState(id);
  EXPECT_EQ(TrialState(id), "TRIAL_STATE_CANCELED");

  // A transition the state does not allow is refused, and says why.
  SfRun late = Sf({"experiment", "pause", sid});
  EXPECT_EQ(late.exit_code, 1);  // a valid request the master refused: the operation failed
  EXPECT_EQ(late.out, "");
  EXPECT_TRUE(Contains(late.err, "experiment " + sid + " is CANCELED and cannot be paused"))
      << late.err;

  // An experiment that does not exist: bad input, named in the message.
  for (const char* verb : {"pause", "activate", "kill"}) {
    SfRun run = Sf({"experiment", verb, kUnknownId});
    EXPECT_EQ(run.exit_code, 2) << verb << "\n" << run.out << run.err;
    EXPECT_EQ(run.out, "") << verb;
    EXPECT_TRUE(Contains(run.err, std::string("experiment ") + kUnknownId + " does not exist"))
        << verb << "\n"
        << run.err;
  }
}

}  // namespace
}  // namespace sf::testing
