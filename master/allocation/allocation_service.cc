// The allocation service (allocation_service.h): allocations held between their submission and
// their end, the managers' events recorded and handed to their owners.
#include "master/allocation/allocation_service.h"

#include <utility>

#include "common/log.h"
#include "common/value.h"
#include "master/db/database.h"

namespace sf::master {
namespace v1 = steadfast::v1;

AllocationService::AllocationService(Store* store, rm::ResourceManager* default_manager,
                                     std::map<std::string, rm::ResourceManager*> external)
    : store_(store), default_(default_manager), external_(std::move(external)) {
  if (store_ && store_->db()) {
    journal_ = std::make_unique<PostgresRendezvousJournal>(store_->db());
    rendezvous_.SetJournal(journal_.get());
  }
  for (rm::ResourceManager* manager : Managers()) {
    manager->SetEventSink([this, manager](const rm::AllocationEvent& event) { OnEvent(*manager, event); });
  }
}

void AllocationService::SetOwner(TaskKind kind, AllocationOwner owner) { owners_[kind] = std::move(owner); }

std::vector<rm::ResourceManager*> AllocationService::Managers() const {
  std::vector<rm::ResourceManager*> out;
  if (default_) out.push_back(default_);
  for (const auto& [pool, manager] : external_) out.push_back(manager);
  return out;
}

void AllocationService::Start() {
  for (rm::ResourceManager* manager : Managers()) manager->Start();
}

void AllocationService::Stop() {
  rendezvous_.Shutdown();
  for (rm::ResourceManager* manager : Managers()) manager->Stop();  // their threads deliver to owners
}

rm::ResourceManager& AllocationService::ManagerFor(const std::string& pool) const {
  auto it = external_.find(pool);
  return it == external_.end() ? *default_ : *it->second;
}

bool AllocationService::IsExternal(const std::string& pool) const { return external_.count(pool) > 0; }

std::string AllocationService::ManagerKind(const std::string& pool) const { return ManagerFor(pool).Kind(); }

void AllocationService::Submit(TaskLaunch request) {
  rm::GangLaunch& gang = request.gang;
  rm::ResourceManager& manager = ManagerFor(gang.pool);
  {
    std::lock_guard<std::mutex> lock(mu_);
    (void)store_->CreateAllocation(gang.allocation_id, request.kind == TaskKind::kTrial ? request.owner : 0,
                                   request.restart, request.kind == TaskKind::kTrial ? 0 : request.owner);
    HoldLocked(request, manager);
  }
  // An external manager's ranks may call Rendezvous before it has seen the job run; the
  // agents' are opened with their places when they start.
  if (IsExternal(gang.pool)) {
    rendezvous_.Open(gang.allocation_id, std::vector<std::string>(gang.world_size, manager.Kind() + " job"));
  }
  manager.Submit(std::move(gang));
}

void AllocationService::Adopt(TaskLaunch request, const std::string& external_id, bool running) {
  const rm::GangLaunch& gang = request.gang;
  rm::ResourceManager& manager = ManagerFor(gang.pool);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Allocation& a = HoldLocked(request, manager);
    a.external_id = external_id;
    a.running = running;
  }
  manager.Adopt(gang, external_id);
  if (IsExternal(gang.pool)) {
    rendezvous_.Open(gang.allocation_id,
                     std::vector<std::string>(gang.world_size, manager.Kind() + " job " + external_id));
  }
}

rm::ResourceManager* AllocationService::HeldBy(const std::string& allocation_id, bool forget) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(allocation_id);
  if (it == held_.end()) return nullptr;
  rm::ResourceManager* manager = it->second.manager;
  if (forget) ForgetLocked(allocation_id);
  return manager;
}

AllocationService::Allocation& AllocationService::HoldLocked(const TaskLaunch& request,
                                                             rm::ResourceManager& manager) {
  Allocation& a = held_[request.gang.allocation_id];
  a.kind = request.kind;
  a.owner = request.owner;
  a.manager = &manager;
  a.pool = request.gang.pool;
  a.world_size = request.gang.world_size;
  return a;
}

