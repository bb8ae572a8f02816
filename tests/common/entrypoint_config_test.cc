// Experiments that run user code (the Core API): `entrypoint`, `context_directory`, free-form
// hyperparameters and metrics, and `data` optional. Native experiments keep their rules.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/config/experiment_config.h"
#include "tests/support/config_cases.h"
#include "tests/support/testing.h"

namespace sf::config {
namespace {

using Sections = std::vector<std::pair<std::string, std::string>>;

// A valid user-code document, one line per section (so section k is on line k + 1), with
// sections replaced ("" drops one) or added at the end.
std::string UserDoc(const Sections& changes = {}) {
  return testing::WithSections({{"name", "name: user-code"},
                                {"entrypoint", "entrypoint: python3 train.py --epochs 3"},
                                {"hyperparameters", "hyperparameters: {lr: 0.1}"},
                                {"searcher", "searcher: {name: single, metric: accuracy, max_length: {batches: 100}}"}},
                               changes);
}

// Each error as "line:column: path: message".
std::vector<std::string> Located(const ParseResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.errors) {
    out.push_back(std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + e.ToString());
  }
  return out;
}

std::vector<std::string> Paths(const ParseResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.errors) out.push_back(e.path);
  return out;
}

// ---- entrypoint

TEST(EntrypointConfigTest, StringEntrypointIsOneShellCommandLine) {
  ParseResult r = ParseExperimentConfig(UserDoc());
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_TRUE(r.config->has_entrypoint());
  EXPECT_TRUE(r.config->entrypoint_is_shell);
  EXPECT_EQ(r.config->entrypoint, std::vector<std::string>{"python3 train.py --epochs 3"});
  EXPECT_FALSE(r.config->context_directory.has_value()) << "set by ResolvePaths, not the parser";
}

TEST(EntrypointConfigTest, ListEntrypointIsProgramAndArguments) {
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"entrypoint", "entrypoint: [python3, train.py, --epochs, \"3\", 'a b']"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_FALSE(r.config->entrypoint_is_shell);
  EXPECT_EQ(r.config->entrypoint,
            (std::vector<std::string>{"python3", "train.py", "--epochs", "3", "a b"}));
}

TEST(EntrypointConfigTest, NativeExperimentHasNoEntrypoint) {
  ParseResult r = ParseExperimentConfig(sf::testing::With({}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_FALSE(r.config->has_entrypoint());
  EXPECT_TRUE(r.config->entrypoint.empty());
  EXPECT_TRUE(r.config->has_data());
}

struct BadEntrypoint {
  std::string entrypoint_line;
  std::vector<std::string> located;  // every error, as "line:column: path: message"
};

TEST(EntrypointConfigTest, BadEntrypointsNameThePathValueAndReason) {
  const std::vector<BadEntrypoint> cases = {
      {"entrypoint: \"\"", {"2:13: entrypoint: must not be empty"}},
      {"entrypoint: \"   \"",
       {"2:13: entrypoint: \"   \" is only white space; give a command to run"}},
      {"entrypoint: []",
       {"2:13: entrypoint: expected a non-empty list (a program and its arguments)"}},
      {"entrypoint: 42",
       {"2:13: entrypoint: expected a command line (a string) or a list of strings (a program "
        "and its arguments), got 42"}},
      {"entrypoint: {run: train.py}",
       {"2:13: entrypoint: expected a command line (a string) or a list of strings (a program "
        "and its arguments), got a mapping"}},
      {"entrypoint: [python3, 3]",
       {"2:23: entrypoint[1]: expected a string, got 3 (quote it: \"3\")"}},
      {"entrypoint: [python3, true, ~]",
       {"2:23: entrypoint[1]: expected a string, got true (quote it: \"true\")",
        "2:29: entrypoint[2]: expected a string, got null"}},
      {"entrypoint: [python3, [a]]", {"2:23: entrypoint[1]: expected a string, got a list"}},
      {"entrypoint: [python3, \"\"]", {"2:23: entrypoint[1]: must not be empty"}},
      {"entrypoint: \"python3\\0x\"",
       {"2:13: entrypoint: \"python3\\0x\" must not contain a NUL character (\\0)"}},
      {"entrypoint: [python3, \"a\\0\"]",
       {"2:23: entrypoint[1]: \"a\\0\" must not contain a NUL character (\\0)"}},
  };
  for (const auto& tc : cases) {
    ParseResult r = ParseExperimentConfig(UserDoc({{"entrypoint", tc.entrypoint_line}}));
    EXPECT_FALSE(r.config.has_value()) << tc.entrypoint_line;
    EXPECT_EQ(Located(r), tc.located) << tc.entrypoint_line;
  }
}

TEST(EntrypointConfigTest, EntrypointStringOver4096BytesIsRefused) {
  ParseResult ok = ParseExperimentConfig(
      UserDoc({{"entrypoint", "entrypoint: echo " + std::string(4096 - 5, 'x')}}));
  EXPECT_TRUE(ok.ok()) << "4096 bytes is the limit, not past it: " << ok.ErrorText();
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"entrypoint", "entrypoint: [sh, -c, \"" + std::string(5000, 'y') + "\"]"}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "entrypoint[2]");
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[0].message,
            "\"" + std::string(40, 'y') + "...\" is 5000 bytes, longer than the 4096-byte limit");
}

