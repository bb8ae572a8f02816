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

// The allocation service and its managers answer under their own locks; none of this takes mu_.
std::vector<v1::Agent> Cluster::Agents() { return allocations_.Agents(); }

std::vector<v1::ResourcePool> Cluster::ResourcePools() { return allocations_.Pools(); }

ClusterStats Cluster::Stats() {
  ClusterStats s;
  // The default manager's machines (the agents); another manager's nodes are not agents.
  const rm::PoolSize size = allocations_.DefaultSize();
  s.agents = size.nodes;
  s.total_slots = size.slots;
  s.used_slots = size.used_slots;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : experiments_) s.experiments_by_state[ExperimentStateName(e.state)]++;
  for (const auto& [id, t] : trials_) s.trials_by_state[TrialStateName(t.state)]++;
  return s;
}

}  // namespace sf::master
