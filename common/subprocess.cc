#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace sf {

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a.find_first_of(" \t\"'") == std::string::npos ? a : "'" + a + "'";
  }
  return out;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const CommandOptions& options) {
  if (argv.empty()) return InvalidArgument("RunCommand: empty argument vector");
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  if (options.run_as_user) {
    struct passwd* pw = getpwnam(options.run_as_user->c_str());
    if (!pw) return NotFound("user \"" + *options.run_as_user + "\" does not exist");
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    home = pw->pw_dir;
  }
  int out_pipe[2] = {-1, -1};
  int in_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};  // reports exec failure to the parent (close-on-exec)
  if (pipe2(err_pipe, O_CLOEXEC) != 0 || pipe2(in_pipe, O_CLOEXEC) != 0 ||
      (options.capture_output && pipe2(out_pipe, O_CLOEXEC) != 0)) {
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; options.inherit_env && *e; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    if (!options.env.count(key) && !(options.run_as_user && (key == "HOME" || key == "USER"))) {
      env_strings.push_back(kv);
    }
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  if (options.run_as_user) {
    env_strings.push_back("HOME=" + home);
    env_strings.push_back("USER=" + *options.run_as_user);
  }
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    auto fail = [&](const char* what) {
      int e = errno;
      std::string msg = std::string(what) + ": " + std::strerror(e);
      ssize_t ignored = write(err_pipe[1], msg.data(), msg.size());
      (void)ignored;
      _exit(127);
    };
    setpgid(0, 0);  // own process group, so a timeout kills the whole tree
    dup2(in_pipe[0], STDIN_FILENO);
    if (options.capture_output) {
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(out_pipe[1], STDERR_FILENO);
    }
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) fail("chdir");
    if (options.run_as_user) {
      if (setgroups(0, nullptr) != 0) fail("setgroups");
      if (setgid(gid) != 0) fail("setgid");
      if (setuid(uid) != 0) fail("setuid");
    }
    // Die with the caller (set after setuid, which clears it): the calling thread blocks until
    // the command ends, so the command outliving it means the whole process died.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // it died before prctl
    execvpe(args[0], args.data(), envp.data());
    fail(("exec " + argv[0]).c_str());
  }
  close(err_pipe[1]);
  close(in_pipe[0]);
  if (options.capture_output) close(out_pipe[1]);

  // Feed stdin (small payloads only: tests and tool invocations), then close it.
  if (!options.stdin_data.empty()) {
    size_t off = 0;
    while (off < options.stdin_data.size()) {
      ssize_t n = write(in_pipe[1], options.stdin_data.data() + off, options.stdin_data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  close(in_pipe[1]);

  CommandResult result;
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  if (options.capture_output) {
    char buf[65536];
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        break;
      }
      struct pollfd p = {out_pipe[0], POLLIN, 0};
      int r = poll(&p, 1, static_cast<int>(std::min<long>(left, 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue;
      ssize_t n = read(out_pipe[0], buf, sizeof(buf));
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
    }
    close(out_pipe[0]);
  }
  int status = 0;
  while (true) {
    pid_t w = waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return Internal(std::string("waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline && !result.timed_out) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      continue;
    }
    usleep(2000);
  }
  std::string exec_error;
  char ebuf[512];
  ssize_t en = read(err_pipe[0], ebuf, sizeof(ebuf));
  if (en > 0) exec_error.assign(ebuf, static_cast<size_t>(en));
  close(err_pipe[0]);
  if (!exec_error.empty()) return Unavailable(JoinCommand(argv) + ": " + exec_error);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

bool ProcessRuns(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: trust kill()
  const size_t paren = line.rfind(')');  // the state follows the command's closing parenthesis
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

}  // namespace sf
