// The agent (sf_agent_lib, in this process) against a test-side AgentLink server over real
// gRPC on 127.0.0.1, running real /bin/sh trainers.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "agent/agent.h"
#include "agent/slot_detector.h"
#include "tests/agent/process_helpers.h"
#include "tests/agent/test_master.h"
#include "tests/support/testing.h"

namespace sf::agent {
namespace {

using namespace std::chrono_literals;
using agent::testing::ProcessAlive;
using agent::testing::ReadPidFile;
using agent::testing::TestMaster;
using agent::testing::WaitUntilDead;
using agent::testing::WriteScript;
using steadfast::v1::MasterMessage;
using steadfast::v1::TaskStateChange;

class AgentLinkTest : public ::testing::Test {
 protected:
  void SetUp() override { master_ = std::make_unique<TestMaster>(); }
  void TearDown() override {
    if (agent_) agent_->Shutdown();
    agent_.reset();
    master_.reset();
  }

  void StartAgent(const std::string& trainer_body, int cpu_slots = 2, bool kill_on_exit = false) {
    WriteScript(dir_.path(), "trainer.sh", trainer_body);
    StartAgentOnly(cpu_slots, kill_on_exit);
    ASSERT_TRUE(master_->WaitForRegistrations(1, 10s));
  }

  // Starts an agent on the same work dir (and trainer) without waiting for registration.
  void StartAgentOnly(int cpu_slots = 2, bool kill_on_exit = false) {
    Agent::Options options;
    options.config.master = master_->address();
    options.config.agent_id = "test-agent";
    options.config.trainer = dir_.path() + "/trainer.sh";
    options.config.work_dir = dir_.path() + "/work";
    options.config.kill_tasks_on_exit = kill_on_exit;
    options.config.kill_grace_ms = 500;
    SlotSpec slots;
    slots.auto_detect = false;
    slots.cpu_slots = cpu_slots;
    options.slots = DetectSlots(slots);
    options.link.initial_backoff = 50ms;
    options.link.max_backoff = 400ms;
    agent_ = std::make_unique<Agent>(std::move(options));
    ASSERT_TRUE(agent_->Start().ok());
  }

  static MasterMessage StartTaskMessage(const std::string& task_id, int64_t trial_id,
                                        std::vector<std::string> slots = {"cpu0"}) {
    MasterMessage message;
    auto* start = message.mutable_start_task();
    start->set_task_id(task_id);
    start->set_trial_id(trial_id);
    start->set_experiment_id(3);
    start->set_rank(0);
    start->set_world_size(1);
    for (auto& slot : slots) start->add_slot_ids(slot);
    start->set_config_yaml("name: tiny\n");
    start->set_master_address("127.0.0.1:9999");
    start->set_checkpoint_dir("/ckpt/trial-" + std::to_string(trial_id));
    return message;
  }

  static MasterMessage KillTaskMessage(const std::string& task_id, int grace_ms) {
    MasterMessage message;
    message.mutable_kill_task()->set_task_id(task_id);
    message.mutable_kill_task()->set_grace_period_ms(grace_ms);
    return message;
  }

  std::string TaskDir(const std::string& task_id) { return dir_.path() + "/work/tasks/" + task_id; }

  bool WaitForLine(TestMaster& master, int64_t trial, const std::string& text,
                   std::chrono::milliseconds timeout = 10s) {
    return master.WaitFor(
        [&] {
          for (const auto& line : master.Lines(trial))
            if (line == text) return true;
          return false;
        },
        timeout);
  }

  // Polls the agent (not the master, which may be down) until it runs no task; false on timeout.
  bool WaitUntilNoTaskRuns(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!agent_->RunningTasks().empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    return agent_->RunningTasks().empty();
  }

