// Runs the real `sf` binary (SF_CLI_PATH) as a user would: a process, its exit code, and its
// stdout and stderr kept apart.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "tests/support/testing.h"

namespace sf::testing {

struct SfRun {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs `sf args...` with `env` added to the environment; stderr goes through a file in `dir`.
inline SfRun RunSf(const std::vector<std::string>& args, const TempDir& dir,
                   const std::map<std::string, std::string>& env = {}) {
  std::string err_file = dir.path() + "/stderr.txt";
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>" + err_file,
                                   SF_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.env = env;
  auto r = RunCommand(argv, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {-1, "", ""};
  std::ifstream in(err_file);
  std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {r->exit_code, r->output, err};
}

}  // namespace sf::testing
