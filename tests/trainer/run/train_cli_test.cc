// `sf-trainer train` and `sf-trainer translate` as a user runs them: real processes on the
// Multi30k-tiny corpus (copied into a temporary directory, so the data cache lands there).
//
//  - Bit-exact resume: N steps straight equal N/2 steps, stop, --resume, the rest: the same
//    weights and optimizer state byte for byte, and the same loss at every step.
//  - A corrupted checkpoint (a flipped byte, a truncated file, a missing file) is refused by
//    --resume and by translate with an error naming the file; nothing is trained from it.
//  - SIGINT (Ctrl-C) writes a checkpoint, exits 0, and the checkpoint resumes.
//  - translate answers one line per input line, from the checkpoint alone.
//  - The checkpoint's model.safetensors describes its model in __metadata__: plain json +
//    numpy (tests/trainer/reference/weights_from_metadata.py) rebuilds the model from the
//    metadata alone and computes the engine's logits and loss.
//  - Bad command lines and configs get a clear error and exit status 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/subprocess.h"
#include "tests/trainer/run/trainer_cli.h"
#include "common/value.h"
#include "tests/support/testing.h"
#include "tests/trainer/seq2seq_batches.h"
#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/weights_io.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/run/model_setup.h"

namespace sf {
namespace {
namespace fs = std::filesystem;

std::string Trainer() { return sf::testing::TrainerBinary(); }
std::string ReadFile(const std::string& path) { return sf::testing::ReadWholeFile(path); }

// A 2-layer, 32-wide model on the tiny corpus; dropout on (every kind), two micro-batches per step and
// bf16, so the resume has RNG, data position, aggregation and mixed precision to get right.
std::string Config(int64_t batches) {
  return R"(name: tiny-cli
data:
  train: {src: data/train.de, tgt: data/train.en}
  valid: {src: data/valid.de, tgt: data/valid.en}
  test: {src: data/test.de, tgt: data/test.en}
  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}
hyperparameters:
  arch: transformer
  d_model: 32
  heads: 4
  encoder_layers: 2
  decoder_layers: 2
  ffn_dim: 64
  dropout: 0.2
  attention_dropout: 0.1
  activation_dropout: 0.1
  normalize_before: true
  share_embeddings: true
  lr: 0.002
  lr_schedule: {type: inverse_sqrt, warmup: 4}
  optimizer: {type: radam, betas: [0.9, 0.98]}
  max_tokens: 600
  clip_norm: 1.0
  beam_size: 2
  max_len_b: 5
precision: bf16
optimizations: {aggregation_frequency: 2}
scheduling_unit: 1
searcher: {name: single, metric: validation_loss, max_length: {batches: )" +
         std::to_string(batches) + R"(}}
min_validation_period: {batches: 4}
min_checkpoint_period: {batches: 4}
)";
}

class TrainCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new sf::testing::TempDir();
    sf::testing::CopyTinyCorpus(dir_->path());
    dir_->WriteFile("tiny.yaml", Config(12));
    // The straight run every test may use.
    auto r = Run({"train", "tiny.yaml", "--output", "straight", "--no-test"});
    straight_ok_ = r.exit_code == 0;
    straight_output_ = r.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(straight_ok_) << straight_output_; }

  static CommandResult Run(std::vector<std::string> args, const std::string& stdin_data = "") {
    return sf::testing::RunTrainer(dir_->path(), std::move(args), stdin_data);
  }
  // stdout alone (translate's answer), through the shell.
  static CommandResult RunStdout(const std::string& args, const std::string& stdin_data, const std::string& out) {
    CommandOptions o;
    o.working_dir = dir_->path();
    o.stdin_data = stdin_data;
    o.timeout = std::chrono::minutes(2);
    auto r = RunCommand({"/bin/sh", "-c", "'" + Trainer() + "' " + args + " > " + out}, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CommandResult{};
  }
  static std::string Path(const std::string& rel) { return dir_->path() + "/" + rel; }

  // step -> training loss, from a run's metrics.jsonl.
  static std::map<int64_t, double> Losses(const std::string& run) {
    return sf::testing::RunMetrics(Path(run), "training", "loss");
  }

  static sf::testing::TempDir* dir_;
  static bool straight_ok_;
  static std::string straight_output_;
};
sf::testing::TempDir* TrainCli::dir_ = nullptr;
bool TrainCli::straight_ok_ = false;
std::string TrainCli::straight_output_;

