// The agents' resource manager (the contract is in agent_manager.h): its thread, the seam's
// calls, scheduling passes and placement, stopping ranks, and delivering events. AgentLink's
// side and the queries are in agent_link_side.cc.
#include "master/rm/agents/agent_manager.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "master/allocation/task_ids.h"
#include "master/util/proto_value.h"

namespace sf::master::rm {
namespace v1 = steadfast::v1;

AgentManager::AgentManager(AgentManagerOptions options) : options_(std::move(options)) {
  scheduler_.SetDefaultPoolMode(options_.default_scheduler);
  for (const auto& [pool, mode] : options_.pool_schedulers) scheduler_.SetPoolMode(pool, mode);
  scheduler_.SetMinRunSeconds(static_cast<double>(options_.min_run.count()));
}

AgentManager::~AgentManager() { Stop(); }

void AgentManager::SetEventSink(EventSink sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = std::move(sink);
}

void AgentManager::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void AgentManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AgentManager::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next_pass = Clock::now();
  while (!stopping_) {
    const auto wake_at = reasons_due_ ? std::min(next_pass, reasons_at_ + options_.reasons_interval) : next_pass;
    wake_.wait_until(lock, wake_at, [&] { return stopping_ || changed_ || !events_.empty() || reasons_wake_; });
    if (stopping_) break;
    reasons_wake_ = false;
    const auto now = Clock::now();
    const bool due = now >= next_pass;
    if (changed_ || due) {
      changed_ = false;
      if (due) {
        TickLocked(now);
        next_pass = now + options_.pass_interval;
      }
      ScheduleLocked(SchedulerSeconds(now));
    } else if (reasons_due_ && now >= reasons_at_ + options_.reasons_interval) {
      PublishReasonsLocked();
    }
    lock.unlock();
    Deliver();
    lock.lock();
  }
}

void AgentManager::ChangedLocked() {
  changed_ = true;
  wake_.notify_all();
}

AllocationRequest AgentManager::RequestOf(const GangLaunch& gang) const {
  AllocationRequest req;
  req.allocation_id = gang.allocation_id;
  req.experiment_id = gang.experiment_id;
  req.trial_id = gang.trial_id;
  req.resource_pool = gang.pool;
  req.slots = gang.world_size;
  req.priority = gang.priority;
  req.max_slots = gang.max_slots;
  req.weight = gang.weight;
  req.submit_order = gang.submit_order;
  req.preempted_by = gang.preempted_by;
  return req;
}

// ------------------------------------------------------------------------------------------
// The seam

void AgentManager::Submit(GangLaunch launch) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string id = launch.allocation_id;
  if (allocations_.count(id)) return;  // submitted twice: the first stands
  Allocation& a = allocations_[id];
  a.gang = std::move(launch);
  if (Status st = scheduler_.Submit(RequestOf(a.gang)); !st.ok()) {
    AllocationEvent e;
    e.kind = AllocationEvent::Kind::kExited;
    e.allocation_id = id;
    e.reason = "the scheduler refused the gang: " + st.message();
    e.refused = true;
    for (int rank = 0; rank < std::max(1, a.gang.world_size); ++rank) e.exit_codes[rank] = -1;
    allocations_.erase(id);
    Emit(std::move(e));
  } else {
    a.in_scheduler = true;
  }
  ChangedLocked();
}

void AgentManager::Adopt(const GangLaunch& gang, const std::string& /*external_id*/) {
  std::lock_guard<std::mutex> lock(mu_);
  Allocation& a = allocations_[gang.allocation_id];
  a.gang = gang;
  a.gang.ranks.clear();
  a.adopt_deadline = Clock::now() + options_.reconnect_grace;
}

void AgentManager::Kill(const std::string& allocation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(allocation_id);
  if (it == allocations_.end()) return;
  Allocation& a = it->second;
  if (!a.placed) {
    // Queued, or adopted with no rank reported yet: withdrawn. A rank of it that an agent
    // reports later belongs to nothing and is killed then.
    scheduler_.Release(allocation_id);
    allocations_.erase(it);
    ChangedLocked();
    return;
  }
  a.killed = true;
  KillRanks(a);
}

