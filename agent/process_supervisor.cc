#include "agent/process_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "task/line_splitter.h"
#include "agent/logger.h"

extern char** environ;

namespace sf::agent {

const char* OutputStreamName(OutputStream stream) {
  return stream == OutputStream::kStdout ? "stdout" : "stderr";
}

struct ProcessSupervisor::Child {
  Child(size_t max_line) : out_lines(max_line), err_lines(max_line) {}
  ~Child() {
    if (out_fd >= 0) {
      close(out_fd);
    }
    if (err_fd >= 0) {
      close(err_fd);
    }
    if (pidfd >= 0) {
      close(pidfd);
    }
  }
  std::string task_id;
  pid_t pid = 0;
  int out_fd = -1;  // read ends of the output files
  int err_fd = -1;
  task::LineSplitter out_lines;
  task::LineSplitter err_lines;
  bool adopted = false;  // not our child: pidfd tells its exit, the status is unknown
  int pidfd = -1;
  bool kill_requested = false;
  bool sigkill_sent = false;
  std::chrono::steady_clock::time_point kill_deadline;
};

struct ProcessSupervisor::Event {
  bool is_exit = false;
  OutputLine line;
  ProcessExit exit;
};

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// RAII for the posix_spawn structures.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

}  // namespace

ProcessSupervisor::ProcessSupervisor(Callbacks callbacks, Options options)
    : callbacks_(std::move(callbacks)), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

ProcessSupervisor::~ProcessSupervisor() { Detach(); }

void ProcessSupervisor::Detach() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

Status ProcessSupervisor::Adopt(const AdoptSpec& spec) {
  // glibc 2.36's <sys/pidfd.h> lacks extern "C"; the raw system call is the same thing.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, spec.pid, 0));
  if (pidfd < 0) {
    return NotFound("process " + std::to_string(spec.pid) + ": " + ErrnoText(errno));
  }
  auto child = std::make_unique<Child>(options_.max_line_bytes);
  child->task_id = spec.task_id;
  child->pid = spec.pid;
  child->adopted = true;
  child->pidfd = pidfd;
  auto open_at = [](const std::string& path, int64_t offset, int* fd) -> Status {
    *fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (*fd < 0) {
      return Internal("cannot open " + path + ": " + ErrnoText(errno));
    }
    if (offset >= 0) {
      lseek(*fd, offset, SEEK_SET);
    } else {
      lseek(*fd, 0, SEEK_END);
    }
    return Status::Ok();
  };
  SF_RETURN_IF_ERROR(open_at(spec.stdout_path, spec.stdout_offset, &child->out_fd));
  SF_RETURN_IF_ERROR(open_at(spec.stderr_path, spec.stderr_offset, &child->err_fd));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (children_.count(spec.task_id)) {
      return FailedPrecondition("task " + spec.task_id + " is already supervised");
    }
    children_[spec.task_id] = std::move(child);
  }
  LogEvent(LogLevel::kInfo, "supervisor", "adopted",
           {{"task", spec.task_id}, {"pid", std::to_string(spec.pid)}});
  cv_.notify_all();
  return Status::Ok();
}

