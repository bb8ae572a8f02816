// The coordinator's agent side (class Cluster, master/core/cluster.h): agents connecting,
// re-registering with the tasks they still run (adoption), disconnecting; task state changes
// and task logs they report. Split out of cluster.cc; the same lock (mu_) guards it all.
#include "master/core/cluster.h"

#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "master/core/task_ids.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;
using std::chrono::steady_clock;

void Cluster::AgentConnected(const v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn) {
  std::lock_guard<std::mutex> lock(mu_);
  Agent& a = agents_[reg.agent_id()];
  a.id = reg.agent_id();
  a.hostname = reg.hostname();
  a.pool = reg.resource_pool().empty() ? "default" : reg.resource_pool();
  a.version = reg.version();
  a.slots.assign(reg.slots().begin(), reg.slots().end());
  for (auto& s : a.slots) s.clear_usage();  // usage comes with heartbeats only
  a.conn = std::move(conn);
  a.connected = true;
  a.incarnation = reg.incarnation();
  a.lost_since.reset();
  a.registered = NowSeconds();
  a.last_heartbeat = a.registered;
  std::vector<std::string> slot_ids;
  for (const auto& s : a.slots) slot_ids.push_back(s.id());
  scheduler_.AddAgent(a.id, a.pool, slot_ids);
  v1::Agent row;
  row.set_id(a.id);
  row.set_hostname(a.hostname);
  row.set_resource_pool(a.pool);
  row.set_version(a.version);
  for (const auto& s : a.slots) *row.add_slots() = s;
  (void)store_->UpsertAgent(row);
  log::Info("agent", {{"event", "registered"}, {"id", a.id}, {"slots", std::to_string(a.slots.size())},
                      {"running_tasks", std::to_string(reg.running_tasks_size())}});
  // Re-adopt tasks the agent is still running (after a master restart or a reconnect).
  std::set<std::string> reported;
  for (const auto& task : reg.running_tasks()) {
    reported.insert(task.task_id());
    std::string allocation;
    int rank = 0;
    if (!ParseTaskId(task.task_id(), allocation, rank)) continue;
    Trial* t = FindTrialLocked(task.trial_id());
    if (!t || IsTerminal(t->state) || t->allocation_id != allocation) {
      // Its trial ended, or moved on to another allocation while this agent was away (e.g.
      // cut off past the grace period): nothing will use what this task computes.
      log::Warn("agent", {{"event", "kill_stale_task"}, {"id", a.id}, {"task", task.task_id()}});
      v1::MasterMessage m;
      m.mutable_kill_task()->set_task_id(task.task_id());
      m.mutable_kill_task()->set_grace_period_ms(static_cast<int32_t>(options_.kill_grace.count()));
      a.conn->Send(m);
      continue;
    }
    if (!t->allocated) {
      // The master restarted: rebuild the allocation from what the agents report.
      t->allocated = true;
      t->state = v1::TRIAL_STATE_RUNNING;
    }
    t->rank_agent[rank] = a.id;
    t->live_ranks.insert(rank);
    bool have = false;
    for (const auto& s : t->slots) have |= (s.agent_id == a.id && s.slot_id == (task.slot_ids().empty() ? "" : task.slot_ids(0)));
    if (!have && !task.slot_ids().empty()) {
      if (static_cast<int>(t->slots.size()) <= rank) t->slots.resize(rank + 1);
      t->slots[rank] = SlotRef{a.id, task.slot_ids(0)};
    }
    Experiment& e = experiments_[t->experiment_id];
    if (static_cast<int>(t->live_ranks.size()) >= e.config.resources.slots_per_trial) {
      t->world_size = static_cast<int>(e.config.resources.slots_per_trial);
      t->adopt_deadline.reset();
      AllocationRequest req;
      req.allocation_id = t->allocation_id;
      req.experiment_id = e.id;
      req.trial_id = t->id;
      req.resource_pool = e.config.resources.resource_pool;
      req.slots = t->world_size;
      req.priority = static_cast<int>(e.config.resources.priority);
      req.submit_order = 0;
      scheduler_.Release(t->allocation_id);  // drop a queued copy, if any
      Status st = scheduler_.Adopt(req, t->slots);
      if (!st.ok()) log::Warn("trial", {{"event", "adopt_failed"}, {"error", st.message()}});
      log::Info("trial", {{"event", "adopted"}, {"id", std::to_string(t->id)}, {"agent", a.id}});
    }
  }
  // Tasks we believe run on this agent but it doesn't report: they ended while we were apart.
  for (auto& [id, t] : trials_) {
    if (!t.allocated) continue;
    std::vector<int> gone;
    for (int rank : t.live_ranks) {
      if (t.rank_agent[rank] == a.id && !reported.count(TaskId(t.allocation_id, rank)) && !t.adopt_deadline) {
        gone.push_back(rank);
      }
    }
    // The agent reports exits that happened while we were apart right after registering; give
    // those a moment to arrive before calling the ranks lost.
    for (int rank : gone) t.missing_ranks[rank] = steady_clock::now() + std::chrono::seconds(10);
  }
  ScheduleLocked();
}

