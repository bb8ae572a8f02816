// End to end, speech recognition (issue 27): speech experiments are ordinary experiments on a
// real cluster — PostgreSQL, sf-master, sf-agents and sf-trainer processes on loopback — reading
// audio manifests of a corpus this test synthesises (deploy/make-speech-corpus.sh).
//  - A grid of two trials validates by WER and CER (the searcher's metric is wer); the REST API
//    gives each trial's error rates, and each checkpoint's weights say speech_transformer_ctc.
//    Each validation also carries the validation split's first utterances, reference beside
//    hypothesis (the metric group validation_transcripts, trainer/run/validation_transcripts.h),
//    which the trial lists among its groups and the REST API returns as stored.
//  - A two-rank trial (slots_per_trial: 2, two agents of one slot: Open MPI between separate
//    processes) pauses by checkpoint and, activated, continues the step count to the end; its
//    transcripts are gathered from both ranks (each hypothesis scores as its row says).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/reported_parameters.h"
#include "trainer/eval/error_rate.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

// The corpus, synthesised once per test process: 16 training, 4 validation, 2 test utterances.
const std::string& Corpus() {
  static TempDir* dir = new TempDir();
  static const std::string path = [] {
    int status = 0;
    const std::string out = RunShellCommand("bash " + SourceDir() + "/deploy/make-speech-corpus.sh " + dir->path() +
                                                "/corpus --sentences 16 --valid 4 --test 2 --seed 3",
                                            &status);
    EXPECT_EQ(status, 0) << out;
    return dir->path() + "/corpus";
  }();
  return path;
}

// The validation manifest's utterances (id, transcript), in order.
std::vector<std::pair<std::string, std::string>> ValidationUtterances() {
  std::ifstream in(Corpus() + "/valid.tsv");
  std::string line;
  std::getline(in, line);  // the header: id, audio, duration, text, ...
  std::vector<std::string> header;
  for (size_t a = 0, b; a <= line.size(); a = b + 1) {
    b = std::min(line.find('\t', a), line.size());
    header.push_back(line.substr(a, b - a));
  }
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  std::vector<std::pair<std::string, std::string>> out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    for (size_t a = 0, b; a <= line.size(); a = b + 1) {
      b = std::min(line.find('\t', a), line.size());
      cells.push_back(line.substr(a, b - a));
    }
    out.emplace_back(cells.at(column("id")), cells.at(column("text")));
  }
  return out;
}

// The trial's validation transcripts as the master returns them: one row per validation, each
// the validation split's utterances (4 of them: fewer than the sample of 5) in manifest order,
// reference as written and a hypothesis whose word errors are the row's. Returns the rows' steps.
std::vector<int64_t> ExpectValidationTranscripts(Cluster& cluster, int64_t trial_id) {
  const std::string trial = "/api/v1/trials/" + std::to_string(trial_id);
  auto [dcode, described] = cluster.Get(trial);
  EXPECT_EQ(dcode, 200);
  std::vector<std::string> groups;
  if (const Value* g = described.Find("metricGroups"); g && g->is_list()) {
    for (const Value& x : g->as_list()) groups.push_back(x.as_string());
  }
  EXPECT_NE(std::find(groups.begin(), groups.end(), "validation_transcripts"), groups.end())
      << described.ToJson();
  auto [code, m] = cluster.Get(trial + "/metrics?kind=validation_transcripts");
  EXPECT_EQ(code, 200);
  const auto utterances = ValidationUtterances();
  EXPECT_EQ(utterances.size(), 4u);
  std::vector<int64_t> steps;
  if (!m.Find("metrics")) return steps;
  for (const Value& r : m.Find("metrics")->as_list()) {
    steps.push_back(static_cast<int64_t>(std::stoll(r.Find("batches")->as_string())));
    const Value* list = r.Find("values") ? r.Find("values")->Find("utterances") : nullptr;
    if (!list || !list->is_list()) {
      ADD_FAILURE() << "no utterances: " << r.ToJson();
      continue;
    }
    EXPECT_EQ(list->as_list().size(), utterances.size()) << r.ToJson();
    for (size_t i = 0; i < std::min(list->as_list().size(), utterances.size()); ++i) {
      const Value& u = list->as_list()[i];
      EXPECT_EQ(u.Find("id")->as_string(), utterances[i].first) << r.ToJson();
      EXPECT_EQ(u.Find("reference")->as_string(), utterances[i].second);
      if (!u.Find("hypothesis") || !u.Find("hypothesis")->is_string()) {
        ADD_FAILURE() << "no hypothesis: " << u.ToJson();
        continue;
      }
      const eval::ErrorCounts e =
          eval::WordErrors(u.Find("hypothesis")->as_string(), utterances[i].second);
      EXPECT_EQ(u.Find("word_errors")->as_double(), static_cast<double>(e.edits())) << u.ToJson();
      EXPECT_EQ(u.Find("words")->as_double(), static_cast<double>(e.reference_length))
          << u.ToJson();
      EXPECT_GT(e.reference_length, 0);
    }
  }
  return steps;
}