TEST_F(TrainCli, ResumeIsBitExact) {
  auto first = Run({"train", "tiny.yaml", "--output", "resumed", "--no-test", "--stop-after-steps", "5"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("stopped at step 5"), std::string::npos) << first.output;
  const std::string at5 = fs::canonical(Path("resumed/latest")).string();
  auto second = Run({"train", "tiny.yaml", "--output", "resumed", "--no-test", "--resume", at5});
  ASSERT_EQ(second.exit_code, 0) << second.output;

  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string a = ReadFile(Path(std::string("straight/latest/") + f));
    const std::string b = ReadFile(Path(std::string("resumed/latest/") + f));
    ASSERT_FALSE(a.empty()) << f;
    EXPECT_TRUE(a == b) << f << " differs between the straight and the resumed run";
  }
  const auto straight = Losses("straight"), resumed = Losses("resumed");
  ASSERT_EQ(straight.size(), 12u);
  ASSERT_EQ(resumed.size(), 12u);
  for (const auto& [step, loss] : straight) {
    ASSERT_TRUE(resumed.count(step)) << "step " << step;
    EXPECT_EQ(loss, resumed.at(step)) << "loss at step " << step;
  }
  // The losses moved: the run trained, so equality above is not equality of nothing.
  EXPECT_LT(straight.at(12), straight.at(1));
}

