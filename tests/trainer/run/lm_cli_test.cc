// fairseq's `transformer_lm` through `sf-trainer` as a user runs it (arch: transformer_lm_small,
// real processes on the English side of the Multi30k-tiny corpus copied into a temporary
// directory, given as one-sided text `{text: FILE}`): the same training loop, checkpoints and
// commands as the translation models, with perplexity where they have BLEU.
//
//  - Bit-exact resume with dropout, bf16 and two micro-batches per step.
//  - Validation perplexity every period and the test set's perplexity at the end.
//  - The checkpoint says arch transformer_lm and holds fairseq's transformer_lm state_dict
//    names; the independent PyTorch model (tests/trainer/reference/transformer_reference.py)
//    given those tensors computes the engine's logits, loss and every gradient.
//  - generate continues every prompt line (beam, greedy, seeded sampling); translate refuses
//    the language model and generate refuses a translation model.
//  - The target side of parallel data trains a language model too.
//  - One-sided text with a translation arch, and metric bleu with a language model, are
//    refused by name before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/subprocess.h"
#include "common/value.h"
#include "tests/support/testing.h"
#include "tests/trainer/run/checkpoint_reference.h"
#include "tests/trainer/run/trainer_cli.h"
#include "trainer/models/model_spec.h"
#include "trainer/models/transformer_lm.h"
#include "trainer/run/checkpoint.h"

namespace sf {
namespace {
namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) { return sf::testing::ReadWholeFile(path); }

// transformer_lm_small made tiny, on the English side alone.
std::string Config(int64_t batches, const std::string& data = R"(  train: {text: data/train.en}
  valid: {text: data/valid.en}
  test: {text: data/test.en}
)") {
  return R"(name: tiny-lm
data:
)" + data + R"(  tokenizer: {type: sentencepiece, vocab_size: 300, model_type: bpe}
hyperparameters:
  arch: transformer_lm_small
  d_model: 32
  heads: 4
  decoder_layers: 2
  ffn_dim: 48
  dropout: 0.1
  attention_dropout: 0.1
  lr: 0.003
  lr_schedule: {type: inverse_sqrt, warmup: 4}
  optimizer: {type: adamw, betas: [0.9, 0.98]}
  max_tokens: 500
  clip_norm: 1.0
  beam_size: 2
precision: bf16
optimizations: {aggregation_frequency: 2}
scheduling_unit: 1
searcher: {name: single, metric: validation_perplexity, smaller_is_better: true, max_length: {batches: )" +
         std::to_string(batches) + R"(}}
min_validation_period: {batches: 4}
min_checkpoint_period: {batches: 4}
)";
}

