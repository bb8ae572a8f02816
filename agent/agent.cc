#include "agent/agent.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "agent/logger.h"
#include "agent/slot_detector.h"
#include "agent/task_files.h"
#include "task/task_environment.h"
#include "common/read_file.h"

#ifndef SF_VERSION
#define SF_VERSION "0.0.0"
#endif

namespace sf::agent {
namespace fs = std::filesystem;
using steadfast::v1::MasterMessage;
using steadfast::v1::StartTask;
using steadfast::v1::TaskStateChange;

namespace {

// A task id names a directory: keep it to a safe alphabet.
bool ValidTaskId(const std::string& id) {
  if (id.empty() || id.size() > 200 || id == "." || id == "..") {
    return false;
  }
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::string HostnameOrEmpty() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) {
    return "";
  }
  return buf;
}

}  // namespace

Agent::Agent(Options options) : options_(std::move(options)), outbox_(options_.outbox) {
  if (options_.link.target.empty()) {
    options_.link.target = options_.config.master;
  }
  if (options_.link.join_token.empty()) options_.link.join_token = options_.config.join_token;
  if (options_.link.ca_pem.empty()) options_.link.ca_pem = options_.config.master_ca_pem;
  ProcessSupervisor::Callbacks callbacks;
  callbacks.on_line = [this](const OutputLine& line) { OnLine(line); };
  callbacks.on_exit = [this](const ProcessExit& exit) { OnExit(exit); };
  supervisor_ = std::make_unique<ProcessSupervisor>(std::move(callbacks), options_.supervisor);
  contexts_ = std::make_unique<task::ContextCache>(options_.config.work_dir, options_.config.master_ca_pem);
  link_ = std::make_unique<MasterLink>(options_.link, this, &outbox_);
}

Agent::~Agent() { Shutdown(); }

Status Agent::Start() {
  std::error_code ec;
  fs::create_directories(fs::path(options_.config.work_dir) / "tasks", ec);
  if (ec) {
    return Internal("cannot create work dir " + options_.config.work_dir + ": " + ec.message());
  }
  // What a previous agent process had not delivered is sent first (agent/outbox.h).
  SF_RETURN_IF_ERROR(outbox_.OpenJournal((fs::path(options_.config.work_dir) / "outbox.journal").string()));
  std::string slot_ids;
  for (const auto& slot : options_.slots) {
    slot_ids += (slot_ids.empty() ? "" : ",") + slot.id();
  }
  LogEvent(LogLevel::kInfo, "agent", "starting",
           {{"agent_id", options_.config.agent_id},
            {"master", options_.link.target},
            {"tls", options_.link.ca_pem.empty() ? "off" : "on (CA " + options_.config.master_ca_file + ")"},
            {"resource_pool", options_.config.resource_pool},
            {"slots", slot_ids},
            {"trainer", options_.config.trainer},
            {"serve", options_.config.serve},
            {"work_dir", options_.config.work_dir}});
  AdoptSurvivors();
  PruneTaskDirs(/*now=*/true);
  if (options_.gpu_monitor) {
    gpu_sampler_ = std::make_unique<GpuSampler>(options_.gpu_monitor, options_.gpu_sample_interval);
  }
  link_->Start();
  return Status::Ok();
}

void Agent::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
    accepting_ = false;
  }
  {
    // A StartTask accepted just before this point finishes spawning first, so that every
    // trainer is either killed below or recorded for the next agent.
    std::unique_lock<std::mutex> lock(mu_);
    started_cv_.wait(lock, [&] { return starts_in_flight_ == 0; });
  }
  auto running = supervisor_->Running();
  if (options_.config.kill_tasks_on_exit && !running.empty()) {
    auto grace = std::chrono::milliseconds(options_.config.kill_grace_ms);
    LogEvent(
        LogLevel::kInfo, "agent", "killing_tasks_on_exit",
        {{"tasks", std::to_string(running.size())}, {"grace_ms", std::to_string(grace.count())}});
    supervisor_->KillAll(grace);
    supervisor_->WaitUntilIdle(grace + std::chrono::seconds(5));
  } else if (!running.empty()) {
    LogEvent(LogLevel::kInfo, "agent", "leaving_tasks_running",
             {{"tasks", std::to_string(running.size())}});
  }
  // Stop reading output, then remember for each trainer left running how far its output was
  // read, so the next agent on this work dir resumes there.
  supervisor_->Detach();
  for (const RunningProcess& p : supervisor_->Running()) {
    WriteStateFile(p.task_id, &p);
  }
  link_->Stop();
  gpu_sampler_.reset();  // no heartbeat asks it any more
  LogEvent(LogLevel::kInfo, "agent", "stopped", {{"agent_id", options_.config.agent_id}});
}

