// fairseq's `fconv` (ConvS2S) through `sf-trainer` as a user runs it (arch: fconv_small, real
// processes on the Multi30k-tiny corpus copied into a temporary directory): the same training
// loop, checkpoints, search and commands as the other translation families.
//
//  - Bit-exact resume with dropout, bf16 and two micro-batches per step.
//  - Validation BLEU and the test-set score come from fconv's incremental beam search.
//  - The checkpoint's model.safetensors says arch fconv and holds fairseq's state_dict names;
//    those tensors, by their file names, given to the independent PyTorch model
//    (tests/trainer/reference/fconv_reference.py) reproduce the engine's logits, loss and every
//    gradient.
//  - translate answers every line; a Transformer-only hyperparameter is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/subprocess.h"
#include "tests/support/testing.h"
#include "tests/trainer/run/checkpoint_reference.h"
#include "tests/trainer/run/trainer_cli.h"
#include "trainer/models/fconv.h"
#include "trainer/models/model_spec.h"
#include "trainer/run/checkpoint.h"

namespace sf {
namespace {
namespace fs = std::filesystem;

// fconv_small made tiny: a projection where the encoder's width changes, an untied fc3.
std::string Config(int64_t batches) {
  return R"(name: tiny-fconv
data:
  train: {src: data/train.de, tgt: data/train.en}
  valid: {src: data/valid.de, tgt: data/valid.en}
  test: {src: data/test.de, tgt: data/test.en}
  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}
hyperparameters:
  arch: fconv_small
  encoder_embed_dim: 24
  decoder_embed_dim: 24
  decoder_out_embed_dim: 20
  share_decoder_input_output_embed: false
  conv_channels: 32
  encoder_layers: 2
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

class FConvCli : public sf::testing::TrainedRunSuite<FConvCli> {
 public:
  static constexpr const char* kConfigFile = "fconv.yaml";
  static std::string SuiteConfig() { return Config(12); }
};

TEST_F(FConvCli, ResumeIsBitExact) { ExpectResumeIsBitExact(5, 12); }

TEST_F(FConvCli, ValidationAndTestScoresComeFromTheBeamSearch) {
  EXPECT_EQ(Metric("straight", "validation", "bleu").size(), 3u) << sf::testing::ReadWholeFile(Path("straight/metrics.jsonl"));
  EXPECT_NE(straight_output_.find("BLEU = "), std::string::npos) << straight_output_;
  const std::string hyps = sf::testing::ReadWholeFile(Path("straight/test.hyp"));
  const std::string refs = sf::testing::ReadWholeFile(Path("data/test.en"));
  ASSERT_GT(std::count(refs.begin(), refs.end(), '\n'), 10);
  EXPECT_EQ(std::count(hyps.begin(), hyps.end(), '\n'), std::count(refs.begin(), refs.end(), '\n'))
      << "one hypothesis per test sentence";
}

TEST_F(FConvCli, TheCheckpointIsFairseqsFConvByName) {
  auto ck = ReadCheckpoint(Path("straight/latest"));
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto spec = ModelSpecFromMetadata(ck->model_metadata);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->family(), "fconv");
  EXPECT_EQ(ConvSpecsText(spec->config<FConvConfig>().encoder_convs), "32x3,32x3");
  EXPECT_FALSE(spec->config<FConvConfig>().share_input_output_embed);
  std::set<std::string> names;
  for (const NamedBuffer& b : ck->model) names.insert(b.name);
  for (const char* n : {"encoder.embed_tokens.weight", "encoder.embed_positions.weight", "encoder.fc1.weight_v",
                        "encoder.fc1.weight_g", "encoder.convolutions.1.weight_v", "encoder.convolutions.1.bias",
                        "encoder.fc2.weight_g", "decoder.attention.1.in_projection.weight_v",
                        "decoder.attention.0.out_projection.bias", "decoder.fc2.weight_v", "decoder.fc3.weight_g"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  // The checkpoint's tensors, by their file names, in the independent PyTorch model.
  sf::testing::ExpectReferenceReproducesCheckpoint(
      Path("straight/latest"), "fconv_reference.py", Path("fconv-case.safetensors"),
      [](Seq2SeqModel<float>& m) {
        auto* model = dynamic_cast<FConvModel<float>*>(&m);
        return model ? model->logits() : nullptr;
      },
      "grad.decoder.attention.1.in_projection.weight_g");
}

TEST_F(FConvCli, TranslateAnswersEveryLine) {
  auto r = Run({"translate", "--checkpoint", "straight/latest", "--beam", "3"},
               "Ein Mann fährt Fahrrad.\n\nZwei Hunde spielen im Schnee.\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[1], "") << "an empty source gives an empty translation";
  EXPECT_FALSE(lines[0].empty());
}

TEST_F(FConvCli, TransformerHyperparametersAreRefusedByName) {
  std::string y = Config(4);
  y.replace(y.find("  encoder_layers: 2\n"), 0, "  heads: 4\n");
  dir_->WriteFile("bad.yaml", y);
  auto r = Run({"train", "bad.yaml", "--output", "bad"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("hyperparameters.heads: does not apply to arch fconv_small"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(Path("bad/latest")));
}

}  // namespace
}  // namespace sf