Result<pid_t> ProcessSupervisor::Start(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgument("empty command");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (children_.count(spec.task_id)) {
      return FailedPrecondition("task " + spec.task_id + " is already running");
    }
  }
  // Output files: the child gets write ends (O_APPEND), we keep read ends at offset 0.
  auto open_pair = [](const std::string& path, int* write_fd, int* read_fd) -> Status {
    *write_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (*write_fd < 0) {
      return Internal("cannot create " + path + ": " + ErrnoText(errno));
    }
    *read_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (*read_fd < 0) {
      int err = errno;
      close(*write_fd);
      *write_fd = -1;
      return Internal("cannot open " + path + ": " + ErrnoText(err));
    }
    return Status::Ok();
  };
  auto child = std::make_unique<Child>(options_.max_line_bytes);
  child->task_id = spec.task_id;
  int out_w = -1, err_w = -1;
  SF_RETURN_IF_ERROR(open_pair(spec.stdout_path, &out_w, &child->out_fd));
  Status err_status = open_pair(spec.stderr_path, &err_w, &child->err_fd);
  if (!err_status.ok()) {
    close(out_w);
    return err_status;
  }

  // Everything the child needs is built before the spawn (nothing allocates in the child).
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : spec.env) {
    env[k] = v;
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) {
    env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = spec.argv;
  std::vector<char*> argv;
  for (auto& a : argv_copy) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);

  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out_w, 1);
  posix_spawn_file_actions_adddup2(&setup.actions, err_w, 2);
  if (!spec.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&setup.actions, spec.working_dir.c_str());
  }
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  posix_spawnattr_setsigmask(&setup.attr, &empty_mask);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  bool search_path = spec.argv[0].find('/') == std::string::npos;
  int rc = search_path
               ? posix_spawnp(&pid, argv[0], &setup.actions, &setup.attr, argv.data(), envp.data())
               : posix_spawn(&pid, argv[0], &setup.actions, &setup.attr, argv.data(), envp.data());
  close(out_w);
  close(err_w);
  if (rc != 0) {
    return FailedPrecondition("cannot execute " + spec.argv[0] + ": " + ErrnoText(rc));
  }
  child->pid = pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    children_[spec.task_id] = std::move(child);
  }
  LogEvent(LogLevel::kDebug, "supervisor", "spawned",
           {{"task", spec.task_id}, {"pid", std::to_string(pid)}, {"program", spec.argv[0]}});
  cv_.notify_all();
  return pid;
}

Status ProcessSupervisor::Kill(const std::string& task_id, std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(task_id);
  if (it == children_.end()) {
    return NotFound("no running task " + task_id);
  }
  Child& child = *it->second;
  if (child.adopted) {
    pollfd p{child.pidfd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
      return Status::Ok();  // already gone; the loop reports it
    }
  }
  auto deadline = std::chrono::steady_clock::now() + grace;
  if (!child.kill_requested || deadline < child.kill_deadline) {
    child.kill_deadline = deadline;
  }
  child.kill_requested = true;
  if (grace.count() <= 0) {
    kill(-child.pid, SIGKILL);
    child.sigkill_sent = true;
  } else if (!child.sigkill_sent) {
    kill(-child.pid, SIGTERM);
  }
  LogEvent(LogLevel::kInfo, "supervisor", "kill",
           {{"task", task_id},
            {"pid", std::to_string(child.pid)},
            {"grace_ms", std::to_string(grace.count())}});
  cv_.notify_all();
  return Status::Ok();
}

void ProcessSupervisor::KillAll(std::chrono::milliseconds grace) {
  for (const RunningProcess& p : Running()) {
    (void)Kill(p.task_id, grace);
  }
}

std::vector<RunningProcess> ProcessSupervisor::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RunningProcess> out;
  for (const auto& [id, child] : children_) {
    RunningProcess p{id, child->pid, 0, 0};
    off_t out_pos = child->out_fd >= 0 ? lseek(child->out_fd, 0, SEEK_CUR) : 0;
    off_t err_pos = child->err_fd >= 0 ? lseek(child->err_fd, 0, SEEK_CUR) : 0;
    p.stdout_offset =
        static_cast<int64_t>(out_pos) - static_cast<int64_t>(child->out_lines.pending_bytes());
    p.stderr_offset =
        static_cast<int64_t>(err_pos) - static_cast<int64_t>(child->err_lines.pending_bytes());
    out.push_back(p);
  }
  return out;
}

bool ProcessSupervisor::WaitUntilIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return children_.empty() && exits_in_flight_ == 0; });
}

