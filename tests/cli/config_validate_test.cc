// `sf config validate` as a user runs it: a real process, real files, exit codes and streams.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/value.h"
#include "tests/cli/run_sf.h"
#include "tests/support/config_cases.h"
#include "tests/support/testing.h"

namespace sf {
namespace {

using sf::testing::RunSf;
using sf::testing::SfRun;

class SfConfigValidateTableTest : public ::testing::TestWithParam<sf::testing::ConfigCase> {};

TEST_P(SfConfigValidateTableTest, ExitCodeStreamsAndPaths) {
  const auto& tc = GetParam();
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile("exp.yaml", tc.yaml);
  SfRun run = RunSf({"config", "validate", "--no-file-checks", file}, dir);
  if (tc.paths.empty()) {
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out.rfind(file + ": valid", 0), 0u) << run.out;
    EXPECT_EQ(run.err, "");
    return;
  }
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(run.out, "") << "nothing but errors, and those on stderr";
  for (const std::string& path : tc.paths) {
    EXPECT_NE(run.err.find(path + ": "), std::string::npos)
        << "stderr lacks the path " << path << ":\n" << run.err;
  }
  if (!tc.message.empty()) {
    EXPECT_NE(run.err.find(tc.message), std::string::npos) << run.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Documents, SfConfigValidateTableTest,
                         ::testing::ValuesIn(sf::testing::ConfigCases()),
                         [](const auto& info) { return info.param.name; });

TEST(SfConfigValidateTest, AcceptsEveryExampleExperiment) {
  sf::testing::TempDir dir;
  for (const auto& entry :
       std::filesystem::directory_iterator(sf::testing::SourceDir() + "/experiments")) {
    if (entry.path().extension() != ".yaml") continue;
    // With file checks on: the example data must be where the examples say. The speech
    // examples read a corpus deploy/make-speech-corpus.sh builds (runs/speech-corpus, not in
    // the repository): their files are checked once it exists.
    std::vector<std::string> args = {"config", "validate", entry.path().string()};
    const bool generated = entry.path().filename().string().rfind("speech-", 0) == 0 &&
                           !std::filesystem::exists(sf::testing::SourceDir() + "/runs/speech-corpus/train.tsv");
    if (generated) args.push_back("--no-file-checks");
    SfRun run = RunSf(args, dir);
    EXPECT_EQ(run.exit_code, 0) << entry.path() << "\n" << run.err;
    EXPECT_EQ(run.err, "");
  }
}

TEST(SfConfigValidateTest, MissingDataFileNamesTheField) {
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile("exp.yaml", sf::testing::With({}));
  SfRun run = RunSf({"config", "validate", file}, dir);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("data.train.src: \"" + dir.path() + "/train.de\" does not exist"),
            std::string::npos)
      << run.err;
}

TEST(SfConfigValidateTest, ErrorsCarryFileLineAndColumn) {
  sf::testing::TempDir dir;
  std::string file = dir.WriteFile("exp.yaml", "name: x\ndata: {train: [a, b\n");
  SfRun run = RunSf({"config", "validate", file}, dir);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind(file + ":3:", 0), 0u) << run.err;
}

TEST(SfConfigValidateTest, BadUsageIsExitTwo) {
  sf::testing::TempDir dir;
  EXPECT_EQ(RunSf({}, dir).exit_code, 2);
  EXPECT_EQ(RunSf({"frobnicate"}, dir).exit_code, 2);
  EXPECT_EQ(RunSf({"config", "validate"}, dir).exit_code, 2);
  EXPECT_EQ(RunSf({"config", "validate", "--bogus", "x.yaml"}, dir).exit_code, 2);
  SfRun missing = RunSf({"config", "validate", dir.path() + "/nope.yaml"}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("<document>: cannot read"), std::string::npos) << missing.err;
  EXPECT_EQ(RunSf({"--version"}, dir).exit_code, 0);
}

}  // namespace
}  // namespace sf

namespace sf {
namespace {

TEST(SfConfigValidateTest, JsonReportUsesTheApiErrorShape) {
  sf::testing::TempDir dir;
  std::string bad = dir.WriteFile("bad.yaml", sf::testing::With({{"max_restarts", "max_restarts: -1"}}));
  SfRun run = RunSf({"config", "validate", "--json", "--no-file-checks", bad}, dir);
  EXPECT_EQ(run.exit_code, 2);
  auto v = Value::FromJson(run.out);
  ASSERT_TRUE(v.ok()) << run.out;
  EXPECT_EQ(v->Find("valid")->as_bool(), false);
  const Value& first = v->Find("errors")->as_list().at(0);
  EXPECT_EQ(first.Find("path")->as_string(), "max_restarts");
  EXPECT_EQ(first.Find("message")->as_string(), "-1 must be >= 0");
  EXPECT_GT(first.Find("line")->as_int(), 0);
}

}  // namespace
}  // namespace sf
