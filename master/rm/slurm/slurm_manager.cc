#include "master/rm/slurm/slurm_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>

#include "common/log.h"
#include "common/subprocess.h"

namespace sf::master::rm::slurm {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// How long a tracked job may be unknown to both squeue and sacct before its allocation ends.
constexpr std::chrono::seconds kUnknownGrace{60};

// Created with `mode` from the start (never readable by others, even briefly).
Status WritePrivate(const fs::path& path, const std::string& data, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Internal("cannot write " + path.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == data.size() && ::fchmod(fd, mode) == 0;  // an existing file keeps its mode otherwise
  ::close(fd);
  return ok ? Status::Ok() : Internal("cannot write " + path.string());
}

std::string LastLines(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  for (char& c : t) {
    if (c == '\n') c = ' ';
  }
  return t.size() > 600 ? t.substr(t.size() - 600) : t;
}

}  // namespace

SlurmManager::SlurmManager(std::string pool_name, SlurmPoolConfig config)
    : pool_(std::move(pool_name)), config_(std::move(config)) {}

SlurmManager::~SlurmManager() { Stop(); }

std::map<std::string, std::string> SlurmManager::ToolEnv() const {
  std::map<std::string, std::string> env;
  const char* path = std::getenv("PATH");
  env["PATH"] = path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  if (const char* home = std::getenv("HOME")) env["HOME"] = home;
  env["LANG"] = "C.UTF-8";
  if (!config_.slurm_conf.empty()) {
    env["SLURM_CONF"] = config_.slurm_conf;
  } else if (const char* conf = std::getenv("SLURM_CONF")) {
    env["SLURM_CONF"] = conf;
  }
  return env;
}

Result<std::string> SlurmManager::Tool(const std::vector<std::string>& argv,
                                       const std::map<std::string, std::string>& extra_env) {
  CommandOptions options;
  options.env = ToolEnv();
  for (const auto& [k, v] : extra_env) options.env[k] = v;
  options.inherit_env = false;
  options.timeout = std::chrono::seconds(30);
  Result<CommandResult> r = RunCommand(argv, options);
  if (!r.ok()) {
    return Status(StatusCode::kUnavailable,
                  "resource pool " + pool_ + ": cannot run " + argv[0] + ": " + r.status().message());
  }
  if (r->timed_out) return Status(StatusCode::kUnavailable, argv[0] + " did not answer within 30 s");
  if (r->exit_code != 0) {
    return Status(StatusCode::kFailedPrecondition,
                  argv[0] + " exited with status " + std::to_string(r->exit_code) + ": " + LastLines(r->output));
  }
  return r->output;
}

Status SlurmManager::Check() {
  const std::string at = "resource pool " + pool_ + " (manager: slurm): ";
  for (const char* tool : {"sbatch", "squeue", "scancel", "sacct", "scontrol"}) {
    Result<std::string> v = Tool({tool, "--version"});
    if (!v.ok()) {
      return FailedPrecondition(at + "the Slurm tool " + tool + " does not run (" + v.status().message() +
                                "); install slurm-client (Debian: slurm-wlm) on the master's machine");
    }
  }
  Result<std::string> part = Tool({"scontrol", "show", "partition", config_.partition});
  if (!part.ok() || part->find("PartitionName=" + config_.partition) == std::string::npos) {
    std::string known;
    if (Result<std::string> all = Tool({"sinfo", "-h", "-o", "%R"}); all.ok()) {
      std::string names = *all;
      for (char& c : names) {
        if (c == '\n') c = ' ';
      }
      known = "; its partitions: " + LastLines(names);
    }
    return FailedPrecondition(at + "Slurm has no partition \"" + config_.partition + "\"" + known +
                              (part.ok() ? "" : " (" + part.status().message() + ")"));
  }
  if (config_.job_dir.empty()) return FailedPrecondition(at + "job_dir is not set");
  std::error_code ec;
  fs::create_directories(config_.job_dir, ec);
  if (ec) return FailedPrecondition(at + "cannot create job_dir " + config_.job_dir + ": " + ec.message());
  return Status::Ok();
}

void SlurmManager::SetEventSink(EventSink sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = std::move(sink);
}

void SlurmManager::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void SlurmManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlurmManager::Submit(GangLaunch launch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    to_submit_.push_back(std::move(launch));
  }
  wake_.notify_all();
}

