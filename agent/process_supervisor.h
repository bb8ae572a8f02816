// Running trainer processes: spawn, capture output line by line, reap, kill.
//
// Each process starts in a session and process group of its own (setsid: pgid == pid), with
// stdin on /dev/null, default signal dispositions, an empty signal mask, and stdout/stderr
// written to two files (ProcessSpec::stdout_path/stderr_path). Files, not pipes: a trainer
// must outlive its agent (agent restart, agent upgrade), and a trainer writing to a pipe whose
// reader is gone dies of SIGPIPE. The supervisor tails those files without blocking.
//
// One supervisor thread does all the work, every `poll_interval` (default 20 ms) or sooner
// when woken: it reads new output of every child and splits it into lines (task::LineSplitter:
// 16 KiB pieces, valid UTF-8), checks for exits with waitid(WNOHANG) (no SIGCHLD handler, so
// it is safe beside any other code), and escalates kills whose grace period has run out. When
// a process exits, its remaining output is read, a partial last line is flushed, every other
// member of its process group is SIGKILLed (no orphaned helpers hold on to a slot), and then
// on_exit is called. Callbacks therefore arrive on the supervisor thread, in order: every line
// of a process before its exit. They must not block for long and must not call Stop().
//
// Adopt() takes over a process that a previous agent started (an agent restart): it is not our
// child, so its exit is noticed through a pidfd and its exit status is unknown (exit_code -1),
// and its group is not SIGKILLed after it exits (its pid may already be reused).
//
// Thread-safe: Start, Adopt, Kill, KillAll, Running and WaitUntilIdle may be called from any
// thread (also from the callbacks). Detach() (and the destructor) stops the thread; processes
// still running are left running (their output keeps going to their files).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace sf::agent {

enum class OutputStream { kStdout, kStderr };
// "stdout" | "stderr" (the LogLine.stream names).
const char* OutputStreamName(OutputStream stream);

struct ProcessSpec {
  std::string task_id;                     // unique among running processes
  std::vector<std::string> argv;           // argv[0]: a path, or a name looked up on PATH
  std::map<std::string, std::string> env;  // added to (or overriding) the agent's environment
  std::string working_dir;                 // must exist; empty: the agent's
  std::string stdout_path;                 // created or truncated; the child's stdout
  std::string stderr_path;                 // created or truncated; the child's stderr
};

struct OutputLine {
  std::string task_id;
  OutputStream stream = OutputStream::kStdout;
  std::string text;  // without the newline; valid UTF-8, at most 16 KiB
  std::chrono::system_clock::time_point time;
};

struct ProcessExit {
  std::string task_id;
  pid_t pid = 0;
  int exit_code = 0;            // exit status, or 128 + signal number; -1 when unknown (adopted)
  bool kill_requested = false;  // Kill/KillAll was called for it
  bool adopted = false;         // supervised through Adopt()
};

struct RunningProcess {
  std::string task_id;
  pid_t pid = 0;
  // How far each output file has been turned into lines (bytes); where an adopter resumes.
  int64_t stdout_offset = 0;
  int64_t stderr_offset = 0;
};

// A process started by someone else (a previous agent) to be supervised from now on.
struct AdoptSpec {
  std::string task_id;
  pid_t pid = 0;
  std::string stdout_path;
  std::string stderr_path;
  int64_t stdout_offset = -1;  // resume reading here; -1: at the current end of the file
  int64_t stderr_offset = -1;
};

class ProcessSupervisor {
 public:
  struct Callbacks {
    std::function<void(const OutputLine&)> on_line;
    std::function<void(const ProcessExit&)> on_exit;
  };
  struct Options {
    std::chrono::milliseconds poll_interval{20};
    size_t max_line_bytes = 16 * 1024;
  };

  ProcessSupervisor(Callbacks callbacks, Options options);
  explicit ProcessSupervisor(Callbacks callbacks)
      : ProcessSupervisor(std::move(callbacks), Options{}) {}
  ~ProcessSupervisor();
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts a process; returns its pid. Fails (nothing left running) when the task id is in
  // use, an output file can't be created, or the program can't be executed (the message names
  // the program and the system error).
  Result<pid_t> Start(const ProcessSpec& spec);

  // Supervises a running process that is not our child. Fails when it is not running or its
  // output files can't be opened.
  Status Adopt(const AdoptSpec& spec);

  // SIGTERM to the process group now, SIGKILL to it once `grace` has passed (grace 0: SIGKILL
  // at once). A second Kill can only shorten the deadline. NotFound when no such task runs.
  Status Kill(const std::string& task_id, std::chrono::milliseconds grace);
  // Kill() for every running process.
  void KillAll(std::chrono::milliseconds grace);

  // The processes not yet reaped.
  std::vector<RunningProcess> Running() const;

  // Waits until no process is left (each exit reported), or `timeout`; true when none is left.
  bool WaitUntilIdle(std::chrono::milliseconds timeout);

  // Stops watching: no more callbacks after it returns. Processes keep running; Running() still
  // lists them (with final offsets); Kill still signals them. Idempotent.
  void Detach();

 private:
  struct Child;
  struct Event;
  void Loop();
  void Tick(std::vector<Event>* events);
  void ReadOutput(Child& child, bool final, std::vector<Event>* events);

  Callbacks callbacks_;
  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the loop; signals WaitUntilIdle
  bool stop_ = false;
  std::map<std::string, std::unique_ptr<Child>> children_;
  int exits_in_flight_ = 0;  // exits taken out of children_ whose callbacks have not returned
  std::thread thread_;
};

}  // namespace sf::agent