std::vector<steadfast::v1::RunningTask> Agent::RunningTasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<steadfast::v1::RunningTask> out;
  for (const auto& [id, task] : tasks_) {
    out.push_back(task.info);
  }
  return out;
}

steadfast::v1::RegisterAgent Agent::MakeRegistration() {
  steadfast::v1::RegisterAgent reg;
  reg.set_agent_id(options_.config.agent_id);
  reg.set_hostname(HostnameOrEmpty());
  reg.set_resource_pool(options_.config.resource_pool);
  reg.set_version(SF_VERSION);
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> busy;
  for (const auto& [id, task] : tasks_) {
    *reg.add_running_tasks() = task.info;
    for (const auto& slot : task.info.slot_ids()) {
      busy[slot] = task.info.trial_id();
    }
  }
  for (const auto& slot : options_.slots) {
    auto* s = reg.add_slots();
    *s = slot;
    if (auto it = busy.find(slot.id()); it != busy.end()) {
      s->set_trial_id(it->second);
    }
  }
  return reg;
}

void Agent::OnMasterMessage(const MasterMessage& message) {
  if (message.has_start_task()) {
    HandleStart(message.start_task());
  } else if (message.has_kill_task()) {
    HandleKill(message.kill_task());
  } else {
    LogEvent(LogLevel::kDebug, "agent", "ignored_master_message",
             {{"type", std::to_string(static_cast<int>(message.body_case()))}});
  }
}

void Agent::FillHeartbeat(steadfast::v1::Heartbeat* heartbeat) {
  if (!gpu_sampler_) return;
  // Older than three samples: the sampling thread is stuck in NVML; report nothing rather than
  // figures that stopped changing.
  for (const GpuReading& reading : gpu_sampler_->Latest(3 * options_.gpu_sample_interval)) {
    const std::string slot_id = "cuda" + std::to_string(reading.index);
    bool known = std::any_of(options_.slots.begin(), options_.slots.end(), [&](const steadfast::v1::Slot& s) {
      return s.id() == slot_id && s.type() == steadfast::v1::SLOT_TYPE_CUDA;
    });
    if (!known) continue;
    steadfast::v1::GpuUsage& usage = (*heartbeat->mutable_gpu_usage())[slot_id];
    usage.set_utilization_percent(reading.utilization_percent);
    usage.set_memory_used_bytes(reading.memory_used_bytes);
  }
}

void Agent::ReportState(const StartTask& start, TaskStateChange::State state, int exit_code,
                        const std::string& message) {
  TaskStateChange change;
  change.set_task_id(start.task_id());
  change.set_trial_id(start.trial_id());
  change.set_rank(start.rank());
  change.set_state(state);
  change.set_exit_code(exit_code);
  change.set_message(message);
  outbox_.PushState(std::move(change));
}

