// sf-test-watchdog: the process that cleans up after a test process which died without running
// its destructors (SIGKILL, a crash, a CTest timeout). Started by sf::testing::CleanupWatchdog
// (tests/support/cleanup_watchdog.h); not meant to be run by hand.
//
//   sf-test-watchdog TEST_PID
//
// stdin is one end of a Unix socket whose other end only the test process holds (close-on-exec,
// so no server or trainer inherits it). The watchdog first detaches (setsid, then a second fork
// so it is no longer the test's child: whoever kills the test's process tree or its terminal's
// process group does not take the watchdog along), answers "ready PID\n", and then reads lines
// that register (+) or forget (-) what to clean up:
//
//   +group PGID     a process group (master, agent) to SIGKILL
//   +postgres DIR   a PostgreSQL data directory: immediate shutdown (SIGQUIT) of the postmaster
//                   named in DIR/postmaster.pid, SIGKILL if it still runs 10 s later
//   +env NAME=VALUE processes whose environment holds this entry (the trainers of one cluster,
//                   which run in sessions of their own): SIGKILL them and their process groups
//   +dir PATH       a directory to remove once everything above is dead
//
// End of file on stdin means every copy of the test's end is closed: the test process is gone.
// The watchdog then cleans up whatever is still registered, in the order above, and exits. In the
// normal path the test forgot everything it stopped itself, so there is nothing to do.
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/read_file.h"

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Registry {
  std::set<pid_t> groups;
  std::set<std::string> postgres_dirs;
  std::set<std::string> env_entries;
  std::set<std::string> dirs;

  bool empty() const {
    return groups.empty() && postgres_dirs.empty() && env_entries.empty() && dirs.empty();
  }

  // Applies one protocol line; unknown lines are ignored.
  void Apply(const std::string& line) {
    if (line.size() < 2 || (line[0] != '+' && line[0] != '-')) return;
    const bool add = line[0] == '+';
    const size_t space = line.find(' ');
    if (space == std::string::npos) return;
    const std::string kind = line.substr(1, space - 1);
    const std::string arg = line.substr(space + 1);
    auto update = [&](std::set<std::string>& set) {
      add ? (void)set.insert(arg) : (void)set.erase(arg);
    };
    if (kind == "group") {
      const pid_t pgid = static_cast<pid_t>(std::atol(arg.c_str()));
      if (pgid <= 1) return;  // never kill(-1) or kill(0)
      add ? (void)groups.insert(pgid) : (void)groups.erase(pgid);
    } else if (kind == "postgres") {
      update(postgres_dirs);
    } else if (kind == "env") {
      update(env_entries);
    } else if (kind == "dir") {
      update(dirs);
    }
  }
};

std::string ReadFile(const std::string& path) { return sf::testing::ReadFileOrEmpty(path); }

// True when `pid` exists and is not a zombie (a zombie has exited; only its parent's wait is
// missing, and in a container PID 1 may never reap it).
bool Running(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// Members of process group `pgid` that still run.
bool GroupRunning(pid_t pgid) {
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (getpgid(pid) == pgid && Running(pid)) return true;
  }
  return false;
}

// The postmaster's pid from DATA_DIR/postmaster.pid, when that process is still a postgres.
pid_t PostmasterPid(const std::string& data_dir) {
  const std::string text = ReadFile(data_dir + "/postmaster.pid");
  const pid_t pid = static_cast<pid_t>(std::atol(text.c_str()));
  if (pid <= 1) return 0;
  std::string comm = ReadFile("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm == "postgres" ? pid : 0;  // a stale file whose pid now names something else
}

// SIGKILLs every process (and its process group when it leads one) whose environment holds
// one of `entries`; returns how many it found.
int KillByEnvironment(const std::set<std::string>& entries) {
  int found = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (pid == getpid()) continue;  // we inherited the test's environment
    const std::string env = ReadFile(entry.path().string() + "/environ");
    bool match = false;
    for (size_t pos = 0; pos < env.size() && !match;) {
      size_t end = env.find('\0', pos);
      if (end == std::string::npos) end = env.size();
      match = entries.count(env.substr(pos, end - pos)) > 0;
      pos = end + 1;
    }
    if (!match || !Running(pid)) continue;
    ++found;
    if (getpgid(pid) == pid) kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  return found;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  // Read-only directories inside (tests of read-only data) get their write bit back first.
  for (auto it = fs::recursive_directory_iterator(path, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
  }
  fs::remove_all(path, ec);
}

template <typename Pred>
bool WaitUntil(Pred done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void CleanUp(const Registry& r, const std::string& test_pid) {
  const std::string me = "sf-test-watchdog: test process " + test_pid + " died; ";
  std::vector<pid_t> postmasters;
  // Returns whether every registered data directory had a postmaster to stop.
  auto shut_down_postgres = [&] {
    bool all = true;
    for (const std::string& dir : r.postgres_dirs) {
      const pid_t pid = PostmasterPid(dir);
      all = all && pid != 0;
      if (pid == 0 || std::find(postmasters.begin(), postmasters.end(), pid) != postmasters.end()) {
        continue;
      }
      std::cerr << me << "immediate shutdown of PostgreSQL " << pid << " (" << dir << ")\n";
      kill(pid, SIGQUIT);
      postmasters.push_back(pid);
    }
    return all;
  };
  const bool every_postmaster_found = shut_down_postgres();
  for (pid_t pgid : r.groups) {
    if (kill(-pgid, SIGKILL) == 0) std::cerr << me << "killed process group " << pgid << "\n";
  }
  // Killed processes start no new ones; wait for them so the scan below sees every trainer.
  WaitUntil(
      [&] {
        for (pid_t pgid : r.groups) {
          if (GroupRunning(pgid)) return false;
        }
        return true;
      },
      std::chrono::seconds(5));
  if (!r.env_entries.empty()) {
    // Twice: a trainer forked just before its agent died may show up a moment later.
    int killed = KillByEnvironment(r.env_entries);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    killed += KillByEnvironment(r.env_entries);
    if (killed > 0) std::cerr << me << "killed " << killed << " trainer process(es) and helpers\n";
  }
  // A `pg_ctl start` that was under way when the test died (RunCommand's child dies with the
  // test, but the server it forked does not) writes postmaster.pid a moment later: look again.
  if (!every_postmaster_found) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  shut_down_postgres();
  for (pid_t pid : postmasters) {
    if (!WaitUntil([&] { return !Running(pid); }, std::chrono::seconds(10))) kill(pid, SIGKILL);
  }
  for (const std::string& dir : r.dirs) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) continue;
    std::cerr << me << "removing " << dir << "\n";
    RemoveTree(dir);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string test_pid = argc > 1 ? argv[1] : "?";
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  // Detach: a session of our own (no terminal signals), then leave the test's process tree.
  setsid();
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child > 0) _exit(0);  // the test reaps this intermediate process

  const std::string ready = "ready " + std::to_string(getpid()) + "\n";
  if (write(STDIN_FILENO, ready.data(), ready.size()) != static_cast<ssize_t>(ready.size()))
    return 1;

  Registry registry;
  std::string pending;
  char buf[4096];
  while (true) {
    const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF (or the socket broke): the test process is gone
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      registry.Apply(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  if (!registry.empty()) CleanUp(registry, test_pid);
  return 0;
}
