// The agents' resource manager, AgentLink's side (the contract is in agent_manager.h): a rank's
// exit, agents registering (re-adopting what they run), disconnecting and sending heartbeats,
// lost agents and ranks (Tick); and what the manager answers the coordinator's queries with.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "master/allocation/task_ids.h"
#include "master/rm/agents/agent_manager.h"
#include "master/util/proto_value.h"

namespace sf::master::rm {
namespace v1 = steadfast::v1;

void AgentManager::TaskStateChanged(const std::string& agent_id, const v1::TaskStateChange& change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (RankExitedLocked(agent_id, change)) ScheduleLocked(SchedulerSeconds(Clock::now()));  // its slots are free
  }
  Deliver();
}

bool AgentManager::RankExitedLocked(const std::string& agent_id, const v1::TaskStateChange& change) {
  if (change.state() != v1::TaskStateChange::STATE_EXITED &&
      change.state() != v1::TaskStateChange::STATE_FAILED_TO_START) {
    return false;
  }
  // A held task (stale, or a rank of a gang adopted in part) that ended: its slots are free now.
  const bool freed = ReleaseHeldLocked(change.task_id());
  std::string allocation;
  int rank = 0;
  if (!ParseTaskId(change.task_id(), allocation, rank)) return freed;
  auto it = allocations_.find(allocation);
  if (it == allocations_.end() || it->second.gang.trial_id != change.trial_id()) {
    if (freed) log::Info("agent", {{"event", "stale_task_exited"}, {"id", agent_id}, {"task", change.task_id()}});
    return freed;  // a late event, or a stale task's
  }
  Allocation& a = it->second;
  const int code = change.state() == v1::TaskStateChange::STATE_EXITED ? change.exit_code() : -1;
  a.exit_codes[rank] = code;
  a.live_ranks.erase(rank);
  a.missing_ranks.erase(rank);
  a.placed = true;  // it exited while the master was away: its end still counts
  log::Info("trial", {{"event", "task_exited"}, {"task", change.task_id()}, {"code", std::to_string(code)},
                      {"message", change.message()}});
  if (code != 0 && a.first_failure.empty() && !a.killed) {
    a.first_failure = "rank " + std::to_string(rank) + " on " + agent_id + ": " +
                      (change.message().empty() ? "exit status " + std::to_string(code) : change.message());
  }
  if (code != 0 && !a.live_ranks.empty()) KillRanks(a);  // one rank failed: stop the rest
  if (!a.live_ranks.empty()) return freed;
  Finish(allocation);
  return true;
}

// ------------------------------------------------------------------------------------------
// Agents

void AgentManager::Connected(const v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ConnectedLocked(reg, std::move(conn));
    ScheduleLocked(SchedulerSeconds(Clock::now()));  // its slots may take what waits
  }
  Deliver();
}