std::string SpeechExperiment(const std::string& name, const std::string& lrs, int64_t batches,
                             const std::string& extra = "") {
  const std::string c = Corpus();
  return "name: " + name + "\n"
         "data:\n"
         "  train: {manifest: " + c + "/train.tsv}\n"
         "  valid: {manifest: " + c + "/valid.tsv}\n"
         "  features: {mels: 40}\n"
         "  spec_augment: {freq_masks: 1, freq_width: 8, time_masks: 1, time_width: 20, time_ratio: 0.2}\n"
         "hyperparameters:\n"
         "  arch: speech_transformer_ctc_small\n"
         "  conv_channels: 8\n  d_model: 32\n  heads: 2\n  encoder_layers: 1\n  ffn_dim: 64\n"
         "  lr: {type: categorical, vals: [" + lrs + "]}\n"
         "  lr_schedule: {type: inverse_sqrt, warmup: 4}\n"
         "  max_frames: 1200\n"
         "searcher:\n"
         "  name: grid\n"
         "  metric: wer\n"
         "  max_length: {batches: " + std::to_string(batches) + "}\n"
         "  max_concurrent_trials: 2\n"
         "scheduling_unit: 4\n"
         "min_validation_period: {batches: 8}\n"
         "min_checkpoint_period: {batches: 8}\n"
         "max_restarts: 1\n" + extra;
}

TEST(SpeechEndToEnd, AGridOfSpeechTrialsIsSearchedByWordErrorRate) {
  Cluster cluster(2, 1);
  int64_t id = cluster.Submit(SpeechExperiment("speech-grid", "0.001, 0.003", 16));
  ASSERT_GT(id, 0);
  bool done = cluster.WaitForState(id, kCompleted, std::chrono::seconds(400));
  if (!done) cluster.DumpLogs();
  ASSERT_TRUE(done) << cluster.ExperimentState(id);
  Value trials = cluster.Trials(id);
  ASSERT_EQ(trials.as_list().size(), 2u);
  for (const Value& t : trials.as_list()) {
    EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
    auto [code, m] = cluster.Get("/api/v1/trials/" + std::to_string(Id(t)) + "/metrics?kind=validation");
    ASSERT_EQ(code, 200);
    const auto& reports = m.Find("metrics")->as_list();
    ASSERT_EQ(reports.size(), 2u) << "at steps 8 and 16: " << m.ToJson();
    for (const Value& r : reports) {
      const Value* values = r.Find("values");
      ASSERT_NE(values, nullptr);
      for (const char* k : {"wer", "cer", "validation_loss"}) {
        ASSERT_TRUE(values->Find(k) && values->Find(k)->is_number()) << k << ": " << r.ToJson();
      }
      EXPECT_GT(values->Find("cer")->as_double(), 0.0) << "a tiny model makes errors";
      EXPECT_EQ(values->Find("bleu"), nullptr);
    }
    EXPECT_EQ(ExpectValidationTranscripts(cluster, Id(t)), (std::vector<int64_t>{8, 16}));
    // The training reports count labels.
    auto [tcode, tm] = cluster.Get("/api/v1/trials/" + std::to_string(Id(t)) + "/metrics?kind=training");
    ASSERT_EQ(tcode, 200);
    EXPECT_EQ(tm.Find("metrics")->as_list().size(), 4u);
  }
  // The searcher's metric is the trials' WER: what each checkpoint records.
  auto [code, cks] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(code, 200);
  int active = 0;
  for (const Value& c : cks.Find("checkpoints")->as_list()) {
    if (c.Find("state")->as_string() != "ACTIVE") continue;
    ++active;
    const std::string path = c.Find("path")->as_string();
    std::ifstream state(path + "/trainer_state.json");
    std::string text((std::istreambuf_iterator<char>(state)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"char_vocabulary\""), std::string::npos) << path;
    std::ifstream weights(path + "/model.safetensors", std::ios::binary);
    std::string head(4096, '\0');
    weights.read(head.data(), static_cast<std::streamsize>(head.size()));
    EXPECT_NE(head.find("\"arch\":\"speech_transformer_ctc\""), std::string::npos) << path;
  }
  EXPECT_GE(active, 2);
  // The speech model's size as reported is its weights': the same model (only lr differs) twice.
  const std::map<int64_t, int64_t> parameters = ExpectReportedParametersAreTheCheckpointedModels(cluster, id);
  ASSERT_EQ(parameters.size(), 2u);
  EXPECT_EQ(parameters.begin()->second, parameters.rbegin()->second);
  EXPECT_TRUE(cluster.TrainerPids().empty());
}

