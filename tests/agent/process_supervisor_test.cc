#include "agent/process_supervisor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <condition_variable>
#include <mutex>

#include "tests/agent/process_helpers.h"
#include "tests/support/testing.h"

namespace sf::agent {
namespace {

using namespace std::chrono_literals;
using agent::testing::ProcessAlive;
using agent::testing::ReadPidFile;
using agent::testing::WaitUntilDead;
using agent::testing::WriteScript;

// Records callbacks; the events of one run in the order the supervisor delivered them.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;  // "stdout:text", "stderr:text", "exit:CODE"
  std::vector<ProcessExit> exits;

  ProcessSupervisor::Callbacks Callbacks() {
    return {[this](const OutputLine& line) {
              std::lock_guard<std::mutex> lock(mu);
              events.push_back(std::string(OutputStreamName(line.stream)) + ":" + line.text);
              cv.notify_all();
            },
            [this](const ProcessExit& exit) {
              std::lock_guard<std::mutex> lock(mu);
              events.push_back("exit:" + std::to_string(exit.exit_code));
              exits.push_back(exit);
              cv.notify_all();
            }};
  }
  bool WaitForExits(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return exits.size() >= n; });
  }
  bool WaitForEvent(const std::string& event, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] {
      return std::find(events.begin(), events.end(), event) != events.end();
    });
  }
  std::vector<std::string> Events(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& e : events)
      if (e.rfind(prefix, 0) == 0) out.push_back(e);
    return out;
  }
};

class ProcessSupervisorTest : public ::testing::Test {
 protected:
  ProcessSpec Spec(const std::string& task_id, const std::string& script_body) {
    ProcessSpec spec;
    spec.task_id = task_id;
    spec.argv = {WriteScript(dir_.path(), task_id + ".sh", script_body), "cluster"};
    spec.working_dir = dir_.path();
    spec.stdout_path = dir_.path() + "/" + task_id + ".out";
    spec.stderr_path = dir_.path() + "/" + task_id + ".err";
    return spec;
  }
  sf::testing::TempDir dir_;
  Recorder recorder_;
};

TEST_F(ProcessSupervisorTest, CapturesBothStreamsInOrderThenExit) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  ProcessSpec spec = Spec("t1",
                          "echo \"arg=$1 var=$MY_VAR\"\n"
                          "for i in 1 2 3; do echo out$i; echo err$i >&2; done\n"
                          "printf 'no newline'\n"
                          "exit 3\n");
  spec.env["MY_VAR"] = "hello world";
  auto pid = supervisor.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  EXPECT_EQ(recorder_.Events("stdout:"),
            (std::vector<std::string>{"stdout:arg=cluster var=hello world", "stdout:out1",
                                      "stdout:out2", "stdout:out3", "stdout:no newline"}));
  EXPECT_EQ(recorder_.Events("stderr:"),
            (std::vector<std::string>{"stderr:err1", "stderr:err2", "stderr:err3"}));
  EXPECT_EQ(recorder_.events.back(), "exit:3");  // after every line
  EXPECT_EQ(recorder_.exits[0].pid, *pid);
  EXPECT_FALSE(recorder_.exits[0].kill_requested);
  EXPECT_TRUE(supervisor.Running().empty());
  // The output also stays on disk.
  EXPECT_NE(agent::testing::ReadFile(spec.stdout_path).find("out2\n"), std::string::npos);
}

TEST_F(ProcessSupervisorTest, RunsInItsOwnProcessGroupWithCleanSignals) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  // What its children inherit, read by the children themselves (/proc/self): the shell's own
  // mask changes for a moment whenever it forks, so it is not read from the shell.
  auto pid = supervisor.Start(Spec("t2",
                                   "echo pgid=$(cut -d' ' -f5 /proc/self/stat)\n"
                                   "grep SigBlk /proc/self/status\n"));
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  auto out = recorder_.Events("stdout:");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], "stdout:pgid=" + std::to_string(*pid));
  EXPECT_EQ(out[1], "stdout:SigBlk:\t0000000000000000");
}

