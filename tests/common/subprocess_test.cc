#include "common/subprocess.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tests/support/testing.h"
#include "tests/support/read_file.h"

namespace sf {
namespace {

using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) { return sf::testing::ReadFileOrEmpty(path); }

// No such process, or a zombie (exited; in a container PID 1 may never reap it).
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

TEST(RunCommand, CapturesOutputAndExitCode) {
  auto r = RunCommand({"/bin/sh", "-c", "echo hello; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "hello\n");
}

TEST(RunCommand, CommandDiesWithTheProcessWaitingForIt) {
  testing::TempDir dir;
  const std::string pid_file = dir.path() + "/pid";
  const std::string script =
      "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file + " && exec sleep 60";
  const pid_t waiter = fork();
  ASSERT_GE(waiter, 0);
  if (waiter == 0) {
    (void)RunCommand({"/bin/sh", "-c", script});
    _exit(0);
  }
  pid_t command = 0;
  for (auto deadline = Clock::now() + std::chrono::seconds(20);
       command == 0 && Clock::now() < deadline;) {
    command = static_cast<pid_t>(std::atol(ReadFile(pid_file).c_str()));
    if (command == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(command, 0) << "the command did not start";
  ASSERT_FALSE(Gone(command));

  ASSERT_EQ(kill(waiter, SIGKILL), 0);
  waitpid(waiter, nullptr, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!Gone(command) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Gone(command)) << "the command outlived the process that ran it";
  if (!Gone(command)) kill(command, SIGKILL);
}

TEST(ProcessRuns, AZombieDoesNotRunThoughKillStillFindsIt) {
  EXPECT_TRUE(ProcessRuns(getpid()));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  // Not reaped yet: a zombie once it has exited.
  for (int i = 0; i < 200 && ProcessRuns(child); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(kill(child, 0), 0) << "a zombie still answers kill(pid, 0)";
  EXPECT_FALSE(ProcessRuns(child));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(ProcessRuns(child));
  EXPECT_FALSE(ProcessRuns(0));
}

}  // namespace
}  // namespace sf
