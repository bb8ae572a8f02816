#include "tests/support/cleanup_watchdog.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace sf::testing {
namespace {

// Starts the watchdog and waits for its "ready PID" line; returns the pid, or an error message.
std::string Launch(int* fd_out, pid_t* pid_out) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return std::string("socketpair: ") + std::strerror(errno);
  }
  // Everything the child needs is prepared before fork: the test process may have threads, so
  // the child calls only async-signal-safe functions until exec.
  std::string program = SF_TEST_WATCHDOG;
  std::string test_pid = std::to_string(getpid());
  std::vector<char*> argv{program.data(), test_pid.data(), nullptr};
  const pid_t child = fork();
  if (child < 0) {
    close(sv[0]);
    close(sv[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (child == 0) {
    if (sv[1] == STDIN_FILENO) {
      fcntl(STDIN_FILENO, F_SETFD, 0);
    } else {
      dup2(sv[1], STDIN_FILENO);  // the copy is not close-on-exec
    }
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    // stderr stays (the watchdog reports what it cleaned up); nothing else may leak into a
    // process that outlives us (a pipe's reader would wait for its end-of-file).
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
      for (int fd = 3; fd < 4096; ++fd) close(fd);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(sv[1]);
  // The watchdog forks once more and its first process exits at once: reap it.
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    close(sv[0]);
    return "could not run " + program + " (exit status " + std::to_string(status) + ")";
  }
  std::string line;
  while (line.find('\n') == std::string::npos) {
    struct pollfd p = {sv[0], POLLIN, 0};
    const int r = poll(&p, 1, 10000);
    if (r < 0 && errno == EINTR) continue;
    char buf[64];
    const ssize_t n = r > 0 ? read(sv[0], buf, sizeof(buf)) : -1;
    if (n <= 0) {
      close(sv[0]);
      return program + " did not answer";
    }
    line.append(buf, static_cast<size_t>(n));
  }
  if (line.rfind("ready ", 0) != 0) {
    close(sv[0]);
    return program + " answered \"" + line + "\"";
  }
  *fd_out = sv[0];
  *pid_out = static_cast<pid_t>(std::atol(line.c_str() + 6));
  return "";
}

std::mutex g_start_mu;
CleanupWatchdog* g_watchdog = nullptr;

}  // namespace

CleanupWatchdog* CleanupWatchdog::Get() {
  std::lock_guard<std::mutex> lock(g_start_mu);
  if (g_watchdog) return g_watchdog;
  int fd = -1;
  pid_t pid = 0;
  const std::string error = Launch(&fd, &pid);
  if (!error.empty()) {
    ADD_FAILURE() << "cannot start the cleanup watchdog: " << error;
    return nullptr;
  }
  g_watchdog = new CleanupWatchdog(fd, pid);  // never deleted: see the header
  return g_watchdog;
}

void CleanupWatchdog::Send(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string text = line + "\n";
  size_t off = 0;
  while (off < text.size()) {
    // MSG_NOSIGNAL: a watchdog that died must not take the test down with SIGPIPE.
    const ssize_t n = send(fd_, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

void CleanupWatchdog::WatchProcessGroup(pid_t pgid) { Send("+group " + std::to_string(pgid)); }
void CleanupWatchdog::ForgetProcessGroup(pid_t pgid) { Send("-group " + std::to_string(pgid)); }
void CleanupWatchdog::WatchPostgres(const std::string& data_dir) { Send("+postgres " + data_dir); }
void CleanupWatchdog::ForgetPostgres(const std::string& data_dir) { Send("-postgres " + data_dir); }
void CleanupWatchdog::WatchEnvironment(const std::string& entry) { Send("+env " + entry); }
void CleanupWatchdog::ForgetEnvironment(const std::string& entry) { Send("-env " + entry); }
void CleanupWatchdog::WatchDirectory(const std::string& path) { Send("+dir " + path); }
void CleanupWatchdog::ForgetDirectory(const std::string& path) { Send("-dir " + path); }

}  // namespace sf::testing