void AllocationService::Kill(const std::string& allocation_id) {
  if (rm::ResourceManager* manager = HeldBy(allocation_id, /*forget=*/false)) manager->Kill(allocation_id);
}

void AllocationService::Withdraw(const std::string& allocation_id) {
  if (rm::ResourceManager* manager = HeldBy(allocation_id, /*forget=*/true)) manager->Kill(allocation_id);
}

void AllocationService::Release(const std::string& allocation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (held_.count(allocation_id)) ForgetLocked(allocation_id);
}

void AllocationService::ForgetLocked(const std::string& allocation_id) {
  rendezvous_.Close(allocation_id);
  (void)store_->EndAllocation(allocation_id);
  held_.erase(allocation_id);
}

bool AllocationService::MarkRunning(const std::string& allocation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(allocation_id);
  if (it == held_.end() || it->second.running) return false;
  it->second.running = true;
  it->second.pending_reason.clear();
  (void)store_->SetAllocationState(allocation_id, "RUNNING");
  return true;
}

void AllocationService::RecordRankFailure(const std::string& allocation_id, int rank, const std::string& host,
                                          const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(allocation_id);
  if (it == held_.end() || !it->second.reported_failure.empty()) return;
  Allocation& a = it->second;
  auto known = a.rank_hosts.find(rank);
  const std::string where = !host.empty() ? " on " + host : known == a.rank_hosts.end() ? "" : " on " + known->second;
  a.reported_failure = "rank " + std::to_string(rank) + where + ": " + reason;
}

void AllocationService::OnEvent(rm::ResourceManager& from, const rm::AllocationEvent& event) {
  // Every write this event causes (here and in its owner) commits without waiting for the disk:
  // the serial delivery path is not bounded by a flush per commit (database.h, DeferredFlush).
  DeferredFlush deferred;
  AllocationUpdate update;
  bool deliver = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    deliver = RecordLocked(from, event, update);
  }
  if (!deliver) {
    // Withdrawn or released meanwhile: nothing may run it.
    if (event.kind == rm::AllocationEvent::Kind::kRunning) from.Kill(event.allocation_id);
    return;
  }
  auto owner = owners_.find(update.kind);
  if (owner != owners_.end()) owner->second(update);
}

bool AllocationService::RecordLocked(rm::ResourceManager& from, const rm::AllocationEvent& event,
                                     AllocationUpdate& update) {
  auto it = held_.find(event.allocation_id);
  if (it == held_.end() || it->second.manager != &from) return false;
  Allocation& a = it->second;
  using Kind = rm::AllocationEvent::Kind;
  switch (event.kind) {
    case Kind::kSubmitted:
      a.external_id = event.external_id;
      (void)store_->SetAllocationExternalId(event.allocation_id, event.external_id);
      break;
    case Kind::kPending:
      a.pending_reason = event.reason;
      break;
    case Kind::kRunning: {
      for (const std::string& h : event.hosts) update.where += (update.where.empty() ? "" : ",") + h;
      if (!update.where.empty()) update.where = from.Kind() + ":" + update.where;
      if (!event.ranks.empty()) {
        for (size_t rank = 0; rank < event.ranks.size(); ++rank) {
          if (!event.ranks[rank].host.empty()) a.rank_hosts[static_cast<int>(rank)] = event.ranks[rank].host;
        }
      } else if (!update.where.empty()) {
        for (int rank = 0; rank < a.world_size; ++rank) a.rank_hosts[rank] = update.where;
      }
      Value::List slots;
      for (int rank = 0; rank < a.world_size; ++rank) {
        if (rank < static_cast<int>(event.ranks.size())) {
          if (event.ranks[rank].host.empty()) continue;  // its agent has not re-registered yet
          slots.push_back(
              Value(Value::Map{{"agent_id", event.ranks[rank].host}, {"slot_id", event.ranks[rank].slot}}));
        } else if (!update.where.empty()) {
          slots.push_back(Value(Value::Map{{"agent_id", update.where}, {"slot_id", "rank " + std::to_string(rank)}}));
        }
      }
      // Where it runs is recorded even when a rank of an external job called in first.
      if (!slots.empty() || !a.running) {
        (void)store_->UpdateAllocation(event.allocation_id, "RUNNING", Value(slots), false);
      }
      if (a.running) break;  // seen before (that rank's call marked it running)
      a.running = true;
      a.pending_reason.clear();  // it runs: why it waited is over
      a.reported_failure.clear();
      if (!event.ranks.empty()) {
        std::vector<std::string> rank_hosts;
        for (const rm::RankPlace& place : event.ranks) rank_hosts.push_back(place.host);
        // Every rank of the gang meets, whichever of them the manager has placed so far.
        if (static_cast<int>(rank_hosts.size()) < a.world_size) rank_hosts.resize(static_cast<size_t>(a.world_size));
        rendezvous_.Open(event.allocation_id, std::move(rank_hosts));
      }
      break;
    }
    case Kind::kPreempt:
      break;
    case Kind::kExited:
      update.reported_failure = a.reported_failure;
      break;
  }
  update.kind = a.kind;
  update.owner = a.owner;
  update.event = event;
  update.manager = from.Kind();
  update.external = &from != default_;
  update.external_id = a.external_id;
  if (event.kind == Kind::kRunning || event.kind == Kind::kExited) update.rank_hosts = a.rank_hosts;
  if (event.kind == Kind::kExited) ForgetLocked(event.allocation_id);
  return true;
}