void Agent::HandleStart(const StartTask& start) {
  auto fail = [&](const std::string& why) {
    LogEvent(
        LogLevel::kWarn, "agent", "task_failed_to_start",
        {{"task", start.task_id()}, {"trial", std::to_string(start.trial_id())}, {"reason", why}});
    ReportState(start, TaskStateChange::STATE_FAILED_TO_START, 0, why);
  };
  if (!ValidTaskId(start.task_id())) {
    fail("invalid task id '" + start.task_id() + "' (use letters, digits, '-', '_', '.')");
    return;
  }
  std::vector<std::string> slot_ids(start.slot_ids().begin(), start.slot_ids().end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) {
      fail("agent is shutting down");
      return;
    }
    if (auto it = tasks_.find(start.task_id()); it != tasks_.end()) {
      // A repeated StartTask (e.g. resent after a reconnect): the task already runs.
      LogEvent(LogLevel::kInfo, "agent", "task_already_running", {{"task", start.task_id()}});
      ReportState(start, TaskStateChange::STATE_STARTED, 0, "already running");
      return;
    }
    std::set<std::string> known;
    for (const auto& slot : options_.slots) {
      known.insert(slot.id());
    }
    for (const auto& id : slot_ids) {
      if (!known.count(id)) {
        fail("unknown slot '" + id + "'");
        return;
      }
      for (const auto& [other_id, task] : tasks_) {
        for (const auto& used : task.info.slot_ids()) {
          if (used == id) {
            fail("slot " + id + " is in use by task " + other_id);
            return;
          }
        }
      }
    }
    // Reserve the slots now, so two StartTasks can't both take them.
    Task task;
    task.info.set_task_id(start.task_id());
    task.info.set_trial_id(start.trial_id());
    task.info.set_rank(start.rank());
    for (const auto& id : slot_ids) {
      task.info.add_slot_ids(id);
    }
    tasks_[start.task_id()] = std::move(task);
    ++starts_in_flight_;
  }
  struct InFlight {
    Agent* agent;
    ~InFlight() {
      {
        std::lock_guard<std::mutex> lock(agent->mu_);
        --agent->starts_in_flight_;
      }
      agent->started_cv_.notify_all();
    }
  } in_flight{this};
  auto unreserve = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.erase(start.task_id());
  };

  fs::path task_dir = fs::path(options_.config.work_dir) / "tasks" / start.task_id();
  std::error_code ec;
  fs::create_directories(task_dir, ec);
  if (ec) {
    unreserve();
    fail("cannot create task directory " + task_dir.string() + ": " + ec.message());
    return;
  }
  fs::path config_file = task_dir / "experiment.yaml";
  {
    std::ofstream out(config_file, std::ios::binary | std::ios::trunc);
    out << start.config_yaml();
    out.close();
    if (!out) {
      unreserve();
      fail("cannot write " + config_file.string());
      return;
    }
  }
  ProcessSpec spec;
  spec.task_id = start.task_id();
  spec.argv = {options_.config.trainer, "cluster"};
  spec.working_dir = task_dir.string();
  if (!start.entrypoint().empty()) {
    // A user trial: its code, unpacked fresh, is its working directory.
    const fs::path code = task_dir / "code";
    if (!start.context_sha256().empty()) {
      const std::string master = start.master_address().empty() ? options_.config.master : start.master_address();
      Result<std::string> archive = contexts_->Get(start, master);
      Status unpacked = archive.ok() ? task::UnpackTaskContext(*archive, code.string()) : archive.status();
      if (!unpacked.ok()) {
        unreserve();
        fail("context: " + unpacked.message());
        return;
      }
    } else {
      fs::create_directories(code, ec);
    }
    spec.argv = task::EntrypointArgv(start, {{"sf-trainer", options_.config.trainer}, {"sf-serve", options_.config.serve}});
    spec.working_dir = code.string();
  }
  int cpu_slot_count = 0;
  for (const auto& slot : options_.slots) {
    cpu_slot_count += slot.type() == steadfast::v1::SLOT_TYPE_CPU ? 1 : 0;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spec.env = task::TaskEnvironment(start, config_file.string(), task_dir.string(), options_.config.agent_id,
                             options_.config.master,
                             CpuThreadsPerSlot(options_.config.cpu_threads_per_slot, cores, cpu_slot_count),
                             options_.slots);
  // A TLS master: the trainer verifies it with the agent's CA (a path; the trainer reads it).
  if (!options_.config.master_ca_file.empty()) spec.env["SF_MASTER_CA_FILE"] = options_.config.master_ca_file;
  if (!start.entrypoint().empty()) task::AddUserTaskEnvironment(start, options_.config.python_path, spec.env);
  spec.stdout_path = (task_dir / "stdout.log").string();
  spec.stderr_path = (task_dir / "stderr.log").string();
  Result<pid_t> pid = supervisor_->Start(spec);
  if (!pid.ok()) {
    unreserve();
    fail(pid.status().message());
    return;
  }
  uint64_t start_time = ProcessStartTime(*pid);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = tasks_.find(start.task_id()); it != tasks_.end()) {
      it->second.info.set_pid(*pid);
      it->second.start_time = start_time;
    }
  }
  WriteStateFile(start.task_id(), nullptr);
  LogEvent(LogLevel::kInfo, "agent", "task_started",
           {{"task", start.task_id()},
            {"trial", std::to_string(start.trial_id())},
            {"rank", std::to_string(start.rank())},
            {"pid", std::to_string(*pid)},
            {"slots", Join(start.slot_ids())}});
  ReportState(start, TaskStateChange::STATE_STARTED, 0, "pid " + std::to_string(*pid));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = tasks_.find(start.task_id()); it != tasks_.end()) {
      it->second.started_reported = true;
    }
  }
  started_cv_.notify_all();
}

