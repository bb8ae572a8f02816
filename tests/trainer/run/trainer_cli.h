// What the sf-trainer command-line tests share: the binary, the tiny corpus copied where a test
// runs (so the data cache lands there), running a subcommand as a user does, and reading a run's
// files back.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "common/value.h"
#include "tests/support/testing.h"

namespace sf::testing {

inline std::string TrainerBinary() { return BinaryDir() + "/trainer/sf-trainer"; }

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Multi30k-tiny's six files into dir/data.
inline void CopyTinyCorpus(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir + "/data");
  const std::string tiny = DataCopy("multi30k-de-en-tiny");
  for (const char* f : {"train.de", "train.en", "valid.de", "valid.en", "test.de", "test.en"}) {
    fs::copy_file(tiny + "/" + f, dir + "/data/" + f);
  }
}

// `sf-trainer SUBCOMMAND --threads 1 ARGS...` in `dir` (--threads right after the subcommand, so a
// missing value at the end stays missing).
inline CommandResult RunTrainer(const std::string& dir, std::vector<std::string> args,
                                const std::string& stdin_data = "",
                                std::chrono::seconds timeout = std::chrono::minutes(4)) {
  args.insert(args.begin() + (args.empty() ? 0 : 1), {"--threads", "1"});
  args.insert(args.begin(), TrainerBinary());
  CommandOptions o;
  o.working_dir = dir;
  o.stdin_data = stdin_data;
  o.timeout = timeout;
  auto r = RunCommand(args, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : CommandResult{};
}

// step -> `name` of the records of `kind` ("training", "validation") in a run's metrics.jsonl.
inline std::map<int64_t, double> RunMetrics(const std::string& run_dir, const std::string& kind,
                                            const std::string& name) {
  std::map<int64_t, double> out;
  std::istringstream in(ReadWholeFile(run_dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto v = Value::FromJson(line);
    EXPECT_TRUE(v.ok()) << line;
    if (!v.ok() || !v->Find("kind") || v->Find("kind")->as_string() != kind || !v->Find(name)) continue;
    out[v->Find("step")->as_int()] = v->Find(name)->as_double();
  }
  return out;
}

// A suite of tests around one straight training run: before the first test, Multi30k-tiny is
// copied into a fresh directory, Suite::kConfigFile is written with Suite::SuiteConfig(), and
// `sf-trainer train` runs it into "straight"; every test fails at once when that run failed.
//   class LmCli : public TrainedRunSuite<LmCli> { ... static constexpr const char* kConfigFile
//   = "lm.yaml"; static std::string SuiteConfig(); };
template <typename Suite>
class TrainedRunSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    CopyTinyCorpus(dir_->path());
    dir_->WriteFile(Suite::kConfigFile, Suite::SuiteConfig());
    auto r = Run({"train", Suite::kConfigFile, "--output", "straight"});
    straight_ok_ = r.exit_code == 0;
    straight_output_ = r.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(straight_ok_) << straight_output_; }

  static CommandResult Run(std::vector<std::string> args, const std::string& stdin_data = "") {
    return RunTrainer(dir_->path(), std::move(args), stdin_data);
  }
  static std::string Path(const std::string& rel) { return dir_->path() + "/" + rel; }
  // step -> one metric of a run's metrics.jsonl records of `kind`.
  static std::map<int64_t, double> Metric(const std::string& run, const std::string& kind, const std::string& name) {
    return RunMetrics(Path(run), kind, name);
  }

  // The straight run's `steps` steps equal `stop_at` steps, a stop, --resume and the rest:
  // weights, optimizer state and every step's training loss, bit for bit; and the loss fell.
  static void ExpectResumeIsBitExact(int stop_at, size_t steps) {
    auto first = Run({"train", Suite::kConfigFile, "--output", "resumed", "--no-test", "--stop-after-steps",
                      std::to_string(stop_at)});
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string stopped = std::filesystem::canonical(Path("resumed/latest")).string();
    auto second = Run({"train", Suite::kConfigFile, "--output", "resumed", "--no-test", "--resume", stopped});
    ASSERT_EQ(second.exit_code, 0) << second.output;
    for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string a = ReadWholeFile(Path(std::string("straight/latest/") + f));
      const std::string b = ReadWholeFile(Path(std::string("resumed/latest/") + f));
      ASSERT_FALSE(a.empty()) << f;
      EXPECT_TRUE(a == b) << f << " differs between the straight and the resumed run";
    }
    const auto straight = Metric("straight", "training", "loss"), resumed = Metric("resumed", "training", "loss");
    ASSERT_EQ(straight.size(), steps);
    ASSERT_EQ(resumed.size(), steps);
    for (const auto& [step, loss] : straight) EXPECT_EQ(loss, resumed.at(step)) << "loss at step " << step;
    EXPECT_LT(straight.rbegin()->second, straight.begin()->second) << "the model did not train";
  }

  inline static TempDir* dir_ = nullptr;
  inline static bool straight_ok_ = false;
  inline static std::string straight_output_;
};

}  // namespace sf::testing