// ------------------------------------------------------------------------------------------
// Scheduling

void AgentManager::Schedule(double now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ScheduleLocked(now);
    if (reasons_due_) PublishReasonsLocked();  // a test's pass: its reasons at once
  }
  Deliver();
}

void AgentManager::ScheduleLocked(double now) {
  const Clock::time_point start = Clock::now();
  struct Observe {
    const AgentManagerOptions& options;
    Clock::time_point start;
    ~Observe() {
      if (options.pass_observer) {
        options.pass_observer(std::chrono::duration<double>(Clock::now() - start).count());
      }
    }
  } observe{options_, start};
  for (const Assignment& assignment : scheduler_.Schedule(now)) {
    auto it = allocations_.find(assignment.allocation_id);
    if (it == allocations_.end()) {
      scheduler_.Release(assignment.allocation_id);
      continue;
    }
    Place(it->second, assignment);
  }
  for (const Preemption& p : scheduler_.Preempt(now)) {
    auto it = allocations_.find(p.allocation_id);
    if (it == allocations_.end() || !it->second.placed || it->second.killed) continue;
    AllocationEvent e;
    e.kind = AllocationEvent::Kind::kPreempt;
    e.allocation_id = p.allocation_id;
    e.reason = "trial " + std::to_string(p.for_trial_id);
    e.for_trial_id = p.for_trial_id;
    Emit(std::move(e));
  }
  PublishReasonsSoonLocked();
}

void AgentManager::PublishReasonsSoonLocked() {
  if (Clock::now() - reasons_at_ >= options_.reasons_interval) {
    PublishReasonsLocked();
  } else {
    reasons_due_ = true;  // Loop publishes them when the interval is up
    if (!reasons_wake_) {
      reasons_wake_ = true;  // so it waits until then, not until its next pass
      wake_.notify_all();
    }
  }
}

void AgentManager::PublishReasonsLocked() {
  reasons_due_ = false;
  reasons_at_ = Clock::now();
  for (auto& [id, a] : allocations_) {
    if (a.placed || !a.in_scheduler) continue;
    std::string reason = scheduler_.PendingReason(id);
    if (reason.empty() || reason == a.pending_reason) continue;
    a.pending_reason = reason;
    AllocationEvent e;
    e.kind = AllocationEvent::Kind::kPending;
    e.allocation_id = id;
    e.reason = std::move(reason);
    Emit(std::move(e));
  }
}

void AgentManager::Place(Allocation& a, const Assignment& assignment) {
  const std::string id = assignment.allocation_id;
  a.placed = true;
  a.slots = assignment.slots;
  a.gang.world_size = static_cast<int>(assignment.slots.size());
  a.live_ranks.clear();
  a.exit_codes.clear();
  a.rank_agent.clear();
  // Each rank's index among the gang's ranks on its agent (LOCAL_RANK), and their number.
  std::map<std::string, int> ranks_on_agent;
  std::vector<int> local_rank(a.slots.size());
  for (size_t rank = 0; rank < a.slots.size(); ++rank) local_rank[rank] = ranks_on_agent[a.slots[rank].agent_id]++;
  AllocationEvent running;
  running.kind = AllocationEvent::Kind::kRunning;
  running.allocation_id = id;
  for (int rank = 0; rank < a.gang.world_size; ++rank) {
    const SlotRef& slot = a.slots[rank];
    a.rank_agent[rank] = slot.agent_id;
    running.ranks.push_back({slot.agent_id, slot.slot_id});
    auto agent = agents_.find(slot.agent_id);
    if (agent == agents_.end() || !agent->second.conn || rank >= static_cast<int>(a.gang.ranks.size())) {
      a.exit_codes[rank] = -1;
      continue;
    }
    a.live_ranks.insert(rank);
    v1::MasterMessage m;
    v1::StartTask* s = m.mutable_start_task();
    *s = a.gang.ranks[rank];
    s->add_slot_ids(slot.slot_id);
    s->set_local_rank(local_rank[rank]);
    s->set_local_size(ranks_on_agent[slot.agent_id]);
    a.unsent.emplace_back(slot.agent_id, std::move(m));  // after the Running event (SendStarts)
  }
  a.gang.ranks.clear();  // sent: the tokens and configs are not kept
  a.running_told = true;
  a.pending_reason.clear();
  Emit(std::move(running));
  if (a.live_ranks.empty()) Finish(id);
}

