// sf-task: one rank of a trial run where no agent is (docs/slurm.md "The resource manager"; for
// now by hand, e.g. an unmanaged script): it runs a program with the task's environment and
// ships the program's output to the master over TrialLink, as an agent would have.
//
// Contract:
// - The task's identity is the environment the agent would have set (SF_MASTER_ADDRESS,
//   SF_TRIAL_ID, SF_TASK_ID, SF_TASK_TOKEN, SF_RANK, SF_CHECKPOINT_DIR, ...; docs/core-api.md):
//   RunTask connects with it (core_api/steadfast_core.h) before it starts the program, and
//   refuses to start (exit 2, naming the variable) without it. The program inherits it.
// - The program's stdout and stderr are pipes read by two threads. Each is cut into lines as
//   the agent cuts them (agent/line_splitter.h: 16 KiB pieces, valid UTF-8), copied to sf-task's
//   own stdout or stderr (so a Slurm job's output file has them too), and queued. A sender
//   thread sends what is queued in ReportLogs calls of at most 500 lines, every 200 ms or when
//   500 wait, numbered 1, 2, ... under a random incarnation: the master stores each batch once,
//   so a batch that failed is sent again with its number. At most 100,000 lines wait; beyond
//   that the oldest are dropped and counted on stderr.
// - SIGTERM, SIGINT and SIGHUP are passed on to the program's process group (it runs in its
//   own). When the program ends, what is queued is sent (for up to `drain` seconds), then
//   RunTask returns the program's exit status (128 + N for a signal N). A batch the master
//   refused for good is reported on stderr and dropped; it does not change the exit status.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace sf::launcher {

struct TaskOptions {
  std::vector<std::string> argv;  // the program and its arguments (looked up on PATH)
  std::chrono::milliseconds flush_every{200};
  size_t batch_lines = 500;
  size_t max_queued_lines = 100000;
  std::chrono::seconds drain{30};
  // Also written to this file, line by line (empty: nowhere): the program's stderr.
  std::string stderr_copy;
  // After the program ends with a failure of its own (an exit status 1-128, not a signal), tell
  // the master why (TrialLink ReportExit: task/user_task.h task::FailureReason over stderr_copy).
  bool report_exit = false;
};

// The program's exit status; 2 when the task's environment is not usable, 127 when the program
// cannot be started.
int RunTask(const TaskOptions& options);

}  // namespace sf::launcher
