// Cleanup that survives the test process: servers, daemons, trainers and directories that a test
// starts are registered here, and if the test process dies without stopping them (SIGKILL, a
// crash, a CTest timeout, an abort in the middle of a test) a separate watchdog process stops
// them instead, within a few seconds.
//
// How it works: on first use, Get() starts `sf-test-watchdog` (cleanup_watchdog_main.cc) with one
// end of a Unix socket as its stdin; the test process keeps the other end, close-on-exec, so no
// child inherits it. The watchdog detaches (its own session, no longer the test's child) and
// waits. When the test process ends, however it ends, the kernel closes its end and the watchdog
// reads end-of-file: it then SIGKILLs the registered process groups, shuts the registered
// PostgreSQL data directories down immediately, SIGKILLs the processes whose environment holds a
// registered entry, and removes the registered directories.
//
// The normal path is unchanged: destructors and atexit handlers stop everything cleanly and then
// Forget*() what they stopped, so the watchdog, seeing end-of-file, has nothing left to do. Forget
// a process group only after the process was reaped, and a directory only after it was removed,
// so nothing is left unguarded in between; the watchdog never kills a group it was told to
// forget (whose id may be reused by then).
//
// Thread-safe. The watchdog lives as long as the process (never destroyed, so static destructors
// may still call Forget*()).
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>

namespace sf::testing {

class CleanupWatchdog {
 public:
  // The watchdog of this process, started on first use. Fails the calling test (and returns
  // nullptr) when it cannot be started.
  static CleanupWatchdog* Get();

  // A process group (e.g. a daemon started with setpgid(0, 0)): SIGKILLed.
  void WatchProcessGroup(pid_t pgid);
  void ForgetProcessGroup(pid_t pgid);
  // A PostgreSQL data directory (the one holding postmaster.pid): its postmaster, whatever its
  // pid is by then (a test may restart the server), gets an immediate shutdown.
  void WatchPostgres(const std::string& data_dir);
  void ForgetPostgres(const std::string& data_dir);
  // Every process whose environment holds `entry` ("NAME=value", e.g. the SF_MASTER_ADDRESS of
  // one cluster's trainers, which run in sessions of their own): SIGKILLed with its group.
  void WatchEnvironment(const std::string& entry);
  void ForgetEnvironment(const std::string& entry);
  // A directory, removed (recursively) after every process above is dead.
  void WatchDirectory(const std::string& path);
  void ForgetDirectory(const std::string& path);

  // The watchdog's pid (it is not our child).
  pid_t pid() const { return pid_; }

 private:
  CleanupWatchdog(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  void Send(const std::string& line);

  std::mutex mu_;
  int fd_;
  pid_t pid_;
};

}  // namespace sf::testing