void Agent::HandleKill(const steadfast::v1::KillTask& kill) {
  auto grace = std::chrono::milliseconds(std::max(0, kill.grace_period_ms()));
  Status st = supervisor_->Kill(kill.task_id(), grace);
  if (!st.ok()) {
    LogEvent(LogLevel::kWarn, "agent", "kill_unknown_task",
             {{"task", kill.task_id()}, {"error", st.message()}});
  }
}

void Agent::OnLine(const OutputLine& line) {
  steadfast::v1::LogLine out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tasks_.find(line.task_id);
    if (it == tasks_.end()) {
      return;
    }
    out.set_trial_id(it->second.info.trial_id());
    out.set_rank(it->second.info.rank());
    out.set_task_id(line.task_id);
  }
  out.set_stream(OutputStreamName(line.stream));
  out.set_message(line.text);
  out.set_agent_id(options_.config.agent_id);
  *out.mutable_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
      std::chrono::duration_cast<std::chrono::nanoseconds>(line.time.time_since_epoch()).count());
  outbox_.PushLog(std::move(out));
}

void Agent::OnExit(const ProcessExit& exit) {
  StartTask start;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = tasks_.find(exit.task_id);
    if (it == tasks_.end()) {
      return;
    }
    // A process that exits at once can be reaped before HandleStart queued STARTED: wait for
    // it (HandleStart is between Start() and ReportState, a few microseconds).
    started_cv_.wait(lock, [&] {
      auto t = tasks_.find(exit.task_id);
      return t == tasks_.end() || t->second.started_reported;
    });
    it = tasks_.find(exit.task_id);
    if (it == tasks_.end()) {
      return;
    }
    start.set_task_id(exit.task_id);
    start.set_trial_id(it->second.info.trial_id());
    start.set_rank(it->second.info.rank());
    tasks_.erase(it);
  }
  std::error_code ec;
  fs::remove(fs::path(TaskDir(exit.task_id)) / kStateFile, ec);
  // An adopted trainer is not our child, so its status is not ours to wait for; a trainer that
  // returned (rather than died) recorded it in its task directory.
  int code = exit.exit_code;
  bool known = !exit.adopted;
  if (exit.adopted) {
    if (std::optional<int> recorded = RecordedExitStatus(TaskDir(exit.task_id))) {
      code = *recorded;
      known = true;
    }
  }
  std::string message = !known     ? std::string("exit status unknown (adopted after an agent restart)")
                        : code > 128 ? "killed by signal " + std::to_string(code - 128)
                                     : "exit status " + std::to_string(code);
  if (exit.kill_requested) {
    message += " (kill requested)";
  } else if (code != 0 && code <= 128) {  // not for a signal: it says why
    message = task::FailureReason(code, (fs::path(TaskDir(exit.task_id)) / "stderr.log").string());
  }
  LogEvent(LogLevel::kInfo, "agent", "task_exited",
           {{"task", exit.task_id},
            {"trial", std::to_string(start.trial_id())},
            {"exit_code", std::to_string(code)},
            {"adopted", exit.adopted ? "true" : "false"}});
  ReportState(start, TaskStateChange::STATE_EXITED, code, message);
  PruneTaskDirs(/*now=*/false);
}

void Agent::PruneTaskDirs(bool now) {
  std::set<std::string> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - last_prune_ < std::chrono::minutes(10)) return;
    last_prune_ = t;
    for (const auto& [id, task] : tasks_) running.insert(id);
  }
  const int deleted = PruneTaskDirectories((fs::path(options_.config.work_dir) / "tasks").string(),
                                           std::chrono::hours(options_.config.task_dir_keep_hours), running);
  if (deleted > 0) {
    LogEvent(LogLevel::kInfo, "agent", "task_dirs_pruned",
             {{"deleted", std::to_string(deleted)}, {"keep_hours", std::to_string(options_.config.task_dir_keep_hours)}});
  }
}

}  // namespace sf::agent
