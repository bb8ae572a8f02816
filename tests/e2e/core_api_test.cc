// User trials through the Core API (docs/core-api.md) on a real local cluster: PostgreSQL, a
// master, two agents of one CPU slot each, and real Python processes running PyTorch scripts
// (tests/e2e/core_api/) that import the `steadfast` package the build made. Experiments are
// submitted with the real `sf` (which packs the context directory); what the tests check is
// read back from the REST API, PostgreSQL and the checkpoint files. The entrypoints name Debian's
// /usr/bin/python3, which has python3-torch (a python3 earlier on PATH may not).
//
// One CTest test for the binary: its TESTs share one cluster (SetUpTestSuite), one after another.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "tests/cli/run_sf.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class CoreApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterLayout layout;
    layout.master_flags = {"--min-run-seconds", "0"};
    cluster_ = new Cluster(2, 1, layout);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_FALSE(cluster_->db().empty()) << "no PostgreSQL"; }
  void TearDown() override {
    if (HasFailure()) cluster_->DumpLogs();
  }

  // A context directory holding the test scripts and `exp.yaml` (this text); its YAML's path.
  std::string Experiment(const std::string& yaml) {
    const fs::path dir = fs::path(scratch_.path()) / ("exp" + std::to_string(++made_));
    fs::create_directories(dir);
    for (const char* script : {"regress.py", "ddp.py"}) {
      fs::copy_file(fs::path(SF_SOURCE_DIR) / "tests/e2e/core_api" / script, dir / script);
    }
    std::ofstream(dir / "exp.yaml") << yaml;
    return (dir / "exp.yaml").string();
  }
  // `sf experiment create` as a user runs it: the experiment's id, or 0 with a failure.
  int64_t Create(const std::string& yaml_path, const std::vector<std::string>& overrides = {}) {
    std::vector<std::string> args = {"experiment", "create", yaml_path};
    for (const std::string& o : overrides) args.insert(args.end(), {"--config", o});
    SfRun run = Sf(args);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    const std::string prefix = "created experiment ";
    if (run.exit_code != 0 || run.out.rfind(prefix, 0) != 0) return 0;
    return std::stoll(run.out.substr(prefix.size()));
  }
  SfRun Sf(const std::vector<std::string>& args) {
    return RunSf(args, scratch_, {{"SF_MASTER", cluster_->url()}, {"SF_TOKEN", cluster_->admin_token()}});
  }
  Value OnlyTrial(int64_t experiment) {
    Value trials = cluster_->Trials(experiment);
    EXPECT_EQ(trials.as_list().size(), 1u);
    return trials.as_list().empty() ? Value(Value::Map{}) : trials.as_list()[0];
  }
  std::string TrialError(int64_t experiment) {
    const Value trial = OnlyTrial(experiment);
    const Value* e = trial.Find("error");
    return e && e->is_string() ? e->as_string() : "";
  }
  int64_t Sql(const std::string& query) { return Count(cluster_->db(), query); }
  // What every task process of this cluster has in its environment (other tests' clusters
  // run in parallel, with trial ids of their own).
  std::string MasterEnv() const { return "SF_MASTER_ADDRESS=" + cluster_->grpc_address(); }
  // Every log line of the trial, in order.
  std::string Logs(int64_t trial) {
    auto [code, v] = cluster_->Get("/api/v1/trials/" + std::to_string(trial) + "/logs?limit=10000");
    std::string out;
    if (code != 200) return out;
    for (const Value& l : v.Find("logs")->as_list()) {
      out += "[rank " + (l.Find("rank") ? std::to_string(l.Find("rank")->is_int() ? l.Find("rank")->as_int() : 0) : "0") +
             "] " + l.Find("message")->as_string() + "\n";
    }
    return out;
  }
  bool WaitState(int64_t id, const std::string& state, seconds timeout = seconds(180)) {
    const bool ok = cluster_->WaitForState(id, "EXPERIMENT_STATE_" + state, timeout);
    EXPECT_TRUE(ok) << "experiment " << id << " is " << cluster_->ExperimentState(id) << ", not " << state;
    return ok;
  }
  // The trial's training losses by step, from PostgreSQL.
  std::map<int64_t, double> Losses(int64_t trial) {
    std::map<int64_t, double> out;
    pqxx::connection conn(cluster_->db());
    pqxx::work tx(conn);
    for (const auto& row : tx.exec_params("SELECT batches, (vals->>'loss')::float8 FROM metrics WHERE trial_id = $1 "
                                          "AND kind = 'training' ORDER BY batches",
                                          trial)) {
      out[row[0].as<int64_t>()] = row[1].as<double>();
    }
    return out;
  }

  static Cluster* cluster_;
  TempDir scratch_;
  int made_ = 0;
};
Cluster* CoreApi::cluster_ = nullptr;

std::string RegressExperiment(const std::string& name, const std::string& extra_hparams, int64_t batches,
                              const std::string& more = "") {
  return "name: " + name + "\n"
         "entrypoint: /usr/bin/python3 regress.py\n"
         "hyperparameters:\n"
         "  lr: 0.05\n" +
         extra_hparams +
         "searcher: {name: single, metric: validation_loss, max_length: {batches: " + std::to_string(batches) + "}}\n" +
         more;
}

