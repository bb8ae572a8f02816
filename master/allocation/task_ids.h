// Allocation and task ids: the coordinator names each scheduled run of a trial (an allocation)
// "t<trial>-r<restart>-a<n>", n counting the trial's allocations so an id is never reused, and
// each rank's task "<allocation>.<rank>". A task that is not a trial's (a server,
// master/tasks/task_coordinator.h) names its runs "task<id>-r<restart>-a<n>" the same way. Agents use task ids as directory names, TrialLink's
// task tokens are bound to them (master/auth/task_tokens.h), and a late event or call naming an
// allocation that is no longer the trial's is recognised by them (docs/cluster.md).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace sf::master {

inline std::string AllocationId(int64_t trial_id, int restart, int n) {
  return "t" + std::to_string(trial_id) + "-r" + std::to_string(restart) + "-a" + std::to_string(n);
}

inline std::string TaskId(const std::string& allocation_id, int rank) {
  return allocation_id + "." + std::to_string(rank);
}

// "t12-r0-a1" -> 12; 0 when the id is not an allocation id.
inline int64_t AllocationTrialId(const std::string& allocation_id) {
  if (allocation_id.size() < 2 || allocation_id[0] != 't' || allocation_id[1] < '0' || allocation_id[1] > '9') return 0;
  return std::strtoll(allocation_id.c_str() + 1, nullptr, 10);
}

inline std::string TaskAllocationId(int64_t task_id, int restart, int n) {
  return "task" + std::to_string(task_id) + "-r" + std::to_string(restart) + "-a" + std::to_string(n);
}

// "task7-r0-a1" (or a rank's "task7-r0-a1.0") -> 7; 0 when it names no task of that kind.
inline int64_t AllocationTaskRowId(const std::string& id) {
  if (id.compare(0, 4, "task") != 0 || id.size() < 5 || id[4] < '1' || id[4] > '9') return 0;
  return std::strtoll(id.c_str() + 4, nullptr, 10);
}

// "t12-r0-a1.1" -> allocation "t12-r0-a1", rank 1. False when there is no ".<rank>".
inline bool ParseTaskId(const std::string& task_id, std::string& allocation, int& rank) {
  size_t dot = task_id.rfind('.');
  if (dot == std::string::npos) return false;
  allocation = task_id.substr(0, dot);
  rank = std::atoi(task_id.c_str() + dot + 1);
  return true;
}

}  // namespace sf::master
