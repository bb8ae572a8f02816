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

}  // namespace sf::testing