void AgentManager::ConnectedLocked(const v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn) {
  Agent& agent = agents_[reg.agent_id()];
  agent.id = reg.agent_id();
  agent.hostname = reg.hostname();
  agent.pool = reg.resource_pool().empty() ? "default" : reg.resource_pool();
  agent.version = reg.version();
  agent.slots.assign(reg.slots().begin(), reg.slots().end());
  for (auto& s : agent.slots) s.clear_usage();  // usage comes with heartbeats only
  agent.conn = std::move(conn);
  agent.connected = true;
  agent.incarnation = reg.incarnation();
  agent.lost_since.reset();
  agent.registered = NowSeconds();
  agent.last_heartbeat = agent.registered;
  std::vector<std::string> slot_ids;
  for (const auto& s : agent.slots) slot_ids.push_back(s.id());
  ForgetHeldLocked(scheduler_.AddAgent(agent.id, agent.pool, slot_ids));
  // Held tasks it no longer lists ended while we were apart: their slots are free.
  {
    std::set<std::string> listed;
    for (const auto& task : reg.running_tasks()) listed.insert(task.task_id());
    std::vector<std::string> ended;
    for (const auto& [task_id, held] : held_) {
      if (held.agent_id == agent.id && !listed.count(task_id)) ended.push_back(task_id);
    }
    for (const std::string& task_id : ended) ReleaseHeldLocked(task_id);
  }
  log::Info("agent", {{"event", "registered"}, {"id", agent.id}, {"slots", std::to_string(agent.slots.size())},
                      {"running_tasks", std::to_string(reg.running_tasks_size())}});
  // Re-adopt the tasks it still runs (after a master restart or a reconnect).
  std::set<std::string> reported;
  std::vector<const v1::RunningTask*> stale;
  for (const auto& task : reg.running_tasks()) {
    reported.insert(task.task_id());
    std::string allocation;
    int rank = 0;
    if (!ParseTaskId(task.task_id(), allocation, rank)) continue;
    auto it = allocations_.find(allocation);
    if (it == allocations_.end() || it->second.gang.trial_id != task.trial_id() || it->second.killed) {
      // Its trial ended, or moved on to another allocation while this agent was away (e.g. cut
      // off past the grace period), or it was being stopped: nothing will use what it computes.
      // Killed after the live ranks are taken back (their slots are theirs).
      stale.push_back(&task);
      continue;
    }
    Allocation& a = it->second;
    a.placed = true;
    a.rank_agent[rank] = agent.id;
    a.live_ranks.insert(rank);
    const std::string slot = task.slot_ids().empty() ? "" : task.slot_ids(0);
    if (!slot.empty()) {
      if (static_cast<int>(a.slots.size()) <= rank) a.slots.resize(rank + 1);
      a.slots[rank] = SlotRef{agent.id, slot};
    }
    if (!a.running_told) {
      a.running_told = true;
      AllocationEvent e;
      e.kind = AllocationEvent::Kind::kRunning;
      e.allocation_id = allocation;
      // The whole gang, though only some ranks' agents are back yet: the rendezvous opens for
      // world_size ranks (the others' hosts stay empty until their agents re-register).
      e.ranks.resize(static_cast<size_t>(std::max(1, a.gang.world_size)));
      for (const auto& [r, host] : a.rank_agent) {
        if (static_cast<int>(e.ranks.size()) <= r) e.ranks.resize(r + 1);
        e.ranks[r] = {host, r < static_cast<int>(a.slots.size()) ? a.slots[r].slot_id : ""};
      }
      Emit(std::move(e));
    }
    if (static_cast<int>(a.live_ranks.size()) < a.gang.world_size) {
      // Until the whole gang is back its ranks' slots are held one by one.
      if (!slot.empty()) HoldTaskLocked(agent, task.task_id(), {slot});
    } else {
      a.adopt_deadline.reset();
      for (int r = 0; r < a.gang.world_size; ++r) ReleaseHeldLocked(TaskId(allocation, r));
      scheduler_.Release(allocation);  // drop a queued copy, if any
      if (Status st = scheduler_.Adopt(RequestOf(a.gang), a.slots); !st.ok()) {
        log::Warn("trial", {{"event", "adopt_failed"}, {"allocation", allocation}, {"error", st.message()}});
      } else {
        a.in_scheduler = true;
      }
      log::Info("trial", {{"event", "adopted"}, {"id", std::to_string(a.gang.trial_id)}, {"agent", agent.id}});
    }
  }
  for (const v1::RunningTask* task : stale) HoldStaleLocked(agent, *task);
  // Ranks we believe run on this agent but it doesn't report: they ended while we were apart.
  // The agent reports those exits right after registering; give them a moment to arrive
  // before calling the ranks lost.
  for (auto& [id, a] : allocations_) {
    if (!a.placed || a.adopt_deadline) continue;
    for (int rank : a.live_ranks) {
      auto host = a.rank_agent.find(rank);
      if (host != a.rank_agent.end() && host->second == agent.id && !reported.count(TaskId(id, rank))) {
        a.missing_ranks[rank] = Clock::now() + options_.missing_rank_grace;
      }
    }
  }
}

void AgentManager::HoldTaskLocked(const Agent& agent, const std::string& task_id,
                                  const std::vector<std::string>& slot_ids, const std::set<SlotRef>& excluded) {
  if (held_.count(task_id)) return;  // held since an earlier registration
  AllocationRequest hold;
  hold.allocation_id = HoldId(task_id);
  hold.resource_pool = agent.pool;
  hold.priority = 1;  // never asked to make room: it runs until it exits
  std::vector<SlotRef> slots;
  for (const std::string& slot : slot_ids) {
    const SlotRef ref{agent.id, slot};
    if (!excluded.count(ref) && std::find(slots.begin(), slots.end(), ref) == slots.end()) slots.push_back(ref);
  }
  if (slots.empty()) return;
  hold.slots = static_cast<int>(slots.size());
  if (Status st = scheduler_.Adopt(hold, slots); !st.ok()) {
    log::Warn("agent", {{"event", "task_slots_unheld"}, {"id", agent.id}, {"task", task_id}, {"error", st.message()}});
    return;
  }
  held_[task_id] = HeldTask{agent.id};
}

