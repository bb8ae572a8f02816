// The cluster simulator's agent: the agent's own MasterLink and Outbox (registration with its
// slots, heartbeats, STARTED and EXITED events, delivery and acks) and a SimTrainer thread per
// task the master starts on it; it records how long each slot stayed free and flags a slot given
// to a second task while its first runs.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/master_link.h"
#include "agent/outbox.h"
#include "bench/sim/scenario.h"
#include "bench/sim/sim_stats.h"
#include "bench/sim/sim_trainer.h"
#include "common/log.h"

namespace sf::sim {

// One simulated agent: the agent's own link and outbox, a trainer thread per task.
class SimAgent : public sf::agent::MasterLink::Handler {
 public:
  SimAgent(int index, const Scenario& scenario, Stats* stats, Channels* channels,
           const std::string& master, const std::string& join_token)
      : id_("sim-agent-" + std::to_string(index)),
        pool_(scenario.PoolOfAgent(index)),
        scenario_(scenario),
        stats_(stats),
        channels_(channels) {
    for (int s = 0; s < scenario.slots_per_agent; ++s) slots_["cpu" + std::to_string(s)] = {};
    sf::agent::MasterLink::Options o;
    o.target = master;
    o.join_token = join_token;
    link_ = std::make_unique<sf::agent::MasterLink>(o, this, &outbox_);
  }
  ~SimAgent() override { Stop(); }

  void Start() { link_->Start(); }
  void Stop() {
    std::vector<Trainer> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (Trainer& t : threads) t.thread.join();
    if (link_) link_->Stop();
  }
  bool connected() const { return link_->connected(); }
  // Every event this agent queued (task exits above all) was acknowledged by the master.
  bool drained() const { return outbox_.empty(); }

  v1::RegisterAgent MakeRegistration() override {
    v1::RegisterAgent r;
    r.set_agent_id(id_);
    r.set_hostname(id_);
    r.set_resource_pool(pool_);
    r.set_version("sim");
    r.set_incarnation(link_->incarnation());
    for (const auto& [id, slot] : slots_) {
      v1::Slot* s = r.add_slots();
      s->set_id(id);
      s->set_type(v1::SLOT_TYPE_CPU);
      s->set_device("CPU (simulated)");
      s->set_enabled(true);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [task, running] : running_) *r.add_running_tasks() = running;
    return r;
  }

  void OnMasterMessage(const v1::MasterMessage& message) override {
    if (message.has_start_task()) return StartTrainer(message.start_task());
    if (message.has_kill_task()) {  // the trainer sees it after its current step
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = killed_.find(message.kill_task().task_id()); it != killed_.end())
        *it->second = true;
    }
  }

 private:
  struct SlotState {
    std::optional<Clock::time_point> freed;  // when its last task exited
    std::string task;                        // the task on it now; empty: free
  };

  void StartTrainer(const v1::StartTask& start) {
    ++stats_->starts;
    std::vector<std::optional<Clock::time_point>> freed;
    auto killed = std::make_shared<std::atomic<bool>>(false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      killed_[start.task_id()] = killed;
      // Trainers that ended: their threads joined (each held a stack).
      for (auto it = threads_.begin(); it != threads_.end();) {
        if (*it->done) {
          it->thread.join();
          it = threads_.erase(it);
        } else {
          ++it;
        }
      }
      v1::RunningTask& running = running_[start.task_id()];
      running.set_task_id(start.task_id());
      running.set_trial_id(start.trial_id());
      running.set_rank(start.rank());
      running.set_pid(0);
      *running.mutable_slot_ids() = start.slot_ids();
      for (const std::string& slot : start.slot_ids()) {
        SlotState& state = slots_[slot];
        // The master must never give a slot that still runs a task to another.
        if (!state.task.empty()) {
          ++stats_->double_booked;
          // Every collision, timed as the master's log is, to match the two.
          sf::log::Warn("sim", {{"event", "double_booked"},
                                {"agent", id_},
                                {"slot", slot},
                                {"task", start.task_id()},
                                {"running", state.task}});
          stats_->Error(id_ + "/" + slot + " given to " + start.task_id() + " while " + state.task +
                        " runs on it");
        }
        state.task = start.task_id();
        freed.push_back(state.freed);
        state.freed.reset();
      }
    }
    State(start, v1::TaskStateChange::STATE_STARTED, 0, "simulated");
    if (stats_->shares)
      stats_->shares->TaskStarted(start.experiment_id(), start.trial_id(), start.slot_ids_size());
    std::lock_guard<std::mutex> lock(mu_);
    auto done = std::make_shared<std::atomic<bool>>(false);
    ++stats_->running;
    // Each trainer its own random stream: from the task's id and the agent's count of starts.
    const uint64_t seed =
        std::hash<std::string>{}(start.task_id() + "/" + id_) ^ (seed_++ * 0x9E3779B97F4A7C15ull);
    std::thread thread([this, start, freed, seed, killed, done] {
      SimTrainer trainer(scenario_, stats_, start, channels_->Next(), seed, killed);
      const int code = trainer.Run([&] {
        const Clock::time_point now = Clock::now();
        std::lock_guard<std::mutex> stats_lock(stats_->mu);
        for (const auto& f : freed) {
          if (f) stats_->slot_gaps.push_back(std::chrono::duration<double>(now - *f).count());
        }
      });
      {
        std::lock_guard<std::mutex> agent_lock(mu_);
        running_.erase(start.task_id());
        killed_.erase(start.task_id());
        for (const std::string& slot : start.slot_ids()) {
          SlotState& state = slots_[slot];
          state.freed = Clock::now();
          if (state.task == start.task_id()) state.task.clear();
        }
      }
      if (stats_->shares) stats_->shares->TaskExited(start.experiment_id(), start.slot_ids_size());
      State(start, v1::TaskStateChange::STATE_EXITED, code,
            code == 0 ? "" : "simulated exit " + std::to_string(code));
      stats_->last_running_ns = NowNs();
      --stats_->running;
      *done = true;
    });
    threads_.push_back({std::move(thread), std::move(done)});
  }

  void State(const v1::StartTask& start, v1::TaskStateChange::State state, int code,
             const std::string& message) {
    v1::TaskStateChange change;
    change.set_task_id(start.task_id());
    change.set_trial_id(start.trial_id());
    change.set_rank(start.rank());
    change.set_state(state);
    change.set_exit_code(code);
    change.set_message(message);
    outbox_.PushState(std::move(change));
  }

  const std::string id_;
  const std::string pool_;
  const Scenario& scenario_;
  Stats* stats_;
  Channels* channels_;
  sf::agent::Outbox outbox_;
  std::unique_ptr<sf::agent::MasterLink> link_;
  std::mutex mu_;
  std::map<std::string, SlotState> slots_;          // under mu_ (the ids fixed at start)
  std::map<std::string, v1::RunningTask> running_;  // under mu_
  struct Trainer {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Trainer> threads_;                                      // under mu_
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> killed_;  // by task, under mu_
  uint64_t seed_ = 1;                                                 // under mu_
};

}  // namespace sf::sim