  sf::testing::TempDir dir_;
  std::unique_ptr<TestMaster> master_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentLinkTest, RegistersItsSlotsAndHeartbeats) {
  StartAgent("exit 0\n", /*cpu_slots=*/2);
  auto registration = master_->Registrations().at(0);
  EXPECT_EQ(registration.agent_id(), "test-agent");
  EXPECT_EQ(registration.resource_pool(), "default");
  EXPECT_FALSE(registration.hostname().empty());
  EXPECT_FALSE(registration.version().empty());
  EXPECT_EQ(registration.running_tasks_size(), 0);
  ASSERT_EQ(registration.slots_size(), 2);
  EXPECT_EQ(registration.slots(0).id(), "cpu0");
  EXPECT_EQ(registration.slots(1).id(), "cpu1");
  for (const auto& slot : registration.slots()) {
    EXPECT_EQ(slot.type(), steadfast::v1::SLOT_TYPE_CPU);
    EXPECT_TRUE(slot.enabled());
  }
  // RegisterAck asked for 200 ms heartbeats.
  EXPECT_TRUE(master_->WaitFor([&] { return master_->heartbeats() >= 4; }, 5s));
  EXPECT_TRUE(agent_->connected());
}

TEST_F(AgentLinkTest, StartTaskRunsTrainerWithTheTrialSpecAndReportsOutputAndExit) {
  StartAgent(
      "echo \"argv1=$1\"\n"
      "echo \"ids task=$SF_TASK_ID trial=$SF_TRIAL_ID exp=$SF_EXPERIMENT_ID rank=$SF_RANK "
      "world=$SF_WORLD_SIZE restart=$SF_RESTART\"\n"
      "echo \"master=$SF_MASTER_ADDRESS ckpt=$SF_CHECKPOINT_DIR restore=[$SF_RESTORE_CHECKPOINT] "
      "slots=$SF_SLOT_IDS\"\n"
      "echo \"hparams=$SF_HPARAMS\"\n"
      "echo \"config_file=$SF_CONFIG_FILE\"\n"
      "echo \"config=$(cat \"$SF_CONFIG_FILE\")\"\n"
      "echo \"extra=$EXTRA\"\n"
      "echo \"cwd=$(pwd)\"\n"
      "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done\n"
      "printf 'tail without newline'\n"
      "exit 3\n");
  MasterMessage message = StartTaskMessage("task-a", 41, {"cpu1"});
  auto* start = message.mutable_start_task();
  start->set_restart(2);
  (*start->mutable_env())["EXTRA"] = "from master";
  (*start->mutable_hparams()->mutable_fields())["lr"].set_number_value(0.01);
  (*start->mutable_hparams()->mutable_fields())["arch"].set_string_value("transformer");
  ASSERT_TRUE(master_->Send(message));

  auto started = master_->WaitForState("task-a", TaskStateChange::STATE_STARTED, 10s);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->trial_id(), 41);
  auto exited = master_->WaitForState("task-a", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 3);
  EXPECT_EQ(exited->trial_id(), 41);

  std::string dir = TaskDir("task-a");
  std::vector<std::string> stdout_lines = master_->Lines(41, "stdout");
  std::vector<std::string> expected = {
      "argv1=cluster", "ids task=task-a trial=41 exp=3 rank=0 world=1 restart=2",
      "master=127.0.0.1:9999 ckpt=/ckpt/trial-41 restore=[] slots=cpu1",
      // checked separately below (JSON key order is not fixed)
      "", "config_file=" + dir + "/experiment.yaml", "config=name: tiny", "extra=from master",
      "cwd=" + dir, "out1", "out2", "out3", "out4", "out5", "tail without newline"};
  ASSERT_EQ(stdout_lines.size(), expected.size()) << ::testing::PrintToString(stdout_lines);
  for (size_t i = 0; i < expected.size(); ++i) {
    if (i == 3) continue;
    EXPECT_EQ(stdout_lines[i], expected[i]) << "line " << i;
  }
  EXPECT_EQ(stdout_lines[3].rfind("hparams={", 0), 0u) << stdout_lines[3];
  EXPECT_NE(stdout_lines[3].find("\"lr\":0.01"), std::string::npos) << stdout_lines[3];
  EXPECT_NE(stdout_lines[3].find("\"arch\":\"transformer\""), std::string::npos);
  EXPECT_EQ(master_->Lines(41, "stderr"),
            (std::vector<std::string>{"err1", "err2", "err3", "err4", "err5"}));

