// The agents' resource manager (master/rm/resource_manager.h): gangs placed on the slots of
// Steadfast's own agents by the master's scheduler (master/scheduler/scheduler.h,
// docs/scheduling.md), each rank started with a StartTask over AgentLink.
//
// What it keeps: the connected agents and their slots, the scheduler, and every allocation it
// was given until it exits — which agent and slot runs each rank, which ranks still run, their
// exit statuses, and the first rank that failed on its own. What it does with them:
// - Submit queues the gang with the scheduler; Schedule() places what fits (a Running event with
//   every rank's place, then, once the coordinator took that event, a StartTask to each rank's
//   agent with its slot, LOCAL_RANK and LOCAL_SIZE: a rank that starts at once and calls in
//   finds its trial running and its rendezvous open), asks for preemptions (Preempt events) and
//   publishes each queued gang's reason (Pending events, when it changes).
// - A rank that exits is recorded; one that fails gets the rest of its gang killed; when no
//   rank runs any more, the allocation's slots are freed and an Exited event carries the exit
//   statuses and the first failure ("rank 1 on agent-2: <the agent's message>").
// - After a master restart, Adopt waits for the agents to re-register with the ranks they still
//   run (the first one reported: Running; all of them: the scheduler takes their slots back). A
//   rank no agent reports within the reconnect grace period is lost (exit -1), like the ranks
//   of an agent gone longer than that (Tick), and so are ranks an agent no longer lists when it
//   re-registers whose exit never arrives. Tasks an agent reports that belong to no allocation
//   here (their trial ended or moved on) are killed. A slot is never given to a second task
//   while its first still runs: the slots of such a task, and of the ranks of a gang re-adopted
//   in part, stay taken until the agent reports the task's exit, re-registers without it or is
//   lost (or, for a rank, until its whole gang is adopted).
//
// AgentLink's connections end here: the AgentLink service (master/api/grpc_services.cc) calls
// Connected, Heartbeat, TaskStateChanged and Disconnected directly; the coordinator never sees
// an agent, only allocations.
//
// Threads (the contract's, resource_manager.h): one lock of its own; a thread of its own that
// runs a scheduling pass when something changed (a gang submitted or killed, an agent came or
// went, a rank exited) and every pass_interval (gangs too young to preempt may be by now; Tick);
// events delivered in order, one at a time, never under the lock. AgentLink's calls deliver the
// events they caused before they return (so an agent's event the delivery ledger acknowledges
// has been acted on by the coordinator: docs/cluster.md, delivery); the coordinator's calls
// (Submit, Adopt, Kill, the queries) never deliver: its thread does. Messages to agents are
// queued on their connections, written by the connections' threads.
#pragma once

#include <chrono>
#include <functional>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
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
  std::chrono::milliseconds pass_interval{500};  // scheduling pass and Tick at least this often
  // Pending events (why each queued gang waits) go out after a pass, but at most once per this
  // interval: a burst of passes (one per rank exit) does not explain thousands of queued gangs
  // each time. The thread publishes what a pass within the interval left unsaid when it is due.
  std::chrono::milliseconds reasons_interval{200};
  std::chrono::seconds reconnect_grace{30};     // before a lost agent's (or unadopted) ranks are lost
  std::chrono::milliseconds kill_grace{10000};  // SIGTERM -> SIGKILL on agents
  std::chrono::seconds missing_rank_grace{10};  // for the exit of a rank an agent no longer lists
  SchedulingMode default_scheduler = SchedulingMode::kPriority;
  std::map<std::string, SchedulingMode> pool_schedulers;
  std::chrono::seconds min_run{60};  // before an allocation may be preempted
  // Called after each scheduling pass (Schedule and Preempt) with its duration in seconds, on
  // the manager's thread under its lock: must be quick (the master's metrics).
  std::function<void(double seconds)> pass_observer;
};

class AgentManager final : public ResourceManager {
 public:
  using Clock = std::chrono::steady_clock;
  explicit AgentManager(AgentManagerOptions options = {});
  ~AgentManager() override;

  // ---- ResourceManager
  std::string Kind() const override { return "agents"; }
  Status Check() override { return Status::Ok(); }
  void SetEventSink(EventSink sink) override;
  // Its thread: scheduling passes, Tick, and the delivery of what the coordinator's calls caused.
  void Start() override;
  void Stop() override;
  void Submit(GangLaunch launch) override;
  void Adopt(const GangLaunch& gang, const std::string& external_id) override;
  void Kill(const std::string& allocation_id) override;
  // Every connected agent of every pool (as nodes and slots) and the slots placed ranks use.
  PoolSize Size() const override;
  // The pool's registered agents (connected or not) and their slots.
  PoolSize Capacity(const std::string& pool) const override;
  std::vector<std::string> PoolNames() const override;  // of every registered agent
  // Every pool an agent is in or a queued gang asks for: its scheduler, agents, slots, usage
  // and queue.
  std::vector<steadfast::v1::ResourcePool> Pools() const override;
  // Every agent registered since the master started, each busy slot with its trial.
  std::vector<steadfast::v1::Agent> Agents() const override;