void AgentManager::HoldStaleLocked(const Agent& agent, const v1::RunningTask& task) {
  log::Warn("agent", {{"event", "kill_stale_task"}, {"id", agent.id}, {"task", task.task_id()}});
  SendKill(agent.id, task.task_id());
  // Its slots run it until its exit arrives: none may be given to another task before. Those an
  // allocation here claims are its own (held by it, or by its ranks').
  std::set<SlotRef> claimed;
  for (const auto& [id, a] : allocations_) claimed.insert(a.slots.begin(), a.slots.end());
  HoldTaskLocked(agent, task.task_id(), {task.slot_ids().begin(), task.slot_ids().end()}, claimed);
}

bool AgentManager::ReleaseHeldLocked(const std::string& task_id) {
  if (!held_.erase(task_id)) return false;
  scheduler_.Release(HoldId(task_id));
  ChangedLocked();
  return true;
}

void AgentManager::ForgetHeldLocked(const std::vector<std::string>& dropped) {
  const std::string prefix = HoldId("");
  for (const std::string& id : dropped) {
    if (id.rfind(prefix, 0) == 0) held_.erase(id.substr(prefix.size()));
  }
}

Status AgentManager::CheckClaim(const std::string& agent_id, const std::string& incarnation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end() || !it->second.connected || !it->second.conn) return Status::Ok();
  if (it->second.incarnation.empty() || it->second.incarnation == incarnation) return Status::Ok();
  return Status(StatusCode::kAlreadyExists,
                "agent id " + agent_id + " belongs to another agent process that is connected; stop that one or " +
                    "give this agent another --agent-id");
}

void AgentManager::Disconnected(const std::string& agent_id, const AgentConnection* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end() || it->second.conn.get() != conn) return;  // superseded by a reconnect
  it->second.conn.reset();
  it->second.connected = false;
  it->second.lost_since = Clock::now();
  for (auto& s : it->second.slots) s.clear_usage();  // no longer current
  log::Warn("agent", {{"event", "disconnected"}, {"id", agent_id}});
}

void AgentManager::Heartbeat(const std::string& agent_id, const v1::Heartbeat& heartbeat) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  Agent& agent = it->second;
  agent.last_heartbeat = NowSeconds();
  for (auto& slot : agent.slots) {
    auto sample = heartbeat.gpu_usage().find(slot.id());
    const bool plausible =
        sample != heartbeat.gpu_usage().end() && slot.type() == v1::SLOT_TYPE_CUDA &&
        sample->second.utilization_percent() >= 0 && sample->second.utilization_percent() <= 100 &&
        sample->second.memory_used_bytes() >= 0 &&
        (slot.memory_total_bytes() <= 0 || sample->second.memory_used_bytes() <= slot.memory_total_bytes());
    if (!plausible) {
      slot.clear_usage();
      continue;
    }
    v1::GpuUsage* usage = slot.mutable_usage();
    usage->set_utilization_percent(sample->second.utilization_percent());
    usage->set_memory_used_bytes(sample->second.memory_used_bytes());
    *usage->mutable_sample_time() = SecondsToTimestamp(agent.last_heartbeat);
  }
}

void AgentManager::Tick(Clock::time_point now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    TickLocked(now);
  }
  Deliver();
}

