// User trials on the agent (agent/user_task.h): the failure line of real Python tracebacks,
// the entrypoint's argv, and the environment a task gets.
#include "task/user_task.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/context/context_archive.h"
#include "common/subprocess.h"
#include "tests/support/testing.h"

namespace sf::task {
namespace {
namespace fs = std::filesystem;

// Runs `code` under Debian's python3 and returns the path of what it wrote to stderr.
std::string PythonStderr(const sf::testing::TempDir& dir, const std::string& name, const std::string& code) {
  const std::string path = dir.path() + "/" + name + ".log";
  CommandOptions options;
  auto r = RunCommand({"/bin/sh", "-c", "exec /usr/bin/python3 -c \"$0\" 2>" + path, code}, options);
  EXPECT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  return path;
}

TEST(PythonExceptionLine, IsTheLastExceptionOfARealTraceback) {
  sf::testing::TempDir dir;
  EXPECT_EQ(PythonExceptionLine(PythonStderr(dir, "plain", "def f():\n  raise ValueError('bad shape')\nf()")),
            "ValueError: bad shape");
  // Chained: the last exception, not the first.
  EXPECT_EQ(PythonExceptionLine(PythonStderr(dir, "chained",
                                             "try:\n  {}['x']\nexcept KeyError:\n  raise RuntimeError('no x')")),
            "RuntimeError: no x");
  // A multi-line message: its first line.
  EXPECT_EQ(PythonExceptionLine(PythonStderr(dir, "multi", "raise TypeError('one\\ntwo')")), "TypeError: one");
  // Output before it (logs, prints to stderr) does not matter.
  EXPECT_EQ(PythonExceptionLine(PythonStderr(
                dir, "noisy", "import sys\nprint('error: not this one', file=sys.stderr)\nimport json\njson.loads('{')")),
            "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");
}

TEST(PythonExceptionLine, IsEmptyWithoutATraceback) {
  sf::testing::TempDir dir;
  std::ofstream(dir.path() + "/x.log") << "sf-trainer cluster: invalid experiment config\n";
  EXPECT_EQ(PythonExceptionLine(dir.path() + "/x.log"), "");
  EXPECT_EQ(PythonExceptionLine(dir.path() + "/missing.log"), "");
}

TEST(EntrypointArgv, ShellLineRunsUnderShListRunsAsIs) {
  steadfast::v1::StartTask start;
  EXPECT_TRUE(EntrypointArgv(start).empty());
  start.add_entrypoint("python3 train.py --epochs 3");
  start.set_entrypoint_shell(true);
  EXPECT_EQ(EntrypointArgv(start), (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py --epochs 3"}));
  start.clear_entrypoint();
  start.set_entrypoint_shell(false);
  start.add_entrypoint("python3");
  start.add_entrypoint("train.py");
  EXPECT_EQ(EntrypointArgv(start), (std::vector<std::string>{"python3", "train.py"}));
}

TEST(AddUserTaskEnvironment, AddsLocalRankUnbufferedAndPutsThePackageFirst) {
  steadfast::v1::StartTask start;
  start.set_local_rank(1);
  start.set_local_size(2);
  std::map<std::string, std::string> env{{"PYTHONPATH", "/home/me/lib"}};
  AddUserTaskEnvironment(start, "/opt/sf/python", env);
  EXPECT_EQ(env["SF_LOCAL_RANK"], "1");
  EXPECT_EQ(env["SF_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
  EXPECT_EQ(env["PYTHONPATH"], "/opt/sf/python:/home/me/lib");
  std::map<std::string, std::string> bare;
  AddUserTaskEnvironment(start, "", bare);
  EXPECT_EQ(bare.count("PYTHONPATH"), std::getenv("PYTHONPATH") ? 1u : 0u) << "no package: PYTHONPATH as it was";
}

TEST(UnpackTaskContext, GivesEachRunAFreshCopy) {
  sf::testing::TempDir dir;
  fs::create_directories(dir.path() + "/src");
  std::ofstream(dir.path() + "/src/train.py") << "print('hi')\n";
  auto packed = context::PackContext(dir.path() + "/src");
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  const std::string archive = dir.path() + "/ctx.tar.gz";
  std::ofstream(archive, std::ios::binary) << packed->archive;
  const std::string code = dir.path() + "/code";
  fs::create_directories(code);
  std::ofstream(code + "/stale.txt") << "from the last run";
  ASSERT_TRUE(UnpackTaskContext(archive, code).ok());
  EXPECT_TRUE(fs::exists(code + "/train.py"));
  EXPECT_FALSE(fs::exists(code + "/stale.txt"));
  Status missing = UnpackTaskContext(dir.path() + "/no-such-archive.tar.gz", code);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no-such-archive"), std::string::npos) << missing.message();
}

}  // namespace
}  // namespace sf::task
