// fairseq's `lstm` architecture through `sf-trainer` as a user runs it (arch: lstm_small, real
// processes on the Multi30k-tiny corpus copied into a temporary directory): the same training
// loop, checkpoints, search and commands as the Transformer's.
//
//  - Bit-exact resume with dropout, bf16 and two micro-batches per step: N steps straight equal
//    N/2 steps, stop, --resume, the rest (weights and optimizer state byte for byte).
//  - Validation BLEU and the test-set score come from the LSTM's beam search.
//  - The checkpoint's model.safetensors says arch lstm in its __metadata__ and holds fairseq's
//    state_dict names: fairseq's LSTMModel written in PyTorch
//    (tests/trainer/reference/lstm_model_reference.py --weights) loads it by those names alone
//    and computes the engine's logits and loss.
//  - translate answers every line; --no-cache (the Transformer's reference mode) is refused.
//  - A Transformer-only hyperparameter is refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "common/subprocess.h"
#include "tests/trainer/run/trainer_cli.h"
#include "common/value.h"
#include "tests/support/testing.h"
#include "tests/trainer/seq2seq_batches.h"
#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/lstm_model.h"
#include "trainer/models/model_spec.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/model_setup.h"

namespace sf {
namespace {
namespace fs = std::filesystem;

std::string Trainer() { return sf::testing::TrainerBinary(); }
std::string ReadFile(const std::string& path) { return sf::testing::ReadWholeFile(path); }

// lstm_small made tiny: two layers, both directions, a decoder wider than the encoder's output
// (projected initial states) and narrower output embeddings (additional_fc, tied to the input).
std::string Config(int64_t batches) {
  return R"(name: tiny-lstm
data:
  train: {src: data/train.de, tgt: data/train.en}
  valid: {src: data/valid.de, tgt: data/valid.en}
  test: {src: data/test.de, tgt: data/test.en}
  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}
hyperparameters:
  arch: lstm_small
  encoder_embed_dim: 24
  encoder_hidden_size: 16
  encoder_layers: 2
  decoder_embed_dim: 24
  decoder_hidden_size: 40
  decoder_out_embed_dim: 24
  decoder_layers: 2
  dropout: 0.2
  lr: 0.003
  lr_schedule: {type: inverse_sqrt, warmup: 4}
  optimizer: {type: adamw, betas: [0.9, 0.98]}
  max_tokens: 600
  clip_norm: 1.0
  beam_size: 2
  max_len_b: 5
precision: bf16
optimizations: {aggregation_frequency: 2}
scheduling_unit: 1
searcher: {name: single, metric: bleu, smaller_is_better: false, max_length: {batches: )" +
         std::to_string(batches) + R"(}}
min_validation_period: {batches: 4}
min_checkpoint_period: {batches: 4}
)";
}

class LstmCli : public sf::testing::TrainedRunSuite<LstmCli> {
 public:
  static constexpr const char* kConfigFile = "lstm.yaml";
  static std::string SuiteConfig() { return Config(12); }
};

TEST_F(LstmCli, ResumeIsBitExact) {
  ExpectResumeIsBitExact(5, 12);
}

TEST_F(LstmCli, ValidationAndTestScoresComeFromTheBeamSearch) {
  const auto bleu = Metric("straight", "validation", "bleu");
  EXPECT_EQ(bleu.size(), 3u) << ReadFile(Path("straight/metrics.jsonl"));
  EXPECT_NE(straight_output_.find("BLEU = "), std::string::npos) << straight_output_;
  const std::string hyps = ReadFile(Path("straight/test.hyp"));
  const std::string refs = ReadFile(Path("data/test.en"));
  ASSERT_GT(std::count(refs.begin(), refs.end(), '\n'), 10);
  EXPECT_EQ(std::count(hyps.begin(), hyps.end(), '\n'), std::count(refs.begin(), refs.end(), '\n'))
      << "one hypothesis per test sentence";
}

TEST_F(LstmCli, TheCheckpointIsFairseqsLstmByName) {
  auto ck = ReadCheckpoint(Path("straight/latest"));
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto spec = ModelSpecFromMetadata(ck->model_metadata);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->family(), "lstm");
  EXPECT_EQ(spec->config<LstmConfig>().encoder_hidden, 16);
  EXPECT_TRUE(spec->config<LstmConfig>().encoder_bidirectional);
  EXPECT_EQ(spec->config<LstmConfig>().decoder_layers, 2);
  EXPECT_TRUE(spec->config<LstmConfig>().share_decoder_input_output_embed);
  std::set<std::string> names;
  for (const NamedBuffer& b : ck->model) names.insert(b.name);
  for (const char* n : {"encoder.embed_tokens.weight", "encoder.lstm.weight_ih_l0", "encoder.lstm.weight_hh_l1_reverse",
                        "decoder.encoder_hidden_proj.weight", "decoder.encoder_cell_proj.bias",
                        "decoder.layers.1.weight_hh", "decoder.attention.input_proj.weight",
                        "decoder.attention.output_proj.weight", "decoder.additional_fc.weight"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }

  // The engine's logits and loss on one batch, from the checkpoint (no dropout).
  CpuBackend backend;
  std::unique_ptr<Seq2SeqModel<float>> model = MakeModel(*spec, &backend, DType::kF32);
  ASSERT_TRUE(LoadModelWeights(*ck, "straight/latest", *model).ok());
  model->context().training = false;
  const int64_t V = spec->config<LstmConfig>().tgt_vocab;
  HostBatch hb = RandomBatch(3, 7, 6, V, 9);
  auto stats = model->Forward(hb.view());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const int64_t nt = hb.batch * hb.tgt_len;
  auto* lstm = dynamic_cast<LstmModel<float>*>(model.get());
  ASSERT_NE(lstm, nullptr);
  std::vector<float> logits(lstm->logits(), lstm->logits() + nt * V);
  const std::vector<float> loss = {static_cast<float>(stats->loss)}, eps = {spec->config<LstmConfig>().label_smoothing};
  const std::vector<int32_t> pad = {spec->config<LstmConfig>().pad_id};
  auto i32 = [](const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    return safetensors::TensorView{name, safetensors::DType::kI32, std::move(shape),
                                   std::as_bytes(std::span<const int32_t>(v))};
  };
  // The case holds the batch and our results only: the weights come from the checkpoint file.
  const std::string case_path = Path("lstm-case.safetensors");
  const std::vector<safetensors::TensorView> views = {
      safetensors::F32View("ours.logits", {nt, V}, logits), safetensors::F32View("ours.loss", {1}, loss),
      safetensors::F32View("input.eps", {1}, eps), i32("input.pad", {1}, pad),
      i32("batch.src", {hb.batch, hb.src_len}, hb.src), i32("batch.tgt_in", {hb.batch, hb.tgt_len}, hb.tin),
      i32("batch.tgt_out", {hb.batch, hb.tgt_len}, hb.tout)};
  ASSERT_TRUE(safetensors::WriteFile(case_path, views).ok());
  CommandOptions o;
  o.timeout = std::chrono::minutes(2);
  auto r = RunCommand({"/usr/bin/python3", sf::testing::SourceDir() + "/tests/trainer/reference/lstm_model_reference.py",
                       case_path, "--tolerance", "1e-4", "--weights", Path("straight/latest/model.safetensors")},
                      o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::printf("%s", r->output.c_str());
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find("logits: rel"), std::string::npos) << r->output;
}

TEST_F(LstmCli, TranslateAnswersEveryLine) {
  const std::string input = "Ein Mann fährt Fahrrad.\n\nZwei Hunde spielen im Schnee.\n";
  CommandOptions o;
  o.working_dir = dir_->path();
  o.stdin_data = input;
  o.timeout = std::chrono::minutes(2);
  auto r = RunCommand({"/bin/sh", "-c", "'" + Trainer() + "' translate --checkpoint straight/latest --beam 3 --threads 1 > hyp.txt"}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->exit_code, 0) << r->output;
  std::istringstream in(ReadFile(Path("hyp.txt")));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u) << ReadFile(Path("hyp.txt"));
  EXPECT_EQ(lines[1], "") << "an empty source gives an empty translation";
  EXPECT_FALSE(lines[0].empty());
  auto nc = Run({"translate", "--checkpoint", "straight/latest", "--no-cache"}, "Ein Mann.\n");
  EXPECT_EQ(nc.exit_code, 2) << nc.output;
  EXPECT_NE(nc.output.find("--no-cache is the Transformer's reference mode"), std::string::npos) << nc.output;
}

TEST_F(LstmCli, TransformerHyperparametersAreRefusedByName) {
  std::string y = Config(4);
  y.replace(y.find("  encoder_layers: 2\n"), 0, "  heads: 4\n");
  dir_->WriteFile("bad.yaml", y);
  auto r = Run({"train", "bad.yaml", "--output", "bad"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("hyperparameters.heads: does not apply to arch lstm_small"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(Path("bad/latest")));
}

}  // namespace
}  // namespace sf
