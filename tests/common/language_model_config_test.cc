// The transformer_lm family (fairseq's decoder-only transformer_lm) in the config: its presets
// and completed defaults, which hyperparameters apply to it, its cross-field rules, the metric it
// can be searched by, and monolingual data (`{text: FILE}`), which only a language model trains
// on. Each test asserts the error's path and message, so a rule that stops firing fails it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_schema.h"
#include "tests/support/config_cases.h"
#include "tests/support/testing.h"

namespace sf::config {
namespace {

using sf::testing::With;

// The base document with these hyperparameters (the section's body, indented), searched for by
// validation_perplexity (bleu is refused for a language model) with `searcher` ("single" or
// "grid"), and with `data` as the section's body when given.
std::string LmDoc(const std::string& hyperparameters, const std::string& data = "",
                  const std::string& searcher = "single") {
  std::vector<std::pair<std::string, std::string>> changes = {
      {"hyperparameters", "hyperparameters:\n" + hyperparameters},
      {"searcher", "searcher: {name: " + searcher +
                       ", metric: validation_perplexity, max_length: {batches: 10}}"}};
  if (!data.empty()) changes.emplace_back("data", "data:\n" + data);
  return With(changes);
}

// Monolingual train and valid splits (the English side of Multi30k, say).
const char kTextData[] =
    "  train: {text: train.en}\n"
    "  valid: {text: valid.en}\n";

// The value of `name` in a completed set; null when absent, so a missing key fails an EXPECT.
Value Get(const Value& hparams, const char* name) {
  const Value* v = hparams.Find(name);
  return v ? *v : Value();
}

std::vector<std::string> ErrorPaths(const ParseResult& r) {
  std::vector<std::string> paths;
  for (const auto& e : r.errors) paths.push_back(e.path);
  return paths;
}

// ---- presets and defaults

TEST(LanguageModelConfigTest, PresetsAreFairseqsTransformerLmAndOurSmallOne) {
  const auto& presets = ArchPresets();
  ASSERT_TRUE(presets.count("transformer_lm"));
  ASSERT_TRUE(presets.count("transformer_lm_small"));
  EXPECT_EQ(presets.at("transformer_lm"),
            (Value::Map{{"d_model", 512},
                        {"heads", 8},
                        {"decoder_layers", 6},
                        {"ffn_dim", 2048},
                        {"share_decoder_input_output_embed", false}}));
  EXPECT_EQ(presets.at("transformer_lm_small"),
            (Value::Map{{"d_model", 256},
                        {"heads", 4},
                        {"decoder_layers", 3},
                        {"ffn_dim", 1024},
                        {"share_decoder_input_output_embed", true}}));
  EXPECT_TRUE(IsLanguageModelFamily(ArchFamily("transformer_lm")));
  EXPECT_TRUE(IsLanguageModelFamily(ArchFamily("transformer_lm_small")));
  for (const char* arch : {"transformer", "transformer_tiny", "lstm_small", "lstm_gnmt4", "fconv",
                           "fconv_small", "bogus"}) {
    EXPECT_FALSE(IsLanguageModelFamily(ArchFamily(arch))) << arch;
  }
}

TEST(LanguageModelConfigTest, DefaultsCompleteAnLmWithItsFamilysHyperparametersOnly) {
  struct Expected {
    const char* arch;
    int64_t d_model, heads, decoder_layers, ffn_dim;
    bool tied;
  };
  for (const Expected& e : {Expected{"transformer_lm", 512, 8, 6, 2048, false},
                            Expected{"transformer_lm_small", 256, 4, 3, 1024, true}}) {
    const Value full = WithDefaults(Value(Value::Map{{"arch", e.arch}}));
    EXPECT_EQ(Get(full, "arch"), Value(e.arch));
    EXPECT_EQ(Get(full, "d_model"), Value(e.d_model)) << e.arch;
    EXPECT_EQ(Get(full, "heads"), Value(e.heads)) << e.arch;
    EXPECT_EQ(Get(full, "decoder_layers"), Value(e.decoder_layers)) << e.arch;
    EXPECT_EQ(Get(full, "ffn_dim"), Value(e.ffn_dim)) << e.arch;
    EXPECT_EQ(Get(full, "share_decoder_input_output_embed"), Value(e.tied)) << e.arch;
    EXPECT_EQ(Get(full, "activation"), Value("relu")) << e.arch;
    EXPECT_EQ(Get(full, "attention_dropout"), Value(0.0)) << e.arch;
    EXPECT_EQ(Get(full, "activation_dropout"), Value(0.0)) << e.arch;
    EXPECT_EQ(Get(full, "normalize_before"), Value(false)) << e.arch;
    EXPECT_EQ(Get(full, "dropout"), Value(0.1)) << e.arch;
    EXPECT_EQ(Get(full, "label_smoothing"), Value(0.1)) << e.arch;
    EXPECT_EQ(Get(full, "beam_size"), Value(int64_t{4})) << e.arch;
    EXPECT_EQ(Get(full, "lenpen"), Value(1.0)) << e.arch;
    ASSERT_NE(full.Find("optimizer"), nullptr) << e.arch;
    EXPECT_EQ(full.Find("optimizer")->Find("type")->as_string(), "adamw");
    for (const char* name :
         {"encoder_layers", "share_embeddings", "max_len_a", "max_len_b", "encoder_embed_dim",
          "encoder_hidden_size", "encoder_bidirectional", "encoder_dropout_in",
          "encoder_dropout_out", "decoder_embed_dim", "decoder_hidden_size",
          "decoder_out_embed_dim", "decoder_dropout_in", "decoder_dropout_out",
          "residual_from_layer", "conv_channels", "kernel_size"}) {
      EXPECT_EQ(full.Find(name), nullptr) << e.arch << ": " << name << " does not apply";
    }
  }
  // Given values win over the preset.
  const Value full = WithDefaults(
      Value(Value::Map{{"arch", "transformer_lm_small"}, {"d_model", 128}, {"decoder_layers", 2}}));
  EXPECT_EQ(Get(full, "d_model"), Value(int64_t{128}));
  EXPECT_EQ(Get(full, "decoder_layers"), Value(int64_t{2}));
  EXPECT_EQ(Get(full, "heads"), Value(int64_t{4}));
}

TEST(LanguageModelConfigTest, LmExperimentOnTextValidatesWithItsFamilysHyperparameters) {
  ParseResult r = ParseExperimentConfig(
      LmDoc("  arch: transformer_lm_small\n  d_model: 128\n  heads: 8\n  ffn_dim: 512\n"
            "  decoder_layers: 2\n  attention_dropout: 0.1\n  activation_dropout: 0.1\n"
            "  activation: gelu\n  normalize_before: true\n  dropout: 0.2\n"
            "  share_decoder_input_output_embed: false\n  beam_size: 5\n  lenpen: 0.8\n"
            "  lr: 0.001\n  max_tokens: 2048\n",
            kTextData));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Value constants = ConstantHyperparameters(r.config->hyperparameters);
  EXPECT_TRUE(ValidateTrialHyperparameters(constants).empty());
  EXPECT_TRUE(r.config->searcher.smaller_is_better) << "perplexity: lower is better";
}

// ---- which hyperparameters apply

TEST(LanguageModelConfigTest, TranslationHyperparametersForAnLmAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"encoder_layers: 3", "it applies to the transformer, lstm, fconv and speech_transformer_ctc families"},
      {"share_embeddings: true", "it applies to the transformer family"},
      {"max_len_a: 1.5", "it applies to the transformer, lstm and fconv families"},
      {"max_len_b: 5", "it applies to the transformer, lstm and fconv families"},
      {"encoder_bidirectional: true", "it applies to the lstm family"},
  };
  for (const auto& [line, families] : cases) {
    const std::string name = line.substr(0, line.find(':'));
    ParseResult r =
        ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n  " + line + "\n", kTextData));
    ASSERT_EQ(r.errors.size(), 1u) << line << "\n" << r.ErrorText();
    EXPECT_EQ(r.errors[0].ToString(),
              "hyperparameters." + name +
                  ": does not apply to arch transformer_lm_small (a transformer_lm model); " +
                  families)
        << line;
    EXPECT_GT(r.errors[0].line, 0) << "located at the hyperparameter";
  }
  // A trial's hyperparameters say the same.
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "transformer_lm"}, {"encoder_layers", 2}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.encoder_layers: does not apply to arch transformer_lm (a "
            "transformer_lm model); it applies to the transformer, lstm, fconv and speech_transformer_ctc families");
}