class LmCli : public sf::testing::TrainedRunSuite<LmCli> {
 public:
  static constexpr const char* kConfigFile = "lm.yaml";
  static std::string SuiteConfig() { return Config(12); }
 protected:
  static std::vector<std::string> Lines(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
};

TEST_F(LmCli, ResumeIsBitExact) {
  ExpectResumeIsBitExact(5, 12);
}

TEST_F(LmCli, ValidationAndTestAreScoredByPerplexity) {
  const auto ppl = Metric("straight", "validation", "validation_perplexity");
  ASSERT_EQ(ppl.size(), 3u) << ReadFile(Path("straight/metrics.jsonl"));
  EXPECT_LT(ppl.at(12), ppl.at(4)) << "validation perplexity did not fall";
  EXPECT_TRUE(Metric("straight", "validation", "bleu").empty()) << "a language model has no BLEU";
  const auto test = Metric("straight", "test", "test_perplexity");
  ASSERT_EQ(test.size(), 1u) << ReadFile(Path("straight/metrics.jsonl"));
  const double p = test.begin()->second;
  EXPECT_GT(p, 1.0);
  EXPECT_LT(p, 300.0) << "worse than uniform over the vocabulary";
  EXPECT_NE(straight_output_.find("test set"), std::string::npos) << straight_output_;
  EXPECT_NE(straight_output_.find("perplexity"), std::string::npos) << straight_output_;
  EXPECT_FALSE(fs::exists(Path("straight/test.hyp"))) << "nothing is translated";
}

TEST_F(LmCli, TheCheckpointIsFairseqsTransformerLmByName) {
  auto ck = ReadCheckpoint(Path("straight/latest"));
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto spec = ModelSpecFromMetadata(ck->model_metadata);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->family(), "transformer_lm");
  EXPECT_EQ(spec->config<TransformerLmConfig>().d_model, 32);
  EXPECT_EQ(spec->config<TransformerLmConfig>().layers, 2);
  EXPECT_TRUE(spec->config<TransformerLmConfig>().share_input_output_embed) << "transformer_lm_small ties its output projection";
  std::set<std::string> names;
  for (const NamedBuffer& b : ck->model) names.insert(b.name);
  for (const char* n : {"decoder.embed_tokens.weight", "decoder.layers.0.self_attn.in_proj_weight",
                        "decoder.layers.1.self_attn.out_proj.bias", "decoder.layers.1.self_attn_layer_norm.weight",
                        "decoder.layers.0.fc1.weight", "decoder.layers.1.fc2.bias",
                        "decoder.layers.1.final_layer_norm.bias"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  for (const std::string& n : names) EXPECT_EQ(n.rfind("decoder.", 0), 0u) << n << ": a decoder-only model";

  // The checkpoint's tensors, by their file names, in the independent PyTorch model.
  sf::testing::ExpectReferenceReproducesCheckpoint(
      Path("straight/latest"), "transformer_reference.py", Path("lm-case.safetensors"),
      [](Seq2SeqModel<float>& m) {
        auto* model = dynamic_cast<TransformerLm<float>*>(&m);
        return model ? model->logits() : nullptr;
      },
      "grad.decoder.layers.1.fc2.weight");
}

TEST_F(LmCli, GenerateContinuesEveryPrompt) {
  const std::string prompts = "A man\n\nTwo dogs are\n";
  auto beam = Run({"generate", "--checkpoint", "straight/latest", "--max-new-tokens", "8"}, prompts);
  ASSERT_EQ(beam.exit_code, 0) << beam.output;
  const auto lines = Lines(beam.output);
  ASSERT_EQ(lines.size(), 3u) << beam.output;
  EXPECT_EQ(lines[0].rfind("A man", 0), 0u) << lines[0];
  EXPECT_EQ(lines[2].rfind("Two dogs are", 0), 0u) << lines[2];
  EXPECT_GT(lines[0].size(), std::string("A man").size()) << "nothing was generated";
  EXPECT_FALSE(lines[1].empty()) << "an empty prompt asks for a sentence from scratch";

  auto sample = [&](const std::string& seed) {
    return Run({"generate", "--checkpoint", "straight/latest", "--sample", "--top-k", "20", "--temperature", "1.2",
                "--seed", seed, "--continuation-only"},
               std::string(8, '\n'));
  };
  auto a = sample("5"), b = sample("5"), c = sample("6");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output) << "the same seed draws the same";
  EXPECT_NE(a.output, c.output) << "another seed draws otherwise";
  const auto drawn = Lines(a.output);
  ASSERT_EQ(drawn.size(), 8u) << a.output;
  EXPECT_GE(std::set<std::string>(drawn.begin(), drawn.end()).size(), 4u) << a.output;

  auto bad = Run({"generate", "--checkpoint", "straight/latest", "--sample", "--temperature", "0"}, "A\n");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--temperature must be > 0"), std::string::npos) << bad.output;
}

TEST_F(LmCli, TranslateRefusesALanguageModelAndGenerateATranslationModel) {
  auto t = Run({"translate", "--checkpoint", "straight/latest"}, "Ein Mann.\n");
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_NE(t.output.find("holds a transformer_lm language model: it continues text and translates nothing"),
            std::string::npos)
      << t.output;
  // A translation model: two steps of a tiny Transformer.
  std::string y = Config(2, "  train: {src: data/train.de, tgt: data/train.en}\n");
  y.replace(y.find("arch: transformer_lm_small"), std::string("arch: transformer_lm_small").size(), "arch: transformer_tiny");
  y.replace(y.find("  decoder_layers: 2\n"), 0, "  encoder_layers: 1\n");
  dir_->WriteFile("mt.yaml", y);
  auto mt = Run({"train", "mt.yaml", "--output", "mt", "--no-test"});
  ASSERT_EQ(mt.exit_code, 0) << mt.output;
  auto g = Run({"generate", "--checkpoint", "mt/latest"}, "A man\n");
  EXPECT_EQ(g.exit_code, 2) << g.output;
  EXPECT_NE(g.output.find("holds a transformer translation model, not a language model"), std::string::npos)
      << g.output;
}

TEST_F(LmCli, TheTargetSideOfParallelDataTrainsALanguageModel) {
  dir_->WriteFile("parallel.yaml", Config(4, "  train: {src: data/train.de, tgt: data/train.en}\n"
                                             "  valid: {src: data/valid.de, tgt: data/valid.en}\n"));
  auto r = Run({"train", "parallel.yaml", "--output", "parallel", "--no-test"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Metric("parallel", "validation", "validation_perplexity").size(), 1u);
  auto g = Run({"generate", "--checkpoint", "parallel/latest", "--max-new-tokens", "4"}, "A man\n");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_EQ(Lines(g.output).size(), 1u) << g.output;
}

TEST_F(LmCli, MismatchedDataArchAndMetricAreRefusedByName) {
  std::string y = Config(4);
  y.replace(y.find("arch: transformer_lm_small"), std::string("arch: transformer_lm_small").size(), "arch: transformer_tiny");
  dir_->WriteFile("mono-mt.yaml", y);
  auto r = Run({"train", "mono-mt.yaml", "--output", "mono-mt"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.train"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("trains a language model"), std::string::npos) << r.output;
  std::string b = Config(4);
  b.replace(b.find("metric: validation_perplexity, smaller_is_better: true"),
            std::string("metric: validation_perplexity, smaller_is_better: true").size(),
            "metric: bleu, smaller_is_better: false");
  dir_->WriteFile("bleu-lm.yaml", b);
  auto s = Run({"train", "bleu-lm.yaml", "--output", "bleu-lm"});
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("searcher.metric"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("is a language model"), std::string::npos) << s.output;
  EXPECT_FALSE(fs::exists(Path("mono-mt/latest")));
  EXPECT_FALSE(fs::exists(Path("bleu-lm/latest")));
}

}  // namespace
}  // namespace sf
