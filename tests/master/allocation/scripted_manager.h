// A resource manager whose events a test makes (master/rm/resource_manager.h): it records what
// it was asked (submitted, adopted, killed allocations; the gangs submitted) and delivers the
// events the test scripts, on the test's thread, as a manager's delivery thread would. Its
// capacity queries answer "nothing known yet", so every gang is placeable.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "master/rm/resource_manager.h"

namespace sf::master {

class ScriptedManager : public rm::ResourceManager {
 public:
  explicit ScriptedManager(std::string kind) : kind_(std::move(kind)) {}
  std::string Kind() const override { return kind_; }
  Status Check() override { return Status::Ok(); }
  void SetEventSink(rm::EventSink sink) override { sink_ = std::move(sink); }
  void Start() override { started = true; }
  void Stop() override { stopped = true; }
  void Submit(rm::GangLaunch launch) override {
    submitted.push_back(launch.allocation_id);
    gangs.push_back(std::move(launch));
  }
  void Adopt(const rm::GangLaunch& gang, const std::string& external_id) override {
    adopted.push_back(gang.allocation_id + "@" + external_id);
  }
  void Kill(const std::string& allocation_id) override { killed.push_back(allocation_id); }
  rm::PoolSize Size() const override { return {}; }
  rm::PoolSize Capacity(const std::string&) const override { return {}; }
  std::vector<std::string> PoolNames() const override { return {}; }
  std::vector<steadfast::v1::ResourcePool> Pools() const override { return {}; }
  std::vector<steadfast::v1::Agent> Agents() const override { return {}; }

  void Emit(rm::AllocationEvent event) { sink_(event); }

  bool started = false, stopped = false;
  std::vector<std::string> submitted, adopted, killed;
  std::vector<rm::GangLaunch> gangs;

 private:
  std::string kind_;
  rm::EventSink sink_;
};

// An event of `kind` for allocation `id`, the rest left empty.
inline rm::AllocationEvent Event(rm::AllocationEvent::Kind kind, const std::string& id) {
  rm::AllocationEvent e;
  e.kind = kind;
  e.allocation_id = id;
  return e;
}

}  // namespace sf::master