// The whole path: sf packs the context, the agent unpacks it and starts python3, the script
// reports every step, validates, checkpoints; all of it lands in PostgreSQL. The same script
// run on its own (local mode) computes the same losses.
TEST_F(CoreApi, TrialCompletesWithItsMetricsAndCheckpointsInPostgresAndMatchesLocalMode) {
  const std::string yaml = Experiment(RegressExperiment("core-api-basic", "  seed: 3\n", 20, "max_restarts: 0\n"));
  const int64_t id = Create(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitState(id, "COMPLETED"));
  const Value trial = OnlyTrial(id);
  const int64_t trial_id = Id(trial);
  EXPECT_EQ(trial.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
  const std::string t = std::to_string(trial_id);
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 20);
  EXPECT_EQ(Sql("SELECT min(batches) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 1);
  EXPECT_EQ(Sql("SELECT max(batches) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 20);
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'validation' AND batches = 20"), 1);
  // A group of its own (report_metrics("inference", ...)), read back by its name; a name that
  // is no group is refused, naming it.
  auto [icode, inference] = cluster_->Get("/api/v1/trials/" + t + "/metrics?kind=inference");
  ASSERT_EQ(icode, 200) << inference.ToJson();
  ASSERT_EQ(inference.Find("metrics")->as_list().size(), 1u) << inference.ToJson();
  const Value* at = inference.Find("metrics")->as_list()[0].Find("batches");  // int64: a JSON string
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(at->is_string() ? std::stoll(at->as_string()) : at->as_int(), 20);
  EXPECT_GT(inference.Find("metrics")->as_list()[0].Find("values")->Find("examples")->as_double(), 0);
  // The trial lists its groups, its own among them.
  auto [gcode, described] = cluster_->Get("/api/v1/trials/" + t);
  ASSERT_EQ(gcode, 200) << described.ToJson();
  ASSERT_NE(described.Find("metricGroups"), nullptr) << described.ToJson();
  std::vector<std::string> groups;
  for (const Value& g : described.Find("metricGroups")->as_list()) groups.push_back(g.as_string());
  EXPECT_EQ(groups, (std::vector<std::string>{"inference", "training", "validation"}));
  auto [bad_code, bad] = cluster_->Get("/api/v1/trials/" + t + "/metrics?kind=Eval-1");
  EXPECT_EQ(bad_code, 400);
  EXPECT_NE(bad.ToJson().find("must start with a lowercase letter"), std::string::npos) << bad.ToJson();
  // What it ran from (GET .../context): the context's files with their sizes on disk, and the
  // archive itself on request.
  const std::string e = std::to_string(id);
  auto [ccode, context] = cluster_->Get("/api/v1/experiments/" + e + "/context");
  ASSERT_EQ(ccode, 200) << context.ToJson();
  std::map<std::string, int64_t> files;
  for (const Value& f : context.Find("files")->as_list()) {
    const Value* size = f.Find("size");  // int64: a JSON string
    files[f.Find("path")->as_string()] = size ? std::stoll(size->as_string()) : 0;
  }
  const fs::path context_dir = fs::path(yaml).parent_path();
  EXPECT_EQ(files, (std::map<std::string, int64_t>{
                       {"ddp.py", static_cast<int64_t>(fs::file_size(context_dir / "ddp.py"))},
                       {"exp.yaml", static_cast<int64_t>(fs::file_size(context_dir / "exp.yaml"))},
                       {"regress.py", static_cast<int64_t>(fs::file_size(context_dir / "regress.py"))}}))
      << context.ToJson();
  EXPECT_EQ(context.Find("sha256")->as_string().size(), 64u);
  ASSERT_NE(context.Find("archive"), nullptr) << context.ToJson();
  EXPECT_EQ(context.Find("archive")->as_string(), "") << "the archive only on request";
  const int64_t archive_bytes = std::stoll(context.Find("archiveBytes")->as_string());
  auto [acode, with_archive] = cluster_->Get("/api/v1/experiments/" + e + "/context?includeArchive=true");
  ASSERT_EQ(acode, 200);
  ASSERT_NE(with_archive.Find("archive"), nullptr);
  EXPECT_EQ(static_cast<int64_t>(with_archive.Find("archive")->as_string().size()), (archive_bytes + 2) / 3 * 4)
      << "base64 of the archive's bytes";
  auto [ecode, experiment] = cluster_->Get("/api/v1/experiments/" + e);
  ASSERT_EQ(ecode, 200);
  ASSERT_NE(experiment.Find("experiment")->Find("unmanaged"), nullptr) << experiment.ToJson();
  EXPECT_FALSE(experiment.Find("experiment")->Find("unmanaged")->as_bool());
  // Its checkpoint: registered with its files, on disk where the row says.
  pqxx::connection conn(cluster_->db());
  pqxx::work tx(conn);
  auto rows = tx.exec_params("SELECT uuid, path, batches, files::text, metadata::text, validation_metric "
                             "FROM checkpoints WHERE trial_id = $1 AND state = 'ACTIVE' ORDER BY batches DESC",
                             trial_id);
  ASSERT_GE(rows.size(), 1u);
  EXPECT_EQ(rows[0][2].as<int64_t>(), 20);
  // It carries the operation's searcher metric, as a native checkpoint does (retention ranks by it).
  ASSERT_FALSE(rows[0][5].is_null()) << "no validation metric on the checkpoint";
  auto [vcode, validation] = cluster_->Get("/api/v1/trials/" + std::to_string(trial_id) + "/metrics?kind=validation");
  ASSERT_EQ(vcode, 200);
  EXPECT_DOUBLE_EQ(rows[0][5].as<double>(),
                   validation.Find("metrics")->as_list()[0].Find("values")->Find("validation_loss")->as_double());
  const fs::path dir = rows[0][1].as<std::string>();
  EXPECT_TRUE(fs::exists(dir / "state.pt"));
  EXPECT_TRUE(fs::exists(dir / "metadata.json"));
  EXPECT_EQ(dir.filename().string(), rows[0][0].as<std::string>());
  EXPECT_NE(rows[0][3].as<std::string>().find("state.pt"), std::string::npos);
  EXPECT_NE(rows[0][4].as<std::string>().find("steps_completed"), std::string::npos);
  EXPECT_EQ(OnlyTrial(id).Find("latestCheckpointUuid")->as_string(), rows[0][0].as<std::string>());
  // get_experiment_best_validation: after its only operation, its own searcher metric.
  const std::string logs = Logs(trial_id);
  EXPECT_NE(logs.find("experiment best validation: "), std::string::npos) << logs;
  const size_t said_at = logs.find("experiment best validation: ");
  if (said_at != std::string::npos) {
    const double said = std::stod(logs.substr(said_at + std::string("experiment best validation: ").size()));
    EXPECT_DOUBLE_EQ(said, rows[0][5].as<double>()) << logs;
  }
  // Its output, shipped by the agent, tagged rank 0.
  EXPECT_NE(Logs(trial_id).find("[rank 0] starting at step 0"), std::string::npos) << Logs(trial_id);

  // Local mode, same script and hyperparameters: the same numbers.
  TempDir local;
  CommandOptions options;
  // (SF_MASTER and SF_TOKEN of this test process would make it an unmanaged trial.)
  options.env = {{"PYTHONPATH", std::string(SF_BINARY_DIR) + "/python"},
                 {"SF_LOCAL_DIR", local.path()},
                 {"SF_HPARAMS", R"({"lr": 0.05, "seed": 3})"},
                 {"SF_MASTER", ""},
                 {"SF_TOKEN", ""}};
  options.working_dir = fs::path(yaml).parent_path().string();
  auto ran = RunCommand({"/usr/bin/python3", "regress.py"}, options);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  ASSERT_EQ(ran->exit_code, 0) << ran->output;
  std::map<int64_t, double> local_losses;
  std::istringstream lines(ReadFile(fs::path(local.path()) / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto v = Value::FromJson(line);
    ASSERT_TRUE(v.ok()) << line;
    if (v->Find("kind")->as_string() != "training") continue;
    local_losses[v->Find("steps_completed")->as_int()] = v->Find("metrics")->Find("loss")->as_double();
  }
  EXPECT_EQ(local_losses, Losses(trial_id)) << "local mode and the cluster disagree";
}

// Pause: the script sees should_preempt(), checkpoints and returns; activate: it starts again
// from that checkpoint, so no step is trained twice or skipped.
TEST_F(CoreApi, PauseThenActivateResumesFromItsCheckpointWithEveryStepOnce) {
  const int64_t id = Create(Experiment(RegressExperiment("core-api-pause", "  sleep: 0.15\n", 60)));
  ASSERT_GT(id, 0);
  const int64_t trial = Id(OnlyTrial(id));
  const std::string t = std::to_string(trial);
  ASSERT_TRUE(cluster_->WaitFor(
      [&] { return Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'") >= 8; },
      seconds(120)));
  SfRun pause = Sf({"experiment", "pause", std::to_string(id)});
  ASSERT_EQ(pause.exit_code, 0) << pause.out << pause.err;
  ASSERT_TRUE(cluster_->WaitFor([&] { return OnlyTrial(id).Find("state")->as_string() == "TRIAL_STATE_PAUSED"; },
                                seconds(60)));
  const int64_t paused_at = Sql("SELECT max(batches) FROM checkpoints WHERE trial_id = " + t);
  EXPECT_EQ(paused_at, Sql("SELECT max(batches) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"))
      << "it checkpointed at the last step it reported";
  EXPECT_LT(paused_at, 60);
  SfRun activate = Sf({"experiment", "activate", std::to_string(id)});
  ASSERT_EQ(activate.exit_code, 0) << activate.out << activate.err;
  ASSERT_TRUE(WaitState(id, "COMPLETED"));
  const std::string logs = Logs(trial);
  EXPECT_NE(logs.find("stopping at step " + std::to_string(paused_at) + " as the master asked"), std::string::npos) << logs;
  EXPECT_NE(logs.find("starting at step " + std::to_string(paused_at)), std::string::npos) << logs;
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 60);
  EXPECT_EQ(Sql("SELECT count(DISTINCT batches) FROM metrics WHERE trial_id = " + t +
                " AND kind = 'training' AND batches BETWEEN 1 AND 60"),
            60);
  EXPECT_EQ(OnlyTrial(id).Find("restarts")->as_int(), 0) << "a pause is not a restart";
}

// Kill: the agent's SIGTERM ends the Python process at once (the library installs no handler).
TEST_F(CoreApi, KillStopsItWithinTheGracePeriod) {
  const int64_t id = Create(Experiment(RegressExperiment("core-api-kill", "  sleep: 0.5\n", 100000)));
  ASSERT_GT(id, 0);
  const std::string t = std::to_string(Id(OnlyTrial(id)));
  ASSERT_TRUE(cluster_->WaitFor(
      [&] { return Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'") >= 2; },
      seconds(120)));
  const auto start = std::chrono::steady_clock::now();
  SfRun kill = Sf({"experiment", "kill", std::to_string(id)});
  ASSERT_EQ(kill.exit_code, 0) << kill.out << kill.err;
  ASSERT_TRUE(WaitState(id, "CANCELED", seconds(30)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10)) << "the kill grace is 10 s";
  EXPECT_TRUE(cluster_->WaitFor([&] { return TaskPids({MasterEnv(), "SF_TRIAL_ID=" + t}).empty(); }, seconds(10)))
      << "its python process is gone";
}

// An exception: the trial fails with the traceback's last line as its reason; what it reported
// before stays.
TEST_F(CoreApi, AnExceptionBecomesAOneLineFailureReason) {
  const int64_t id = Create(Experiment(RegressExperiment("core-api-raise", "  fail_at: 3\n", 20, "max_restarts: 0\n")));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitState(id, "ERROR"));
  const std::string error = TrialError(id);
  EXPECT_TRUE(std::regex_search(error, std::regex("^rank 0 on e2e-agent-[01]: ValueError: bad shape$"))) << error;
  const std::string t = std::to_string(Id(OnlyTrial(id)));
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 2);
}

// Bad input from the script: each gets a message naming the trial and the problem; the reports
// before it are kept.
TEST_F(CoreApi, BadReportsAndAnEarlyExitNameTheTrialAndTheProblem) {
  struct Case {
    std::string hparams, want;
  };
  for (const Case& c : std::vector<Case>{
           {"  bad_metric_at: 3\n",
            R"(report_training_metrics: metric "loss" is 'abc' \(str\), not a number)"},
           {"  backwards_at: 3\n", "steps_completed 1 is less than 2, the step of the previous training report"},
           {"  exit_early: true\n",
            "the entrypoint exited with status 0 before completing its searcher operation \\(train to 20 batches; "
            "completed 0\\)"}}) {
    const int64_t id = Create(Experiment(RegressExperiment("core-api-bad", c.hparams, 20, "max_restarts: 0\n")));
    ASSERT_GT(id, 0);
    ASSERT_TRUE(WaitState(id, "ERROR"));
    const int64_t trial = Id(OnlyTrial(id));
    const std::string error = TrialError(id);
    EXPECT_TRUE(std::regex_search(error, std::regex("trial " + std::to_string(trial) + ": .*" + c.want))) << error;
    if (c.hparams.find("exit_early") == std::string::npos) {
      EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + std::to_string(trial) + " AND kind = 'training'"),
                2)
          << "the steps reported before the bad one are kept";
    }
  }
}

// Determined's report_early_exit, as a script on the cluster calls it and exits 0: ERRORED fails
// the trial with the reason and no restart (although max_restarts allows 5); USER_REQUESTED_STOP
// ends it as completed; a sibling that does neither completes as usual.
TEST_F(CoreApi, AnEarlyExitsReasonDecidesTheTrialsEndWithoutARestart) {
  const int64_t id = Create(Experiment(
      "name: core-api-early-exit\n"
      "entrypoint: /usr/bin/python3 regress.py\n"
      "hyperparameters:\n"
      "  lr: 0.05\n"
      "  early_exit_at: 5\n"
      "  early_exit: {type: categorical, vals: ['', USER_REQUESTED_STOP, ERRORED]}\n"
      "max_restarts: 5\n"
      "searcher: {name: grid, metric: validation_loss, max_length: {batches: 20}}\n"));
  ASSERT_GT(id, 0);
  std::map<std::string, Value> by_reason;
  ASSERT_TRUE(cluster_->WaitFor(
      [&] {
        by_reason.clear();
        const Value trials = cluster_->Trials(id);  // kept: the loop reads into it
        for (const Value& t : trials.as_list()) {
          const std::string state = t.Find("state")->as_string();
          if (state != "TRIAL_STATE_COMPLETED" && state != "TRIAL_STATE_ERROR") return false;
          by_reason[t.Find("hparams")->Find("early_exit")->as_string()] = t;
        }
        return by_reason.size() == 3;
      },
      seconds(300)))
      << cluster_->Trials(id).ToJson();
  auto field = [](const Value& t, const char* name) {
    const Value* v = t.Find(name);
    return v && v->is_string() ? v->as_string() : std::string();
  };
  const Value& errored = by_reason.at("ERRORED");
  EXPECT_EQ(field(errored, "state"), "TRIAL_STATE_ERROR");
  EXPECT_EQ(errored.Find("restarts")->as_int(), 0) << "reported, not retried";
  EXPECT_NE(field(errored, "error").find("the script reported an error (report_early_exit ERRORED)"), std::string::npos)
      << errored.ToJson();
  const Value& stopped = by_reason.at("USER_REQUESTED_STOP");
  EXPECT_EQ(field(stopped, "state"), "TRIAL_STATE_COMPLETED");
  EXPECT_EQ(stopped.Find("restarts")->as_int(), 0);
  EXPECT_EQ(field(stopped, "error"), "") << stopped.ToJson();
  EXPECT_EQ(field(by_reason.at(""), "state"), "TRIAL_STATE_COMPLETED");
  // The early-exiting ones stopped at step 5, with their reports up to it kept.
  for (const std::string reason : {"USER_REQUESTED_STOP", "ERRORED"}) {
    const std::string t = std::to_string(Id(by_reason.at(reason)));
    EXPECT_EQ(Sql("SELECT max(batches) FROM metrics WHERE kind = 'training' AND trial_id = " + t), 5) << reason;
  }
  EXPECT_EQ(Sql("SELECT max(batches) FROM metrics WHERE kind = 'training' AND trial_id = " +
                std::to_string(Id(by_reason.at("")))),
            20);
}

// What sf refuses before anything is stored: an entrypoint script that is not in the context,
// and a context over the 96 MiB limit.
TEST_F(CoreApi, MissingScriptAndOversizedContextAreRefusedBeforeAnythingIsStored) {
  const int64_t before = Sql("SELECT count(*) FROM experiments");
  std::string yaml = Experiment(RegressExperiment("core-api-missing", "", 5));
  {
    std::string text = ReadFile(yaml);
    text.replace(text.find("regress.py"), 10, "missing.py");
    std::ofstream(yaml) << text;
  }
  SfRun missing = Sf({"experiment", "create", yaml});
  EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("entrypoint: missing.py is not in the context directory " +
                             fs::path(yaml).parent_path().string()),
            std::string::npos)
      << missing.err;

  const std::string big = Experiment(RegressExperiment("core-api-big", "", 5));
  const fs::path weights = fs::path(big).parent_path() / "weights.bin";
  int fd = open(weights.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{100} << 20), 0);  // sparse: no disk
  close(fd);
  SfRun oversized = Sf({"experiment", "create", big});
  EXPECT_EQ(oversized.exit_code, 2) << oversized.out << oversized.err;
  EXPECT_NE(oversized.err.find("more than the 96.0 MiB limit"), std::string::npos) << oversized.err;
  EXPECT_NE(oversized.err.find("weights.bin (100.0 MiB)"), std::string::npos) << oversized.err;
  EXPECT_EQ(Sql("SELECT count(*) FROM experiments"), before) << "nothing stored";

  // Listed in .sfignore, the same directory is fine.
  std::ofstream(fs::path(big).parent_path() / ".sfignore") << "*.bin\n";
  const int64_t id = Create(big);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitState(id, "COMPLETED"));
}