void AgentManager::TickLocked(Clock::time_point now) {
  // Agents gone longer than the grace period: their ranks are lost, their gangs stopped.
  for (auto& [agent_id, agent] : agents_) {
    if (agent.connected || !agent.lost_since || now - *agent.lost_since < options_.reconnect_grace) continue;
    agent.lost_since.reset();
    const std::vector<std::string> dropped = scheduler_.RemoveAgent(agent_id);
    ForgetHeldLocked(dropped);
    for (const std::string& allocation : dropped) {
      auto it = allocations_.find(allocation);
      if (it == allocations_.end() || !it->second.placed) continue;
      Allocation& a = it->second;
      for (int rank : std::set<int>(a.live_ranks)) {
        if (a.rank_agent[rank] == agent_id) {
          a.live_ranks.erase(rank);
          a.exit_codes[rank] = -1;
        }
      }
      KillRanks(a);
      if (a.live_ranks.empty()) Finish(allocation);
    }
    log::Warn("agent", {{"event", "lost"}, {"id", agent_id}});
  }
  std::vector<std::string> finished;
  for (auto& [id, a] : allocations_) {
    // Ranks missing from an agent's re-registration whose exit never arrived.
    bool changed = false;
    for (auto it = a.missing_ranks.begin(); it != a.missing_ranks.end();) {
      if (now < it->second) {
        ++it;
        continue;
      }
      if (a.live_ranks.erase(it->first)) {
        if (!a.exit_codes.count(it->first)) a.exit_codes[it->first] = -1;
        changed = true;
      }
      it = a.missing_ranks.erase(it);
    }
    // Live before a master restart: ranks no agent reported in time are lost.
    if (a.adopt_deadline && now >= *a.adopt_deadline) {
      a.adopt_deadline.reset();
      for (int rank = 0; rank < std::max(1, a.gang.world_size); ++rank) {
        if (a.live_ranks.count(rank) || a.exit_codes.count(rank)) continue;
        a.exit_codes[rank] = -1;
        changed = true;
      }
      if (changed) {
        log::Warn("trial", {{"event", "not_adopted"}, {"id", std::to_string(a.gang.trial_id)}, {"allocation", id},
                            {"grace_seconds", std::to_string(options_.reconnect_grace.count())}});
        KillRanks(a);
      }
    }
    if (changed && a.live_ranks.empty()) finished.push_back(id);
  }
  for (const std::string& id : finished) Finish(id);
  if (!finished.empty()) ChangedLocked();
}

std::vector<v1::Agent> AgentManager::Agents() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::pair<std::string, std::string>, const Allocation*> busy;
  for (const auto& [id, a] : allocations_) {
    if (!a.placed) continue;
    for (const auto& s : a.slots) busy[{s.agent_id, s.slot_id}] = &a;
  }
  std::vector<v1::Agent> out;
  for (const auto& [id, agent] : agents_) {
    v1::Agent row;
    row.set_id(agent.id);
    row.set_hostname(agent.hostname);
    row.set_resource_pool(agent.pool);
    row.set_connected(agent.connected);
    row.set_version(agent.version);
    *row.mutable_registered_time() = SecondsToTimestamp(agent.registered);
    *row.mutable_last_heartbeat() = SecondsToTimestamp(agent.last_heartbeat);
    for (const auto& s : agent.slots) {
      v1::Slot* slot = row.add_slots();
      *slot = s;
      auto b = busy.find({agent.id, s.id()});
      slot->set_trial_id(b == busy.end() ? 0 : b->second->gang.trial_id);
      slot->set_allocation_id(b == busy.end() ? "" : b->second->gang.allocation_id);
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<v1::ResourcePool> AgentManager::Pools() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, v1::ResourcePool> pools;
  auto pool = [&](const std::string& name) -> v1::ResourcePool& {
    v1::ResourcePool& p = pools[name];
    if (p.name().empty()) {
      p.set_name(name);
      p.set_scheduler(SchedulingModeName(scheduler_.PoolMode(name)));
    }
    return p;
  };
  for (const auto& [name, stats] : scheduler_.Stats()) {
    v1::ResourcePool& p = pool(name);
    p.set_agents(stats.agents);
    p.set_total_slots(stats.total_slots);
    p.set_used_slots(stats.used_slots);
  }
  for (const AllocationRequest& r : scheduler_.Queue()) {
    v1::ResourcePool& p = pool(r.resource_pool);
    p.set_queued_trials(p.queued_trials() + 1);
    p.set_queued_slots(p.queued_slots() + r.slots);
  }
  std::vector<v1::ResourcePool> out;
  for (auto& [name, p] : pools) out.push_back(std::move(p));
  return out;
}

PoolSize AgentManager::Capacity(const std::string& pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolSize c;
  for (const auto& [id, agent] : agents_) {
    if (agent.pool != pool) continue;
    c.known = true;
    c.slots += static_cast<int>(agent.slots.size());
    c.nodes++;
  }
  return c;
}

std::vector<std::string> AgentManager::PoolNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> pools;
  for (const auto& [id, agent] : agents_) pools.insert(agent.pool);
  return {pools.begin(), pools.end()};
}

PoolSize AgentManager::Size() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolSize u;
  u.known = true;
  for (const auto& [id, agent] : agents_) {
    if (!agent.connected) continue;
    u.nodes++;
    u.slots += static_cast<int>(agent.slots.size());
  }
  for (const auto& [id, a] : allocations_) {
    if (a.placed) u.used_slots += static_cast<int>(a.slots.size());
  }
  return u;
}

}  // namespace sf::master::rm