TEST_F(ProcessSupervisorTest, LongLinesArriveIn16KiBPieces) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  ASSERT_TRUE(supervisor.Start(Spec("t3", "head -c 40000 /dev/zero | tr '\\0' x; echo\n")).ok());
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  auto out = recorder_.Events("stdout:");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].size() - 7, 16384u);
  EXPECT_EQ(out[1].size() - 7, 16384u);
  EXPECT_EQ(out[2].size() - 7, 40000u - 2 * 16384u);
}

TEST_F(ProcessSupervisorTest, KilledBySignalReports128PlusSignal) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  ASSERT_TRUE(supervisor.Start(Spec("t4", "kill -SEGV $$\n")).ok());
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  EXPECT_EQ(recorder_.exits[0].exit_code, 128 + SIGSEGV);
}

TEST_F(ProcessSupervisorTest, StartFailsForMissingProgramAndDuplicateTask) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  ProcessSpec missing = Spec("t5", "");
  missing.argv = {dir_.path() + "/no-such-trainer", "cluster"};
  auto result = supervisor.Start(missing);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("no-such-trainer"), std::string::npos);
  EXPECT_TRUE(supervisor.Running().empty());

  ASSERT_TRUE(supervisor.Start(Spec("t6", "sleep 5\n")).ok());
  EXPECT_FALSE(supervisor.Start(Spec("t6", "true\n")).ok());
  ASSERT_TRUE(supervisor.Kill("t6", 0ms).ok());
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  EXPECT_EQ(recorder_.exits[0].exit_code, 128 + SIGKILL);
  EXPECT_TRUE(recorder_.exits[0].kill_requested);
  EXPECT_FALSE(supervisor.Kill("t6", 0ms).ok());  // gone
}

TEST_F(ProcessSupervisorTest, TermTrappedExitsWithinGraceAndGrandchildDies) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  std::string pid_file = dir_.path() + "/grandchild.pid";
  ASSERT_TRUE(supervisor
                  .Start(Spec("t7",
                              "trap 'echo got-term; exit 7' TERM\n"
                              "sleep 1000 & echo $! > " +
                                  pid_file +
                                  "\n"
                                  "echo ready\n"
                                  "wait\n"))
                  .ok());
  ASSERT_TRUE(recorder_.WaitForEvent("stdout:ready", 10s));
  pid_t grandchild = ReadPidFile(pid_file, 5s);
  ASSERT_GT(grandchild, 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(supervisor.Kill("t7", 10s).ok());
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // well before the grace ran out
  EXPECT_EQ(recorder_.exits[0].exit_code, 7);
  EXPECT_EQ(recorder_.Events("stdout:").back(), "stdout:got-term");
  EXPECT_TRUE(WaitUntilDead(grandchild, 5s));
}

TEST_F(ProcessSupervisorTest, TermIgnoredIsSigkilledAfterGraceWithItsWholeGroup) {
  ProcessSupervisor supervisor(recorder_.Callbacks());
  std::string pid_file = dir_.path() + "/grandchild.pid";
  ASSERT_TRUE(supervisor
                  .Start(Spec("t8",
                              "trap '' TERM\n"
                              "sleep 1000 & echo $! > " +
                                  pid_file +
                                  "\n"
                                  "echo ready\n"
                                  "while true; do sleep 0.05; done\n"))
                  .ok());
  ASSERT_TRUE(recorder_.WaitForEvent("stdout:ready", 10s));
  pid_t grandchild = ReadPidFile(pid_file, 5s);
  ASSERT_GT(grandchild, 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(supervisor.Kill("t8", 600ms).ok());
  ASSERT_TRUE(recorder_.WaitForExits(1, 10s));
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 550ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_EQ(recorder_.exits[0].exit_code, 137);
  EXPECT_TRUE(WaitUntilDead(grandchild, 5s));
}

TEST_F(ProcessSupervisorTest, ProcessesOutliveTheSupervisor) {
  pid_t pid = 0;
  {
    ProcessSupervisor supervisor(recorder_.Callbacks());
    auto started = supervisor.Start(Spec("t9", "sleep 30\n"));
    ASSERT_TRUE(started.ok());
    pid = *started;
  }
  EXPECT_TRUE(ProcessAlive(pid));
  kill(-pid, SIGKILL);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
}

}  // namespace
}  // namespace sf::agent
