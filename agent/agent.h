// sf-agent's core: turns the master's StartTask/KillTask into trainer processes and reports
// what they do (state changes, output lines) back through the Outbox and the MasterLink.
//
// A StartTask gets a task directory <work_dir>/tasks/<task_id>/ holding experiment.yaml
// (StartTask.config_yaml), stdout.log and stderr.log, and a trainer process
//   argv: [trainer, "cluster"], cwd: the task directory, its own session/process group,
//   env:  the agent's environment + StartTask.env + the SF_* trial spec (see task::TaskEnvironment)
// A user trial's StartTask (with an entrypoint, docs/core-api.md) runs the entrypoint instead,
// in <task dir>/code, where the experiment's context is unpacked, with the environment of
// user_task.h added; a context that can't be fetched or unpacked fails the start.
// The agent then reports STARTED (or FAILED_TO_START with the reason) and, later, EXITED
// with the exit code (128 + signal when killed). KillTask sends SIGTERM to the process group
// and SIGKILL after grace_period_ms.
//
// Agent restarts: each running task has a state file <task dir>/agent-task.state (pid, the
// process's start time, trial, rank, slots; on a clean agent stop also how far its output was
// read). A starting agent adopts every task whose process is still alive (same pid and start
// time): it lists it in running_tasks, tails its output from where its predecessor stopped,
// and kills it on request; its exit is reported with exit_code -1 (not our child: the status
// is unknown). A task whose process is gone is reported EXITED with exit_code -1.
//
// Thread-safe: every public method may be called from any thread. Callbacks from the link and
// the supervisor take the agent's lock only briefly.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "agent/gpu_monitor.h"
#include "agent/master_link.h"
#include "agent/outbox.h"
#include "agent/process_supervisor.h"
#include "task/user_task.h"
#include "common/status.h"
#include "steadfast/v1/agent_link.pb.h"

namespace sf::agent {

class Agent : public MasterLink::Handler {
 public:
  struct Options {
    AgentConfig config;
    std::vector<steadfast::v1::Slot> slots;
    MasterLink::Options link;  // target is taken from config.master when empty
    Outbox::Options outbox;
    ProcessSupervisor::Options supervisor;
    // NVML, when the agent's cuda slots came from it: sampled every gpu_sample_interval on a
    // thread of its own; each heartbeat carries the latest sample (Heartbeat.gpu_usage, slot
    // "cuda<index>") when it is younger than three intervals. Null: heartbeats carry none.
    std::shared_ptr<GpuMonitor> gpu_monitor;
    std::chrono::milliseconds gpu_sample_interval{1000};
  };

  explicit Agent(Options options);
  ~Agent() override;  // Shutdown()s
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Creates the work directory, adopts trainers a previous agent left running in it (see
  // below), and starts dialling the master.
  Status Start();

  // Stops accepting work (a StartTask from now on is answered FAILED_TO_START); with
  // config.kill_tasks_on_exit, kills every trainer (config.kill_grace_ms) and waits for their
  // exits; sends what is queued (briefly), closes the link. Trainers not killed keep running.
  // Idempotent.
  void Shutdown();

  // For tests and status: tasks not yet exited, and whether the master acknowledged us.
  std::vector<steadfast::v1::RunningTask> RunningTasks() const;
  bool connected() const { return link_ && link_->connected(); }
  const std::vector<steadfast::v1::Slot>& slots() const { return options_.slots; }

  // MasterLink::Handler.
  steadfast::v1::RegisterAgent MakeRegistration() override;
  void OnMasterMessage(const steadfast::v1::MasterMessage& message) override;
  void FillHeartbeat(steadfast::v1::Heartbeat* heartbeat) override;

 private:
  struct Task {
    steadfast::v1::RunningTask info;
    uint64_t start_time = 0;        // the process's start time (/proc/PID/stat field 22)
    bool started_reported = false;  // STARTED is queued (EXITED must come after it)
  };
  void HandleStart(const steadfast::v1::StartTask& start);
  void HandleKill(const steadfast::v1::KillTask& kill);
  void ReportState(const steadfast::v1::StartTask& start,
                   steadfast::v1::TaskStateChange::State state, int exit_code,
                   const std::string& message);
  void OnLine(const OutputLine& line);
  void OnExit(const ProcessExit& exit);
  void AdoptSurvivors();
  // Deletes ended tasks' old directories (PruneTaskDirectories), at most every 10 minutes
  // unless `now`.
  void PruneTaskDirs(bool now);
  void WriteStateFile(const std::string& task_id, const RunningProcess* position);
  std::string TaskDir(const std::string& task_id) const;

  Options options_;
  Outbox outbox_;
  mutable std::mutex mu_;
  std::condition_variable started_cv_;
  bool accepting_ = true;
  int starts_in_flight_ = 0;  // HandleStart calls past the accepting_ check, not yet done
  bool shut_down_ = false;
  std::map<std::string, Task> tasks_;  // running, by task id
  std::chrono::steady_clock::time_point last_prune_{};  // guarded by mu_
  std::unique_ptr<ProcessSupervisor> supervisor_;
  std::unique_ptr<MasterLink> link_;
  std::unique_ptr<GpuSampler> gpu_sampler_;  // from Start() until Shutdown() stopped the link
  std::unique_ptr<task::ContextCache> contexts_;    // user trials' code, by digest (user_task.h)
};

}  // namespace sf::agent
