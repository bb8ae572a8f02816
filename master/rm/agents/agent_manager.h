// The agents' resource manager (master/rm/resource_manager.h): gangs placed on the slots of
// Steadfast's own agents by the master's scheduler (master/scheduler/scheduler.h,
// docs/scheduling.md), each rank started with a StartTask over AgentLink.
//
// What it keeps: the connected agents and their slots, the scheduler, and every allocation it
// was given until it exits — which agent and slot runs each rank, which ranks still run, their
// exit statuses, and the first rank that failed on its own. What it does with them:
// - Submit queues the gang with the scheduler; Schedule() places what fits (StartTask to each
//   rank's agent, with its slot, LOCAL_RANK and LOCAL_SIZE: a Running event with every rank's
//   place), asks for preemptions (Preempt events) and publishes each queued gang's reason
//   (Pending events, when it changes).
// - A rank that exits is recorded; one that fails gets the rest of its gang killed; when no
//   rank runs any more, the allocation's slots are freed and an Exited event carries the exit
//   statuses and the first failure ("rank 1 on agent-2: <the agent's message>").
// - After a master restart, Adopt waits for the agents to re-register with the ranks they still
//   run (the first one reported: Running; all of them: the scheduler takes their slots back). A
//   rank no agent reports within the reconnect grace period is lost (exit -1), like the ranks
//   of an agent gone longer than that (Tick), and so are ranks an agent no longer lists when it
//   re-registers whose exit never arrives. Tasks an agent reports that belong to no allocation
//   here (their trial ended or moved on) are killed.
//
// Threads: none of its own, and no lock: the coordinator calls every method with its own lock
// held (the AgentLink service's calls come through the coordinator), and events go to the sink
// synchronously, under that lock, once the call that caused them has done its bookkeeping.
// Messages to agents are queued on their connections, written by the connections' threads.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/rm/resource_manager.h"
#include "master/scheduler/scheduler.h"
#include "steadfast/v1/agent_link.pb.h"
#include "steadfast/v1/api.pb.h"

namespace sf::master {

// One live AgentLink stream, as the master sees it.
class AgentConnection {
 public:
  virtual ~AgentConnection() = default;
  // Queues a message for the agent; never blocks. Thread-safe.
  virtual void Send(const steadfast::v1::MasterMessage& message) = 0;
};

}  // namespace sf::master

namespace sf::master::rm {

struct AgentManagerOptions {
  std::chrono::seconds reconnect_grace{30};     // before a lost agent's (or unadopted) ranks are lost
  std::chrono::milliseconds kill_grace{10000};  // SIGTERM -> SIGKILL on agents
  std::chrono::seconds missing_rank_grace{10};  // for the exit of a rank an agent no longer lists
  SchedulingMode default_scheduler = SchedulingMode::kPriority;
  std::map<std::string, SchedulingMode> pool_schedulers;
  std::chrono::seconds min_run{60};  // before an allocation may be preempted
};

class AgentManager final : public ResourceManager {
 public:
  using Clock = std::chrono::steady_clock;
  explicit AgentManager(AgentManagerOptions options = {});

  // ---- ResourceManager
  std::string Kind() const override { return "agents"; }
  Status Check() override { return Status::Ok(); }
  void SetEventSink(EventSink sink) override { sink_ = std::move(sink); }
  void Start() override {}
  void Stop() override {}
  void Submit(GangLaunch launch) override;
  void Adopt(const GangLaunch& gang, const std::string& external_id) override;
  void Kill(const std::string& allocation_id) override;
  // Every connected agent of every pool (Stats(), as nodes and slots).
  PoolSize Size() const override;

  // A scheduling pass at `now` (seconds on a monotonic clock, for min_run).
  void Schedule(double now);
  // Lost agents, ranks missing after a re-registration, adoptions past their deadline.
  void Tick(Clock::time_point now);

  // ---- AgentLink (through the coordinator)
  // Registers (or re-registers) an agent; re-adopts the tasks it reports running.
  void Connected(const steadfast::v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn);
  void Disconnected(const std::string& agent_id, const AgentConnection* conn);
  // kAlreadyExists while another incarnation is connected under the id.
  Status CheckClaim(const std::string& agent_id, const std::string& incarnation) const;
  // The heartbeat's time and its GPU usage samples (Cluster::AgentHeartbeat says which count).
  void Heartbeat(const std::string& agent_id, const steadfast::v1::Heartbeat& heartbeat);
  void TaskStateChanged(const std::string& agent_id, const steadfast::v1::TaskStateChange& change);

  // ---- What it has
  // Every agent registered since the master started, each busy slot with its trial.
  std::vector<steadfast::v1::Agent> Agents() const;
  // Every pool an agent is in or a queued gang asks for: its scheduler, agents, slots, usage and
  // queue (running_trials left to the caller).
  std::map<std::string, steadfast::v1::ResourcePool> Pools() const;
  struct Capacity {
    int agents = 0, slots = 0;
  };
  Capacity PoolCapacity(const std::string& pool) const;
  // The scheduling mode of a pool of agents ("priority", "fair_share").
  std::string SchedulerOf(const std::string& pool) const { return SchedulingModeName(scheduler_.PoolMode(pool)); }  // registered agents, connected or not
  bool HasAgents() const { return !agents_.empty(); }
  std::vector<std::string> KnownPools() const;  // sorted
  struct Usage {
    int agents = 0, total_slots = 0, used_slots = 0;  // connected agents' slots; placed ranks
  };
  Usage Stats() const;

 private:
  struct Agent {
    std::string id, hostname, pool, version;
    std::vector<steadfast::v1::Slot> slots;
    std::shared_ptr<AgentConnection> conn;
    bool connected = false;
    double registered = 0, last_heartbeat = 0;
    std::optional<Clock::time_point> lost_since;
    std::string incarnation;  // of the connected agent process
  };
  struct Allocation {
    GangLaunch gang;           // its ranks' StartTasks until placed
    bool placed = false;       // its ranks were started (or reported by their agents)
    bool running_told = false;  // the Running event went out
    bool in_scheduler = false;  // the scheduler holds it (queued, placed or adopted)
    bool killed = false;       // Kill() was called: it is stopping
    std::vector<SlotRef> slots;  // by rank
    std::map<int, std::string> rank_agent;
    std::set<int> live_ranks;
    std::map<int, int> exit_codes;
    std::string first_failure;
    std::string pending_reason;  // as last published
    std::optional<Clock::time_point> adopt_deadline;
    std::map<int, Clock::time_point> missing_ranks;
  };

  AllocationRequest RequestOf(const GangLaunch& gang) const;
  void Place(Allocation& a, const Assignment& assignment);
  void KillRanks(const Allocation& a);
  void SendKill(const std::string& agent_id, const std::string& task_id);
  // No rank runs any more: frees its slots, says Exited, forgets it.
  void Finish(const std::string& allocation_id);
  void Emit(AllocationEvent event);
  void Deliver();

  AgentManagerOptions options_;
  EventSink sink_;
  Scheduler scheduler_;
  std::map<std::string, Agent> agents_;
  std::map<std::string, Allocation> allocations_;
  std::deque<AllocationEvent> events_;
  bool delivering_ = false;
};

}  // namespace sf::master::rm