Status Cluster::CheckAgentClaim(const std::string& agent_id, const std::string& incarnation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end() || !it->second.connected || !it->second.conn) return Status::Ok();
  if (it->second.incarnation.empty() || it->second.incarnation == incarnation) return Status::Ok();
  return Status(StatusCode::kAlreadyExists,
                "agent id " + agent_id + " belongs to another agent process that is connected; stop that one or " +
                    "give this agent another --agent-id");
}

void Cluster::AgentDisconnected(const std::string& agent_id, const AgentConnection* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end() || it->second.conn.get() != conn) return;  // superseded by a reconnect
  it->second.conn.reset();
  it->second.connected = false;
  it->second.lost_since = steady_clock::now();
  for (auto& s : it->second.slots) s.clear_usage();  // no longer current
  log::Warn("agent", {{"event", "disconnected"}, {"id", agent_id}});
}

void Cluster::AgentHeartbeat(const std::string& agent_id, const v1::Heartbeat& heartbeat) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  Agent& a = it->second;
  a.last_heartbeat = NowSeconds();
  for (auto& slot : a.slots) {
    auto sample = heartbeat.gpu_usage().find(slot.id());
    const bool plausible =
        sample != heartbeat.gpu_usage().end() && slot.type() == v1::SLOT_TYPE_CUDA &&
        sample->second.utilization_percent() >= 0 && sample->second.utilization_percent() <= 100 &&
        sample->second.memory_used_bytes() >= 0 &&
        (slot.memory_total_bytes() <= 0 ||
         sample->second.memory_used_bytes() <= slot.memory_total_bytes());
    if (!plausible) {
      slot.clear_usage();
      continue;
    }
    v1::GpuUsage* usage = slot.mutable_usage();
    usage->set_utilization_percent(sample->second.utilization_percent());
    usage->set_memory_used_bytes(sample->second.memory_used_bytes());
    *usage->mutable_sample_time() = SecondsToTimestamp(a.last_heartbeat);
  }
}

void Cluster::TaskStateChanged(const std::string& agent_id, const v1::TaskStateChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string allocation;
  int rank = 0;
  if (!ParseTaskId(change.task_id(), allocation, rank)) return;
  Trial* t = FindTrialLocked(change.trial_id());
  if (!t || t->allocation_id != allocation) return;
  switch (change.state()) {
    case v1::TaskStateChange::STATE_STARTED:
      (void)store_->SetAllocationState(allocation, "RUNNING");
      break;
    case v1::TaskStateChange::STATE_EXITED:
    case v1::TaskStateChange::STATE_FAILED_TO_START: {
      int code = change.state() == v1::TaskStateChange::STATE_EXITED ? change.exit_code() : -1;
      t->exit_codes[rank] = code;
      t->live_ranks.erase(rank);
      t->missing_ranks.erase(rank);
      if (!t->allocated) t->allocated = true;  // exited while the master was away: still decide
      log::Info("trial", {{"event", "task_exited"}, {"task", change.task_id()}, {"code", std::to_string(code)},
                          {"message", change.message()}});
      if (code != 0 && t->first_failure.empty() && t->stop.empty()) {
        t->first_failure = "rank " + std::to_string(rank) + " on " + agent_id + ": " +
                           (change.message().empty() ? "exit status " + std::to_string(code) : change.message());
      }
      if (code != 0 && !t->live_ranks.empty()) KillTrialTasksLocked(*t);  // one rank failed: stop the rest
      if (t->live_ranks.empty()) AllocationExitedLocked(*t);
      break;
    }
    default:
      break;
  }
}