TEST(SpeechEndToEnd, TwoRankSpeechTrialPausesAndContinuesToTheEnd) {
  Cluster cluster(2, 1);
  int64_t id = cluster.Submit(SpeechExperiment("speech-dist", "0.002", 80, "resources: {slots_per_trial: 2}\n"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitFor([&] { return TotalBatches(cluster, id) >= 20; }, std::chrono::seconds(300)))
      << cluster.ExperimentState(id);
  const int64_t tid = Id(cluster.Trials(id).as_list()[0]);
  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "").first, 200);
  ASSERT_TRUE(cluster.WaitFor(
      [&] { return cluster.Trials(id).as_list()[0].Find("state")->as_string() == "TRIAL_STATE_PAUSED"; },
      std::chrono::seconds(90)));
  EXPECT_TRUE(cluster.TrainerPids(tid).empty());
  const int64_t paused_at = TotalBatches(cluster, id);
  ASSERT_LT(paused_at, 80);
  EXPECT_EQ(Count(cluster.db(), "SELECT max(batches) FROM checkpoints WHERE trial_id=" + std::to_string(tid)),
            paused_at);
  ASSERT_EQ(cluster.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "").first, 200);
  bool done = cluster.WaitForState(id, kCompleted, std::chrono::seconds(600));
  if (!done) cluster.DumpLogs();
  ASSERT_TRUE(done) << cluster.ExperimentState(id);
  const std::string t = std::to_string(tid);
  // Every training report once (4, 8, ..., 80), from a gang of two, with allreduce traffic.
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id=" + t),
            20);
  EXPECT_GE(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id=" + t +
                                    " AND (vals->>'world_size')::float = 2 AND (vals->>'allreduce_bytes')::float > 0"),
            1);
  EXPECT_GE(Count(cluster.db(), "SELECT count(*) FROM metrics WHERE kind='validation' AND trial_id=" + t +
                                    " AND vals ? 'wer'"),
            1);
  EXPECT_EQ(Count(cluster.db(), "SELECT count(DISTINCT rank) FROM task_logs WHERE trial_id=" + t), 2);
  // A validation every 8 steps from each start and one at the end: each row's hypotheses come
  // from both ranks' shares of the split.
  const std::vector<int64_t> steps = ExpectValidationTranscripts(cluster, tid);
  EXPECT_GE(steps.size(), 5u);
  EXPECT_EQ(steps.empty() ? 0 : steps.back(), 80);
  EXPECT_EQ(cluster.Trials(id).as_list()[0].Find("restarts")->as_int(), 0);
  EXPECT_TRUE(cluster.TrainerPids().empty());
}

}  // namespace
}  // namespace sf::testing