  // Every log line carries its origin, and all of them arrive before EXITED; STARTED first.
  auto messages = master_->Messages();
  int started_at = -1, exited_at = -1, last_log_at = -1;
  for (int i = 0; i < static_cast<int>(messages.size()); ++i) {
    const auto& m = messages[i];
    if (m.has_task_state() && m.task_state().state() == TaskStateChange::STATE_STARTED)
      started_at = i;
    if (m.has_task_state() && m.task_state().state() == TaskStateChange::STATE_EXITED)
      exited_at = i;
    if (m.has_logs()) {
      last_log_at = i;
      for (const auto& line : m.logs().lines()) {
        EXPECT_EQ(line.agent_id(), "test-agent");
        EXPECT_EQ(line.rank(), 0);
        EXPECT_GT(line.time().seconds(), 0);
      }
    }
  }
  EXPECT_LT(started_at, exited_at);
  EXPECT_LT(last_log_at, exited_at);
  EXPECT_TRUE(agent_->RunningTasks().empty());
}

TEST_F(AgentLinkTest, ReportsFailedToStartWithTheReason) {
  StartAgent("exit 0\n");
  // Unknown slot.
  ASSERT_TRUE(master_->Send(StartTaskMessage("bad-slot", 1, {"cuda7"})));
  auto failed = master_->WaitForState("bad-slot", TaskStateChange::STATE_FAILED_TO_START, 10s);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->message().find("cuda7"), std::string::npos);
  // A trainer that can't be executed.
  std::filesystem::remove(dir_.path() + "/trainer.sh");
  ASSERT_TRUE(master_->Send(StartTaskMessage("no-trainer", 2)));
  failed = master_->WaitForState("no-trainer", TaskStateChange::STATE_FAILED_TO_START, 10s);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->message().find("trainer.sh"), std::string::npos) << failed->message();
  // A task id that is not a safe directory name.
  ASSERT_TRUE(master_->Send(StartTaskMessage("../escape", 3)));
  EXPECT_TRUE(master_->WaitForState("../escape", TaskStateChange::STATE_FAILED_TO_START, 10s));
  EXPECT_TRUE(agent_->RunningTasks().empty());
}