// ------------------------------------------------------------------------------------------
// Ranks

void AgentManager::SendKill(const std::string& agent_id, const std::string& task_id) {
  auto agent = agents_.find(agent_id);
  if (agent == agents_.end() || !agent->second.conn) return;
  v1::MasterMessage m;
  m.mutable_kill_task()->set_task_id(task_id);
  m.mutable_kill_task()->set_grace_period_ms(static_cast<int32_t>(options_.kill_grace.count()));
  agent->second.conn->Send(m);
}

void AgentManager::KillRanks(const Allocation& a) {
  for (int rank : a.live_ranks) {
    auto agent = a.rank_agent.find(rank);
    if (agent != a.rank_agent.end()) SendKill(agent->second, TaskId(a.gang.allocation_id, rank));
  }
}

void AgentManager::Finish(const std::string& allocation_id) {
  auto it = allocations_.find(allocation_id);
  if (it == allocations_.end()) return;
  Allocation& a = it->second;
  scheduler_.Release(allocation_id);
  for (int rank = 0; rank < std::max(a.gang.world_size, static_cast<int>(a.slots.size())); ++rank) {
    ReleaseHeldLocked(TaskId(allocation_id, rank));  // ranks of a gang never adopted whole
  }
  AllocationEvent e;
  e.kind = AllocationEvent::Kind::kExited;
  e.allocation_id = allocation_id;
  e.exit_codes = a.exit_codes;
  e.first_failure = a.first_failure;
  e.cancelled = a.killed;
  bool success = !a.exit_codes.empty();
  for (auto [rank, code] : a.exit_codes) success = success && code == 0;
  if (!success) {
    e.reason = "trainer exited with";
    for (auto [rank, code] : a.exit_codes) {
      e.reason += " rank " + std::to_string(rank) + "=" + std::to_string(code);
      auto agent = a.rank_agent.find(rank);
      if (code == -1 && agent != a.rank_agent.end()) e.reason += " (agent " + agent->second + " lost)";
    }
  }
  allocations_.erase(it);
  Emit(std::move(e));
}

// ------------------------------------------------------------------------------------------
// Events and queries

void AgentManager::Emit(AllocationEvent event) {
  events_.push_back(std::move(event));
  wake_.notify_all();
}

void AgentManager::Deliver() {
  {
    // Called from inside the sink (the events it causes): the outer loop delivers them, after
    // the one being delivered.
    std::lock_guard<std::mutex> lock(mu_);
    if (deliverer_ == std::this_thread::get_id()) return;
  }
  std::lock_guard<std::mutex> one(deliver_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    deliverer_ = std::this_thread::get_id();
  }
  for (;;) {
    AllocationEvent event;
    EventSink sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (events_.empty()) {
        deliverer_ = std::thread::id();
        return;
      }
      event = std::move(events_.front());
      events_.pop_front();
      sink = sink_;
    }
    if (sink) sink(event);
    if (event.kind == AllocationEvent::Kind::kRunning) SendStarts(event.allocation_id);
  }
}

void AgentManager::SendStarts(const std::string& allocation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(allocation_id);
  if (it == allocations_.end()) return;
  Allocation& a = it->second;
  for (auto& [agent_id, message] : a.unsent) {
    auto agent = agents_.find(agent_id);
    if (agent != agents_.end() && agent->second.conn) agent->second.conn->Send(message);
  }
  a.unsent.clear();
  if (a.killed) KillRanks(a);  // a kill sent before the starts found nothing to stop
}

}  // namespace sf::master::rm