TEST(EntrypointConfigTest, MalformedEntrypointStillMakesTheRestFreeForm) {
  // The document means user code: only the entrypoint is wrong, not the missing data or the
  // names the native trainer does not know.
  ParseResult r = ParseExperimentConfig(UserDoc(
      {{"entrypoint", "entrypoint: []"}, {"hyperparameters", "hyperparameters: {layers: 2}"}}));
  EXPECT_EQ(Paths(r), std::vector<std::string>{"entrypoint"}) << r.ErrorText();
}

TEST(EntrypointConfigTest, NullEntrypointCountsAsAbsent) {
  ParseResult r = ParseExperimentConfig(UserDoc({{"entrypoint", "entrypoint: ~"}}));
  EXPECT_EQ(Paths(r), (std::vector<std::string>{"data", "searcher.metric"})) << r.ErrorText();
}

// ---- data

TEST(EntrypointConfigTest, DataIsOptionalWithAnEntrypoint) {
  ParseResult r = ParseExperimentConfig(UserDoc());
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_FALSE(r.config->has_data());
  EXPECT_TRUE(r.config->data.train.src.empty());
  EXPECT_FALSE(r.config->data.valid.has_value());
}

TEST(EntrypointConfigTest, DataGivenWithAnEntrypointIsValidatedAsToday) {
  ParseResult ok = ParseExperimentConfig(
      UserDoc({{"data", "data: {train: {src: a.de, tgt: a.en}, max_source_positions: 64}"}}));
  ASSERT_TRUE(ok.ok()) << ok.ErrorText();
  EXPECT_TRUE(ok.config->has_data());
  EXPECT_EQ(ok.config->data.max_source_positions, 64);
  ParseResult r =
      ParseExperimentConfig(UserDoc({{"data", "data: {train: {src: a.de}, vaild: 1}"}}));
  EXPECT_EQ(Located(r), (std::vector<std::string>{
                            "5:15: data.train.tgt: required field is missing",
                            "5:35: data.vaild: unknown field (did you mean \"valid\"?)"}));
}