TEST_F(AgentLinkTest, KillWithGraceLetsATermTrappingTrainerExit) {
  StartAgent(
      "trap 'echo got-term; exit 7' TERM\n"
      "sleep 1000 & echo $! > \"$SF_TASK_DIR/grandchild.pid\"\n"
      "echo ready\n"
      "wait\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("trap", 10)));
  ASSERT_TRUE(WaitForLine(*master_, 10, "ready"));
  pid_t grandchild = ReadPidFile(TaskDir("trap") + "/grandchild.pid", 5s);
  ASSERT_GT(grandchild, 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(master_->Send(KillTaskMessage("trap", 10000)));
  auto exited = master_->WaitForState("trap", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(exited->exit_code(), 7);
  EXPECT_EQ(master_->Lines(10, "stdout").back(), "got-term");
  EXPECT_TRUE(WaitUntilDead(grandchild, 5s));
}

TEST_F(AgentLinkTest, KillSigkillsATermIgnoringTrainerAndItsGroupAfterGrace) {
  StartAgent(
      "trap '' TERM\n"
      "sleep 1000 & echo $! > \"$SF_TASK_DIR/grandchild.pid\"\n"
      "echo ready\n"
      "while true; do sleep 0.05; done\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("stubborn", 11)));
  ASSERT_TRUE(WaitForLine(*master_, 11, "ready"));
  pid_t grandchild = ReadPidFile(TaskDir("stubborn") + "/grandchild.pid", 5s);
  ASSERT_GT(grandchild, 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(master_->Send(KillTaskMessage("stubborn", 700)));
  auto exited = master_->WaitForState("stubborn", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 600ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_EQ(exited->exit_code(), 137);
  EXPECT_TRUE(WaitUntilDead(grandchild, 5s));
}

TEST_F(AgentLinkTest, MasterRestartKeepsTrainerRunningAndReReportsIt) {
  StartAgent(
      "echo before\n"
      "while [ ! -f \"$SF_TASK_DIR/go\" ]; do sleep 0.02; done\n"
      "echo during-1; echo during-2 >&2; echo during-3\n"
      "while [ ! -f \"$SF_TASK_DIR/finish\" ]; do sleep 0.02; done\n"
      "echo after\n"
      "exit 5\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("survivor", 20, {"cpu1"})));
  ASSERT_TRUE(master_->WaitForState("survivor", TaskStateChange::STATE_STARTED, 10s));
  ASSERT_TRUE(WaitForLine(*master_, 20, "before"));
  auto running = agent_->RunningTasks();
  ASSERT_EQ(running.size(), 1u);
  pid_t pid = running[0].pid();

  // The master dies. The trainer keeps going and writes while nobody listens.
  int port = master_->port();
  master_->Stop();
  // The successor knows what was applied (the real master keeps it in its DeliveryLedger), so
  // a batch recorded but not yet acknowledged when the master died is not recorded twice.
  const auto applied = master_->Applied();
  master_.reset();
  std::ofstream(TaskDir("survivor") + "/go").close();
  ASSERT_TRUE(std::filesystem::exists(TaskDir("survivor")));
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (agent::testing::ReadFile(TaskDir("survivor") + "/stdout.log").find("during-3") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(300ms);  // the agent has read (and buffered) them by now
  EXPECT_TRUE(ProcessAlive(pid));
  EXPECT_FALSE(agent_->connected());

  // A new master on the same address: the agent re-registers listing the running task,
  // then sends the lines it buffered, then (later) the exit.
  master_ = std::make_unique<TestMaster>(port, 200, applied);
  ASSERT_EQ(master_->port(), port);
  ASSERT_TRUE(master_->WaitForRegistrations(1, 10s));
  auto registration = master_->Registrations().at(0);
  ASSERT_EQ(registration.running_tasks_size(), 1);
  EXPECT_EQ(registration.running_tasks(0).task_id(), "survivor");
  EXPECT_EQ(registration.running_tasks(0).trial_id(), 20);
  EXPECT_EQ(registration.running_tasks(0).pid(), pid);
  ASSERT_EQ(registration.running_tasks(0).slot_ids_size(), 1);
  EXPECT_EQ(registration.running_tasks(0).slot_ids(0), "cpu1");
  EXPECT_EQ(registration.slots(1).trial_id(), 20);  // cpu1 is busy with trial 20
  EXPECT_EQ(registration.slots(0).trial_id(), 0);
  ASSERT_TRUE(master_->Messages().at(0).has_register_());  // first message on the connection

  ASSERT_TRUE(WaitForLine(*master_, 20, "during-3"));
  ASSERT_TRUE(WaitForLine(*master_, 20, "during-2"));
  EXPECT_EQ(master_->Lines(20, "stdout"), (std::vector<std::string>{"during-1", "during-3"}));
  EXPECT_EQ(master_->Lines(20, "stderr"), (std::vector<std::string>{"during-2"}));

  std::ofstream(TaskDir("survivor") + "/finish").close();
  auto exited = master_->WaitForState("survivor", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 5);
  EXPECT_EQ(master_->Lines(20, "stdout").back(), "after");
}

TEST_F(AgentLinkTest, ExitWhileMasterIsAwayIsReportedAfterReconnect) {
  StartAgent(
      "echo started\n"
      "while [ ! -f \"$SF_TASK_DIR/finish\" ]; do sleep 0.02; done\n"
      "echo finishing\n"
      "exit 9\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("offline-exit", 30)));
  ASSERT_TRUE(WaitForLine(*master_, 30, "started"));
  int port = master_->port();
  master_->Stop();
  // The successor knows what was applied (the real master keeps it in its DeliveryLedger), so
  // a batch recorded but not yet acknowledged when the master died is not recorded twice.
  const auto applied = master_->Applied();
  master_.reset();
  std::ofstream(TaskDir("offline-exit") + "/finish").close();
  ASSERT_TRUE(WaitUntilNoTaskRuns(10s));

  master_ = std::make_unique<TestMaster>(port, 200, applied);
  ASSERT_TRUE(master_->WaitForRegistrations(1, 10s));
  EXPECT_EQ(master_->Registrations().at(0).running_tasks_size(), 0);
  auto exited = master_->WaitForState("offline-exit", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 9);
  EXPECT_EQ(master_->Lines(30), (std::vector<std::string>{"finishing"}));
}

// At-least-once delivery: the master reads the trainer's last log batches and its EXITED but
// dies before applying them (kLose); after the reconnect the agent re-sends them, in order,
// and every line and the exit status are recorded exactly once.
TEST_F(AgentLinkTest, EventsTheMasterDidNotApplyAreResentAfterAReconnectAndRecordedOnce) {
  StartAgent(
      "echo started\n"
      "while [ ! -f \"$SF_TASK_DIR/finish\" ]; do sleep 0.02; done\n"
      "i=1; while [ $i -le 300 ]; do echo line$i; i=$((i+1)); done\n"
      "echo 'error: boom' >&2\n"
      "exit 7\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("resent", 70)));
  ASSERT_TRUE(WaitForLine(*master_, 70, "started"));
  master_->SetMode(TestMaster::Mode::kLose);
  std::ofstream(TaskDir("resent") + "/finish").close();
  ASSERT_TRUE(WaitUntilNoTaskRuns(10s));
  ASSERT_TRUE(master_->WaitFor([&] { return master_->lost() >= 2; }, 5s));  // logs + EXITED
  std::this_thread::sleep_for(300ms);  // past the batch delay: everything was sent and lost
  EXPECT_FALSE(master_->WaitForState("resent", TaskStateChange::STATE_EXITED, 10ms).has_value());

  master_->SetMode(TestMaster::Mode::kApply);
  ASSERT_TRUE(master_->DropConnection());
  ASSERT_TRUE(master_->WaitForRegistrations(2, 10s));
  auto exited = master_->WaitForState("resent", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 7);
  EXPECT_NE(exited->message().find("error: boom"), std::string::npos) << exited->message();
  std::vector<std::string> expected = {"started"};
  for (int i = 1; i <= 300; ++i) expected.push_back("line" + std::to_string(i));
  EXPECT_EQ(master_->Lines(70, "stdout"), expected);
  EXPECT_EQ(master_->Lines(70, "stderr"), (std::vector<std::string>{"error: boom"}));
  int exits = 0;
  for (const auto& change : master_->StateChanges()) {
    exits += change.task_id() == "resent" && change.state() == TaskStateChange::STATE_EXITED;
  }
  EXPECT_EQ(exits, 1);
  EXPECT_EQ(master_->duplicates(), 0);
}

// The master applied the events but its acks never arrived: RegisterAck's applied_through
// tells the agent, which forgets them instead of re-sending, and drains at once on shutdown.
TEST_F(AgentLinkTest, EventsAppliedButNotAcknowledgedAreForgottenAtTheNextRegistration) {
  StartAgent("echo one\necho two\nexit 0\n");
  master_->SetMode(TestMaster::Mode::kApplyWithoutAck);
  ASSERT_TRUE(master_->Send(StartTaskMessage("applied", 71)));
  ASSERT_TRUE(master_->WaitForState("applied", TaskStateChange::STATE_EXITED, 10s).has_value());
  ASSERT_TRUE(WaitForLine(*master_, 71, "two"));
  master_->SetMode(TestMaster::Mode::kApply);
  ASSERT_TRUE(master_->DropConnection());
  ASSERT_TRUE(master_->WaitForRegistrations(2, 10s));
  ASSERT_TRUE(master_->Send(StartTaskMessage("after", 72)));
  ASSERT_TRUE(master_->WaitForState("after", TaskStateChange::STATE_EXITED, 10s).has_value());
  EXPECT_EQ(master_->duplicates(), 0);
  EXPECT_EQ(master_->Lines(71), (std::vector<std::string>{"one", "two"}));
  auto start = std::chrono::steady_clock::now();
  agent_->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);  // nothing left unacknowledged
}

TEST_F(AgentLinkTest, ShutdownLeavesTrainersRunningByDefault) {
  StartAgent("echo up\nsleep 30\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("left", 40)));
  ASSERT_TRUE(WaitForLine(*master_, 40, "up"));
  pid_t pid = agent_->RunningTasks().at(0).pid();
  agent_->Shutdown();
  EXPECT_TRUE(ProcessAlive(pid));
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);  // the agent's child is ours to reap now
}

TEST_F(AgentLinkTest, ShutdownWithKillTasksOnExitKillsAndReportsThem) {
  StartAgent("echo up\ntrap 'exit 4' TERM\nsleep 30 & wait\n", 2, /*kill_on_exit=*/true);
  ASSERT_TRUE(master_->Send(StartTaskMessage("doomed", 50)));
  ASSERT_TRUE(WaitForLine(*master_, 50, "up"));
  pid_t pid = agent_->RunningTasks().at(0).pid();
  agent_->Shutdown();
  EXPECT_TRUE(WaitUntilDead(pid, 5s));
  auto exited = master_->WaitForState("doomed", TaskStateChange::STATE_EXITED, 5s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 4);
}

TEST_F(AgentLinkTest, RestartedAgentAdoptsTheTrainersItsPredecessorLeftRunning) {
  StartAgent(
      "echo before\n"
      "while [ ! -f \"$SF_TASK_DIR/go\" ]; do sleep 0.02; done\n"
      "echo while-no-agent\n"
      "trap 'echo adopted-term; exit 0' TERM\n"
      "while true; do sleep 0.05; done\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("orphan", 60, {"cpu1"})));
  ASSERT_TRUE(WaitForLine(*master_, 60, "before"));
  pid_t pid = agent_->RunningTasks().at(0).pid();
  agent_->Shutdown();
  agent_.reset();
  ASSERT_TRUE(ProcessAlive(pid));
  std::ofstream(TaskDir("orphan") + "/go").close();
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (agent::testing::ReadFile(TaskDir("orphan") + "/stdout.log").find("while-no-agent") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }

  // A new agent on the same work dir: it registers the survivor and ships the lines written
  // while no agent was watching (and not the ones already sent).
  master_ = std::make_unique<TestMaster>();
  StartAgentOnly();
  ASSERT_TRUE(master_->WaitForRegistrations(1, 10s));
  auto registration = master_->Registrations().at(0);
  ASSERT_EQ(registration.running_tasks_size(), 1);
  EXPECT_EQ(registration.running_tasks(0).task_id(), "orphan");
  EXPECT_EQ(registration.running_tasks(0).pid(), pid);
  EXPECT_EQ(registration.running_tasks(0).trial_id(), 60);
  ASSERT_EQ(registration.running_tasks(0).slot_ids_size(), 1);
  EXPECT_EQ(registration.running_tasks(0).slot_ids(0), "cpu1");
  ASSERT_TRUE(WaitForLine(*master_, 60, "while-no-agent"));
  EXPECT_EQ(master_->Lines(60), (std::vector<std::string>{"while-no-agent"}));

  // It can still be killed; its exit status is unknown to a non-parent.
  ASSERT_TRUE(master_->Send(KillTaskMessage("orphan", 5000)));
  auto exited = master_->WaitForState("orphan", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), -1);
  EXPECT_TRUE(WaitUntilDead(pid, 5s));
  EXPECT_TRUE(WaitForLine(*master_, 60, "adopted-term"));
  EXPECT_FALSE(std::filesystem::exists(TaskDir("orphan") + "/agent-task.state"));
  waitpid(pid, nullptr, 0);  // started by the first agent in this process: ours to reap
}

TEST_F(AgentLinkTest, RestartedAgentReportsTrainersThatExitedWhileItWasDown) {
  StartAgent("echo up\nwhile [ ! -f \"$SF_TASK_DIR/finish\" ]; do sleep 0.02; done\n");
  ASSERT_TRUE(master_->Send(StartTaskMessage("gone", 61)));
  ASSERT_TRUE(WaitForLine(*master_, 61, "up"));
  pid_t pid = agent_->RunningTasks().at(0).pid();
  agent_->Shutdown();
  agent_.reset();
  std::ofstream(TaskDir("gone") + "/finish").close();
  ASSERT_TRUE(WaitUntilDead(pid, 5s));

  master_ = std::make_unique<TestMaster>();
  StartAgentOnly();
  ASSERT_TRUE(master_->WaitForRegistrations(1, 10s));
  EXPECT_EQ(master_->Registrations().at(0).running_tasks_size(), 0);
  auto exited = master_->WaitForState("gone", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), -1);
  EXPECT_EQ(exited->trial_id(), 61);
  EXPECT_NE(exited->message().find("not running"), std::string::npos) << exited->message();
  waitpid(pid, nullptr, 0);
}

// A trainer records how it ended in $SF_TASK_DIR/exit_status (sf-trainer cluster does, just
// before returning): a restarted agent, which cannot wait for a process it did not start,
// reports that status instead of "unknown", both for a trainer that exits while the agent is
// down and for one it adopted.
TEST_F(AgentLinkTest, RestartedAgentReportsTheExitStatusATrainerRecorded) {
  const std::string trainer =
      "echo up\n"
      "while [ ! -f \"$SF_TASK_DIR/finish\" ]; do sleep 0.02; done\n"
      "code=$(cat \"$SF_TASK_DIR/finish\")\n"
      "echo \"$code\" > \"$SF_TASK_DIR/exit_status\"\n"
      "exit \"$code\"\n";
  StartAgent(trainer);
  ASSERT_TRUE(master_->Send(StartTaskMessage("done-while-down", 62, {"cpu0"})));
  ASSERT_TRUE(master_->Send(StartTaskMessage("adopted-then-done", 63, {"cpu1"})));
  ASSERT_TRUE(WaitForLine(*master_, 62, "up"));
  ASSERT_TRUE(WaitForLine(*master_, 63, "up"));
  std::map<std::string, pid_t> pids;
  for (const auto& t : agent_->RunningTasks()) pids[t.task_id()] = t.pid();
  ASSERT_EQ(pids.size(), 2u);
  agent_->Shutdown();
  agent_.reset();
  std::ofstream(TaskDir("done-while-down") + "/finish") << "0\n";
  ASSERT_TRUE(WaitUntilDead(pids["done-while-down"], 5s));

  master_ = std::make_unique<TestMaster>();
  StartAgentOnly();
  ASSERT_TRUE(master_->WaitForRegistrations(1, 10s));
  auto gone = master_->WaitForState("done-while-down", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->exit_code(), 0);
  EXPECT_EQ(gone->message(), "exited while the agent was not running: exit status 0");

  ASSERT_EQ(master_->Registrations().at(0).running_tasks_size(), 1);
  std::ofstream(TaskDir("adopted-then-done") + "/finish") << "3\n";
  auto adopted = master_->WaitForState("adopted-then-done", TaskStateChange::STATE_EXITED, 10s);
  ASSERT_TRUE(adopted.has_value());
  EXPECT_EQ(adopted->exit_code(), 3);
  EXPECT_EQ(adopted->message().rfind("exit status 3", 0), 0u) << adopted->message();
  for (const auto& [id, pid] : pids) waitpid(pid, nullptr, 0);
}

}  // namespace
}  // namespace sf::agent