// --stop-after-steps at a step where a validation is due: the validation runs before the
// checkpoint, and stopping there then resuming validates at exactly the straight run's steps,
// with the same values.
TEST_F(TrainCli, StoppingWhereAValidationIsDueStillValidates) {
  auto first = Run({"train", "tiny.yaml", "--output", "stop8", "--no-test", "--stop-after-steps", "8"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(sf::testing::RunMetrics(Path("stop8"), "validation", "validation_loss").size(), 2u) << first.output;
  auto state = Value::FromJson(ReadFile(Path("stop8/latest/trainer_state.json")));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->Find("steps")->as_int(), 8);
  auto second = Run({"train", "tiny.yaml", "--output", "stop8", "--no-test", "--resume",
                     fs::canonical(Path("stop8/latest")).string()});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const auto straight = sf::testing::RunMetrics(Path("straight"), "validation", "validation_loss");
  const auto resumed = sf::testing::RunMetrics(Path("stop8"), "validation", "validation_loss");
  ASSERT_EQ(straight.size(), 3u);  // steps 4, 8 and the end, 12
  EXPECT_EQ(resumed, straight);
  // ... and each once: the resumed run does not validate step 8 again.
  int records = 0;
  std::istringstream lines(ReadFile(Path("stop8/metrics.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    auto v = Value::FromJson(line);
    if (v.ok() && v->Find("kind") && v->Find("kind")->as_string() == "validation") ++records;
  }
  EXPECT_EQ(records, 3);
}

TEST_F(TrainCli, InterruptWritesACheckpointAndExitsCleanly) {
  // A long run, interrupted (SIGINT, as Ctrl-C) once it has reported its first step.
  dir_->WriteFile("long.yaml", Config(1000000));
  CommandOptions o;
  o.working_dir = dir_->path();
  o.timeout = std::chrono::minutes(2);
  const std::string script = "'" + Trainer() +
                             "' train long.yaml --output interrupted --no-test --threads 1 & pid=$!; "
                             "while [ ! -s interrupted/metrics.jsonl ]; do sleep 0.05; done; "
                             "kill -INT $pid; wait $pid; echo exit=$?";
  auto r = RunCommand({"/bin/sh", "-c", script}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->output.find("exit=0"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find("interrupted at step"), std::string::npos) << r->output;
  ASSERT_TRUE(fs::exists(Path("interrupted/latest/manifest.json"))) << r->output;
  // The checkpoint is whole and resumable: one more step, then stop.
  auto state = Value::FromJson(ReadFile(Path("interrupted/latest/trainer_state.json")));
  ASSERT_TRUE(state.ok());
  const int64_t at = state->Find("steps")->as_int();
  EXPECT_GE(at, 1);
  auto resumed = Run({"train", "long.yaml", "--output", "interrupted", "--no-test", "--resume",
                      fs::canonical(Path("interrupted/latest")).string(), "--stop-after-steps",
                      std::to_string(at + 1)});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("stopped at step " + std::to_string(at + 1)), std::string::npos) << resumed.output;
}

TEST_F(TrainCli, CorruptCheckpointsAreRefused) {
  const std::string good = fs::canonical(Path("straight/latest")).string();
  struct Case {
    std::string name, file;
    std::function<void(const std::string&)> damage;
  };
  const std::vector<Case> cases = {
      {"flipped byte", "model.safetensors",
       [](const std::string& p) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekg(200);
         char c;
         f.get(c);
         f.seekp(200);
         f.put(static_cast<char>(c ^ 0x10));
       }},
      {"truncated", "optimizer.safetensors",
       [](const std::string& p) { fs::resize_file(p, fs::file_size(p) / 2); }},
      {"missing", "trainer_state.json", [](const std::string& p) { fs::remove(p); }},
  };
  for (const auto& c : cases) {
    const std::string bad = Path("bad-" + std::to_string(&c - cases.data()));
    fs::copy(good, bad, fs::copy_options::recursive);
    c.damage(bad + "/" + c.file);
    auto r = Run({"train", "tiny.yaml", "--output", "from-bad", "--no-test", "--resume", bad});
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.output;
    EXPECT_NE(r.output.find(c.file), std::string::npos) << c.name << ": the error names the file\n" << r.output;
    EXPECT_FALSE(fs::exists(Path("from-bad/latest"))) << c.name << ": trained from a corrupt checkpoint";
    auto t = Run({"translate", "--checkpoint", bad}, "ein Mann .\n");
    EXPECT_EQ(t.exit_code, 2) << c.name << ": " << t.output;
    EXPECT_NE(t.output.find(c.file), std::string::npos) << c.name << ": " << t.output;
  }
}

TEST_F(TrainCli, CheckpointWeightsDescribeTheirModel) {
  auto ck = ReadCheckpoint(Path("straight/latest"));
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  // The metadata says what trainer_state.json says (every architecture key).
  auto from_meta = ConfigFromMetadata(ck->model_metadata);
  ASSERT_TRUE(from_meta.ok()) << from_meta.status().ToString();
  auto from_state = ModelSpecFromValue(*ck->state.Find("model"));
  ASSERT_TRUE(from_state.ok()) << from_state.status().ToString();
  EXPECT_EQ(ConfigMetadata(*from_meta), from_state->metadata());
  EXPECT_EQ(from_meta->d_model, 32);
  EXPECT_TRUE(from_meta->normalize_before);
  EXPECT_TRUE(from_meta->share_embeddings);

  // The engine, from the checkpoint, on one batch (no dropout: the reference has none).
  TransformerConfig config = *from_meta;
  config.dropout = config.attention_dropout = 0;
  CpuBackend backend;
  Transformer<float> model(config, &backend, DType::kF32);
  ASSERT_TRUE(LoadModelWeights(*ck, "straight/latest", model).ok());
  HostBatch hb = RandomBatch(3, 7, 6, config.tgt_vocab, 9);
  auto stats = model.Forward(hb.view());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const int64_t nt = hb.batch * hb.tgt_len;
  std::vector<float> logits(model.logits(), model.logits() + nt * config.tgt_vocab);
  std::vector<float> loss = {static_cast<float>(stats->loss)};
  auto i32 = [](const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    return safetensors::TensorView{name, safetensors::DType::kI32, std::move(shape),
                                   std::as_bytes(std::span<const int32_t>(v))};
  };
  // The case file holds only the batch and our results: no weights, no configuration.
  const std::string case_path = Path("metadata-case.safetensors");
  const std::vector<safetensors::TensorView> views = {
      safetensors::F32View("ours.logits", {nt, config.tgt_vocab}, logits),
      safetensors::F32View("ours.loss", {1}, loss),
      i32("batch.src", {hb.batch, hb.src_len}, hb.src),
      i32("batch.tgt_in", {hb.batch, hb.tgt_len}, hb.tin),
      i32("batch.tgt_out", {hb.batch, hb.tgt_len}, hb.tout)};
  ASSERT_TRUE(safetensors::WriteFile(case_path, views).ok());
  CommandOptions o;
  o.timeout = std::chrono::minutes(2);
  auto r = RunCommand({"/usr/bin/python3", sf::testing::SourceDir() + "/tests/trainer/reference/weights_from_metadata.py",
                       Path("straight/latest/model.safetensors"), case_path},
                      o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::printf("%s", r->output.c_str());
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find("worst:"), std::string::npos) << r->output;
}

TEST_F(TrainCli, WeightsForAnotherModelAreRefusedByName) {
  auto ck = ReadCheckpoint(Path("straight/latest"));
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  TransformerConfig other = ConfigFromMetadata(ck->model_metadata).value();
  other.ffn_dim = 48;
  CpuBackend backend;
  Transformer<float> model(other, &backend, DType::kF32);
  Status st = LoadModelWeights(*ck, "straight/latest", model);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ffn_dim is 64 in the weights, 48 in this model"), std::string::npos) << st.message();
}

TEST_F(TrainCli, TranslateAnswersEveryLine) {
  const std::string input = "Ein Mann fährt Fahrrad.\n\nZwei Hunde spielen im Schnee.\nEine Frau liest ein Buch.\n";
  auto r = RunStdout("translate --checkpoint straight/latest --beam 3 --threads 1", input, "hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(ReadFile(Path("hyp.txt")));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << ReadFile(Path("hyp.txt"));
  EXPECT_EQ(lines[1], "") << "an empty source gives an empty translation";
  // The cached and the recomputing decoder agree through the whole command, too.
  auto nc = RunStdout("translate --checkpoint straight/latest --beam 3 --threads 1 --no-cache", input, "hyp-nc.txt");
  ASSERT_EQ(nc.exit_code, 0) << nc.output;
  EXPECT_EQ(ReadFile(Path("hyp.txt")), ReadFile(Path("hyp-nc.txt")));
  // --device auto is the CPU here, and the GPU search (which must find the same hypotheses,
  // engine_device_model_test) where one is visible.
  auto dev = RunStdout("translate --checkpoint straight/latest --beam 3 --threads 1 --device auto", input, "hyp-auto.txt");
  ASSERT_EQ(dev.exit_code, 0) << dev.output;
  EXPECT_FALSE(ReadFile(Path("hyp-auto.txt")).empty());
  if (VisibleGpuCount() == 0) {
    EXPECT_EQ(ReadFile(Path("hyp.txt")), ReadFile(Path("hyp-auto.txt")));
  }
}

TEST_F(TrainCli, TrainingEndsWithATestScore) {
  // The straight run skipped the test; a 2-step run with it prints a sacreBLEU line.
  dir_->WriteFile("short.yaml", Config(2));
  auto r = RunStdout("train short.yaml --output short --quiet --threads 1", "", "short.out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string out = ReadFile(Path("short.out"));
  EXPECT_NE(out.find("BLEU = "), std::string::npos) << out;
  EXPECT_NE(out.find("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(Path("short/test.hyp")));
}

TEST_F(TrainCli, BadInputIsExplained) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  {
    std::string y = Config(4);
    y.replace(y.find("lr: 0.002"), 9, "lr: {type: categorical, vals: [0.001, 0.002]}");
    y.replace(y.find("name: single"), 12, "name: grid");
    dir_->WriteFile("search.yaml", y);
    std::string z = Config(4);
    z.replace(z.find("heads: 4"), 8, "heads: 5");
    dir_->WriteFile("heads.yaml", z);
    std::string w = Config(4);
    w.replace(w.find("data/train.en"), 13, "data/nothere.en");
    dir_->WriteFile("nodata.yaml", w);
  }
  const std::vector<Case> cases = {
      {{"train"}, "sf-trainer train: EXPERIMENT is required"},
      {{"train", "missing.yaml"}, "missing.yaml"},
      {{"train", "tiny.yaml", "--bogus"}, "not expected: --bogus"},
      {{"train", "tiny.yaml", "--resume"}, "--resume"},
      {{"train", "tiny.yaml", "--stop-after-steps", "ten"}, "--stop-after-steps: 'ten' is not a whole number"},
      {{"translate", "--checkpoint", "straight/latest", "--lenpen", "x1"}, "Could not convert: --lenpen = x1"},
      {{"train", "search.yaml"}, "hyperparameters.lr is a search space"},
      {{"train", "heads.yaml", "--output", "heads"}, "heads"},
      {{"train", "nodata.yaml", "--output", "nodata"}, "nothere.en"},
      {{"translate"}, "sf-trainer translate: --checkpoint is required"},
      {{"translate", "--checkpoint", "no/such/dir"}, "no/such/dir"},
      {{"translate", "--checkpoint", "straight/latest", "--beam", "0"}, "--beam: must be >= 1, not 0"},
      {{"translate", "--checkpoint", "straight/latest", "--device", "tpu"}, "--device tpu: expected cpu, cuda, cuda:N or auto"},
      // No machine here has 65 GPUs: refused by name, with or without a GPU.
      {{"translate", "--checkpoint", "straight/latest", "--device", "cuda:64"}, "device cuda:64"},
      {{"translate", "--checkpoint", "straight/latest", "--device", "cuda:0", "--no-cache"},
       "--no-cache is a CPU reference mode; the cuda:0 search always caches"},
  };
  for (const auto& c : cases) {
    auto r = Run(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << joined << ": expected '" << c.expect << "' in\n"
                                                          << r.output;
  }
}

}  // namespace
}  // namespace sf
