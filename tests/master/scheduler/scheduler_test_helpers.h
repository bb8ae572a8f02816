// Small helpers shared by the scheduler's tests (one binary: master_scheduler_test).
#pragma once

#include <string>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace sf::master::scheduler_test {

// Slot ids "s0".."s<n-1>".
inline std::vector<std::string> Slots(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("s" + std::to_string(i));
  return out;
}

// The allocation ids of assignments (or preemptions), in order.
template <typename T>
std::vector<std::string> Ids(const std::vector<T>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) out.push_back(item.allocation_id);
  return out;
}

}  // namespace sf::master::scheduler_test