TEST(EntrypointConfigTest, DataIsStillRequiredWithoutAnEntrypoint) {
  ParseResult r = ParseExperimentConfig(sf::testing::With({{"data", ""}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(), "data: required field is missing");
}

// ---- free-form hyperparameters

TEST(EntrypointConfigTest, FreeFormConstantsAreAnyYamlValue) {
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"hyperparameters",
                "hyperparameters: {layers: 2, lr: 1.0e-3, model: resnet, pretrained: false, "
                "sizes: [64, 128], checkpoint: ~, quoted: \"3\", mixed: [1, {a: b}]}"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  Value expected(Value::Map{{"layers", int64_t{2}},
                            {"lr", 1.0e-3},
                            {"model", "resnet"},
                            {"pretrained", false},
                            {"sizes", Value::List{int64_t{64}, int64_t{128}}},
                            {"checkpoint", Value()},
                            {"quoted", "3"},
                            {"mixed", Value::List{int64_t{1}, Value::Map{{"a", "b"}}}}});
  EXPECT_EQ(ConstantHyperparameters(r.config->hyperparameters), expected)
      << ConstantHyperparameters(r.config->hyperparameters).ToJson();
}

TEST(EntrypointConfigTest, GroupWithATypeMemberIsANestedGroupOfConstants) {
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"hyperparameters",
                "hyperparameters: {optimizer: {type: adam, lr: 0.1, betas: [0.9, 0.99]}, "
                "model: {depth: 3, head: {type: linear}}}"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Hyperparameter& optimizer = r.config->hyperparameters.at("optimizer");
  EXPECT_EQ(optimizer.kind, Hyperparameter::Kind::kNested);
  EXPECT_EQ(optimizer.members.at("type").kind, Hyperparameter::Kind::kConst);
  EXPECT_FALSE(optimizer.is_space());
  Value expected(Value::Map{
      {"optimizer", Value::Map{{"type", "adam"}, {"lr", 0.1}, {"betas", Value::List{0.9, 0.99}}}},
      {"model", Value::Map{{"depth", int64_t{3}}, {"head", Value::Map{{"type", "linear"}}}}}});
  EXPECT_EQ(ConstantHyperparameters(r.config->hyperparameters), expected)
      << ConstantHyperparameters(r.config->hyperparameters).ToJson();
}

TEST(EntrypointConfigTest, SpaceInsideAFreeFormGroupIsSearchable) {
  ParseResult r = ParseExperimentConfig(UserDoc(
      {{"hyperparameters",
        "hyperparameters: {optimizer: {type: adam, lr: {type: log, minval: -4, maxval: -2}}}"},
       {"searcher",
        "searcher: {name: random, metric: accuracy, max_trials: 4, "
        "max_length: {batches: 100}}"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Hyperparameter& optimizer = r.config->hyperparameters.at("optimizer");
  ASSERT_EQ(optimizer.kind, Hyperparameter::Kind::kNested);
  EXPECT_TRUE(optimizer.is_space());
  const Hyperparameter& lr = optimizer.members.at("lr");
  EXPECT_EQ(lr.kind, Hyperparameter::Kind::kLog);
  EXPECT_EQ(lr.minval, -4);
  EXPECT_EQ(lr.maxval, -2);
  EXPECT_EQ(lr.base, 10);
  // Constants only: the space is left out, the group's constant member stays.
  EXPECT_EQ(ConstantHyperparameters(r.config->hyperparameters),
            Value(Value::Map{{"optimizer", Value::Map{{"type", "adam"}}}}));
}

TEST(EntrypointConfigTest, SpaceInAGroupNeedsASearcherThatSearches) {
  ParseResult r =
      ParseExperimentConfig(UserDoc({{"hyperparameters",
                                      "hyperparameters:\n  optimizer:\n    type: adam\n"
                                      "    lr: {type: double, minval: 0.01, maxval: 0.1}"}}));
  EXPECT_EQ(Located(r),
            std::vector<std::string>{
                "6:9: hyperparameters.optimizer.lr: a search space needs a grid, random "
                "or adaptive_asha searcher (searcher.name is single)"});
}

TEST(EntrypointConfigTest, GridOverFreeFormSpacesCountsEveryPoint) {
  ParseResult r = ParseExperimentConfig(UserDoc(
      {{"hyperparameters",
        "hyperparameters:\n"
        "  layers: {type: int, minval: 1, maxval: 4}\n"
        "  width: {type: categorical, vals: [64, 128]}\n"
        "  optimizer: {type: sgd, momentum: {type: double, minval: 0.8, maxval: 0.9, count: 3}}\n"
        "  seed: 7"},
       {"searcher", "searcher: {name: grid, metric: accuracy, max_length: {batches: 10}}"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Hyperparameters& hps = r.config->hyperparameters;
  EXPECT_EQ(GridPointCount(hps.at("layers")), 4);
  EXPECT_EQ(GridPointCount(hps.at("width")), 2);
  EXPECT_EQ(GridPointCount(hps.at("optimizer")), 3);
  EXPECT_EQ(GridPointCount(hps.at("seed")), 1);
  int64_t n = 1;
  for (const auto& [name, hp] : hps) n *= GridPointCount(hp);
  EXPECT_EQ(n, 4 * 2 * 3);
}

TEST(EntrypointConfigTest, GridOverFreeFormSpacesChecksCountAndSize) {
  ParseResult uncountable = ParseExperimentConfig(UserDoc(
      {{"hyperparameters",
        "hyperparameters: {optimizer: {type: sgd, momentum: {type: double, minval: 0.8, "
        "maxval: 0.9}}}"},
       {"searcher", "searcher: {name: grid, metric: accuracy, max_length: {batches: 10}}"}}));
  EXPECT_EQ(Located(uncountable),
            std::vector<std::string>{"3:52: hyperparameters.optimizer.momentum: grid search over a "
                                     "double space needs count (how many grid points)"});
  ParseResult huge = ParseExperimentConfig(UserDoc(
      {{"hyperparameters",
        "hyperparameters: {a: {type: int, minval: 1, maxval: 1000}, "
        "g: {b: {type: int, minval: 1, maxval: 1000}}}"},
       {"searcher", "searcher: {name: grid, metric: accuracy, max_length: {batches: 10}}"}}));
  EXPECT_EQ(Located(huge),
            std::vector<std::string>{"0:0: hyperparameters: the grid has more than 100000 points"});
}

TEST(EntrypointConfigTest, FreeFormSpacesAreValidatedLikeNativeOnes) {
  ParseResult r =
      ParseExperimentConfig(UserDoc({{"hyperparameters",
                                      "hyperparameters:\n"
                                      "  a: {type: log, minval: -2, maxval: -4}\n"
                                      "  b: {type: int, minval: 1}\n"
                                      "  c: {type: categorical, vals: []}\n"
                                      "  d: {type: int, minval: 1, maxval: 2, step: 1}\n"
                                      "  e: {type: double, minval: 0, maxval: 1, count: 0}\n"
                                      "  f: {type: log, minval: 1, maxval: 400}\n"
                                      "  g: {type: int, minval: 0, maxval: 9007199254740993}\n"
                                      "  h: {type: const}\n"
                                      "  i: .nan"},
                                     {"searcher",
                                      "searcher: {name: random, metric: accuracy, max_trials: 2, "
                                      "max_length: {batches: 10}}"}}));
  const std::string why_finite = "(trials get their hyperparameters as JSON)";
  const std::vector<std::string> expected = {
      "4:6: hyperparameters.a.maxval: -4 is smaller than minval -2",
      "5:6: hyperparameters.b.maxval: required field is missing",
      "6:32: hyperparameters.c.vals: expected a non-empty list, got a list",
      "7:46: hyperparameters.d.step: unknown field",
      "8:50: hyperparameters.e.count: 0 must be >= 1",
      "9:6: hyperparameters.f.maxval: 10^400 is not a finite number",
      "10:37: hyperparameters.g.maxval: 9007199254740993 must be <= 9007199254740992",
      "11:6: hyperparameters.h.val: required field is missing",
      "12:6: hyperparameters.i: NaN must be a finite number " + why_finite,
  };
  EXPECT_EQ(Located(r), expected) << r.ErrorText();
}

TEST(EntrypointConfigTest, DuplicateAndEmptyFreeFormNamesAreErrors) {
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"hyperparameters", "hyperparameters:\n  g: {a: 1, a: 2}\n  \"\": 3"}}));
  EXPECT_EQ(Located(r), (std::vector<std::string>{
                            "4:13: hyperparameters.g.a: duplicate key (first given at line 4)",
                            "5:3: hyperparameters: a hyperparameter name must not be empty"}));
}

TEST(EntrypointConfigTest, ConstSpaceWrapsAMapWhoseTypeNamesASpace) {
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"hyperparameters", "hyperparameters: {quant: {type: const, val: {type: int}}}"}}));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(ConstantHyperparameters(r.config->hyperparameters),
            Value(Value::Map{{"quant", Value::Map{{"type", "int"}}}}));
}

TEST(EntrypointConfigTest, NativeChecksDoNotApplyToFreeFormHyperparameters) {
  // Native names with values the native trainer would refuse, and a share_embeddings without a
  // shared vocabulary: the user's code owns them.
  ParseResult r = ParseExperimentConfig(
      UserDoc({{"hyperparameters",
                "hyperparameters: {d_model: 256, heads: 5, dropout: 2.0, arch: my_net, "
                "share_embeddings: true, optimizer: {type: adam}}"},
               {"data", "data: {train: {src: a, tgt: b}, tokenizer: {shared: false}}"}}));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
}

TEST(EntrypointConfigTest, UnknownHyperparameterIsStillAnErrorWithoutEntrypoint) {
  ParseResult r = ParseExperimentConfig(sf::testing::With(
      {{"hyperparameters", "hyperparameters:\n  layers: 2\n  optimizer: {type: adam}"}}));
  EXPECT_EQ(Paths(r),
            (std::vector<std::string>{"hyperparameters.layers", "hyperparameters.optimizer.type"}))
      << r.ErrorText();
  EXPECT_EQ(r.errors[0].message, "unknown field");
}

TEST(EntrypointConfigTest, OverridesReachFreeFormGroups) {
  auto text = ApplyOverride(
      UserDoc({{"hyperparameters", "hyperparameters: {optimizer: {type: adam, lr: 0.1}}"}}),
      "hyperparameters.optimizer.lr=0.5");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ParseResult r = ParseExperimentConfig(*text);
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(ConstantHyperparameters(r.config->hyperparameters),
            Value(Value::Map{{"optimizer", Value::Map{{"type", "adam"}, {"lr", 0.5}}}}));
}

// ---- searcher metric

TEST(EntrypointConfigTest, AnyMetricNameIsAllowedWithAnEntrypoint) {
  ParseResult r = ParseExperimentConfig(UserDoc());
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config->searcher.metric, "accuracy");
  EXPECT_TRUE(r.config->searcher.smaller_is_better) << "the default unless the metric is bleu";

  ParseResult bleu = ParseExperimentConfig(UserDoc(
      {{"searcher", "searcher: {name: single, metric: bleu, max_length: {batches: 100}}"}}));
  ASSERT_TRUE(bleu.ok()) << bleu.ErrorText();
  EXPECT_FALSE(bleu.config->searcher.smaller_is_better);

  // The user's code says what its metric means: no "contradicts metric" check.
  ParseResult explicit_direction =
      ParseExperimentConfig(UserDoc({{"searcher",
                                      "searcher: {name: single, metric: validation_loss, "
                                      "smaller_is_better: false, max_length: {batches: 100}}"}}));
  ASSERT_TRUE(explicit_direction.ok()) << explicit_direction.ErrorText();
  EXPECT_FALSE(explicit_direction.config->searcher.smaller_is_better);

  ParseResult empty = ParseExperimentConfig(UserDoc(
      {{"searcher", "searcher: {name: single, metric: \"\", max_length: {batches: 100}}"}}));
  EXPECT_EQ(Located(empty), std::vector<std::string>{"4:34: searcher.metric: must not be empty"});
}

TEST(EntrypointConfigTest, MetricIsStillRestrictedWithoutAnEntrypoint) {
  ParseResult r = ParseExperimentConfig(sf::testing::With(
      {{"searcher", "searcher: {name: single, metric: accuracy, max_length: {batches: 100}}"}}));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "searcher.metric: \"accuracy\" is not a metric the trainer reports "
            "(validation_loss, validation_perplexity, bleu, wer, cer)");
  ParseResult contradiction = ParseExperimentConfig(
      sf::testing::With({{"searcher",
                          "searcher: {name: single, metric: bleu, smaller_is_better: true, "
                          "max_length: {batches: 100}}"}}));
  EXPECT_EQ(Paths(contradiction), std::vector<std::string>{"searcher.smaller_is_better"});
}

