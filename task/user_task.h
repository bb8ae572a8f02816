// User trials on the agent (docs/core-api.md): what differs from starting `sf-trainer cluster`
// when a StartTask carries an `entrypoint`.
//
// - The context: StartTask.context_sha256 names the experiment's context archive. ContextCache
//   fetches it once per digest from the master (TrialLink.GetContext, authorised by the task's
//   own token), checks the digest, and keeps it under <work_dir>/contexts/<sha256>.tar.gz;
//   every task then gets a fresh copy unpacked into <task dir>/code, its working directory.
// - The command: EntrypointArgv turns StartTask.entrypoint into argv (a shell line runs under
//   /bin/sh -c; a kill signals the task's whole process group, the user's program with it). A
//   list whose program is one of the agent's own (`sf-trainer`, `sf-serve`: the servers
//   `sf serve start` schedules) runs the agent's copy of it (`programs`), not PATH's.
// - The environment, on top of TaskEnvironment's: SF_LOCAL_RANK, SF_LOCAL_SIZE,
//   PYTHONUNBUFFERED=1 and the agent's `steadfast` package first on
//   PYTHONPATH (UserTaskEnvironment).
// - The failure reason: PythonExceptionLine finds the last exception of a Python traceback in
//   a task's stderr ("ValueError: bad shape").
//
// ContextCache is thread-safe (one fetch per digest at a time); the functions are pure.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "steadfast/v1/agent_link.pb.h"

namespace sf::task {

class ContextCache {
 public:
  // `work_dir`: the agent's; `ca_pem`: the master's CA (TLS) or empty (plaintext).
  ContextCache(std::string work_dir, std::string ca_pem);

  // The path of the archive `start` names, fetched from `master` (host:port of TrialLink) when
  // it is not cached yet. Errors name the experiment and what failed (kUnavailable when the
  // master can't be reached, kDataLoss on a digest mismatch).
  Result<std::string> Get(const steadfast::v1::StartTask& start, const std::string& master);

 private:
  std::string dir_;
  std::string ca_pem_;
  std::mutex mu_;
};

// Unpacks the archive at `archive_path` into `destination` (fresh: an existing one is removed
// first).
Status UnpackTaskContext(const std::string& archive_path, const std::string& destination);

// The process's argv for StartTask.entrypoint (empty when it has none).
std::vector<std::string> EntrypointArgv(const steadfast::v1::StartTask& start,
                                        const std::map<std::string, std::string>& programs = {});

// Adds the user-trial variables to `env` (see the header comment). `python_path` may be empty.
void AddUserTaskEnvironment(const steadfast::v1::StartTask& start, const std::string& python_path,
                            std::map<std::string, std::string>& env);

// The first line of the last exception of the last Python traceback in the file (its final
// 256 KiB), e.g. "ValueError: bad shape"; empty when it holds no traceback.
std::string PythonExceptionLine(const std::string& stderr_path);

// The line of a failed program's stderr that says why: the first "sf-trainer ..." error line,
// else the first line mentioning an error, else the last line; structured info, warning and
// debug lines ("I 2026-...") are never the reason. At most 300 bytes; empty when there is none.
std::string FirstErrorLine(const std::string& stderr_path);

// Why a task that exited with `code` (not 0, not a signal) failed, from its stderr: a Python
// traceback's last exception ("ValueError: bad shape"), else "exit status N: <first error line>",
// else "exit status N". Used by the agent and by sf-task under Slurm.
std::string FailureReason(int code, const std::string& stderr_path);

}  // namespace sf::task
