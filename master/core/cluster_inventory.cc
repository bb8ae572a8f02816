// The coordinator's inventory and AgentLink's task logs (class Cluster, master/core/cluster.h):
// the machines, pools and counts the API shows, as each pool's resource manager reports them
// (master/rm/resource_manager.h) with the coordinator's own trials added; task logs stored.
#include "master/core/cluster.h"

#include <map>
#include <string>
#include <vector>

#include "common/log.h"

namespace sf::master {
namespace v1 = steadfast::v1;

Status Cluster::TaskLogs(const v1::LogBatch& batch, std::optional<DeliveryStamp> delivery) {
  Status st = log_writer_.Write({batch.lines().begin(), batch.lines().end()}, std::move(delivery));
  if (!st.ok()) log::Error("logs", {{"event", "insert_failed"}, {"error", st.message()}});
  changed_.notify_all();
  return st;
}

// The managers answer under their own locks; none of this takes mu_ but the trial counts.
std::vector<v1::Agent> Cluster::Agents() {
  std::vector<v1::Agent> out;
  for (rm::ResourceManager* manager : Managers()) {
    for (v1::Agent& a : manager->Agents()) out.push_back(std::move(a));
  }
  return out;
}

std::vector<v1::ResourcePool> Cluster::ResourcePools() {
  std::map<std::string, v1::ResourcePool> pools;
  for (rm::ResourceManager* manager : Managers()) {
    for (v1::ResourcePool& p : manager->Pools()) pools[p.name()] = std::move(p);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, t] : trials_) {
    if (!t.allocated) continue;
    auto e = experiments_.find(t.experiment_id);
    if (e == experiments_.end()) continue;
    const std::string& name = e->second.config.resources.resource_pool;
    v1::ResourcePool& p = pools[name];
    if (p.name().empty()) {  // a pool its manager no longer lists (its last agent lost)
      p.set_name(name);
      p.set_scheduler(ManagerLocked(e->second).Kind());
    }
    p.set_running_trials(p.running_trials() + 1);
  }
  std::vector<v1::ResourcePool> out;
  for (auto& [name, p] : pools) out.push_back(std::move(p));
  return out;
}

ClusterStats Cluster::Stats() {
  ClusterStats s;
  // The default manager's machines (the agents); another manager's nodes are not agents.
  const rm::PoolSize size = options_.default_manager->Size();
  s.agents = size.nodes;
  s.total_slots = size.slots;
  s.used_slots = size.used_slots;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : experiments_) s.experiments_by_state[ExperimentStateName(e.state)]++;
  for (const auto& [id, t] : trials_) s.trials_by_state[TrialStateName(t.state)]++;
  return s;
}

}  // namespace sf::master