void SlurmManager::Adopt(const GangLaunch& gang, const std::string& external_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_[gang.allocation_id];
  j.allocation_id = gang.allocation_id;
  j.job_id = external_id;
  j.world_size = gang.world_size;
  j.last_seen = Clock::now();
}

void SlurmManager::Kill(const std::string& allocation_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = to_submit_.begin(); it != to_submit_.end(); ++it) {
      if (it->allocation_id != allocation_id) continue;
      withdrawn_.emplace_back(allocation_id, static_cast<int>(it->ranks.size()));  // before sbatch
      to_submit_.erase(it);
      break;
    }
    auto it = jobs_.find(allocation_id);
    if (it != jobs_.end()) {
      it->second.killed = true;
    } else {
      killed_in_flight_.insert(allocation_id);  // perhaps being submitted right now
    }
  }
  wake_.notify_all();
}

void SlurmManager::Loop() {
  bool sweep = true;
  std::unique_lock<std::mutex> lock(mu_);
  const auto every = std::chrono::milliseconds(static_cast<int64_t>(config_.poll_seconds * 1000));
  while (!stopping_) {
    lock.unlock();
    std::vector<AllocationEvent> events = Pass(sweep);
    sweep = false;
    lock.lock();
    EventSink sink = sink_;
    lock.unlock();
    for (const AllocationEvent& e : events) {
      if (sink) sink(e);
    }
    lock.lock();
    wake_.wait_for(lock, every, [&] {
      if (stopping_ || !to_submit_.empty() || !withdrawn_.empty()) return true;
      for (const auto& [id, j] : jobs_) {
        if (j.killed && !j.cancel_sent) return true;
      }
      return false;
    });
  }
}

void SlurmManager::PollSize() {
  Result<std::string> out = Tool({"sinfo", "-h", "-N", "-p", config_.partition, "-o", "%N|%t"});
  if (!out.ok()) {
    log::Warn("slurm", {{"event", "sinfo_failed"}, {"pool", pool_}, {"error", out.status().message()}});
    return;  // keep the last answer
  }
  const PoolSize size = ParseSinfoNodes(*out, config_.slots_per_node);
  std::lock_guard<std::mutex> lock(size_mu_);
  size_ = size;
}

PoolSize SlurmManager::Size() const {
  std::lock_guard<std::mutex> lock(size_mu_);
  return size_;
}

PoolSize SlurmManager::Capacity(const std::string& pool) const {
  if (pool != pool_) return {};
  return Size();
}

std::vector<steadfast::v1::ResourcePool> SlurmManager::Pools() const {
  const PoolSize size = Size();
  steadfast::v1::ResourcePool p;
  p.set_name(pool_);
  p.set_scheduler(Kind());
  p.set_nodes(size.nodes);
  p.set_total_slots(size.slots);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, job] : jobs_) {
    if (job.running) {
      p.set_used_slots(p.used_slots() + job.world_size);
    } else {
      p.set_queued_trials(p.queued_trials() + 1);
      p.set_queued_slots(p.queued_slots() + job.world_size);
    }
  }
  for (const GangLaunch& g : to_submit_) {
    p.set_queued_trials(p.queued_trials() + 1);
    p.set_queued_slots(p.queued_slots() + g.world_size);
  }
  return {p};
}

