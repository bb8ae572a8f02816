// An agent's connection as the agents' manager sees it, recording what the master sends: the
// coordinator's tests play the agent (and the trainer) against it. And WaitFor: the manager
// places gangs on its own thread, so what follows a coordinator's call is waited for.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "master/rm/agents/agent_manager.h"

namespace sf::master {

class RecordingConnection : public AgentConnection {
 public:
  void Send(const steadfast::v1::MasterMessage& m) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.push_back(m);
  }
  std::vector<steadfast::v1::MasterMessage> Sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  // The StartTask messages sent so far for `trial_id` (all when 0).
  std::vector<steadfast::v1::StartTask> Starts(int64_t trial_id = 0) {
    std::vector<steadfast::v1::StartTask> out;
    for (const auto& m : Sent()) {
      if (m.has_start_task() && (trial_id == 0 || m.start_task().trial_id() == trial_id)) out.push_back(m.start_task());
    }
    return out;
  }
  bool Killed(const std::string& task_id) {
    for (const auto& m : Sent()) {
      if (m.has_kill_task() && m.kill_task().task_id() == task_id) return true;
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<steadfast::v1::MasterMessage> sent_;
};

// Polls `done` every 5 ms for up to `limit`: whether it became true.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace sf::master
