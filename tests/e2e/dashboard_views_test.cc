// The dashboard's views of issue 49 in Debian's Chromium against real clusters (PostgreSQL,
// sf-master, sf-agents, and sf-trainer or real Python processes): each test runs small
// experiments, then webui/e2e/views.e2e.mjs, which reads what the master says about them and
// checks that the page shows it. The same views are checked against stubs in the offline browser
// test (webui/e2e/offline.e2e.mjs); a Slurm trial's page is checked in slurm_test.cc. Each test has
// a cluster of its own. The user-code experiments run tests/e2e/core_api/regress.py with Debian's
// /usr/bin/python3 (python3-torch).
#include <filesystem>
#include <fstream>
#include <regex>

#include "common/subprocess.h"
#include "tests/cli/run_sf.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

// A context directory (in `scratch`) holding regress.py and exp.yaml: experiment `name` running
// regress.py with these `hyperparameters` (the YAML block's body) and `searcher` (a flow mapping);
// `sf experiment create` packs and uploads it as a user's would be. The experiment's id, or 0 with
// a failure.
int64_t CreateUserCodeExperiment(Cluster& cluster, const TempDir& scratch, const std::string& name,
                                 const std::string& hyperparameters, const std::string& searcher) {
  const std::string yaml = "name: " + name +
                           "\nentrypoint: /usr/bin/python3 regress.py\nhyperparameters:\n" +
                           hyperparameters + "searcher: " + searcher + "\n";
  const fs::path dir = fs::path(scratch.path()) / "context";
  fs::create_directories(dir);
  fs::copy_file(fs::path(SF_SOURCE_DIR) / "tests/e2e/core_api/regress.py", dir / "regress.py",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "exp.yaml") << yaml;
  const SfRun run = RunSf({"experiment", "create", (dir / "exp.yaml").string()}, scratch,
                          {{"SF_MASTER", cluster.url()}, {"SF_TOKEN", cluster.admin_token()}});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string prefix = "created experiment ";
  if (run.exit_code != 0 || run.out.rfind(prefix, 0) != 0) return 0;
  return std::stoll(run.out.substr(prefix.size()));
}

// Waits for experiment `id` to complete, then checks `view` of it in Chromium (screenshots in
// <build>/webui-views-<view>); the cluster's logs on any failure.
void ExpectViewOfCompleted(Cluster& cluster, int64_t id, const std::string& view, seconds timeout) {
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitForState(id, kCompleted, timeout)) << cluster.ExperimentState(id);
  ExpectDashboardViews(cluster, {view + "=" + std::to_string(id)}, "webui-views-" + view);
  if (::testing::Test::HasFailure()) cluster.DumpLogs();
}

ClusterLayout UserCodeLayout() {
  ClusterLayout layout;
  layout.master_flags = {"--min-run-seconds", "0"};
  return layout;
}

// A Core API experiment's pages show its entrypoint and the context sf uploaded (files, sizes,
// digest) and, on the trial page, none of the native trainer's panels; a script started by hand
// (unmanaged) makes an experiment that the list and its page badge as unmanaged.
TEST(DashboardViews, UserCodeShowsItsEntrypointAndContextAndAnUnmanagedRunItsBadge) {
  Cluster cluster(1, 1, UserCodeLayout());
  TempDir scratch;
  const int64_t id =
      CreateUserCodeExperiment(cluster, scratch, "core-api-views", "  lr: 0.05\n",
                               "{name: single, metric: validation_loss, max_length: {batches: 5}}");
  ASSERT_GT(id, 0);
  // The same script by hand, with the master's URL and a token: an unmanaged experiment.
  CommandOptions o;
  o.env = {{"PYTHONPATH", std::string(SF_BINARY_DIR) + "/python"},
           {"SF_MASTER", cluster.url()},
           {"SF_TOKEN", cluster.admin_token()},
           {"SF_HPARAMS", R"({"lr": 0.05})"}};
  o.working_dir = scratch.path() + "/context";
  o.timeout = std::chrono::minutes(2);
  auto by_hand = RunCommand({"/usr/bin/python3", "regress.py"}, o);
  ASSERT_TRUE(by_hand.ok()) << by_hand.status().ToString();
  ASSERT_EQ(by_hand->exit_code, 0) << by_hand->output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(by_hand->output, m,
                                std::regex("unmanaged trial [0-9]+ of experiment ([0-9]+)")))
      << by_hand->output;
  const std::string unmanaged = m[1].str();
  ASSERT_TRUE(cluster.WaitForState(id, kCompleted, seconds(180))) << cluster.ExperimentState(id);

  ExpectDashboardViews(cluster, {"core-api=" + std::to_string(id), "unmanaged=" + unmanaged},
                       "webui-views-user-code");
  if (HasFailure()) cluster.DumpLogs();
}