// ASHA over a Python trial: the searcher's lengths drive the script; some trials stop at the
// first rung, the best are promoted to the full length.
TEST_F(CoreApi, AshaSweepPromotesAndStopsPythonTrialsByTheSearchersLengths) {
  const int64_t id = Create(Experiment(
      "name: core-api-asha\n"
      "entrypoint: [/usr/bin/python3, regress.py]\n"
      "hyperparameters:\n"
      "  lr: {type: categorical, vals: [0.001, 0.01, 0.05, 0.1]}\n"
      "searcher:\n"
      "  name: adaptive_asha\n"
      "  metric: validation_loss\n"
      "  max_trials: 4\n"
      "  max_length: {batches: 16}\n"
      "  divisor: 2\n"
      "  max_rungs: 2\n"
      "  mode: aggressive\n"
      "  max_concurrent_trials: 2\n"
      "  seed: 7\n"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitState(id, "COMPLETED", seconds(400)));
  std::vector<int64_t> lengths;
  const Value trials = cluster_->Trials(id);
  for (const Value& t : trials.as_list()) {
    EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
    lengths.push_back(std::stoll(t.Find("totalBatches")->as_string()));
  }
  ASSERT_EQ(lengths.size(), 4u);
  EXPECT_EQ(std::count(lengths.begin(), lengths.end(), 16), 2) << "promoted to the full length";
  EXPECT_EQ(std::count(lengths.begin(), lengths.end(), 8), 2) << "stopped at the first rung";
}

// Priority preemption: two low-priority Python trials hold both slots; one checkpoints and steps
// aside for a high-priority trial, then resumes where it stopped, without a restart.
TEST_F(CoreApi, PriorityPreemptionCheckpointsAndResumesAPythonTrial) {
  const int64_t low = Create(Experiment(
      "name: core-api-low\n"
      "entrypoint: /usr/bin/python3 regress.py\n"
      "hyperparameters: {lr: 0.05, sleep: 0.2, seed: {type: categorical, vals: [1, 2]}}\n"
      "searcher: {name: grid, metric: validation_loss, max_length: {batches: 50}}\n"
      "resources: {priority: 60}\n"));
  ASSERT_GT(low, 0);
  const std::string e = std::to_string(low);
  ASSERT_TRUE(cluster_->WaitFor(
      [&] {
        return Sql("SELECT count(DISTINCT m.trial_id) FROM metrics m JOIN trials t ON t.id = m.trial_id "
                   "WHERE t.experiment_id = " + e + " AND m.kind = 'training' AND m.batches >= 5") == 2;
      },
      seconds(120)))
      << "both low-priority trials run";
  const int64_t high = Create(Experiment(RegressExperiment("core-api-high", "", 5, "resources: {priority: 10}\n")));
  ASSERT_GT(high, 0);
  ASSERT_TRUE(WaitState(high, "COMPLETED"));
  ASSERT_TRUE(WaitState(low, "COMPLETED"));
  int preempted = 0;
  const Value trials = cluster_->Trials(low);
  for (const Value& trial : trials.as_list()) {
    EXPECT_EQ(trial.Find("restarts")->as_int(), 0) << "a preemption is not a restart";
    const std::string t = std::to_string(Id(trial));
    EXPECT_EQ(Sql("SELECT count(DISTINCT batches) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 50);
    const std::string logs = Logs(Id(trial));
    std::smatch m;
    if (!std::regex_search(logs, m, std::regex("stopping at step ([0-9]+) as the master asked"))) continue;
    ++preempted;
    EXPECT_NE(logs.find("starting at step " + m[1].str()), std::string::npos) << logs;
  }
  EXPECT_EQ(preempted, 1) << "one trial made room for the high-priority one";
}

// Two ranks of DistributedDataParallel meeting through the master (no launcher): they end with
// identical weights; SIGKILL one rank mid-training and the gang restarts from the checkpoint.
TEST_F(CoreApi, DdpRanksEndIdenticalAndAKilledRankRestartsTheGangFromItsCheckpoint) {
  const int64_t id = Create(Experiment(
      "name: core-api-ddp\n"
      "entrypoint: [/usr/bin/python3, ddp.py]\n"
      "hyperparameters: {lr: 0.05, sleep: 0.2, checkpoint_every: 5}\n"
      "resources: {slots_per_trial: 2}\n"
      "max_restarts: 2\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 40}}\n"));
  ASSERT_GT(id, 0);
  const int64_t trial = Id(OnlyTrial(id));
  const std::string t = std::to_string(trial);
  ASSERT_TRUE(cluster_->WaitFor([&] { return Sql("SELECT count(*) FROM checkpoints WHERE trial_id = " + t) >= 2; },
                                seconds(180)));
  auto is_ddp = [](const std::string& cmdline) { return cmdline.find("ddp.py") != std::string::npos; };
  std::vector<pid_t> rank1 = TaskPids({MasterEnv(), "SF_TRIAL_ID=" + t, "SF_RANK=1"}, is_ddp);
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(kill(rank1[0], SIGKILL), 0);
  ASSERT_TRUE(WaitState(id, "COMPLETED", seconds(300)));
  EXPECT_EQ(OnlyTrial(id).Find("restarts")->as_int(), 1);
  const std::string logs = Logs(trial);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m, std::regex("rank 1 of 2 starting at step ([1-9][0-9]*)"))) << logs;
  // The last checkpoint: one file per rank, the same weights. Retention runs a moment after the
  // trial ends (it settles a second) and may take the checkpoint read here (two are at step 40:
  // the periodic one and the final one); it marks the row DELETED before it removes the files,
  // so a checkpoint gone meanwhile is one the database no longer offers, and the next is read.
  std::optional<CommandResult> same;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string uuid, path;
    {
      pqxx::connection conn(cluster_->db());
      pqxx::work tx(conn);
      const pqxx::row row = tx.exec_params1(
          "SELECT uuid, path FROM checkpoints WHERE trial_id = $1 AND state = 'ACTIVE' "
          "ORDER BY batches DESC, reported_at DESC LIMIT 1",
          trial);
      uuid = row[0].as<std::string>();
      path = row[1].as<std::string>();
    }
    const fs::path dir = path;
    auto run = RunCommand({"/usr/bin/python3", "-c",
                           "import sys, torch\n"
                           "a = torch.load(sys.argv[1])['model']; b = torch.load(sys.argv[2])['model']\n"
                           "assert a.keys() == b.keys()\n"
                           "assert all(torch.equal(a[k], b[k]) for k in a), 'the ranks differ'\n"
                           "print('identical', torch.load(sys.argv[1])['steps'])\n",
                           (dir / "rank0.pt").string(), (dir / "rank1.pt").string()},
                          CommandOptions{});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    same = *run;
    const bool deleted_meanwhile =
        run->exit_code != 0 && run->output.find("No such file") != std::string::npos &&
        Sql("SELECT count(*) FROM checkpoints WHERE uuid = '" + uuid + "' AND state = 'DELETED'") == 1;
    if (!deleted_meanwhile) break;
  }
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->exit_code, 0) << same->output;
  EXPECT_EQ(same->output, "identical 40\n");
}

