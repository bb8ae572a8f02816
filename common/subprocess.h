// Running other programs: fork/exec with an argument vector (never a shell), optional
// working directory, environment additions and a user to run as; output captured or inherited.
//
// RunCommand blocks until the program exits or `timeout` passes (then it is killed with
// SIGKILL and the result says so). Thread-safe: each call owns its child. The program runs in a
// process group of its own and is SIGKILLed by the kernel if the calling process dies while
// waiting for it (PR_SET_PDEATHSIG; what it started in the background, e.g. the server that
// `pg_ctl start` forks, keeps running).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf {

struct CommandOptions {
  std::string working_dir;                   // empty: inherit
  std::map<std::string, std::string> env;    // added to (or overriding) the parent's environment
  bool inherit_env = true;                   // false: the child's environment is `env` alone
  std::optional<std::string> run_as_user;    // drop to this user (caller must be root)
  bool capture_output = true;                // stdout+stderr into CommandResult::output
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string stdin_data;                    // written to the child's stdin, then closed
};

struct CommandResult {
  int exit_code = -1;       // the exit status, or 128 + signal number when killed
  bool timed_out = false;
  std::string output;       // stdout and stderr interleaved (when captured)
};

// Runs argv[0] (looked up on PATH when it has no '/'). Fails only when the program could not
// be started at all; a non-zero exit is a successful Result with exit_code != 0.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const CommandOptions& options = {});

// "initdb -D /x" style rendering for logs and error messages.
std::string JoinCommand(const std::vector<std::string>& argv);

// Whether the process runs: it exists and is not a zombie. A killed daemon whose parent (a
// container's init that never reaps) leaves it a zombie still answers kill(pid, 0).
bool ProcessRuns(int pid);

}  // namespace sf