Status Cluster::TaskLogs(const v1::LogBatch& batch, std::optional<DeliveryStamp> delivery) {
  Status st = log_writer_.Write({batch.lines().begin(), batch.lines().end()}, std::move(delivery));
  if (!st.ok()) log::Error("logs", {{"event", "insert_failed"}, {"error", st.message()}});
  changed_.notify_all();
  return st;
}

std::vector<v1::Agent> Cluster::Agents() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::pair<std::string, std::string>, int64_t> busy;
  for (const auto& [id, t] : trials_) {
    if (!t.allocated) continue;
    for (const auto& s : t.slots) busy[{s.agent_id, s.slot_id}] = t.id;
  }
  std::vector<v1::Agent> out;
  for (const auto& [id, a] : agents_) {
    v1::Agent row;
    row.set_id(a.id);
    row.set_hostname(a.hostname);
    row.set_resource_pool(a.pool);
    row.set_connected(a.connected);
    row.set_version(a.version);
    *row.mutable_registered_time() = SecondsToTimestamp(a.registered);
    *row.mutable_last_heartbeat() = SecondsToTimestamp(a.last_heartbeat);
    for (const auto& s : a.slots) {
      v1::Slot* slot = row.add_slots();
      *slot = s;
      auto b = busy.find({a.id, s.id()});
      slot->set_trial_id(b == busy.end() ? 0 : b->second);
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::string> Cluster::KnownPoolsLocked() const {
  std::set<std::string> pools;
  for (const auto& [id, a] : agents_) pools.insert(a.pool);
  return {pools.begin(), pools.end()};
}

std::vector<v1::ResourcePool> Cluster::ResourcePools() {
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
  for (const auto& [id, t] : trials_) {
    if (!t.allocated) continue;
    auto e = experiments_.find(t.experiment_id);
    if (e == experiments_.end()) continue;
    v1::ResourcePool& p = pool(e->second.config.resources.resource_pool);
    p.set_running_trials(p.running_trials() + 1);
  }
  // Pools another resource manager places: its name as the scheduler, their queued trials.
  for (const auto& [name, manager] : options_.external_pools) pool(name).set_scheduler(manager->Kind());
  for (const auto& [id, t] : trials_) {
    if (t.state != v1::TRIAL_STATE_QUEUED || t.allocation_id.empty()) continue;
    auto e = experiments_.find(t.experiment_id);
    if (e == experiments_.end() || !ExternalManagerLocked(e->second)) continue;
    v1::ResourcePool& p = pool(e->second.config.resources.resource_pool);
    p.set_queued_trials(p.queued_trials() + 1);
    p.set_queued_slots(p.queued_slots() + static_cast<int>(e->second.config.resources.slots_per_trial));
  }
  std::vector<v1::ResourcePool> out;
  for (auto& [name, p] : pools) out.push_back(std::move(p));
  return out;
}

ClusterStats Cluster::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterStats s;
  for (const auto& [id, e] : experiments_) s.experiments_by_state[ExperimentStateName(e.state)]++;
  for (const auto& [id, t] : trials_) s.trials_by_state[TrialStateName(t.state)]++;
  for (const auto& [id, a] : agents_) {
    if (!a.connected) continue;
    s.agents++;
    s.total_slots += static_cast<int>(a.slots.size());
  }
  for (const auto& [id, t] : trials_) {
    if (t.allocated) s.used_slots += static_cast<int>(t.slots.size());
  }
  return s;
}

}  // namespace sf::master