// A rank that fails after rank 0 completed the searcher's operation (and its validation
// reached the searcher) still fails the trial, and a single-trial experiment with it:
// `--follow` exits 1 naming the trial, the rank and the reason.
TEST_F(CoreApi, ARankThatFailsAfterTheChiefCompletedFailsTheExperiment) {
  const std::string yaml = Experiment(
      "name: core-api-late-rank-failure\n"
      "entrypoint: [/usr/bin/python3, ddp.py]\n"
      "hyperparameters: {lr: 0.05, fail_rank: 1}\n"
      "resources: {slots_per_trial: 2}\n"
      "max_restarts: 0\n"
      "searcher: {name: single, metric: validation_loss, max_length: {batches: 10}}\n");
  SfRun run = Sf({"experiment", "create", yaml, "--follow"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const std::string prefix = "created experiment ";
  ASSERT_EQ(run.out.rfind(prefix, 0), 0u) << run.out << run.err;
  const int64_t id = std::stoll(run.out.substr(prefix.size()));
  EXPECT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_ERROR");
  const int64_t trial = Id(OnlyTrial(id));
  EXPECT_EQ(OnlyTrial(id).Find("state")->as_string(), "TRIAL_STATE_ERROR");
  // The searcher did get the validation: the failure is not "no trial validated".
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE kind = 'validation' AND trial_id = " + std::to_string(trial)), 1);
  const std::string why = "rank 1 on e2e-agent-";
  EXPECT_NE(TrialError(id).find(why), std::string::npos) << TrialError(id);
  EXPECT_NE(TrialError(id).find("RuntimeError: rank 1 failed after the last operation"), std::string::npos)
      << TrialError(id);
  EXPECT_NE(run.err.find("sf: experiment " + std::to_string(id) + ": trial " + std::to_string(trial) + " failed: " + why),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("sf: trial " + std::to_string(trial) + ": " + why), std::string::npos) << run.err;
}

// report_early_exit(INVALID_HP), as Determined's: the trial ends in ERROR with that reason, no
// restart, and the random search samples a replacement until it has its max_trials of valid ones.
TEST_F(CoreApi, InvalidHyperparametersReportedEarlyAreReplacedBySearch) {
  const int64_t id = Create(Experiment(
      "name: core-api-invalid-hp\n"
      "entrypoint: /usr/bin/python3 regress.py\n"
      "hyperparameters:\n"
      "  lr: {type: categorical, vals: [0.05, 5.0]}\n"
      "  invalid_above: 1.0\n"
      "max_restarts: 2\n"
      "searcher: {name: random, metric: validation_loss, max_trials: 2, max_length: {batches: 5}}\n"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitState(id, "COMPLETED", seconds(300)));
  int completed = 0, invalid = 0;
  const Value trials = cluster_->Trials(id);
  for (const Value& t : trials.as_list()) {
    const double lr = t.Find("hparams")->Find("lr")->as_double();
    const std::string state = t.Find("state")->as_string();
    const Value* error = t.Find("error");
    if (lr > 1.0) {
      ++invalid;
      EXPECT_EQ(state, "TRIAL_STATE_ERROR");
      EXPECT_EQ(t.Find("restarts")->as_int(), 0) << "reported, not retried";
      ASSERT_TRUE(error && error->is_string());
      EXPECT_NE(error->as_string().find("reported its hyperparameters invalid (report_early_exit INVALID_HP)"),
                std::string::npos)
          << error->as_string();
    } else {
      ++completed;
      EXPECT_EQ(state, "TRIAL_STATE_COMPLETED");
    }
  }
  EXPECT_EQ(completed, 2) << trials.ToJson();
  std::printf("%d trial(s) reported invalid hyperparameters and were replaced\n", invalid);
}

// A master killed mid-trial and started again: the library waits it out (retries with
// backoff), the agent keeps the trial running, and no report is lost.
TEST_F(CoreApi, AMasterRestartLosesNoReport) {
  const int64_t id = Create(Experiment(RegressExperiment("core-api-master-restart", "  sleep: 0.1\n", 60)));
  ASSERT_GT(id, 0);
  const std::string t = std::to_string(Id(OnlyTrial(id)));
  ASSERT_TRUE(cluster_->WaitFor(
      [&] { return Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'") >= 5; },
      seconds(120)));
  cluster_->StopMaster(SIGKILL);
  std::this_thread::sleep_for(seconds(3));
  cluster_->StartMaster();
  ASSERT_TRUE(WaitState(id, "COMPLETED"));
  EXPECT_EQ(Sql("SELECT count(DISTINCT batches) FROM metrics WHERE trial_id = " + t +
                " AND kind = 'training' AND batches BETWEEN 1 AND 60"),
            60);
  EXPECT_EQ(OnlyTrial(id).Find("restarts")->as_int(), 0) << "the trial ran on through the master's restart";
}

// The examples the README shows run as they are (shortened here: a few dozen batches), on one
// slot and, with DistributedDataParallel, on two; they report validation BLEU.
TEST_F(CoreApi, TheExamplesRunAsTheyAre) {
  const std::string examples = std::string(SF_SOURCE_DIR) + "/examples";
  const int64_t single = Create(examples + "/pytorch-transformer/const.yaml",
                                {"searcher.max_length.batches=30", "hyperparameters.report_every=10"});
  ASSERT_GT(single, 0);
  ASSERT_TRUE(WaitState(single, "COMPLETED", seconds(400)));
  const int64_t ddp = Create(examples + "/pytorch-ddp/distributed.yaml", {"searcher.max_length.batches=20"});
  ASSERT_GT(ddp, 0);
  ASSERT_TRUE(WaitState(ddp, "COMPLETED", seconds(400)));
  for (int64_t id : {single, ddp}) {
    const std::string t = std::to_string(Id(OnlyTrial(id)));
    EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'validation' AND vals ? 'bleu'"),
              1)
        << "experiment " << id;
    EXPECT_GE(Sql("SELECT count(*) FROM checkpoints WHERE trial_id = " + t + " AND state = 'ACTIVE'"), 1);
  }
}

// Unmanaged mode: the same script started by hand, with the master's URL and an API token in
// its environment, makes an experiment of its own and reports into it; an exception ends it
// as ERROR with the exception's line.
TEST_F(CoreApi, UnmanagedScriptReportsIntoAnExperimentOfItsOwn) {
  const fs::path dir = fs::path(Experiment("name: unused\n")).parent_path();
  auto run = [&](const std::string& hparams) {
    CommandOptions options;
    options.env = {{"PYTHONPATH", std::string(SF_BINARY_DIR) + "/python"},
                   {"SF_MASTER", cluster_->url()},
                   {"SF_TOKEN", cluster_->admin_token()},
                   {"SF_HPARAMS", hparams}};
    options.working_dir = dir.string();
    auto r = RunCommand({"/usr/bin/python3", "regress.py"}, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CommandResult{};
  };
  auto experiment_of = [&](const std::string& output) -> int64_t {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(output, m, std::regex("unmanaged trial [0-9]+ of experiment ([0-9]+)"))) << output;
    return m.empty() ? 0 : std::stoll(m[1].str());
  };
  CommandResult ok = run(R"({"lr": 0.05, "seed": 5})");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const int64_t id = experiment_of(ok.output);
  ASSERT_GT(id, 0);
  EXPECT_EQ(cluster_->ExperimentState(id), "EXPERIMENT_STATE_COMPLETED");
  const Value trial = OnlyTrial(id);
  EXPECT_EQ(trial.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
  EXPECT_EQ(trial.Find("hparams")->Find("seed")->as_int(), 5);
  const std::string t = std::to_string(Id(trial));
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'training'"), 20);
  EXPECT_EQ(Sql("SELECT count(*) FROM metrics WHERE trial_id = " + t + " AND kind = 'validation'"), 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM checkpoints WHERE trial_id = " + t + " AND batches = 20"), 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM experiments WHERE unmanaged AND id = " + std::to_string(id)), 1);
  {  // ... and says so over REST (the dashboard's badge).
    auto [code, got] = cluster_->Get("/api/v1/experiments/" + std::to_string(id));
    ASSERT_EQ(code, 200);
    ASSERT_NE(got.Find("experiment")->Find("unmanaged"), nullptr) << got.ToJson();
    EXPECT_TRUE(got.Find("experiment")->Find("unmanaged")->as_bool());
  }
  // Its output is in the trial's logs, as a scheduled trial's is (no agent captured it).
  const std::string logs = Logs(Id(trial));
  EXPECT_NE(logs.find("[rank 0] starting at step 0\n"), std::string::npos) << logs;
  EXPECT_NE(logs.find("[rank 0] done at step 20\n"), std::string::npos) << logs;

  CommandResult failed = run(R"({"fail_at": 4})");
  EXPECT_NE(failed.exit_code, 0) << failed.output;
  const int64_t bad = experiment_of(failed.output);
  ASSERT_GT(bad, 0);
  EXPECT_EQ(cluster_->ExperimentState(bad), "EXPERIMENT_STATE_ERROR");
  EXPECT_NE(TrialError(bad).find("ValueError: bad shape"), std::string::npos) << TrialError(bad);
  const std::string bad_logs = Logs(Id(OnlyTrial(bad)));
  EXPECT_NE(bad_logs.find("[rank 0] ValueError: bad shape\n"), std::string::npos) << bad_logs;
}

// The REST client CI pipelines use (steadfast.Client): create (packing the context), wait,
// trials, metrics, and kill, against the real master.
TEST_F(CoreApi, PythonRestClientDrivesExperimentsFromCi) {
  const std::string done = Experiment(RegressExperiment("client-done", "", 10));
  const std::string slow = Experiment(RegressExperiment("client-slow", "  sleep: 0.5\n", 100000));
  CommandOptions options;
  options.env = {{"PYTHONPATH", std::string(SF_BINARY_DIR) + "/python"},
                 {"SF_MASTER", cluster_->url()},
                 {"SF_TOKEN", cluster_->admin_token()}};
  auto r = RunCommand({"/usr/bin/python3", "-c",
                       "import sys, time, steadfast\n"
                       "c = steadfast.Client()\n"
                       "e = c.create_experiment(sys.argv[1])\n"
                       "print('state', c.wait(e, timeout=120)['state'])\n"
                       "t = c.trials(e)\n"
                       "print('trials', len(t))\n"
                       "print('reports', len(c.metrics(int(t[0]['id']))), len(c.metrics(int(t[0]['id']), 'validation')))\n"
                       "s = c.create_experiment(sys.argv[2])\n"
                       "while not c.metrics(int(c.trials(s)[0]['id'])): time.sleep(0.2)\n"
                       "c.kill([s])\n"
                       "print('killed', c.wait(s, timeout=60)['state'])\n"
                       "try:\n"
                       "    c.experiment(999999)\n"
                       "except steadfast.ApiError as err:\n"
                       "    print('missing', err.status)\n",
                       done, slow},
                      options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find("state EXPERIMENT_STATE_COMPLETED\ntrials 1\nreports 10 1\n"), std::string::npos)
      << r->output;
  EXPECT_NE(r->output.find("killed EXPERIMENT_STATE_CANCELED\nmissing 404\n"), std::string::npos) << r->output;
}

}  // namespace
}  // namespace sf::testing
