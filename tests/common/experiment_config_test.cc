// The experiment config parser against a table of good and bad documents. Each bad document
// must be rejected with exactly the listed field paths (and, where given, the exact message).
#include "common/config/experiment_config.h"

#include <gtest/gtest.h>

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
