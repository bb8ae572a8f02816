// Tasks that are not an experiment's trials (docs/cluster.md, "Allocations and tasks"): a
// server (sf serve start, master/serving/serving.h), a command (sf cmd run), a notebook
// (sf notebook start), a shell (sf shell start). The coordinator of trials (master/core/cluster.h) and this one are the two owners of allocations:
// both hand gangs to the allocation service (master/allocation/allocation_service.h), which
// places them through the resource managers and tells each owner what happened to its own.
//
// Contract:
// - Create(spec, with): kInvalidArgument naming "slots" or "resource_pool" for a gang no pool
//   could place (AllocationService::CheckPlaceable). Otherwise the task's row (master/tasks/task_store.h) and its kind's rows (`with`,
//   the same transaction) are stored QUEUED; its first allocation, "task<id>-r0-a1", goes to its
//   pool's manager with the spec's slots (one rank per slot), priority and pool. Its ranks run
//   the spec's entrypoint; each gets a TrialLink token bound to its task id (trial id 0), and a
//   server's, notebook's or shell's ranks the token its clients (the master's proxy) send as
//   SF_SERVE_TOKEN.
// - States: QUEUED -> RUNNING (its manager runs it) -> STOPPING (Stop) -> STOPPED. A run whose
//   ranks fail (a non-zero exit, a lost agent) starts again while restarts < max_restarts (each
//   counted, the failure kept as its error), else FAILED; a run its manager refuses is FAILED
//   at once; a run that ends with status 0 unasked is STOPPED (a server) or COMPLETED (a
//   command). A preempted server (its manager needs the slots) is killed and queued again at
//   its place, not counted as a restart: it keeps no state a checkpoint would save. A command
//   runs once: it is not preempted (it holds its slots until it ends), and rank 0's exit status
//   is stored on its row. Notebooks and shells are not preempted either, and end STOPPED when
//   their idle timeout stops them (status 0).
// - A task with a context (a command's working directory) gets it as an experiment's trials do:
//   its ranks' StartTask names the archive's digest and the agent fetches it (Context).
// - Stop(id): a queued task is taken back and STOPPED at once; a running one is killed and
//   STOPPING until its ranks have exited. Stopping a STOPPED or FAILED task changes nothing;
//   kNotFound for an id that names no live task (the caller checks the row first).
// - Recover() (after a master restart, before the managers start): every live row is held
//   again: a RUNNING one's newest allocation is adopted (the agents re-report its ranks; an
//   external manager watches its job), a QUEUED one is submitted anew, a STOPPING one with a
//   live allocation is adopted and killed, one without is STOPPED.
// - TrialLink, for a rank of a task (Names(who): its task id is "task<id>-r<n>-a<m>.<rank>"):
//   Admit(who) is the identity check (kNotFound for a task this master does not run;
//   kFailedPrecondition for a rank of an allocation that is not the task's current one) and
//   gives the task's id; ShouldStop says STOP_NOW once it is stopping; ReportEndpoint stores
//   the URL with the allocation that reported it (shown only while that allocation runs);
//   ReportExit keeps an external job's rank's failure words for the run's end.
// - Threads: one mutex of its own. It is taken before the allocation service's, never after;
//   updates arrive on the managers' delivery threads without the service's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "master/allocation/allocation_service.h"
#include "master/auth/task_certificates.h"
#include "master/auth/task_tokens.h"
#include "master/tasks/task_store.h"
#include "steadfast/v1/trial_link.pb.h"

namespace sf::master {

struct TaskCoordinatorOptions {
  std::string trial_link_address = "127.0.0.1:8090";  // what a task's ranks dial
  std::map<std::string, std::string> external_trial_link_address;  // by pool (ClusterOptions')
  const TaskTokens* task_tokens = nullptr;  // none: no tokens issued
  // Issues rank 0 of each task that serves something (SERVER, NOTEBOOK, SHELL) its TLS
  // certificate, key and the CA its clients prove themselves by (SF_TASK_TLS_CERT, _KEY, _CA in
  // its environment; master/auth/task_certificates.h). None: tasks serve plain HTTP.
  const TaskCertificates* task_certificates = nullptr;
};

class TaskCoordinator {
 public:
  // `allocations` outlives it; SetOwner for its kinds is called here (before the service starts).
  TaskCoordinator(Database* db, AllocationService* allocations, TaskCoordinatorOptions options);
  TaskCoordinator(const TaskCoordinator&) = delete;
  TaskCoordinator& operator=(const TaskCoordinator&) = delete;

  Status Recover();
  Result<int64_t> Create(const TaskSpec& spec, const std::function<void(pqxx::work&, int64_t)>& with = {});
  Status Stop(int64_t id);

  // ---- TrialLink for a task's ranks
  static bool Names(const steadfast::v1::TrialIdentity& who);
  Result<int64_t> Admit(const steadfast::v1::TrialIdentity& who);
  Result<steadfast::v1::ShouldStopResponse> ShouldStop(const steadfast::v1::TrialIdentity& who);
  Status ReportEndpoint(const steadfast::v1::ReportEndpointRequest& request);
  Status ReportExit(const steadfast::v1::ReportExitRequest& request);
  // The task's context archive (TrialLink GetContext, for the agent to unpack); kNotFound when
  // it has none.
  Result<std::string> Context(const steadfast::v1::TrialIdentity& who);

  // Why each queued task waits, as its manager last said, by task id (one pass over the
  // allocation service's reasons, however many tasks are asked about).
  std::map<int64_t, std::string> PendingReasons();

  // The bearer token a server's clients send (TaskTokens::IssueServing); empty without tokens.
  std::string ServingToken(int64_t id) const;

 private:
  struct Task {
    int64_t id = 0;
    TaskSpec spec;
    std::string state;  // QUEUED, RUNNING, STOPPING (never a terminal one: those are forgotten)
    int restarts = 0;
    int allocations = 0;
    std::string allocation_id;  // the current allocation ("" when none)
    bool running = false;       // its manager runs it
    bool preempted = false;     // killed to make room: queued again when it exits
    int64_t submit_order = 0;   // kept when a preempted task is queued again
  };
  void OnUpdate(const AllocationUpdate& update);
  void SubmitLocked(Task& t, bool keep_place);
  rm::GangLaunch GangLocked(const Task& t, bool with_ranks) const;
  void ExitedLocked(Task& t, const AllocationUpdate& update);
  // Records the state (row first); a terminal one forgets the task.
  void SetStateLocked(Task& t, const std::string& state, const std::string& error = "");
  Result<Task*> FindLocked(const steadfast::v1::TrialIdentity& who);

  TaskStore store_;
  AllocationService* allocations_;
  TaskCoordinatorOptions options_;
  std::mutex mu_;
  std::map<int64_t, Task> tasks_;  // live ones
};

}  // namespace sf::master