// ---- context_directory

TEST(EntrypointConfigTest, ContextDirectoryDefaultsToTheFilesDirectory) {
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile("sub/exp.yaml", UserDoc());
  ParseResult r = LoadExperimentConfigFile(file);
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  ASSERT_TRUE(r.config->context_directory.has_value());
  EXPECT_EQ(*r.config->context_directory, dir.path() + "/sub");
}

TEST(EntrypointConfigTest, RelativeContextDirectoryResolvesAgainstTheFile) {
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile("sub/exp.yaml",
                                   UserDoc({{"context_directory", "context_directory: ../code/"}}));
  ParseResult r = LoadExperimentConfigFile(file);
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config->context_directory, dir.path() + "/code");

  std::string dot =
      dir.WriteFile("sub/dot.yaml", UserDoc({{"context_directory", "context_directory: ."}}));
  ParseResult d = LoadExperimentConfigFile(dot);
  ASSERT_TRUE(d.ok()) << d.ErrorText();
  EXPECT_EQ(d.config->context_directory, dir.path() + "/sub");

  std::string abs = dir.WriteFile(
      "sub/abs.yaml", UserDoc({{"context_directory", "context_directory: /srv/project/"}}));
  ParseResult a = LoadExperimentConfigFile(abs);
  ASSERT_TRUE(a.ok()) << a.ErrorText();
  EXPECT_EQ(a.config->context_directory, "/srv/project");
}

