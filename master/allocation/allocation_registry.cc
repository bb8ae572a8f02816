#include "master/allocation/allocation_registry.h"

#include <algorithm>

#include "master/allocation/task_ids.h"

namespace sf::master {

void AllocationRegistry::Track(int64_t trial_id, int64_t total_batches) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = trials_[trial_id];
  e.total_batches = std::max(e.total_batches, total_batches);
}

void AllocationRegistry::Forget(int64_t trial_id) {
  std::lock_guard<std::mutex> lock(mu_);
  trials_.erase(trial_id);
}

void AllocationRegistry::SetAllocation(int64_t trial_id, const std::string& allocation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return;
  it->second.allocation_id = allocation_id;
}

void AllocationRegistry::SetRunning(int64_t trial_id, bool running) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(trial_id);
  if (it != trials_.end()) it->second.running = running;
}

void AllocationRegistry::SetStop(int64_t trial_id, const std::string& stop) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(trial_id);
  if (it != trials_.end()) it->second.stop_asked = !stop.empty();
}

bool AllocationRegistry::Undisturbed(const steadfast::v1::TrialIdentity& who) const {
  std::string allocation;
  int rank = 0;
  if (who.task_id().empty() || !ParseTaskId(who.task_id(), allocation, rank)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(who.trial_id());
  if (it == trials_.end()) return false;
  const Entry& e = it->second;
  return !e.allocation_id.empty() && allocation == e.allocation_id && e.running && !e.stop_asked;
}

Result<AllocationRegistry::Admission> AllocationRegistry::Admit(const steadfast::v1::TrialIdentity& who) const {
  std::string allocation;
  int rank = 0;
  const bool has_task = !who.task_id().empty() && ParseTaskId(who.task_id(), allocation, rank);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(who.trial_id());
  if (it == trials_.end()) {
    return NotFound("trial " + std::to_string(who.trial_id()) + " is not active on this master");
  }
  const Entry& e = it->second;
  if (has_task && allocation != e.allocation_id) {
    return FailedPrecondition("task " + who.task_id() + " no longer runs trial " + std::to_string(who.trial_id()) +
                              (e.allocation_id.empty() ? "" : " (its current allocation is " + e.allocation_id + ")"));
  }
  if (!who.task_id().empty() && !e.running && !e.allocation_id.empty() && allocation == e.allocation_id) {
    return Admission::kAskCoordinator;
  }
  return Admission::kAdmitted;
}

int64_t AllocationRegistry::RaiseTotal(int64_t trial_id, int64_t batches) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return 0;
  it->second.total_batches = std::max(it->second.total_batches, batches);
  return it->second.total_batches;
}

int64_t AllocationRegistry::Total(int64_t trial_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(trial_id);
  return it == trials_.end() ? 0 : it->second.total_batches;
}

}  // namespace sf::master
