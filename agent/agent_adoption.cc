// The agent after a restart (class Agent, agent/agent.h): the state file each running task
// keeps (task_files.h), and adopting the tasks that survived the agent (re-attaching to their
// output at the last position) or reporting those that exited while no agent watched them.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/agent.h"
#include "agent/logger.h"
#include "agent/task_files.h"

namespace sf::agent {
namespace fs = std::filesystem;
using steadfast::v1::StartTask;
using steadfast::v1::TaskStateChange;

std::string Agent::TaskDir(const std::string& task_id) const {
  return (fs::path(options_.config.work_dir) / "tasks" / task_id).string();
}

void Agent::WriteStateFile(const std::string& task_id, const RunningProcess* position) {
  std::string content;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      return;
    }
    const auto& info = it->second.info;
    content = "task_id=" + info.task_id() + "\npid=" + std::to_string(info.pid()) +
              "\nstart_time=" + std::to_string(it->second.start_time) +
              "\ntrial_id=" + std::to_string(info.trial_id()) +
              "\nrank=" + std::to_string(info.rank()) + "\nslots=" + Join(info.slot_ids()) + "\n";
  }
  if (position) {
    content += "stdout_offset=" + std::to_string(position->stdout_offset) +
               "\nstderr_offset=" + std::to_string(position->stderr_offset) + "\n";
  }
  std::string path = TaskDir(task_id) + "/" + kStateFile;
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << content;
  }
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  if (ec) {
    LogEvent(LogLevel::kWarn, "agent", "state_file_not_written",
             {{"task", task_id}, {"path", path}, {"error", ec.message()}});
  }
}

void Agent::AdoptSurvivors() {
  std::error_code ec;
  fs::directory_iterator dirs(fs::path(options_.config.work_dir) / "tasks", ec);
  if (ec) {
    return;
  }
  std::set<std::string> known_slots;
  for (const auto& slot : options_.slots) {
    known_slots.insert(slot.id());
  }
  for (const auto& entry : dirs) {
    fs::path state_path = entry.path() / kStateFile;
    if (!fs::exists(state_path, ec)) {
      continue;
    }
    auto kv = ReadKeyValues(state_path.string());
    std::string task_id = kv["task_id"];
    pid_t pid = static_cast<pid_t>(std::strtol(kv["pid"].c_str(), nullptr, 10));
    uint64_t start_time = std::strtoull(kv["start_time"].c_str(), nullptr, 10);
    StartTask start;
    start.set_task_id(task_id);
    start.set_trial_id(std::strtoll(kv["trial_id"].c_str(), nullptr, 10));
    start.set_rank(static_cast<int32_t>(std::strtol(kv["rank"].c_str(), nullptr, 10)));
    if (task_id.empty() || task_id != entry.path().filename().string() || pid <= 0) {
      fs::remove(state_path, ec);
      continue;
    }
    bool alive = start_time != 0 && ProcessStartTime(pid) == start_time;
    Status adopted = Status::Ok();
    if (alive) {
      Task task;
      task.info.set_task_id(task_id);
      task.info.set_trial_id(start.trial_id());
      task.info.set_rank(start.rank());
      task.info.set_pid(pid);
      std::stringstream slots(kv["slots"]);
      std::string slot;
      while (std::getline(slots, slot, ',')) {
        if (!slot.empty()) {
          task.info.add_slot_ids(slot);
        }
      }
      task.start_time = start_time;
      task.started_reported = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        tasks_[task_id] = task;
      }
      AdoptSpec spec;
      spec.task_id = task_id;
      spec.pid = pid;
      spec.stdout_path = (entry.path() / "stdout.log").string();
      spec.stderr_path = (entry.path() / "stderr.log").string();
      if (kv.count("stdout_offset")) {
        spec.stdout_offset = std::strtoll(kv["stdout_offset"].c_str(), nullptr, 10);
        spec.stderr_offset = std::strtoll(kv["stderr_offset"].c_str(), nullptr, 10);
      }
      adopted = supervisor_->Adopt(spec);
      if (adopted.ok()) {
        LogEvent(LogLevel::kInfo, "agent", "task_adopted",
                 {{"task", task_id},
                  {"trial", std::to_string(start.trial_id())},
                  {"pid", std::to_string(pid)},
                  {"resume_output", kv.count("stdout_offset") ? "at_last_position" : "at_end"}});
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.erase(task_id);
    }
    // Gone while no agent watched it (or can't be watched): report the exit now, with the
    // status the trainer recorded if it returned normally.
    std::optional<int> recorded = alive ? std::nullopt : RecordedExitStatus(entry.path().string());
    std::string why = alive      ? "cannot adopt: " + adopted.message()
                      : recorded ? "exited while the agent was not running: exit status " + std::to_string(*recorded)
                                 : "exited while the agent was not running; exit status unknown";
    LogEvent(LogLevel::kInfo, "agent", "task_lost_while_agent_down",
             {{"task", task_id}, {"pid", std::to_string(pid)}, {"reason", why}});
    ReportState(start, TaskStateChange::STATE_EXITED, recorded ? *recorded : -1, why);
    fs::remove(state_path, ec);
  }
}

}  // namespace sf::agent