void ProcessSupervisor::ReadOutput(Child& child, bool final, std::vector<Event>* events) {
  char buf[65536];
  auto now = std::chrono::system_clock::now();
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    int fd = stream == OutputStream::kStdout ? child.out_fd : child.err_fd;
    task::LineSplitter& splitter = stream == OutputStream::kStdout ? child.out_lines : child.err_lines;
    std::vector<std::string> lines;
    // A regular file reads until its current end (0); each tick reads at most 1 MiB per stream
    // so one chatty process can't starve the others.
    for (int i = 0; fd >= 0 && i < 16; ++i) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      splitter.Append(std::string_view(buf, static_cast<size_t>(n)), &lines);
      if (static_cast<size_t>(n) < sizeof(buf) && !final) {
        break;
      }
      if (final) {
        i = 0;  // at exit: read everything there is
      }
    }
    if (final) {
      splitter.Flush(&lines);
    }
    for (auto& text : lines) {
      Event e;
      e.line.task_id = child.task_id;
      e.line.stream = stream;
      e.line.text = std::move(text);
      e.line.time = now;
      events->push_back(std::move(e));
    }
  }
}

void ProcessSupervisor::Tick(std::vector<Event>* events) {
  auto now = std::chrono::steady_clock::now();
  for (auto it = children_.begin(); it != children_.end();) {
    Child& child = *it->second;
    ReadOutput(child, /*final=*/false, events);
    auto adopted_gone = [&] {
      pollfd p{child.pidfd, POLLIN, 0};
      return child.adopted && poll(&p, 1, 0) > 0;
    };
    if (child.kill_requested && !child.sigkill_sent && now >= child.kill_deadline &&
        !adopted_gone()) {
      kill(-child.pid, SIGKILL);
      child.sigkill_sent = true;
      LogEvent(LogLevel::kInfo, "supervisor", "grace_expired_sigkill",
               {{"task", child.task_id}, {"pid", std::to_string(child.pid)}});
    }
    int exit_code = -1;
    if (child.adopted) {
      // Not our child: the pidfd turns readable when it exits; its status is not ours to see.
      pollfd p{child.pidfd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) {
        ++it;
        continue;
      }
    } else {
      // Peek without reaping, so the pid (== pgid) can't be reused while we signal the group.
      siginfo_t info;
      std::memset(&info, 0, sizeof(info));
      int rc = waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      bool exited = rc == 0 && info.si_pid == child.pid;
      if (rc != 0 && errno == ECHILD) {
        exited = true;  // reaped elsewhere: report it anyway
      }
      if (!exited) {
        ++it;
        continue;
      }
      kill(-child.pid, SIGKILL);  // the rest of its process group
      int status = 0;
      if (waitpid(child.pid, &status, 0) == child.pid) {
        if (WIFEXITED(status)) {
          exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          exit_code = 128 + WTERMSIG(status);
        }
      }
    }
    ReadOutput(child, /*final=*/true, events);
    Event e;
    e.is_exit = true;
    e.exit = ProcessExit{child.task_id, child.pid, exit_code, child.kill_requested, child.adopted};
    events->push_back(std::move(e));
    LogEvent(LogLevel::kInfo, "supervisor", "exited",
             {{"task", child.task_id},
              {"pid", std::to_string(child.pid)},
              {"exit_code", std::to_string(exit_code)}});
    ++exits_in_flight_;
    it = children_.erase(it);
  }
}

void ProcessSupervisor::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    std::vector<Event> events;
    Tick(&events);
    int exits = 0;
    if (!events.empty()) {
      lock.unlock();
      for (const Event& e : events) {
        if (e.is_exit) {
          ++exits;
          if (callbacks_.on_exit) {
            callbacks_.on_exit(e.exit);
          }
        } else if (callbacks_.on_line) {
          callbacks_.on_line(e.line);
        }
      }
      lock.lock();
      exits_in_flight_ -= exits;
      if (exits > 0) {
        cv_.notify_all();
      }
    }
    if (stop_) {
      break;
    }
    cv_.wait_for(lock, options_.poll_interval);
  }
}

}  // namespace sf::agent
