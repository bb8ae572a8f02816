// The coordinator's AgentLink side and the cluster's inventory (class Cluster,
// master/core/cluster.h): agents connecting (their rows stored), disconnecting, heartbeats and
// their tasks' state changes, handed under mu_ to the agents' resource manager
// (master/rm/agents/agent_manager.h), whose events come back through AllocationEventLocked;
// task logs stored; the agents, pools and counts the API shows.
#include "master/core/cluster.h"

#include <map>
#include <string>
#include <vector>

#include "common/log.h"

namespace sf::master {
namespace v1 = steadfast::v1;

void Cluster::AgentConnected(const v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn) {
  std::lock_guard<std::mutex> lock(mu_);
  v1::Agent row;
  row.set_id(reg.agent_id());
  row.set_hostname(reg.hostname());
  row.set_resource_pool(reg.resource_pool().empty() ? "default" : reg.resource_pool());
  row.set_version(reg.version());
  for (const auto& s : reg.slots()) {
    v1::Slot* slot = row.add_slots();
    *slot = s;
    slot->clear_usage();
  }
  (void)store_->UpsertAgent(row);
  agents_.Connected(reg, std::move(conn));
  ScheduleLocked();
}

Status Cluster::CheckAgentClaim(const std::string& agent_id, const std::string& incarnation) {
  std::lock_guard<std::mutex> lock(mu_);
  return agents_.CheckClaim(agent_id, incarnation);
}

void Cluster::AgentDisconnected(const std::string& agent_id, const AgentConnection* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  agents_.Disconnected(agent_id, conn);
}

void Cluster::AgentHeartbeat(const std::string& agent_id, const v1::Heartbeat& heartbeat) {
  std::lock_guard<std::mutex> lock(mu_);
  agents_.Heartbeat(agent_id, heartbeat);
}

void Cluster::TaskStateChanged(const std::string& agent_id, const v1::TaskStateChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  agents_.TaskStateChanged(agent_id, change);
}

Status Cluster::TaskLogs(const v1::LogBatch& batch, std::optional<DeliveryStamp> delivery) {
  Status st = log_writer_.Write({batch.lines().begin(), batch.lines().end()}, std::move(delivery));
  if (!st.ok()) log::Error("logs", {{"event", "insert_failed"}, {"error", st.message()}});
  changed_.notify_all();
  return st;
}

std::vector<v1::Agent> Cluster::Agents() {
  std::lock_guard<std::mutex> lock(mu_);
  return agents_.Agents();
}

std::vector<v1::ResourcePool> Cluster::ResourcePools() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, v1::ResourcePool> pools = agents_.Pools();
  auto pool = [&](const std::string& name) -> v1::ResourcePool& {
    v1::ResourcePool& p = pools[name];
    if (p.name().empty()) {
      p.set_name(name);
      p.set_scheduler(agents_.SchedulerOf(name));
    }
    return p;
  };
  // Pools another resource manager places: its name as the scheduler, its size as it last
  // saw it (Slurm: the partition's nodes from sinfo), their running and queued trials.
  for (const auto& [name, manager] : options_.external_pools) {
    v1::ResourcePool& p = pool(name);
    p.set_scheduler(manager->Kind());
    const rm::PoolSize size = manager->Size();
    p.set_nodes(size.nodes);
    p.set_total_slots(size.slots);
  }
  for (const auto& [id, t] : trials_) {
    auto e = experiments_.find(t.experiment_id);
    if (e == experiments_.end()) continue;
    if (t.allocated) {
      v1::ResourcePool& p = pool(e->second.config.resources.resource_pool);
      p.set_running_trials(p.running_trials() + 1);
      if (ExternalManagerLocked(e->second)) p.set_used_slots(p.used_slots() + t.world_size);
    } else if (t.state == v1::TRIAL_STATE_QUEUED && !t.allocation_id.empty() && ExternalManagerLocked(e->second)) {
      v1::ResourcePool& p = pool(e->second.config.resources.resource_pool);
      p.set_queued_trials(p.queued_trials() + 1);
      p.set_queued_slots(p.queued_slots() + static_cast<int>(e->second.config.resources.slots_per_trial));
    }
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
  const rm::AgentManager::Usage usage = agents_.Stats();
  s.agents = usage.agents;
  s.total_slots = usage.total_slots;
  s.used_slots = usage.used_slots;
  return s;
}

}  // namespace sf::master