// A sweep over a string (long data paths), a categorical and a log-scaled hyperparameter, with a
// constant string beside them: the parallel-coordinates chart has an axis for each that varies,
// and no two of its labels overlap, at 1280 and 375 px. User code, so that any hyperparameter goes.
TEST(DashboardViews, SweepOverStringCategoricalAndLogHyperparametersHasLabelsThatDoNotOverlap) {
  Cluster cluster(2, 2, UserCodeLayout());
  TempDir scratch;
  const int64_t id = CreateUserCodeExperiment(
      cluster, scratch, "hparam-axes",
      "  lr: {type: log, minval: -4, maxval: -1, base: 10, count: 2}\n"
      "  data_path: {type: categorical, vals: [/data/multi30k/train.de, "
      "/data/wmt14/train.tokenized.bpe32k.newstest2014-filtered.de]}\n"
      "  activation: {type: categorical, vals: [relu, gelu_tanh_approximation]}\n"
      "  vocabulary: /data/wmt14/sentencepiece.bpe32k.shared.model\n",
      "{name: grid, metric: validation_loss, max_length: {batches: 3}, max_concurrent_trials: 4}");
  ExpectViewOfCompleted(cluster, id, "hparams", seconds(240));
  EXPECT_EQ(cluster.Trials(id).as_list().size(), 8u);
}

// A native sweep over `arch` (an LSTM and a Transformer): the Architectures card compares them.
TEST(DashboardViews, ArchSweepShowsItsArchitecturesSideBySide) {
  Cluster cluster(2, 1);
  const std::string data = DataCopy("multi30k-de-en-tiny");
  const int64_t id = cluster.Submit(
      "name: arch-views\n"
      "data:\n"
      "  train: {src: " +
      data + "/train.de, tgt: " + data +
      "/train.en}\n"
      "  valid: {src: " +
      data + "/valid.de, tgt: " + data +
      "/valid.en}\n"
      "  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}\n"
      "hyperparameters:\n"
      "  arch: {type: categorical, vals: [lstm_small, transformer_tiny]}\n"
      "  encoder_layers: 1\n  decoder_layers: 1\n"
      "  lr: 0.002\n"
      "  lr_schedule: {type: inverse_sqrt, warmup: 4}\n"
      "  max_tokens: 512\n"
      "searcher: {name: grid, metric: validation_loss, max_length: {batches: 8}, "
      "max_concurrent_trials: 2}\n"
      "scheduling_unit: 4\n");
  ExpectViewOfCompleted(cluster, id, "arch", seconds(300));
}

// A speech trial (on a corpus synthesised here, deploy/make-speech-corpus.sh) shows its latest
// validation's transcripts beside their references.
TEST(DashboardViews, SpeechTrialShowsItsValidationTranscripts) {
  TempDir corpus_dir;
  const std::string corpus = corpus_dir.path() + "/corpus";
  int status = 0;
  const std::string made =
      RunShellCommand("bash " + SourceDir() + "/deploy/make-speech-corpus.sh " + corpus +
                          " --sentences 8 --valid 3 --test 1 --seed 5",
                      &status);
  ASSERT_EQ(status, 0) << made;
  Cluster cluster(1, 1);
  const int64_t id = cluster.Submit(
      "name: speech-views\n"
      "data:\n"
      "  train: {manifest: " +
      corpus +
      "/train.tsv}\n"
      "  valid: {manifest: " +
      corpus +
      "/valid.tsv}\n"
      "  features: {mels: 40}\n"
      "hyperparameters:\n"
      "  arch: speech_transformer_ctc_small\n"
      "  conv_channels: 8\n  d_model: 32\n  heads: 2\n  encoder_layers: 1\n  ffn_dim: 64\n"
      "  lr: 0.002\n"
      "  lr_schedule: {type: inverse_sqrt, warmup: 4}\n"
      "  max_frames: 1200\n"
      "searcher: {name: single, metric: wer, max_length: {batches: 8}}\n"
      "scheduling_unit: 4\n");
  ExpectViewOfCompleted(cluster, id, "speech", seconds(300));
}

}  // namespace
}  // namespace sf::testing
