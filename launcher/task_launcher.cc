// sf-task: a program run as one task, its output shipped over TrialLink
// (launcher/task_launcher.h).
#include "launcher/task_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "task/line_splitter.h"
#include "task/user_task.h"
#include "core_api/steadfast_core.h"

namespace sf::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The lines waiting to be sent, and the sender's progress.
class LogQueue {
 public:
  explicit LogQueue(size_t max_lines) : max_lines_(max_lines) {}

  void Push(core::Context::LogLine line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (lines_.size() >= max_lines_) {
      lines_.pop_front();
      ++dropped_;
    }
    lines_.push_back(std::move(line));
    if (lines_.size() == 1) oldest_ = Clock::now();
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  // Up to `n` lines once `n` wait, the oldest has waited `every`, or the queue is closed; empty
  // when closed and drained.
  std::vector<core::Context::LogLine> Take(size_t n, std::chrono::milliseconds every, uint64_t* dropped) {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (lines_.size() >= n || closed_ || (!lines_.empty() && Clock::now() - oldest_ >= every)) break;
      if (lines_.empty()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, oldest_ + every);
      }
    }
    *dropped = dropped_;
    dropped_ = 0;
    std::vector<core::Context::LogLine> out;
    while (!lines_.empty() && out.size() < n) {
      out.push_back(std::move(lines_.front()));
      lines_.pop_front();
    }
    oldest_ = Clock::now();
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<core::Context::LogLine> lines_;
  Clock::time_point oldest_{};
  size_t max_lines_;
  uint64_t dropped_ = 0;
  bool closed_ = false;
};

std::string RandomIncarnation() {
  std::random_device rd;
  static const char kHex[] = "0123456789abcdef";
  std::string out = std::to_string(getpid()) + "-";
  for (int i = 0; i < 16; ++i) out += kHex[rd() & 15];
  return out;
}

// Reads `fd` to its end: each line is copied to `echo` and queued under `stream`.
void Pump(int fd, const char* stream, FILE* echo, LogQueue* queue, FILE* copy = nullptr) {
  task::LineSplitter splitter;
  std::vector<std::string> lines;
  char buf[65536];
  auto emit = [&] {
    for (std::string& l : lines) {
      std::fprintf(echo, "%s\n", l.c_str());
      if (copy) std::fprintf(copy, "%s\n", l.c_str());
      queue->Push({stream, std::move(l), std::chrono::system_clock::now()});
    }
    std::fflush(echo);
    if (copy) std::fflush(copy);
    lines.clear();
  };
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    splitter.Append(std::string_view(buf, static_cast<size_t>(n)), &lines);
    emit();
  }
  splitter.Flush(&lines);
  emit();
  close(fd);
}

volatile sig_atomic_t g_child_group = 0;

void ForwardSignal(int sig) {
  if (g_child_group > 0) kill(-g_child_group, sig);
}

}  // namespace

int RunTask(const TaskOptions& options) {
  if (options.argv.empty()) {
    std::fprintf(stderr, "sf-task: no program to run\n");
    return 2;
  }
  auto connected = core::Context::FromEnvironment();
  if (!connected.ok()) {
    std::fprintf(stderr, "sf-task: the task's environment: %s\n", connected.status().message().c_str());
    return 2;
  }
  std::unique_ptr<core::Context> ctx = std::move(connected).value();

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "sf-task: pipe: %s\n", std::strerror(errno));
    return 127;
  }
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "sf-task: fork: %s\n", std::strerror(errno));
    return 127;
  }
  if (child == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "sf-task: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(child, child);  // also here: no race with a signal arriving before the child's own call
  g_child_group = child;
  close(out_pipe[1]);
  close(err_pipe[1]);
  struct sigaction forward {};
  forward.sa_handler = ForwardSignal;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &forward, nullptr);

  LogQueue queue(options.max_queued_lines);
  std::thread out_reader(Pump, out_pipe[0], "stdout", stdout, &queue, nullptr);
  FILE* stderr_copy = options.stderr_copy.empty() ? nullptr : std::fopen(options.stderr_copy.c_str(), "w");
  std::thread err_reader(Pump, err_pipe[0], "stderr", stderr, &queue, stderr_copy);
  const std::string incarnation = RandomIncarnation();
  std::atomic<bool> give_up{false};
  std::thread sender([&] {
    int64_t sequence = 0;
    while (true) {
      uint64_t dropped = 0;
      std::vector<core::Context::LogLine> batch = queue.Take(options.batch_lines, options.flush_every, &dropped);
      if (dropped > 0) {
        batch.insert(batch.begin(), {"stderr", "[sf-task] " + std::to_string(dropped) +
                                                   " earlier lines of this task were dropped (the master was not "
                                                   "taking them fast enough)",
                                     std::chrono::system_clock::now()});
      }
      if (batch.empty()) return;  // closed and drained
      ++sequence;
      // The Core API retries what is transient for five minutes; a lasting refusal drops the batch.
      while (true) {
        Status st = ctx->ReportLogs(incarnation, sequence, batch);
        if (st.ok()) break;
        std::fprintf(stderr, "sf-task: %zu lines not sent: %s\n", batch.size(), st.message().c_str());
        if (give_up) break;
        if (st.code() != StatusCode::kUnavailable) break;
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  });

  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child_group = 0;
  out_reader.join();  // the pipes end when the program (and whatever it left holding them) is gone
  err_reader.join();
  if (stderr_copy) std::fclose(stderr_copy);
  queue.Close();
  // What is queued goes out, for up to `drain`.
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  std::thread waiter([&] {
    sender.join();
    std::lock_guard<std::mutex> lock(done_mu);
    done = true;
    done_cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(done_mu);
    if (!done_cv.wait_for(lock, options.drain, [&] { return done; })) {
      give_up = true;
      std::fprintf(stderr, "sf-task: output not all sent within %lld s; exiting\n",
                   static_cast<long long>(options.drain.count()));
      std::fflush(stderr);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      _exit(code);  // the sender may sit in a call for minutes: do not wait for it
    }
  }
  waiter.join();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (options.report_exit && WIFEXITED(status) && code != 0) {
    Status st = ctx->ReportExit(code, task::FailureReason(code, options.stderr_copy));
    if (!st.ok()) std::fprintf(stderr, "sf-task: the exit was not reported: %s\n", st.message().c_str());
  }
  return code;
}

}  // namespace sf::launcher