AllocationEvent SlurmManager::SubmitNow(const GangLaunch& launch, std::string* job_id) {
  AllocationEvent refused;
  refused.kind = AllocationEvent::Kind::kExited;
  refused.allocation_id = launch.allocation_id;
  refused.refused = true;
  for (size_t rank = 0; rank < std::max<size_t>(1, launch.ranks.size()); ++rank) refused.exit_codes[rank] = -1;
  const fs::path dir = fs::path(config_.job_dir) / launch.allocation_id;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    refused.refused = false;  // the filesystem, not the request: worth a restart
    refused.reason = "cannot create the Slurm job directory " + dir.string() + ": " + ec.message();
    return refused;
  }
  ::chmod(dir.c_str(), 0700);
  std::string tokens;
  for (size_t rank = 0; rank < launch.ranks.size(); ++rank) {
    steadfast::v1::StartTask task = launch.ranks[rank];
    tokens += (rank ? "," : "") + task.task_token();
    task.clear_task_token();  // in the job's environment only
    Status st = WritePrivate(dir / ("rank-" + std::to_string(rank) + ".pb"), task.SerializeAsString(), 0600);
    if (!st.ok()) {
      refused.refused = false;
      refused.reason = st.message();
      return refused;
    }
  }
  const fs::path script = dir / "job.sh";
  Status st = WritePrivate(script, JobScript(config_, launch, dir.string()), 0700);
  if (!st.ok()) {
    refused.refused = false;
    refused.reason = st.message();
    return refused;
  }
  std::map<std::string, std::string> env;
  if (!tokens.empty() && tokens.find_first_not_of(',') != std::string::npos) env["SF_TASK_TOKENS"] = tokens;
  Result<std::string> out = Tool(SbatchArgv(config_, launch, dir.string(), script.string()), env);
  if (!out.ok()) {
    refused.refused = out.status().code() == StatusCode::kFailedPrecondition;  // sbatch said no
    refused.reason = "Slurm refused the job (partition " + config_.partition + "): " + out.status().message();
    return refused;
  }
  Result<std::string> id = ParseSbatchJobId(*out);
  if (!id.ok()) {
    refused.refused = false;
    refused.reason = id.status().message();
    return refused;
  }
  *job_id = *id;
  AllocationEvent submitted;
  submitted.kind = AllocationEvent::Kind::kSubmitted;
  submitted.allocation_id = launch.allocation_id;
  submitted.external_id = *id;
  return submitted;
}

std::vector<JobStatus> SlurmManager::Sacct(const std::vector<std::string>& ids) {
  if (ids.empty()) return {};
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  auto run = [&](bool completion) {
    std::vector<std::string> argv = {"sacct", "-n", "-X", "-P", "-o", kSacctFields, "-j", list};
    if (completion) argv.insert(argv.begin() + 1, "-c");
    return Tool(argv);
  };
  Result<std::string> out = run(sacct_completion_);
  if (!sacct_completion_ && (!out.ok() ? out.status().message() : *out).find("accounting storage is disabled") !=
                                std::string::npos) {
    sacct_completion_ = true;
    out = run(true);
  }
  if (!out.ok()) {
    log::Warn("slurm", {{"event", "sacct_failed"}, {"pool", pool_}, {"error", out.status().message()}});
    return {};
  }
  return ParseSacct(*out);
}

void SlurmManager::PruneJobDirs() {
  std::set<std::string> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [allocation, j] : jobs_) live.insert(allocation);
    for (const GangLaunch& l : to_submit_) live.insert(l.allocation_id);
  }
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(config_.job_dir_keep_hours);
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(config_.job_dir, ec)) {
    std::error_code entry_ec;
    const std::string name = entry.path().filename().string();
    // Only what the manager made: an allocation id's shape, "t<trial>-r<restart>-a<n>".
    if (name.size() < 6 || name[0] != 't' || name.find("-r") == std::string::npos || live.count(name)) continue;
    if (!entry.is_directory(entry_ec) || fs::last_write_time(entry.path(), entry_ec) > cutoff || entry_ec) continue;
    fs::remove_all(entry.path(), entry_ec);
    removed += entry_ec ? 0 : 1;
  }
  if (removed > 0) log::Info("slurm", {{"event", "pruned_job_dirs"}, {"pool", pool_}, {"count", std::to_string(removed)}});
}