TEST(EntrypointConfigTest, ContextDirectoryWithoutEntrypointIsAnError) {
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile(
      "exp.yaml", sf::testing::With({{"context_directory", "context_directory: code"}}));
  ParseResult r = LoadExperimentConfigFile(file);
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "context_directory: needs an entrypoint (the native trainer reads data files, not a "
            "context)");
  EXPECT_EQ(r.errors[0].line, 18);
  EXPECT_EQ(r.errors[0].column, 20);
  EXPECT_FALSE(r.config.has_value());
}

TEST(EntrypointConfigTest, NativeExperimentGetsNoContextDirectory) {
  ExperimentConfig c = *ParseExperimentConfig(sf::testing::With({})).config;
  ResolvePaths(c, "/base");
  EXPECT_FALSE(c.context_directory.has_value());
  EXPECT_EQ(c.data.train.src, "/base/train.de");
}

TEST(EntrypointConfigTest, BadContextDirectoryIsAnError) {
  ParseResult r = ParseExperimentConfig(UserDoc({{"context_directory", "context_directory: [a]"}}));
  EXPECT_EQ(Located(r),
            std::vector<std::string>{"5:20: context_directory: expected a string, got a list"});
}

// ---- docs

TEST(EntrypointConfigTest, DocsDescribeTheCoreApiFields) {
  std::ifstream in(sf::testing::SourceDir() + "/docs/config.md");
  ASSERT_TRUE(in);
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* needle : {"| `entrypoint` |", "| `context_directory` |", "core-api.md"}) {
    EXPECT_NE(doc.find(needle), std::string::npos) << needle;
  }
}

}  // namespace
}  // namespace sf::config
