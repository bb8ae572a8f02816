// The experiment config parser against a table of good and bad documents. Each bad document
// must be rejected with exactly the listed field paths (and, where given, the exact message).
#include "common/config/experiment_config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/config/hyperparameter_schema.h"
#include "tests/support/config_cases.h"
#include "tests/support/testing.h"

namespace sf::config {
namespace {

using sf::testing::ConfigCase;
using sf::testing::ConfigCases;
using sf::testing::With;

class ConfigTableTest : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(ConfigTableTest, ReportsExactlyTheExpectedPaths) {
  const ConfigCase& tc = GetParam();
  ParseResult r = ParseExperimentConfig(tc.yaml);
  std::vector<std::string> paths;
  for (const auto& e : r.errors) paths.push_back(e.path);
  EXPECT_EQ(paths, tc.paths) << "document:\n" << tc.yaml << "\nerrors:\n" << r.ErrorText();
  EXPECT_EQ(r.ok(), tc.paths.empty());
  EXPECT_EQ(r.config.has_value(), tc.paths.empty()) << "a config must not come with errors";
  if (!tc.message.empty() && !r.errors.empty()) {
    EXPECT_EQ(r.errors[0].ToString(), tc.message);
  }
}

INSTANTIATE_TEST_SUITE_P(Documents, ConfigTableTest, ::testing::ValuesIn(ConfigCases()),
                         [](const auto& info) { return info.param.name; });

TEST(ExperimentConfigTest, TableHasAtLeastFortyDocuments) { EXPECT_GE(ConfigCases().size(), 40u); }

TEST(ExperimentConfigTest, SyntaxErrorNamesLineAndColumn) {
  ParseResult r = ParseExperimentConfig("name: x\ndata: {train: [a, b\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 3);
  EXPECT_GT(r.errors[0].column, 0);
  EXPECT_NE(r.errors[0].message.find("YAML syntax error"), std::string::npos);
  EXPECT_EQ(r.errors[0].ToStringWithLocation("exp.yaml").rfind("exp.yaml:3:", 0), 0u);
}

TEST(ExperimentConfigTest, FieldErrorsCarryTheirLine) {
  ParseResult r = ParseExperimentConfig(
      With({{"searcher", "searcher:\n  name: random\n  metric: bleu\n  max_trials: -3\n"
                         "  max_length: {batches: 5}"}}));
  ASSERT_EQ(r.errors.size(), 1u);
  // name (1) + data (4 lines) + hyperparameters (7) + precision (1) = 13 lines, then searcher.
  EXPECT_EQ(r.errors[0].line, 17);
  EXPECT_EQ(r.errors[0].column, 15);
}

TEST(ExperimentConfigTest, TenMegabyteDocumentIsRefusedBeforeParsing) {
  std::string big = With({}) + "description: \"" + std::string(10 << 20, 'x') + "\"\n";
  ParseResult r = ParseExperimentConfig(big);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, "<document>");
  EXPECT_NE(r.errors[0].message.find("4194304-byte limit"), std::string::npos);
}

TEST(ExperimentConfigTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "name: " + std::string(20000, '[') + std::string(20000, ']') + "\n";
  ParseResult r = ParseExperimentConfig(deep);
  EXPECT_FALSE(r.ok());
}

TEST(ExperimentConfigTest, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  std::string base = With({});
  for (int i = 0; i < 300; ++i) {
    std::string doc = base;
    for (int k = 0; k < 5; ++k) {
      doc[rng() % doc.size()] = static_cast<char>(" :{}[]-,\n#&*!|>'\"%@`a1"[rng() % 23]);
    }
    ParseResult r = ParseExperimentConfig(doc);
    EXPECT_EQ(r.ok(), r.errors.empty());
  }
}

TEST(ExperimentConfigTest, ParsesTypedValues) {
  ParseResult r = ParseExperimentConfig(
      With({{"optimizations", "optimizations: {aggregation_frequency: 4, allreduce_dtype: bf16}"},
            {"resources", "resources: {slots_per_trial: 2, priority: 10, max_slots: 6, weight: 2.5}"},
            {"min_validation_period", "min_validation_period: {epochs: 2}"},
            {"precision", "precision: fp16"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const ExperimentConfig& c = *r.config;
  EXPECT_EQ(c.name, "test-exp");
  EXPECT_EQ(c.optimizations.aggregation_frequency, 4);
  EXPECT_EQ(c.optimizations.allreduce_dtype, Precision::kBf16);
  EXPECT_EQ(c.resources.slots_per_trial, 2);
  EXPECT_EQ(c.resources.priority, 10);
  EXPECT_EQ(c.resources.max_slots, 6);
  EXPECT_EQ(c.resources.weight, 2.5);
  ASSERT_TRUE(c.min_validation_period.has_value());
  EXPECT_EQ(c.min_validation_period->unit, Length::Unit::kEpochs);
  EXPECT_EQ(c.min_validation_period->value, 2);
  EXPECT_EQ(c.precision, Precision::kFp16);
  // fp16 without a loss_scaling section gets dynamic scaling.
  EXPECT_EQ(c.loss_scaling.type, LossScalingConfig::Type::kDynamic);
  EXPECT_EQ(c.loss_scaling.init_scale, 128.0);
  // bleu: higher is better unless said otherwise.
  EXPECT_FALSE(c.searcher.smaller_is_better);
  const Hyperparameter& opt = c.hyperparameters.at("optimizer");
  EXPECT_EQ(opt.kind, Hyperparameter::Kind::kNested);
  EXPECT_EQ(opt.members.at("type").value, Value("radam"));
  EXPECT_EQ(opt.members.at("betas").value, Value(Value::List{0.9, 0.98}));
  EXPECT_EQ(c.hyperparameters.at("d_model").value, Value(int64_t{256}));
}

TEST(ExperimentConfigTest, GridCountsPoints) {
  ParseResult r = ParseExperimentConfig(
      With({{"searcher", "searcher: {name: grid, metric: bleu, max_length: {batches: 10}}"},
            {"hyperparameters",
             "hyperparameters:\n  dropout: {type: double, minval: 0.0, maxval: 0.3, count: 3}\n"
             "  encoder_layers: {type: int, minval: 2, maxval: 4}\n"
             "  activation: {type: categorical, vals: [relu, gelu]}"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  int64_t n = 1;
  for (const auto& [k, hp] : r.config->hyperparameters) n *= GridPointCount(hp);
  EXPECT_EQ(n, 3 * 3 * 2);
}

TEST(ExperimentConfigTest, RelativePathsResolveAgainstTheFile) {
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile("sub/exp.yaml", With({}));
  ParseResult r = LoadExperimentConfigFile(file);
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config->data.train.src, dir.path() + "/sub/train.de");
  EXPECT_EQ(r.config->data.valid->tgt, dir.path() + "/sub/valid.en");
}

TEST(ExperimentConfigTest, UnreadableFileIsADocumentError) {
  ParseResult r = LoadExperimentConfigFile("/nonexistent/exp.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, "<document>");
  EXPECT_NE(r.errors[0].message.find("/nonexistent/exp.yaml"), std::string::npos);
}

TEST(ExperimentConfigTest, OverrideSetsNestedKeys) {
  auto text = ApplyOverride(With({}), "searcher.max_length={batches: 77}");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ParseResult r = ParseExperimentConfig(*text);
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config->searcher.max_length.value, 77);
  auto hp = ApplyOverride(With({}), "hyperparameters.dropout=0.25");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(ParseExperimentConfig(*hp).config->hyperparameters.at("dropout").value, Value(0.25));
  EXPECT_FALSE(ApplyOverride(With({}), "no-equals-sign").ok());
}

TEST(ExperimentConfigTest, TrialHyperparametersAreCheckedAfterSampling) {
  EXPECT_TRUE(ValidateTrialHyperparameters(Value(Value::Map{{"d_model", 256}, {"heads", 8}})).empty());
  auto errors = ValidateTrialHyperparameters(Value(Value::Map{{"d_model", 256}, {"heads", 6}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.heads");
  errors = ValidateTrialHyperparameters(Value(Value::Map{{"dropout", 2.0}, {"lrr", 0.1}}));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "hyperparameters.dropout");
  EXPECT_EQ(errors[1].ToString(), "hyperparameters.lrr: unknown field (did you mean \"lr\"?)");
}

TEST(ExperimentConfigTest, DefaultsComeFromTheArchPreset) {
  Value full = WithDefaults(Value(Value::Map{{"arch", "transformer_tiny"}, {"heads", 8}}));
  EXPECT_EQ(full.Find("d_model")->as_int(), 256);
  EXPECT_EQ(full.Find("heads")->as_int(), 8);  // explicit values win
  EXPECT_EQ(full.Find("ffn_dim")->as_int(), 1024);
  EXPECT_EQ(full.Find("optimizer")->Find("type")->as_string(), "adamw");
  EXPECT_DOUBLE_EQ(full.Find("optimizer")->Find("betas")->as_list()[1].as_double(), 0.98);
  EXPECT_EQ(full.Find("lr_schedule")->Find("warmup")->as_int(), 4000);
}

// ---- architecture families (transformer, lstm): which hyperparameters apply to which arch
// (the transformer_lm family and monolingual data: language_model_config_test.cc; the fconv
// family: fconv_config_test.cc)

// The base document with its hyperparameters replaced by `hyperparameters` (the section's
// body, indented) and, when `grid`, a grid searcher.
std::string WithHyperparameters(const std::string& hyperparameters, bool grid = false) {
  std::vector<std::pair<std::string, std::string>> changes = {
      {"hyperparameters", "hyperparameters:\n" + hyperparameters}};
  if (grid) {
    changes.emplace_back("searcher",
                         "searcher: {name: grid, metric: bleu, max_length: {batches: 10}}");
  }
  return With(changes);
}

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

TEST(ArchFamilyTest, EveryArchHasAFamilyAndAPresetOfItsOwnFamily) {
  EXPECT_EQ(ArchFamily("transformer"), "transformer");
  EXPECT_EQ(ArchFamily("transformer_tiny"), "transformer");
  EXPECT_EQ(ArchFamily("transformer_base"), "transformer");
  EXPECT_EQ(ArchFamily("transformer_big"), "transformer");
  EXPECT_EQ(ArchFamily("lstm"), "lstm");
  EXPECT_EQ(ArchFamily("lstm_small"), "lstm");
  EXPECT_EQ(ArchFamily("lstm_gnmt4"), "lstm");
  EXPECT_EQ(ArchFamily("transformer_lm"), "transformer_lm");
  EXPECT_EQ(ArchFamily("transformer_lm_small"), "transformer_lm");
  EXPECT_EQ(ArchFamily("fconv"), "fconv");
  EXPECT_EQ(ArchFamily("fconv_iwslt_de_en"), "fconv");
  EXPECT_EQ(ArchFamily("fconv_small"), "fconv");
  EXPECT_EQ(ArchFamily("speech_transformer_ctc"), "speech_transformer_ctc");
  EXPECT_EQ(ArchFamily("speech_transformer_ctc_small"), "speech_transformer_ctc");
  EXPECT_EQ(ArchFamily("speech_transformer_ctc_base"), "speech_transformer_ctc");
  EXPECT_EQ(ArchFamily("lstm_tiny"), "");
  EXPECT_EQ(ArchFamily(""), "");
  const HpSpec* arch = FindHyperparameterSpec("arch");
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(arch->options,
            (std::vector<std::string>{"transformer", "transformer_tiny", "transformer_base",
                                      "transformer_big", "lstm", "lstm_small", "lstm_gnmt4",
                                      "transformer_lm", "transformer_lm_small", "fconv",
                                      "fconv_iwslt_de_en", "fconv_small", "speech_transformer_ctc",
                                      "speech_transformer_ctc_small", "speech_transformer_ctc_base"}));
  for (const std::string& a : arch->options) {
    auto preset = ArchPresets().find(a);
    ASSERT_NE(preset, ArchPresets().end()) << a;
    for (const auto& [name, value] : preset->second) {
      const HpSpec* spec = FindHyperparameterSpec(name);
      ASSERT_NE(spec, nullptr) << a << ": " << name;
      EXPECT_TRUE(AppliesTo(*spec, ArchFamily(a))) << a << ": " << name;
    }
  }
}

TEST(ArchFamilyTest, EachHyperparameterAppliesToItsFamilies) {
  // Transformer layers: the encoder-decoder Transformer, the language model and the speech
  // recogniser's encoder.
  const std::vector<std::string> attention = {
      "d_model",    "heads",           "ffn_dim", "attention_dropout", "activation_dropout",
      "activation", "normalize_before"};
  // An encoder, and a source sentence to size the output by: the three that translate.
  const std::vector<std::string> translation = {"encoder_layers", "max_len_a", "max_len_b"};
  const std::vector<std::string> transformer_only = {"share_embeddings"};
  // fairseq's embedding widths and the projection before the output: the lstm and the fconv.
  const std::vector<std::string> embed_dims = {"encoder_embed_dim", "decoder_embed_dim",
                                               "decoder_out_embed_dim"};
  const std::vector<std::string> lstm_only = {
      "encoder_hidden_size", "encoder_bidirectional", "encoder_dropout_in",  "encoder_dropout_out",
      "decoder_hidden_size", "decoder_dropout_in",    "decoder_dropout_out", "residual_from_layer",
      "encoder_bidirectional_layers"};
  const std::vector<std::string> fconv_only = {"conv_channels", "kernel_size"};
  // The text families' knobs: tied decoder embeddings, label smoothing, token budgets, the
  // length penalty. The speech recogniser's own: its frame budget and the CTC weight.
  const std::vector<std::string> text_only = {"share_decoder_input_output_embed", "label_smoothing", "max_tokens",
                                              "lenpen"};
  const std::vector<std::string> speech_only = {"max_frames", "ctc_weight"};
  // The speech recogniser has an encoder of Transformer layers behind two convolutions, and
  // optionally an attention decoder.
  const std::vector<std::string> speech_too = {"encoder_layers", "conv_channels", "decoder_layers"};
  auto in = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const auto& [name, spec] : HyperparameterSchema()) {
    const bool text = !in(attention, name) && !in(translation, name) && !in(transformer_only, name) &&
                      !in(embed_dims, name) && !in(lstm_only, name) && !in(fconv_only, name) &&
                      !in(speech_only, name);
    const bool everywhere = text && !in(text_only, name);
    EXPECT_EQ(AppliesTo(spec, "speech_transformer_ctc"),
              everywhere || in(attention, name) || in(speech_only, name) || in(speech_too, name))
        << name;
    EXPECT_EQ(AppliesTo(spec, "transformer"), text || in(attention, name) ||
                                                  in(translation, name) ||
                                                  in(transformer_only, name))
        << name;
    EXPECT_EQ(AppliesTo(spec, "lstm"),
              text || in(translation, name) || in(embed_dims, name) || in(lstm_only, name))
        << name;
    EXPECT_EQ(AppliesTo(spec, "transformer_lm"), text || in(attention, name)) << name;
    EXPECT_EQ(AppliesTo(spec, "fconv"),
              text || in(translation, name) || in(embed_dims, name) || in(fconv_only, name))
        << name;
  }
  for (const auto& list :
       {attention, translation, transformer_only, embed_dims, lstm_only, fconv_only, text_only, speech_only}) {
    for (const auto& name : list) EXPECT_NE(FindHyperparameterSpec(name), nullptr) << name;
  }
  // Every family: the training knobs, beam search (the LM's generate and the speech model's
  // transcribe search too).
  for (const char* name : {"arch", "dropout", "lr", "lr_schedule", "optimizer", "clip_norm", "seed", "beam_size"}) {
    const HpSpec* spec = FindHyperparameterSpec(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_TRUE(spec->families.empty()) << name;
  }
}

TEST(ArchFamilyTest, LstmSmallExperimentValidatesAndCompletesFromItsPreset) {
  ParseResult r = ParseExperimentConfig(WithHyperparameters("  arch: lstm_small\n  lr: 0.001\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Value constants = ConstantHyperparameters(r.config->hyperparameters);
  EXPECT_TRUE(ValidateTrialHyperparameters(constants).empty());
  const Value full = WithDefaults(constants);
  const std::vector<std::pair<std::string, Value>> expected = {
      {"encoder_embed_dim", Value(int64_t{256})},
      {"encoder_hidden_size", Value(int64_t{256})},
      {"encoder_layers", Value(int64_t{1})},
      {"encoder_bidirectional", Value(true)},
      {"decoder_embed_dim", Value(int64_t{256})},
      {"decoder_hidden_size", Value(int64_t{512})},
      {"decoder_out_embed_dim", Value(int64_t{256})},
      {"decoder_layers", Value(int64_t{1})},
      {"share_decoder_input_output_embed", Value(true)},
      {"dropout", Value(0.2)},
      {"encoder_dropout_in", Value(0.2)},
      {"encoder_dropout_out", Value(0.2)},
      {"decoder_dropout_in", Value(0.2)},
      {"decoder_dropout_out", Value(0.2)},
      {"lr", Value(0.001)},
      {"label_smoothing", Value(0.1)},
  };
  for (const auto& [name, value] : expected) {
    const Value* v = full.Find(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(*v, value) << name << " is " << v->ToDisplay();
  }
  EXPECT_EQ(full.Find("optimizer")->Find("type")->as_string(), "adamw");
  for (const char* name : {"d_model", "heads", "ffn_dim", "attention_dropout", "activation_dropout",
                           "activation", "normalize_before", "share_embeddings"}) {
    EXPECT_EQ(full.Find(name), nullptr) << name << " is transformer-only";
  }
}

TEST(ArchFamilyTest, LstmDropoutRatesFollowTheCompletedDropoutUnlessGiven) {
  // fairseq's lstm base_architecture: each rate defaults to args.dropout.
  Value full = WithDefaults(Value(Value::Map{{"arch", "lstm"}}));
  EXPECT_EQ(Get(full, "dropout"), Value(0.1));  // lstm's preset leaves the schema default
  EXPECT_EQ(Get(full, "encoder_bidirectional"), Value(false));
  EXPECT_EQ(Get(full, "share_decoder_input_output_embed"), Value(false));
  for (const char* rate :
       {"encoder_dropout_in", "encoder_dropout_out", "decoder_dropout_in", "decoder_dropout_out"}) {
    EXPECT_EQ(Get(full, rate), Value(0.1)) << rate;
  }
  full = WithDefaults(
      Value(Value::Map{{"arch", "lstm_small"}, {"dropout", 0.3}, {"decoder_dropout_out", 0.05}}));
  EXPECT_EQ(Get(full, "encoder_dropout_in"), Value(0.3));
  EXPECT_EQ(Get(full, "encoder_dropout_out"), Value(0.3));
  EXPECT_EQ(Get(full, "decoder_dropout_in"), Value(0.3));
  EXPECT_EQ(Get(full, "decoder_dropout_out"), Value(0.05));
}

TEST(ArchFamilyTest, TransformerTrialGetsNoLstmHyperparameters) {
  for (const char* arch : {"transformer", "transformer_tiny", "transformer_big"}) {
    const Value full = WithDefaults(Value(Value::Map{{"arch", arch}}));
    for (const char* name :
         {"encoder_embed_dim", "encoder_hidden_size", "encoder_bidirectional", "encoder_dropout_in",
          "encoder_dropout_out", "decoder_embed_dim", "decoder_hidden_size",
          "decoder_out_embed_dim", "decoder_dropout_in", "decoder_dropout_out"}) {
      EXPECT_EQ(full.Find(name), nullptr) << arch << ": " << name << " is lstm-only";
    }
    EXPECT_NE(full.Find("activation"), nullptr) << arch;
  }
  // No arch: a transformer too.
  EXPECT_EQ(WithDefaults(Value(Value::Map{})).Find("encoder_bidirectional"), nullptr);
}

TEST(ArchFamilyTest, TransformerHyperparameterForAnLstmIsRefusedByName) {
  ParseResult r = ParseExperimentConfig(WithHyperparameters("  arch: lstm_small\n  heads: 4\n"));
  EXPECT_EQ(ErrorPaths(r), (std::vector<std::string>{"hyperparameters.heads"})) << r.ErrorText();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.heads: does not apply to arch lstm_small (an lstm model); it applies "
            "to the transformer, transformer_lm and speech_transformer_ctc families");
  EXPECT_GT(r.errors[0].line, 0) << "located at the hyperparameter";
}

TEST(ArchFamilyTest, LstmHyperparameterForATransformerIsRefusedByName) {
  ParseResult r = ParseExperimentConfig(
      WithHyperparameters("  arch: transformer_tiny\n  encoder_hidden_size: 256\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.encoder_hidden_size: does not apply to arch transformer_tiny (a "
            "transformer model); it applies to the lstm family");
  // Without arch the model is a transformer.
  r = ParseExperimentConfig(WithHyperparameters("  encoder_bidirectional: true\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.encoder_bidirectional: does not apply to arch transformer (a "
            "transformer model); it applies to the lstm family");
}

TEST(ArchFamilyTest, GridOverArchRefusesAHyperparameterOfOneFamily) {
  for (const char* vals : {"[lstm_small, transformer_tiny]", "[transformer_tiny, lstm_small]"}) {
    ParseResult r = ParseExperimentConfig(WithHyperparameters(
        std::string("  arch: {type: categorical, vals: ") + vals + "}\n  d_model: 256\n", true));
    ASSERT_EQ(r.errors.size(), 1u) << vals << "\n" << r.ErrorText();
    EXPECT_EQ(r.errors[0].ToString(),
              "hyperparameters.d_model: does not apply to arch lstm_small (an lstm model); it "
              "applies to the transformer, transformer_lm and speech_transformer_ctc families")
        << vals;
  }
}

TEST(ArchFamilyTest, GridOverArchWithSharedHyperparametersValidates) {
  ParseResult r = ParseExperimentConfig(WithHyperparameters(
      "  arch: {type: categorical, vals: [lstm_small, transformer_tiny, lstm]}\n"
      "  encoder_layers: 2\n  decoder_layers: 2\n  dropout: {type: categorical, vals: [0.1, 0.3]}\n"
      "  share_decoder_input_output_embed: false\n  label_smoothing: 0.1\n  lr: 0.001\n"
      "  optimizer: {type: adamw}\n  max_tokens: 2048\n  beam_size: 5\n",
      true));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
}

TEST(ArchFamilyTest, LstmDecoderLayersMustNotExceedEncoderLayers) {
  ParseResult r = ParseExperimentConfig(
      WithHyperparameters("  arch: lstm\n  encoder_layers: 1\n  decoder_layers: 2\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.decoder_layers: 2 is more than encoder_layers 1 (each decoder layer "
            "starts from the final state of the encoder layer of its index)");
  // encoder_layers from the preset (1), in a grid with a transformer that has no such rule.
  r = ParseExperimentConfig(WithHyperparameters(
      "  arch: {type: categorical, vals: [transformer_tiny, lstm_small]}\n  decoder_layers: 3\n",
      true));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "hyperparameters.decoder_layers");
  EXPECT_NE(r.errors[0].message.find("encoder_layers 1"), std::string::npos) << r.ErrorText();
  EXPECT_NE(r.errors[0].message.find("arch lstm_small"), std::string::npos) << r.ErrorText();
  // Equal counts are fine, and a transformer may have more decoder than encoder layers.
  EXPECT_TRUE(ParseExperimentConfig(
                  WithHyperparameters("  arch: lstm\n  encoder_layers: 2\n  decoder_layers: 2\n"))
                  .ok());
  EXPECT_TRUE(ParseExperimentConfig(
                  WithHyperparameters(
                      "  arch: transformer_tiny\n  encoder_layers: 1\n  decoder_layers: 2\n"))
                  .ok());
}

TEST(ArchFamilyTest, GnmtResidualConnectionsStartAtAnExistingLayerAboveTheFirst) {
  // lstm_gnmt4: 4 + 4 layers, residual connections from layer 3.
  ParseResult r = ParseExperimentConfig(WithHyperparameters("  arch: lstm_gnmt4\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Value full = WithDefaults(Value(Value::Map{{"arch", "lstm_gnmt4"}}));
  EXPECT_EQ(full.Find("residual_from_layer")->as_int(), 3);
  EXPECT_EQ(full.Find("encoder_layers")->as_int(), 4);
  EXPECT_EQ(WithDefaults(Value(Value::Map{{"arch", "lstm_small"}})).Find("residual_from_layer")->as_int(), 0);
  // Layer 1 reads the embeddings; layer 5 does not exist.
  for (const char* bad : {"1", "5"}) {
    r = ParseExperimentConfig(WithHyperparameters(std::string("  arch: lstm_gnmt4\n  residual_from_layer: ") + bad + "\n"));
    ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
    EXPECT_EQ(r.errors[0].path, "hyperparameters.residual_from_layer");
    EXPECT_NE(r.errors[0].message.find("must be 0 (none) or a layer from 2 to 4"), std::string::npos) << r.ErrorText();
  }
  // A Transformer has no such knob.
  r = ParseExperimentConfig(WithHyperparameters("  arch: transformer_tiny\n  residual_from_layer: 3\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_NE(r.errors[0].message.find("does not apply to arch transformer_tiny"), std::string::npos) << r.ErrorText();
  // The trial check says the same.
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "lstm_small"}, {"residual_from_layer", int64_t{2}}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.residual_from_layer");
  EXPECT_TRUE(ValidateTrialHyperparameters(Value(Value::Map{{"arch", "lstm_gnmt4"}})).empty());
}

TEST(ArchFamilyTest, GnmtEncoderRunsOnlyItsBottomLayersBothWays) {
  // lstm_gnmt4: the first encoder layer bidirectional, its outputs as wide as the decoder.
  const Value full = WithDefaults(Value(Value::Map{{"arch", "lstm_gnmt4"}}));
  EXPECT_EQ(full.Find("encoder_bidirectional_layers")->as_int(), 1);
  EXPECT_EQ(full.Find("encoder_hidden_size")->as_int(), full.Find("decoder_hidden_size")->as_int());
  EXPECT_EQ(WithDefaults(Value(Value::Map{{"arch", "lstm_small"}})).Find("encoder_bidirectional_layers")->as_int(), 0);
  struct Case {
    const char* yaml;
    const char* path;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           // Layer 2 reads both directions of layer 1: no residual into it.
           {"  arch: lstm_gnmt4\n  residual_from_layer: 2\n", "hyperparameters.residual_from_layer",
            "2 must be at least 3 with encoder_bidirectional_layers 1 (encoder layer 2, the first one-way layer"},
           {"  arch: lstm_gnmt4\n  encoder_bidirectional_layers: 2\n", "hyperparameters.encoder_bidirectional_layers",
            "2 needs residual_from_layer 0 or at least 4, not 3"},
           {"  arch: lstm_gnmt4\n  encoder_bidirectional_layers: 5\n", "hyperparameters.encoder_bidirectional_layers",
            "5 is more than encoder_layers 4"},
           {"  arch: lstm\n  encoder_layers: 2\n  encoder_bidirectional_layers: 1\n",
            "hyperparameters.encoder_bidirectional_layers", "1 needs encoder_bidirectional: true"},
           {"  arch: transformer_tiny\n  encoder_bidirectional_layers: 1\n",
            "hyperparameters.encoder_bidirectional_layers", "does not apply to arch transformer_tiny"},
       }) {
    ParseResult r = ParseExperimentConfig(WithHyperparameters(c.yaml));
    ASSERT_EQ(r.errors.size(), 1u) << c.yaml << r.ErrorText();
    EXPECT_EQ(r.errors[0].path, c.path) << c.yaml;
    EXPECT_NE(r.errors[0].message.find(c.says), std::string::npos) << r.ErrorText();
  }
  // Two bidirectional layers, two one-way ones above them, residuals from layer 4: fine.
  EXPECT_TRUE(ParseExperimentConfig(WithHyperparameters("  arch: lstm_gnmt4\n  encoder_bidirectional_layers: 2\n"
                                                        "  residual_from_layer: 4\n"))
                  .ok());
  // The trial check says the same.
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "lstm_gnmt4"}, {"residual_from_layer", int64_t{2}}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.encoder_bidirectional_layers");
}

TEST(ArchFamilyTest, LstmTiedOutputNeedsEqualDecoderWidths) {
  // lstm_small ties the output projection to the decoder's embedding (256 wide).
  ParseResult r =
      ParseExperimentConfig(WithHyperparameters("  arch: lstm_small\n  decoder_embed_dim: 512\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "hyperparameters.decoder_embed_dim");
  EXPECT_NE(
      r.errors[0].message.find("decoder_out_embed_dim 256 differs from decoder_embed_dim 512"),
      std::string::npos)
      << r.ErrorText();
  r = ParseExperimentConfig(WithHyperparameters(
      "  arch: lstm\n  share_decoder_input_output_embed: true\n  decoder_out_embed_dim: 256\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(
      r.errors[0].ToString(),
      "hyperparameters.share_decoder_input_output_embed: true needs decoder_out_embed_dim 256 "
      "to equal decoder_embed_dim 512 (the decoder's embedding is then its output projection)");
  // Untied, or tied with equal widths: fine.
  EXPECT_TRUE(
      ParseExperimentConfig(
          WithHyperparameters("  arch: lstm_small\n  share_decoder_input_output_embed: false\n"
                              "  decoder_out_embed_dim: 128\n"))
          .ok());
  EXPECT_TRUE(ParseExperimentConfig(
                  WithHyperparameters("  arch: lstm\n  share_decoder_input_output_embed: true\n"))
                  .ok());
}

TEST(ArchFamilyTest, UnknownArchListsTheKnownOnesAndNothingElse) {
  ParseResult r = ParseExperimentConfig(
      WithHyperparameters("  arch: lstm_smal\n  heads: 5\n  encoder_hidden_size: 128\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.arch: \"lstm_smal\" must be one of transformer, transformer_tiny, "
            "transformer_base, transformer_big, lstm, lstm_small, lstm_gnmt4, transformer_lm, "
            "transformer_lm_small, fconv, fconv_iwslt_de_en, fconv_small, speech_transformer_ctc, "
            "speech_transformer_ctc_small, speech_transformer_ctc_base (did you mean "
            "\"lstm_small\"?)");
}

TEST(ArchFamilyTest, TrialHyperparametersOfAnLstmAreChecked) {
  // No d_model or heads after WithDefaults: must not crash, and is valid.
  EXPECT_TRUE(ValidateTrialHyperparameters(Value(Value::Map{{"arch", "lstm_small"}})).empty());
  EXPECT_TRUE(ValidateTrialHyperparameters(Value(Value::Map{{"arch", "lstm"},
                                                            {"encoder_layers", 2},
                                                            {"decoder_layers", 2},
                                                            {"encoder_bidirectional", true},
                                                            {"dropout", 0.3}}))
                  .empty());
  auto errors =
      ValidateTrialHyperparameters(Value(Value::Map{{"arch", "lstm_small"}, {"heads", 6}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.heads: does not apply to arch lstm_small (an lstm model); it applies "
            "to the transformer, transformer_lm and speech_transformer_ctc families");
  errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "transformer_tiny"}, {"decoder_hidden_size", 256}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.decoder_hidden_size");
  errors = ValidateTrialHyperparameters(Value(Value::Map{{"arch", "lstm"}, {"decoder_layers", 2}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.decoder_layers: 2 is more than encoder_layers 1 (each decoder layer "
            "starts from the final state of the encoder layer of its index)");
  errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "lstm_small"}, {"decoder_out_embed_dim", 128}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.share_decoder_input_output_embed");
  errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "lstm"}, {"encoder_dropout_in", 1.0}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(), "hyperparameters.encoder_dropout_in: 1.0 must be < 1");
}

TEST(ExperimentConfigTest, ExampleExperimentsAreValid) {
  int seen = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(sf::testing::SourceDir() + "/experiments")) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    ParseResult r = LoadExperimentConfigFile(entry.path().string());
    EXPECT_TRUE(r.ok()) << entry.path() << ":\n" << r.ErrorText();
  }
  EXPECT_GE(seen, 2);
}

TEST(ExperimentConfigTest, TheApiSeesNoStorageSecretAndThePlaceholderIsRefusedBack) {
  const std::string plain = "name: x\n# a comment\nsearcher: {name: single}\n";
  EXPECT_EQ(RedactConfigSecrets(plain), plain) << "no secret: the text as written";
  const std::string with_secret =
      "name: x\ncheckpoint_storage: {type: s3, bucket: b12, access_key: AKID, secret_key: hunter2}\n";
  const std::string shown = RedactConfigSecrets(with_secret);
  EXPECT_EQ(shown.find("hunter2"), std::string::npos) << shown;
  EXPECT_NE(shown.find(kRedacted), std::string::npos) << shown;
  EXPECT_NE(shown.find("AKID"), std::string::npos) << "the key id is not a secret: " << shown;
  const YAML::Node back = YAML::Load(shown);
  EXPECT_EQ(back["checkpoint_storage"]["bucket"].as<std::string>(), "b12");
  EXPECT_EQ(RedactConfigSecrets("secret_key: [unclosed"), "secret_key: [unclosed");
  // Submitting the shown config back names the placeholder.
  ParseResult r = ParseExperimentConfig(
      "name: x\ndata: {train: {src: a, tgt: b}}\nsearcher: {name: single, metric: validation_loss, max_length: "
      "{batches: 5}}\n" +
      std::string("checkpoint_storage: {type: s3, bucket: b12, access_key: AKID, secret_key: '") + kRedacted + "'}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0].path, "checkpoint_storage.secret_key");
  EXPECT_NE(r.errors[0].message.find("placeholder"), std::string::npos) << r.errors[0].message;
}

}  // namespace
}  // namespace sf::config

namespace sf::config {
namespace {

// docs/config.md must document every hyperparameter and group member the schema knows.
TEST(ExperimentConfigTest, DocsNameEveryField) {
  std::ifstream in(sf::testing::SourceDir() + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [name, spec] : HyperparameterSchema()) {
    if (spec.type == HpSpec::Type::kGroup) {
      for (const auto& [member, m] : spec.members) {
        EXPECT_NE(doc.find("`" + name + "." + member + "`"), std::string::npos) << name << "." << member;
      }
    } else {
      EXPECT_NE(doc.find("| `" + name + "` |"), std::string::npos) << name;
    }
  }
  for (const char* field :
       {"name", "description", "data", "hyperparameters", "precision", "loss_scaling",
        "optimizations", "resources", "searcher", "min_validation_period",
        "min_checkpoint_period", "checkpoint_storage", "max_restarts", "scheduling_unit",
        "data.tokenizer.vocab_size", "searcher.max_trials", "searcher.bracket_rungs",
        "resources.priority", "optimizations.aggregation_frequency", "loss_scaling.min_scale",
        "checkpoint_storage.save_trial_latest"}) {
    EXPECT_NE(doc.find("`" + std::string(field) + "`"), std::string::npos) << field;
  }
}

}  // namespace
}  // namespace sf::config
