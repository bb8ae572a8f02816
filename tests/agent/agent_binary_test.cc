// The sf-agent binary as a real process against a test-side AgentLink server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "agent/slot_detector.h"
#include "common/subprocess.h"
#include "tests/agent/process_helpers.h"
#include "tests/agent/test_master.h"
#include "tests/support/testing.h"

extern char** environ;

namespace sf::agent {
namespace {

using namespace std::chrono_literals;
using agent::testing::LinesWith;
using agent::testing::ProcessAlive;
using agent::testing::ReadFile;
using agent::testing::ReadPidFile;
using agent::testing::TestMaster;
using agent::testing::WaitUntilDead;
using agent::testing::WriteScript;
using steadfast::v1::MasterMessage;
using steadfast::v1::TaskStateChange;

// sf-agent started with posix_spawn, its stderr in a file.
class AgentProcess {
 public:
  // `extra_env` ("NAME=value") is added to this process's environment for the agent.
  AgentProcess(const std::vector<std::string>& args, const std::string& stderr_path,
               const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> argv = {SF_AGENT_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c_argv;
    for (auto& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<std::string> env_entries(extra_env);
    std::vector<char*> c_env;
    for (auto& e : env_entries) c_env.push_back(e.data());
    for (char** e = environ; *e; ++e) c_env.push_back(*e);
    c_env.push_back(nullptr);
    int rc = posix_spawn(&pid_, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << SF_AGENT_PATH << ": " << strerror(rc);
      pid_ = 0;
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Sends `signal` and waits for the exit; returns the exit status, or -1 on timeout.
  int SignalAndWait(int signal, std::chrono::milliseconds timeout) {
    kill(pid_, signal);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = 0;
};

class AgentBinaryTest : public ::testing::Test {
 protected:
  std::vector<std::string> Args(const std::string& trainer_body) {
    return {"--master",   master_.address(),
            "--slots",    "cpu:1",
            "--agent-id", "binary-agent",
            "--trainer",  WriteScript(dir_.path(), "trainer.sh", trainer_body),
            "--work-dir", dir_.path() + "/work"};
  }
  MasterMessage StartTask(const std::string& task_id, int64_t trial_id) {
    MasterMessage message;
    message.mutable_start_task()->set_task_id(task_id);
    message.mutable_start_task()->set_trial_id(trial_id);
    message.mutable_start_task()->add_slot_ids("cpu0");
    return message;
  }
  sf::testing::TempDir dir_;
  TestMaster master_;
};

TEST_F(AgentBinaryTest, HelpAndBadFlags) {
  auto help = RunCommand({SF_AGENT_PATH, "--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_EQ(help->exit_code, 0);
  EXPECT_NE(help->output.find("--master HOST:PORT"), std::string::npos);
  auto bad = RunCommand({SF_AGENT_PATH, "--slots", "gpu:2"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 2);
  EXPECT_NE(bad->output.find("--slots"), std::string::npos) << bad->output;
}

TEST_F(AgentBinaryTest, RegistersRunsATaskAndExitsCleanlyOnSigtermLeavingTheTrainer) {
  std::string log = dir_.path() + "/agent.log";
  // The agent blocks SIGTERM/SIGINT/SIGHUP and ignores SIGPIPE; its trainers must not inherit
  // either (grep reports its own mask and ignored set).
  AgentProcess agent(Args("echo $$ > \"$SF_TASK_DIR/pid\"\necho \"hello from $SF_TASK_ID\"\n"
                          "grep -E 'SigBlk|SigIgn' /proc/self/status\n"
                          "exec sleep 60\n"),
                     log);
  ASSERT_TRUE(master_.WaitForRegistrations(1, 15s)) << ReadFile(log);
  auto registration = master_.Registrations().at(0);
  EXPECT_EQ(registration.agent_id(), "binary-agent");
  ASSERT_EQ(registration.slots_size(), 1);
  EXPECT_EQ(registration.slots(0).id(), "cpu0");
  EXPECT_EQ(registration.slots(0).type(), steadfast::v1::SLOT_TYPE_CPU);

  ASSERT_TRUE(master_.Send(StartTask("bin-task", 77)));
  ASSERT_TRUE(master_.WaitForState("bin-task", TaskStateChange::STATE_STARTED, 10s));
  ASSERT_TRUE(master_.WaitFor([&] { return master_.Lines(77).size() >= 3; }, 10s))
      << ::testing::PrintToString(master_.Lines(77));
  auto task_lines = master_.Lines(77);
  EXPECT_EQ(task_lines[0], "hello from bin-task");
  EXPECT_EQ(task_lines[1], "SigBlk:\t0000000000000000");
  // Signals 1-31 at their defaults (glibc's posix_spawn leaves its own internal real-time
  // signals 32 and 33 ignored; glibc in the trainer sets them up again).
  ASSERT_EQ(task_lines[2].rfind("SigIgn:\t", 0), 0u) << task_lines[2];
  EXPECT_EQ(std::stoull(task_lines[2].substr(8), nullptr, 16) & 0x7fffffffULL, 0u) << task_lines[2];
  pid_t trainer = ReadPidFile(dir_.path() + "/work/tasks/bin-task/pid", 5s);
  ASSERT_GT(trainer, 0);

  EXPECT_EQ(agent.SignalAndWait(SIGTERM, 10s), 0) << ReadFile(log);
  EXPECT_TRUE(ProcessAlive(trainer));  // left running by default
  kill(-trainer, SIGKILL);

  // The agent's own log: `level time component key=value ...`, one event per line.
  std::istringstream lines(ReadFile(log));
  std::regex shape(
      R"(^[DIWE] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [a-z_]+ event=\S+.*$)");
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_TRUE(std::regex_match(line, shape)) << line;
  }
  EXPECT_GE(count, 3);
  EXPECT_NE(ReadFile(log).find("event=registered"), std::string::npos);
}

// An agent killed (SIGKILL) before the master had applied any of its events: the next agent
// process on the same work directory takes its outbox journal back (agent/outbox.h) and delivers
// them, each once and in order, under the old incarnation. Without the journal the task's lines
// and exit would be gone.
TEST_F(AgentBinaryTest, AKilledAgentsUndeliveredLinesAndExitComeFromTheNextProcess) {
  const std::string log = dir_.path() + "/agent.log", log2 = dir_.path() + "/agent2.log";
  const auto args = Args("for i in 1 2 3 4 5; do echo \"line-$i\"; done\nexit 7\n");
  master_.SetMode(TestMaster::Mode::kLose);  // reads every event, applies and acknowledges none
  {
    AgentProcess agent(args, log);
    ASSERT_TRUE(master_.WaitForRegistrations(1, 15s)) << ReadFile(log);
    ASSERT_TRUE(master_.Send(StartTask("lost-task", 88)));
    // STARTED, the lines, EXITED: read by the master and lost.
    ASSERT_TRUE(master_.WaitFor([&] { return master_.lost() >= 3; }, 15s)) << ReadFile(log);
    EXPECT_TRUE(master_.Lines(88).empty());
  }  // SIGKILL: no drain, no goodbye
  master_.SetMode(TestMaster::Mode::kApply);
  AgentProcess again(args, log2);
  auto exited = master_.WaitForState("lost-task", TaskStateChange::STATE_EXITED, 20s);
  ASSERT_TRUE(exited.has_value()) << ReadFile(log2);
  EXPECT_EQ(exited->exit_code(), 7);
  EXPECT_EQ(master_.Lines(88), (std::vector<std::string>{"line-1", "line-2", "line-3", "line-4", "line-5"}));
  EXPECT_EQ(master_.duplicates(), 0);
  auto registrations = master_.Registrations();
  ASSERT_GE(registrations.size(), 2u);
  EXPECT_EQ(registrations.back().incarnation(), registrations.front().incarnation());
  EXPECT_NE(ReadFile(log2).find("event=journal_recovered"), std::string::npos) << ReadFile(log2);
}

TEST_F(AgentBinaryTest, KillTasksOnExitKillsTrainersBeforeExiting) {
  std::string log = dir_.path() + "/agent.log";
  auto args = Args("echo $$ > \"$SF_TASK_DIR/pid\"\necho up\nexec sleep 60\n");
  args.push_back("--kill-tasks-on-exit");
  args.push_back("--kill-grace-ms=2000");
  AgentProcess agent(args, log);
  ASSERT_TRUE(master_.WaitForRegistrations(1, 15s)) << ReadFile(log);
  ASSERT_TRUE(master_.Send(StartTask("doomed", 78)));
  ASSERT_TRUE(master_.WaitFor([&] { return !master_.Lines(78).empty(); }, 10s));
  pid_t trainer = ReadPidFile(dir_.path() + "/work/tasks/doomed/pid", 5s);
  ASSERT_GT(trainer, 0);
  EXPECT_EQ(agent.SignalAndWait(SIGTERM, 10s), 0) << ReadFile(log);
  EXPECT_TRUE(WaitUntilDead(trainer, 5s));
  auto exited = master_.WaitForState("doomed", TaskStateChange::STATE_EXITED, 5s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 128 + SIGTERM);
}

// ---- GPU slots (docs/agent.md, "GPU slots"), with the fake NVML of tests/agent/fake_nvml.cc.

std::vector<std::string> GpuArgs(const std::string& master, const std::string& dir, const std::string& nvml,
                                 const std::string& trainer) {
  return {"--master", master, "--slots", "auto", "--nvml-library", nvml, "--agent-id", "gpu-agent",
          "--trainer", trainer, "--work-dir", dir + "/work"};
}

// The latest heartbeat that carries GPU usage.
std::optional<steadfast::v1::Heartbeat> LatestGpuHeartbeat(const TestMaster& master) {
  std::optional<steadfast::v1::Heartbeat> latest;
  for (const auto& m : master.Messages()) {
    if (m.has_heartbeat() && !m.heartbeat().gpu_usage().empty()) latest = m.heartbeat();
  }
  return latest;
}

TEST_F(AgentBinaryTest, AutoSlotsComeFromNvmlAndTasksSeeTheirGpusByUuid) {
  std::string log = dir_.path() + "/agent.log";
  std::string trainer = WriteScript(dir_.path(), "trainer.sh",
                                    "echo \"devices=$CUDA_VISIBLE_DEVICES slots=$SF_SLOT_IDS\"\n");
  AgentProcess agent(GpuArgs(master_.address(), dir_.path(), SF_FAKE_NVML_PATH, trainer), log);
  ASSERT_TRUE(master_.WaitForRegistrations(1, 15s)) << ReadFile(log);
  auto registration = master_.Registrations().at(0);
  ASSERT_EQ(registration.slots_size(), 2) << registration.DebugString();
  for (int i = 0; i < 2; ++i) {
    const auto& slot = registration.slots(i);
    EXPECT_EQ(slot.id(), "cuda" + std::to_string(i));
    EXPECT_EQ(slot.type(), steadfast::v1::SLOT_TYPE_CUDA);
    EXPECT_EQ(slot.device(), "Steadfast Fake GPU " + std::to_string(i));
    EXPECT_EQ(slot.uuid(), "GPU-00000000-0000-4000-8000-00000000000" + std::to_string(i));
    EXPECT_EQ(slot.memory_total_bytes(), 80LL << 30);
  }

  // A task on cuda1 sees that GPU by its UUID.
  MasterMessage start;
  start.mutable_start_task()->set_task_id("gpu-task");
  start.mutable_start_task()->set_trial_id(81);
  start.mutable_start_task()->add_slot_ids("cuda1");
  ASSERT_TRUE(master_.Send(start));
  ASSERT_TRUE(master_.WaitForState("gpu-task", TaskStateChange::STATE_EXITED, 10s));
  ASSERT_TRUE(master_.WaitFor([&] { return !master_.Lines(81).empty(); }, 10s));
  EXPECT_EQ(master_.Lines(81).at(0), "devices=GPU-00000000-0000-4000-8000-000000000001 slots=cuda1");

  // Heartbeats carry each GPU's latest sample (the fake's figures).
  ASSERT_TRUE(master_.WaitFor([&] { return LatestGpuHeartbeat(master_).has_value(); }, 10s)) << ReadFile(log);
  auto beat = *LatestGpuHeartbeat(master_);
  ASSERT_EQ(beat.gpu_usage_size(), 2) << beat.DebugString();
  EXPECT_EQ(beat.gpu_usage().at("cuda0").utilization_percent(), 40);
  EXPECT_EQ(beat.gpu_usage().at("cuda0").memory_used_bytes(), 1LL << 30);
  EXPECT_EQ(beat.gpu_usage().at("cuda1").utilization_percent(), 50);
  EXPECT_EQ(beat.gpu_usage().at("cuda1").memory_used_bytes(), 2LL << 30);
  EXPECT_EQ(agent.SignalAndWait(SIGTERM, 10s), 0) << ReadFile(log);
  EXPECT_EQ(LinesWith(ReadFile(log), "event=cuda_device"), 2) << ReadFile(log);
}

TEST_F(AgentBinaryTest, WithoutADriverNoGpuSlotAndOneLineSayingWhy) {
  if (!FindCudaDevices().empty()) GTEST_SKIP() << "a GPU is visible to the CUDA runtime here (the fallback)";
  std::string log = dir_.path() + "/agent.log";
  const std::string missing = dir_.path() + "/no/libnvidia-ml.so.1";
  AgentProcess agent(GpuArgs(master_.address(), dir_.path(), missing, WriteScript(dir_.path(), "t.sh", "true\n")),
                     log);
  ASSERT_TRUE(master_.WaitForRegistrations(1, 15s)) << ReadFile(log);
  auto registration = master_.Registrations().at(0);
  ASSERT_EQ(registration.slots_size(), 1);
  EXPECT_EQ(registration.slots(0).id(), "cpu0");
  // Several heartbeats later, still one line, and heartbeats carry no GPU usage.
  const int before = master_.heartbeats();
  ASSERT_TRUE(master_.WaitFor([&] { return master_.heartbeats() >= before + 5; }, 10s));
  EXPECT_FALSE(LatestGpuHeartbeat(master_).has_value());
  EXPECT_EQ(agent.SignalAndWait(SIGTERM, 10s), 0);
  const std::string text = ReadFile(log);
  EXPECT_EQ(LinesWith(text, "event=no_cuda_devices"), 1) << text;
  EXPECT_NE(text.find("cannot load " + missing), std::string::npos) << text;
  EXPECT_EQ(LinesWith(text, " gpu "), 0) << text;
  EXPECT_EQ(LinesWith(text, "NVML"), 1) << text;  // the reason is in that one line only
}

TEST_F(AgentBinaryTest, AGpuThatFailsIsReportedAsNothingAndLoggedOnce) {
  std::string log = dir_.path() + "/agent.log";
  AgentProcess agent(
      GpuArgs(master_.address(), dir_.path(), SF_FAKE_NVML_PATH, WriteScript(dir_.path(), "t.sh", "true\n")), log,
      {"SF_FAKE_NVML_LOST=1"});
  ASSERT_TRUE(master_.WaitForRegistrations(1, 15s)) << ReadFile(log);
  EXPECT_EQ(master_.Registrations().at(0).slots_size(), 2);  // listed: only its readings fail
  ASSERT_TRUE(master_.WaitFor([&] { return LatestGpuHeartbeat(master_).has_value(); }, 10s)) << ReadFile(log);
  // Three samples (1 s apart) later: still only cuda0, and one warning.
  std::this_thread::sleep_for(3s);
  auto beat = *LatestGpuHeartbeat(master_);
  EXPECT_EQ(beat.gpu_usage_size(), 1) << beat.DebugString();
  EXPECT_EQ(beat.gpu_usage().count("cuda0"), 1u);
  EXPECT_EQ(agent.SignalAndWait(SIGTERM, 10s), 0);
  const std::string text = ReadFile(log);
  EXPECT_EQ(LinesWith(text, "event=sample_failed"), 1) << text;
  EXPECT_NE(text.find("GPU is lost"), std::string::npos) << text;
}

}  // namespace
}  // namespace sf::agent