std::map<std::string, std::string> AllocationService::PendingReasons() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [id, a] : held_) {
    if (!a.pending_reason.empty()) out[id] = a.pending_reason;
  }
  return out;
}

// The managers answer under their own locks; the running counts come from the records.
std::vector<v1::Agent> AllocationService::Agents() const {
  std::vector<v1::Agent> out;
  for (rm::ResourceManager* manager : Managers()) {
    for (v1::Agent& a : manager->Agents()) out.push_back(std::move(a));
  }
  return out;
}

std::vector<v1::ResourcePool> AllocationService::Pools() const {
  std::map<std::string, v1::ResourcePool> pools;
  for (rm::ResourceManager* manager : Managers()) {
    for (v1::ResourcePool& p : manager->Pools()) pools[p.name()] = std::move(p);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, a] : held_) {
      if (!a.running || a.kind != TaskKind::kTrial) continue;
      v1::ResourcePool& p = pools[a.pool];
      if (p.name().empty()) {  // a pool its manager no longer lists (its last agent lost)
        p.set_name(a.pool);
        p.set_scheduler(a.manager->Kind());
      }
      p.set_running_trials(p.running_trials() + 1);
    }
  }
  std::vector<v1::ResourcePool> out;
  for (auto& [name, p] : pools) out.push_back(std::move(p));
  return out;
}

std::optional<AllocationService::Unplaceable> AllocationService::CheckPlaceable(const std::string& pool,
                                                                              int world_size) const {
  if (IsExternal(pool)) return std::nullopt;  // its manager says why it waits
  const rm::PoolSize capacity = default_->Capacity(pool);
  const std::vector<std::string> known_pools = default_->PoolNames();
  if (capacity.nodes == 0 && (!known_pools.empty() || !external_.empty())) {
    std::string pools;
    for (const std::string& known : known_pools) pools += (pools.empty() ? "" : ", ") + known;
    for (const auto& [name, manager] : external_) pools += (pools.empty() ? "" : ", ") + name + " (" + manager->Kind() + ")";
    return Unplaceable{"resource_pool", "\"" + pool + "\" is not a resource pool of this cluster; its pools: " + pools};
  }
  if (capacity.nodes > 0 && world_size > capacity.slots) {
    return Unplaceable{"slots", std::to_string(world_size) + " is more than the largest gang this cluster can place: " +
                                    std::to_string(capacity.slots) + " slots in resource pool \"" + pool + "\" across " +
                                    std::to_string(capacity.nodes) + " agent(s)"};
  }
  return std::nullopt;
}

rm::PoolSize AllocationService::DefaultSize() const { return default_->Size(); }

}  // namespace sf::master