std::vector<AllocationEvent> SlurmManager::Pass(bool sweep) {
  std::vector<AllocationEvent> events;
  std::deque<GangLaunch> submits;
  std::vector<std::pair<std::string, int>> withdrawn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submits.swap(to_submit_);
    withdrawn.swap(withdrawn_);
  }
  for (const auto& [allocation, world] : withdrawn) {
    AllocationEvent e;
    e.kind = AllocationEvent::Kind::kExited;
    e.allocation_id = allocation;
    e.cancelled = true;
    e.reason = "withdrawn before it was submitted to Slurm";
    for (int rank = 0; rank < std::max(1, world); ++rank) e.exit_codes[rank] = -1;
    events.push_back(std::move(e));
  }
  for (GangLaunch& launch : submits) {
    std::string job_id;
    AllocationEvent e = SubmitNow(launch, &job_id);
    if (!job_id.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      Job& j = jobs_[launch.allocation_id];
      j.allocation_id = launch.allocation_id;
      j.job_id = job_id;
      j.world_size = static_cast<int>(launch.ranks.size());
      j.last_seen = Clock::now();
      j.killed = killed_in_flight_.count(launch.allocation_id) > 0;
      log::Info("slurm", {{"event", "submitted"}, {"pool", pool_}, {"allocation", launch.allocation_id}, {"job", job_id}});
    } else {
      log::Warn("slurm", {{"event", "submit_failed"}, {"pool", pool_}, {"allocation", launch.allocation_id},
                          {"reason", e.reason}});
    }
    events.push_back(std::move(e));
  }
  // Cancellations asked for.
  std::vector<std::pair<std::string, std::string>> cancels;
  std::map<std::string, Job> tracked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    killed_in_flight_.clear();  // every submission that was in flight is in jobs_ now
    for (auto& [id, j] : jobs_) {
      if (j.killed && !j.cancel_sent) {
        cancels.emplace_back(id, j.job_id);
        j.cancel_sent = true;
      }
    }
  }
  for (const auto& [allocation, job] : cancels) {
    Result<std::string> out = Tool({"scancel", job});
    log::Info("slurm", {{"event", "scancel"}, {"pool", pool_}, {"allocation", allocation}, {"job", job},
                        {"result", out.ok() ? "ok" : out.status().message()}});
  }
  const auto prune_every = config_.job_dir_keep_hours == 0 ? std::chrono::seconds(0) : std::chrono::seconds(3600);
  if (sweep || Clock::now() - last_prune_ >= prune_every) {
    last_prune_ = Clock::now();
    PruneJobDirs();
  }
  if (sweep || Clock::now() - last_sinfo_ >= std::chrono::seconds(30)) {
    last_sinfo_ = Clock::now();
    PollSize();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sweep && jobs_.empty()) return events;  // nothing to watch: no squeue
  }
  Result<std::string> listed = Tool({"squeue", "-h", "-t", "all", "--me", "-o", kSqueueFormat});
  if (!listed.ok()) {
    log::Warn("slurm", {{"event", "squeue_failed"}, {"pool", pool_}, {"error", listed.status().message()}});
    return events;
  }
  std::map<std::string, JobStatus> by_id;
  for (JobStatus& j : ParseSqueue(*listed)) by_id[j.id] = std::move(j);
  {
    std::lock_guard<std::mutex> lock(mu_);
    tracked = jobs_;
  }
  if (sweep) {
    // Jobs of this master's allocations that nobody adopted: their trials are gone.
    std::set<std::string> known;
    for (const auto& [id, j] : tracked) known.insert(j.job_id);
    for (const auto& [id, j] : by_id) {
      if (known.count(id) || IsTerminalState(j.state)) continue;
      std::optional<std::string> allocation = AllocationOfComment(config_.cluster_name, j.comment);
      if (!allocation) continue;
      Result<std::string> out = Tool({"scancel", id});
      log::Warn("slurm", {{"event", "cancel_orphan"}, {"pool", pool_}, {"job", id}, {"allocation", *allocation},
                          {"result", out.ok() ? "ok" : out.status().message()}});
    }
  }
  std::vector<std::string> ask_sacct;  // jobs that ended or vanished from squeue
  const auto now = Clock::now();
  auto pending = [&events](const std::string& allocation, const std::string& reason) {
    AllocationEvent e;
    e.kind = AllocationEvent::Kind::kPending;
    e.allocation_id = allocation;
    e.reason = reason;
    events.push_back(std::move(e));
  };
  for (auto& [allocation, j] : tracked) {
    auto it = by_id.find(j.job_id);
    if (it == by_id.end() || IsTerminalState(it->second.state)) {
      ask_sacct.push_back(j.job_id);
      continue;
    }
    const JobStatus& s = it->second;
    j.last_seen = now;
    if (s.state == "PENDING") {
      const std::string reason = PendingReason(s);
      if (reason != j.last_reason) {
        j.last_reason = reason;
        pending(allocation, reason);
      }
    } else if (IsRunningState(s.state)) {
      if (!j.running) {
        j.running = true;
        AllocationEvent e;
        e.kind = AllocationEvent::Kind::kRunning;
        e.allocation_id = allocation;
        e.hosts = {s.nodes};
        events.push_back(std::move(e));
      }
      // Suspended by Slurm (scontrol suspend, gang scheduling): still allocated, not running.
      // Said as the running trial's reason until Slurm resumes it (an empty reason).
      const std::string held = HeldReason(s);
      if (held != j.held_reason) {
        j.held_reason = held;
        pending(allocation, held);
        log::Info("slurm", {{"event", held.empty() ? "resumed" : "held"}, {"pool", pool_}, {"allocation", allocation},
                            {"job", j.job_id}, {"state", s.state}});
      }
    }
  }
  std::map<std::string, JobStatus> accounted;
  for (JobStatus& s : Sacct(ask_sacct)) accounted[s.id] = std::move(s);
  const std::set<std::string> asked(ask_sacct.begin(), ask_sacct.end());
  std::set<std::string> ended;
  for (auto& [allocation, j] : tracked) {
    if (!asked.count(j.job_id)) continue;
    std::optional<JobStatus> final_state;
    if (auto a = accounted.find(j.job_id); a != accounted.end() && IsTerminalState(a->second.state)) {
      final_state = a->second;
    } else if (auto q = by_id.find(j.job_id); q != by_id.end()) {
      final_state = q->second;  // ended, but not in the accounting yet: squeue's word
    }
    if (final_state) {
      std::string failed_nodes;
      if (final_state->state == "NODE_FAIL" && !final_state->nodes.empty() && final_state->nodes != "None assigned") {
        // Which of its nodes failed: the job's node list names them all.
        if (Result<std::string> nodes = Tool({"sinfo", "-h", "-N", "-n", final_state->nodes, "-o", "%N|%t|%E"}); nodes.ok()) {
          failed_nodes = FailedNodes(*nodes);
        }
      }
      AllocationEvent e = ExitedEvent(allocation, *final_state, j.killed, j.world_size, failed_nodes);
      log::Info("slurm", {{"event", "ended"}, {"pool", pool_}, {"allocation", allocation}, {"job", j.job_id},
                          {"state", final_state->state}, {"exit", final_state->exit_code}});
      events.push_back(std::move(e));
      ended.insert(allocation);
    } else if (now - j.last_seen > kUnknownGrace) {
      AllocationEvent e;
      e.kind = AllocationEvent::Kind::kExited;
      e.allocation_id = allocation;
      e.cancelled = j.killed;
      e.reason = "Slurm no longer knows job " + j.job_id + " (not in squeue or sacct for " +
                 std::to_string(kUnknownGrace.count()) + " s)";
      for (int rank = 0; rank < std::max(1, j.world_size); ++rank) e.exit_codes[rank] = -1;
      events.push_back(std::move(e));
      ended.insert(allocation);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [allocation, j] : tracked) {
      auto it = jobs_.find(allocation);
      if (it == jobs_.end()) continue;
      if (ended.count(allocation)) {
        jobs_.erase(it);
        continue;
      }
      it->second.last_seen = j.last_seen;
      it->second.last_reason = j.last_reason;
      it->second.held_reason = j.held_reason;
      it->second.running = j.running;
    }
  }
  return events;
}

}  // namespace sf::master::rm::slurm