TEST(LanguageModelConfigTest, HeadsAndTheOtherTransformerLayerKnobsApplyToAnLm) {
  for (const char* line : {"heads: 8", "d_model: 512", "ffn_dim: 2048", "attention_dropout: 0.1",
                           "activation_dropout: 0.1", "activation: gelu", "normalize_before: true",
                           "decoder_layers: 4", "beam_size: 2", "lenpen: 1.2"}) {
    ParseResult r = ParseExperimentConfig(
        LmDoc(std::string("  arch: transformer_lm_small\n  ") + line + "\n", kTextData));
    EXPECT_TRUE(r.ok()) << line << "\n" << r.ErrorText();
  }
  EXPECT_TRUE(ValidateTrialHyperparameters(
                  Value(Value::Map{{"arch", "transformer_lm_small"}, {"heads", int64_t{8}}}))
                  .empty());
  // The families `heads` applies to, as an lstm's refusal words them.
  auto errors =
      ValidateTrialHyperparameters(Value(Value::Map{{"arch", "lstm_small"}, {"heads", 4}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.heads: does not apply to arch lstm_small (an lstm model); it applies "
            "to the transformer, transformer_lm and speech_transformer_ctc families");
}

TEST(LanguageModelConfigTest, GridOverThreeFamiliesRefusesDModelForTheLstmOnly) {
  ParseResult r = ParseExperimentConfig(LmDoc(
      "  arch: {type: categorical, vals: [transformer_tiny, lstm_small, transformer_lm_small]}\n"
      "  d_model: 256\n",
      "", "grid"));
  EXPECT_EQ(ErrorPaths(r), (std::vector<std::string>{"hyperparameters.d_model"})) << r.ErrorText();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.d_model: does not apply to arch lstm_small (an lstm model); it "
            "applies to the transformer, transformer_lm and speech_transformer_ctc families");
  // Without the lstm, d_model applies to every arch of the grid.
  r = ParseExperimentConfig(
      LmDoc("  arch: {type: categorical, vals: [transformer_tiny, transformer_lm_small]}\n"
            "  d_model: 256\n",
            "", "grid"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
}

// ---- cross-field rules

TEST(LanguageModelConfigTest, HeadsMustDivideDModelForAnLm) {
  ParseResult r =
      ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n  heads: 3\n", kTextData));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(), "hyperparameters.heads: 3 heads do not divide d_model 256");
  // d_model given, heads from the preset (4): blamed on d_model.
  r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n  d_model: 250\n", kTextData));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(), "hyperparameters.d_model: 4 heads do not divide d_model 250");
  // Every value of a categorical arch, each with its preset's d_model; the note names the arch.
  r = ParseExperimentConfig(
      LmDoc("  arch: {type: categorical, vals: [transformer_tiny, transformer_lm_small]}\n"
            "  heads: {type: categorical, vals: [4, 16]}\n",
            "", "grid"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
  r = ParseExperimentConfig(
      LmDoc("  arch: {type: categorical, vals: [transformer_tiny, transformer_lm]}\n"
            "  d_model: {type: categorical, vals: [256, 200]}\n  heads: 16\n",
            "", "grid"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.heads: 16 heads do not divide d_model 200 (arch transformer_tiny)");
  r = ParseExperimentConfig(
      LmDoc("  arch: {type: categorical, vals: [transformer_lm, transformer_lm_small]}\n"
            "  heads: 3\n",
            "", "grid"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.heads: 3 heads do not divide d_model 512 (arch transformer_lm)");
  // The trial check, on the values WithDefaults completes.
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "transformer_lm"}, {"heads", int64_t{6}}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(), "hyperparameters.heads: 6 heads do not divide d_model 512");
  EXPECT_TRUE(ValidateTrialHyperparameters(
                  Value(Value::Map{{"arch", "transformer_lm"}, {"heads", int64_t{16}}}))
                  .empty());
}

// ---- the searcher's metric

TEST(LanguageModelConfigTest, BleuIsRefusedForALanguageModel) {
  ParseResult r = ParseExperimentConfig(
      With({{"hyperparameters", "hyperparameters:\n  arch: transformer_lm_small"},
            {"data", std::string("data:\n") + kTextData},
            {"searcher", "searcher: {name: single, metric: bleu, max_length: {batches: 10}}"}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "searcher.metric: bleu scores translations; arch transformer_lm_small is a language "
            "model (use validation_perplexity or validation_loss)");
  EXPECT_GT(r.errors[0].line, 0) << "located at the metric";
  // Any value of a categorical arch.
  r = ParseExperimentConfig(With(
      {{"hyperparameters",
        "hyperparameters:\n  arch: {type: categorical, vals: [transformer_tiny, transformer_lm]}"},
       {"searcher", "searcher: {name: grid, metric: bleu, max_length: {batches: 10}}"}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "searcher.metric");
  EXPECT_NE(r.errors[0].message.find("arch transformer_lm is a language model"), std::string::npos)
      << r.ErrorText();
  // The metrics a language model reports.
  for (const char* metric : {"validation_perplexity", "validation_loss"}) {
    r = ParseExperimentConfig(With({{"hyperparameters", "hyperparameters:\n  arch: transformer_lm"},
                                    {"searcher", std::string("searcher: {name: single, metric: ") +
                                                     metric + ", max_length: {batches: 10}}"}}));
    EXPECT_TRUE(r.ok()) << metric << "\n" << r.ErrorText();
  }
  // User code names its own metrics and models: no such rule.
  r = ParseExperimentConfig(
      "name: x\nentrypoint: python3 train.py\nhyperparameters: {arch: transformer_lm_small}\n"
      "searcher: {name: single, metric: bleu, max_length: {batches: 10}}\n");
  EXPECT_TRUE(r.ok()) << r.ErrorText();
}

// ---- monolingual data

TEST(LanguageModelConfigTest, TextDataTrainsALanguageModel) {
  ParseResult r = ParseExperimentConfig(LmDoc(
      "  arch: transformer_lm_small\n", std::string(kTextData) + "  test: {text: test.en}\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const DataConfig& d = r.config->data;
  EXPECT_TRUE(r.config->has_data());
  EXPECT_EQ(d.train.tgt, "train.en");
  EXPECT_EQ(d.train.src, "");
  EXPECT_TRUE(d.train.monolingual());
  ASSERT_TRUE(d.valid.has_value());
  EXPECT_EQ(d.valid->tgt, "valid.en");
  EXPECT_TRUE(d.valid->monolingual());
  ASSERT_TRUE(d.test.has_value());
  EXPECT_TRUE(d.test->monolingual());
  // The LM trains on the target side of parallel data too.
  r = ParseExperimentConfig(LmDoc("  arch: transformer_lm\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_FALSE(r.config->data.train.monolingual());
  EXPECT_EQ(r.config->data.train.src, "train.de");
  // tokenizer.shared means nothing for one side, and is accepted.
  r = ParseExperimentConfig(
      LmDoc("  arch: transformer_lm_small\n",
            std::string(kTextData) + "  tokenizer: {shared: false, vocab_size: 4000}\n"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
}

TEST(LanguageModelConfigTest, TextDataWithATranslationArchIsRefused) {
  const std::string text_data = std::string("data:\n") + kTextData;
  ParseResult r = ParseExperimentConfig(With(
      {{"hyperparameters", "hyperparameters:\n  arch: transformer_tiny"}, {"data", text_data}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "data.train: one-sided text (text:) trains a language model; arch transformer_tiny "
            "translates and needs src and tgt");
  EXPECT_GT(r.errors[0].line, 0) << "located at data.train";
  // No arch: a transformer, which translates.
  r = ParseExperimentConfig(
      With({{"hyperparameters", "hyperparameters:\n  lr: 0.001"}, {"data", text_data}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "data.train: one-sided text (text:) trains a language model; arch transformer "
            "translates and needs src and tgt");
  // Any value of a categorical arch that translates.
  r = ParseExperimentConfig(
      LmDoc("  arch: {type: categorical, vals: [transformer_lm_small, lstm_small]}\n", kTextData,
            "grid"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "data.train");
  EXPECT_NE(r.errors[0].message.find("arch lstm_small translates"), std::string::npos)
      << r.ErrorText();
  // User code reads the data it likes.
  r = ParseExperimentConfig(
      "name: x\nentrypoint: python3 train.py\ndata: {train: {text: train.en}}\n"
      "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n");
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_TRUE(r.config->has_data());
}

TEST(LanguageModelConfigTest, AllSplitsAreOfOneKind) {
  ParseResult r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n",
                                              "  train: {text: train.en}\n"
                                              "  valid: {src: valid.de, tgt: valid.en}\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "data.valid: data.train is monolingual (text); data.valid must be too");
  EXPECT_GT(r.errors[0].line, 0) << "located at data.valid";
  r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n",
                                  "  train: {src: train.de, tgt: train.en}\n"
                                  "  test: {text: test.en}\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "data.test: data.train is parallel (src and tgt); data.test must be too");
  // An empty split after a monolingual one misses its text.
  r = ParseExperimentConfig(
      LmDoc("  arch: transformer_lm_small\n", "  train: {text: train.en}\n  valid: {}\n"));
  EXPECT_EQ(ErrorPaths(r), (std::vector<std::string>{"data.valid.text"})) << r.ErrorText();
}

TEST(LanguageModelConfigTest, TextWithSrcOrTgtIsRefused) {
  ParseResult r = ParseExperimentConfig(
      LmDoc("  arch: transformer_lm_small\n", "  train: {text: train.en, src: train.de}\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "data.train: give either text (one side's text, for a language model) or src and tgt "
            "(parallel text), not text with src");
  r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n",
                                  "  train: {text: a, src: b, tgt: c}\n"
                                  "  valid: {text: valid.en}\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "data.train");
  EXPECT_NE(r.errors[0].message.find("not text with src and tgt"), std::string::npos)
      << r.ErrorText();
  // src without tgt: the missing key, as ever.
  r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n", "  train: {src: train.de}\n"));
  EXPECT_EQ(ErrorPaths(r), (std::vector<std::string>{"data.train.tgt"})) << r.ErrorText();
  // A near miss of text.
  r = ParseExperimentConfig(
      LmDoc("  arch: transformer_lm_small\n", "  train: {texts: train.en}\n"));
  EXPECT_EQ(ErrorPaths(r),
            (std::vector<std::string>{"data.train.src", "data.train.tgt", "data.train.texts"}))
      << r.ErrorText();
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[2].ToString(), "data.train.texts: unknown field (did you mean \"text\"?)");
}

TEST(LanguageModelConfigTest, RelativeTextPathsResolveAgainstTheFile) {
  sf::testing::TempDir dir;
  const std::string file = dir.WriteFile(
      "sub/lm.yaml", LmDoc("  arch: transformer_lm_small\n",
                           std::string(kTextData) + "  test: {text: /data/test.en}\n"));
  ParseResult r = LoadExperimentConfigFile(file);
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const DataConfig& d = r.config->data;
  EXPECT_EQ(d.train.tgt, dir.path() + "/sub/train.en");
  EXPECT_EQ(d.train.src, "") << "no source side to resolve";
  EXPECT_TRUE(d.train.monolingual());
  EXPECT_EQ(d.valid->tgt, dir.path() + "/sub/valid.en");
  EXPECT_EQ(d.test->tgt, "/data/test.en");
}

TEST(LanguageModelConfigTest, DataFilesNameTheKeysTheDocumentGives) {
  ParseResult r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n", kTextData));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  using Files = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(DataFiles(r.config->data),
            (Files{{"data.train.text", "train.en"}, {"data.valid.text", "valid.en"}}));
  r = ParseExperimentConfig(LmDoc("  arch: transformer_lm_small\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(DataFiles(r.config->data), (Files{{"data.train.src", "train.de"},
                                              {"data.train.tgt", "train.en"},
                                              {"data.valid.src", "valid.de"},
                                              {"data.valid.tgt", "valid.en"}}));
}

}  // namespace
}  // namespace sf::config