  // A scheduling pass at `now` (seconds on a monotonic clock, for min_run), and Tick (lost
  // agents, ranks missing after a re-registration, adoptions past their deadline) at `now`:
  // what the thread runs; tests run them at times of their choosing. Both deliver what they
  // caused before returning (never call them with the sink's lock held).
  void Schedule(double now);
  void Tick(Clock::time_point now);

  // ---- AgentLink (the AgentLink service's calls; each delivers what it caused)
  // Registers (or re-registers) an agent; re-adopts the tasks it reports running.
  void Connected(const steadfast::v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn);
  void Disconnected(const std::string& agent_id, const AgentConnection* conn);
  // kAlreadyExists while another incarnation is connected under the id.
  Status CheckClaim(const std::string& agent_id, const std::string& incarnation) const;
  // Notes the heartbeat's time and keeps the GPU usage it carries as the latest sample of each
  // of the agent's cuda slots (shown by Agents()); a cuda slot it carries none for, or an
  // implausible one for (utilisation outside 0..100, negative memory, more memory used than
  // the slot has), has none from then on. In memory only: cleared when the agent disconnects.
  void Heartbeat(const std::string& agent_id, const steadfast::v1::Heartbeat& heartbeat);
  void TaskStateChanged(const std::string& agent_id, const steadfast::v1::TaskStateChange& change);

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
  // A task an agent runs whose slots the scheduler holds under HoldId(task) because no
  // allocation it schedules does: one no allocation here owns (its trial ended or moved on, e.g.
  // closed by a master that was then killed before the task's exit arrived), being killed; or a
  // rank of a gang re-adopted in part (the scheduler takes a gang's slots all at once).
  struct HeldTask {
    std::string agent_id;
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
    // Its ranks' StartTasks (agent, message), sent once the Running event was delivered: a rank
    // that starts at once and calls the master finds its allocation running, never before.
    std::vector<std::pair<std::string, steadfast::v1::MasterMessage>> unsent;
  };

  // The scheduler's clock: seconds on the monotonic clock.
  static double SchedulerSeconds(Clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  }
  // *Locked: mu_ held.
  AllocationRequest RequestOf(const GangLaunch& gang) const;
  void ConnectedLocked(const steadfast::v1::RegisterAgent& reg, std::shared_ptr<AgentConnection> conn);
  // The scheduler's id for the slots a held task runs on; a real allocation id never has its form.
  static std::string HoldId(const std::string& task_id) { return "held:" + task_id; }
  // Holds the slots a task runs on (those not excluded) until ReleaseHeldLocked.
  void HoldTaskLocked(const Agent& agent, const std::string& task_id, const std::vector<std::string>& slot_ids,
                      const std::set<SlotRef>& excluded = {});
  // Kills a stale task the agent reports and holds its slots (those no allocation here claims).
  void HoldStaleLocked(const Agent& agent, const steadfast::v1::RunningTask& task);
  // Frees a held task's slots; false when it held none.
  bool ReleaseHeldLocked(const std::string& task_id);
  // The scheduler dropped these allocations (an agent lost or re-registered with other slots):
  // forgets the held tasks among them.
  void ForgetHeldLocked(const std::vector<std::string>& dropped);
  // Records a rank's exit; true when its allocation has no rank left (Exited queued, slots free).
  bool RankExitedLocked(const std::string& agent_id, const steadfast::v1::TaskStateChange& change);
  void ScheduleLocked(double now);
  // Pending events for the gangs whose reason changed since last published (after a pass);
  // the Soon form defers to the thread within reasons_interval of the last one.
  void PublishReasonsLocked();
  void PublishReasonsSoonLocked();
  void TickLocked(Clock::time_point now);
  void Place(Allocation& a, const Assignment& assignment);
  void KillRanks(const Allocation& a);
  // After the Running event of `allocation_id` was delivered: its ranks' StartTasks go out (and
  // kills after them when it was killed meanwhile).
  void SendStarts(const std::string& allocation_id);
  void SendKill(const std::string& agent_id, const std::string& task_id);
  // No rank runs any more: frees its slots, says Exited, forgets it.
  void Finish(const std::string& allocation_id);
  void Emit(AllocationEvent event);
  // Something the next pass should see: wakes the thread.
  void ChangedLocked();
  // Delivers every queued event, in order (one deliverer at a time; never under mu_). Returns
  // once the queue was empty with this caller delivering, so everything queued before the call
  // has been delivered.
  void Deliver();
  void Loop();

  AgentManagerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool changed_ = false, stopping_ = false;
  bool reasons_due_ = false;           // a pass ran since the last PublishReasonsLocked
  bool reasons_wake_ = false;          // Loop should recompute when it wakes (reasons_due_ set)
  Clock::time_point reasons_at_{};     // the last PublishReasonsLocked
  std::thread thread_;
  std::mutex deliver_mu_;  // held by the one delivering (not with mu_)
  std::thread::id deliverer_;  // who holds deliver_mu_ (guarded by mu_)
  EventSink sink_;         // set before Start
  Scheduler scheduler_;
  std::map<std::string, Agent> agents_;
  std::map<std::string, Allocation> allocations_;
  std::map<std::string, HeldTask> held_;  // by task id: tasks whose slots are held (HoldId)
  std::deque<AllocationEvent> events_;
};

}  // namespace sf::master::rm
