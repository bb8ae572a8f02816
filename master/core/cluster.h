// The master's coordinator: experiments and their searchers, trials and what their allocations'
// ends decide. The API and TrialLink services call into it (and AgentLink for task logs). Where a
// trial's gang runs is each pool's resource manager's business (master/rm/resource_manager.h):
// the default one (the agents', master/rm/agents/agent_manager.h, where AgentLink's connections
// end) or another configured for the pool (Slurm). The coordinator names no manager: it hands
// gangs to the allocation service (master/allocation/allocation_service.h), which holds each
// allocation and its managers, answers for pools, agents and sizes, and tells the coordinator
// what happened to a trial's allocation once it has recorded it (on the manager's thread; the
// coordinator takes mu_).
//
// State transitions are written to PostgreSQL before they are acted upon, so a restarted
// master rebuilds everything from the database (Recover) and re-adopts trials whose agents
// reconnect still running them.
//
// The class is one, its definition six files along its seams: experiments (cluster.cc),
// trials' gangs and the allocation service's updates (cluster_allocation.cc), task logs and the
// cluster's agents and pools as the service reports them (cluster_inventory.cc), what only
// managers other than the default need (cluster_external.cc: Slurm), trainers
// (cluster_trial_link.cc), restart and housekeeping (cluster_recovery.cc).
//
// Thread-safe: one mutex guards all in-memory state; calls are short (a few statements).
// Messages to agents are queued on their connection and written by its own thread, so no call
// here blocks on the network.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/config/experiment_config.h"
#include "master/agentlink/delivery_ledger.h"
#include "master/allocation/allocation_registry.h"
#include "master/allocation/allocation_service.h"
#include "master/auth/task_certificates.h"
#include "master/auth/task_tokens.h"
#include "master/db/store.h"
#include "master/rm/resource_manager.h"
#include "master/housekeeping/checkpoint_retention.h"
#include "master/ingest/log_writer.h"
#include "master/ingest/metric_writer.h"
#include "master/scheduler/scheduler.h"
#include "master/tasks/task_coordinator.h"
#include "master/searcher/search_method.h"
#include "steadfast/v1/agent_link.pb.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/trial_link.pb.h"

namespace sf::master {

struct ClusterOptions {
  std::string checkpoint_root = "/var/lib/steadfast/checkpoints";
  // Flow YAML of the checkpoint_storage added to configs without one (MasterConfig's); empty: none.
  std::string default_checkpoint_storage;
  std::string trial_link_address = "127.0.0.1:8090";  // what trainers dial
  bool check_data_files = true;                       // refuse configs naming unreadable files
  // Issues each task's TrialLink token in StartTask (master/auth/task_tokens.h); none when null.
  const TaskTokens* task_tokens = nullptr;
  // Issues the TLS certificates of tasks that serve something (TaskCoordinatorOptions); none
  // when null.
  const TaskCertificates* task_certificates = nullptr;
  // Where metric and log ingestion write (MetricWriter, LogWriter): a pool of their own, so a
  // saturated ingestion path takes no connection from the coordinator or the API's reads, and
  // its commits do not invalidate cached reads (master/db/snapshot_cache.h). Null: the Store's.
  Database* ingest_db = nullptr;
  // How long a preempted trial may take to checkpoint and stop before it is killed
  // (docs/scheduling.md; when a manager asks for preemption is its own business).
  std::chrono::seconds preemption_grace{300};
  // An unmanaged trial whose script makes no TrialLink call for this long (the library's stop
  // poll calls every second) ends in ERROR, and its experiment with it: the script died without
  // EndTrial. Counted from the master's start for trials recovered after a restart.
  std::chrono::milliseconds unmanaged_timeout{std::chrono::seconds(300)};
  // The manager of every pool not in external_pools (the agents', master main). Required. Not
  // owned; it outlives the Cluster. The Cluster sets its event sink, starts and stops it.
  rm::ResourceManager* default_manager = nullptr;
  // Pools whose gangs another resource manager places (master/rm/resource_manager.h: Slurm),
  // by pool name. Not owned; they outlive the Cluster's Stop, which stops them.
  std::map<std::string, rm::ResourceManager*> external_pools;
  // What ranks of an external pool dial for TrialLink, by pool (default: trial_link_address).
  std::map<std::string, std::string> external_trial_link_address;
  // Called at the start of every pass of the coordinator's over its queue (PublishReasonsLocked),
  // under the coordinator's lock: fault injection for tests that hold a pass artificially long.
  // None in production.
  std::function<void()> scheduling_pass_hook;
};

// Counts for /metrics and GetMaster.
struct ClusterStats {
  std::map<std::string, int> experiments_by_state;
  std::map<std::string, int> trials_by_state;
  int agents = 0;
  int total_slots = 0;
  int used_slots = 0;
};

class Cluster {
 public:
  Cluster(Store* store, ClusterOptions options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Rebuilds experiments, searchers and trials from the database after a (re)start.
  Status Recover();
  // Starts the background housekeeping thread (lost agents, adoption deadlines).
  void Start();
  void Stop();
  // Tasks that are not an experiment's trials (servers): created, stopped and recovered there.
  TaskCoordinator& tasks() { return tasks_; }

  // ---- API
  // Validates and stores an experiment; on invalid config returns errors and stores nothing.
  struct CreateResult {
    std::optional<int64_t> id;
    std::vector<config::ConfigError> errors;
  };
  // `initial_checkpoint` (a checkpoint uuid, possibly of another experiment): every trial the
  // experiment creates starts from it, as if it were the trial's own latest (`sf experiment
  // continue`).
  //
  // `context`: the experiment's context archive (a user trial's code, docs/core-api.md), stored
  // with it; allowed only with an `entrypoint`, and checked (common/context/context_archive.h)
  // before anything is stored: a bad one is an error at "context_directory".
  CreateResult CreateExperiment(const std::string& config_yaml, bool activate, bool validate_only,
                                const std::string& owner, const std::string& initial_checkpoint = "",
                                int64_t workspace_id = 1, const std::string& context = "");
  // Unmanaged mode (docs/core-api.md): an ACTIVE experiment with one RUNNING trial that no
  // scheduler places; a script started by hand speaks TrialLink for it as rank 0 of restart 0
  // with the returned task id and token, and ends it with EndTrial. The config's
  // hyperparameters must be constants. Errors as for CreateExperiment.
  struct UnmanagedTrial {
    CreateResult created;
    int64_t trial_id = 0;
    std::string task_id, task_token, checkpoint_dir, trial_link_address;
    int64_t trial_seed = 0;
  };
  UnmanagedTrial CreateUnmanagedTrial(const std::string& config_yaml, const std::string& owner,
                                      int64_t workspace_id = 1);
  // kFailedPrecondition for transitions the current state doesn't allow; kNotFound.
  Status PauseExperiment(int64_t id);
  Status ActivateExperiment(int64_t id);
  Status KillExperiment(int64_t id);
  Status ArchiveExperiment(int64_t id);
  // Unarchiving an experiment that is not archived is a no-op.
  Status UnarchiveExperiment(int64_t id);
  // Deletes a terminal experiment (master/housekeeping/experiment_deletion.h): its rows, then,
  // off the lock, its checkpoints' files; it is forgotten in memory. kNotFound;
  // kFailedPrecondition (naming the state) for one that is not COMPLETED, CANCELED or ERROR.
  Status DeleteExperiment(int64_t id);
  // Deletes one checkpoint now (housekeeping/checkpoint_retention.h, DeleteCheckpoint); takes no
  // lock of the coordinator.
  Status DeleteCheckpoint(const std::string& uuid);
  // Every manager's machines (the agents registered since the start).
  std::vector<steadfast::v1::Agent> Agents();
  // Every pool its manager knows, by name, with its slots, usage and queue as the manager sees
  // them now, and its running trials.
  std::vector<steadfast::v1::ResourcePool> ResourcePools();
  ClusterStats Stats();
  // Searcher summary for the UI (empty map when unknown).
  Value SearcherSummary(int64_t experiment_id);
  // Why a queued trial waits, as the last scheduling pass computed it (Scheduler::PendingReason),
  // or that it waits for its searcher; empty for a trial that was not queued then. Takes only
  // a small lock of its own, never the coordinator's. With `queued` (the caller read the trial
  // as QUEUED): never empty — a trial queued since the last pass (a restart), or started since
  // its row was read, waits for the scheduler's next pass.
  std::string PendingReason(int64_t trial_id, bool queued = false);

  // ---- AgentLink's task logs (agents themselves are the agents' manager's)
  // Stores the lines; returns once they are durable. With `delivery` (the AgentLink event that
  // carried them), a batch stored before is not stored again (LogWriter).
  Status TaskLogs(const steadfast::v1::LogBatch& batch,
                  std::optional<DeliveryStamp> delivery = std::nullopt);

  // ---- TrialLink
  // Long-polls up to `wait` for an operation; an empty response means "ask again".
  Result<steadfast::v1::GetNextOperationResponse> NextOperation(
      const steadfast::v1::TrialIdentity& who, std::chrono::milliseconds wait);
  Status ReportMetrics(const steadfast::v1::ReportMetricsRequest& request);
  // The same without blocking the caller: `done` gets the status once the rows are committed
  // (or refused), on the metric writer's thread (TrialLink's callback handler answers there).
  void ReportMetricsAsync(const steadfast::v1::ReportMetricsRequest& request, std::function<void(Status)> done);
  Status CompleteOperation(const steadfast::v1::CompleteOperationRequest& request);
  Status ReportCheckpoint(const steadfast::v1::ReportCheckpointRequest& request);
  Result<steadfast::v1::ShouldStopResponse> ShouldStop(const steadfast::v1::ShouldStopRequest& request);
  Result<steadfast::v1::RendezvousResponse> Rendezvous(const steadfast::v1::RendezvousRequest& request,
                                                       std::chrono::milliseconds wait);
  // The context archive of the caller's experiment (read from PostgreSQL, outside mu_);
  // kNotFound when it has none.
  Result<std::string> Context(const steadfast::v1::TrialIdentity& who);
  // Steps done in the current operation: the trial's total until its next metric report.
  Status ReportProgress(const steadfast::v1::ReportProgressRequest& request);
  // Ends an unmanaged trial (and its experiment): COMPLETED, or ERROR with `error`.
  // kFailedPrecondition for a managed trial.
  Status EndTrial(const steadfast::v1::EndTrialRequest& request);
  // A task publishes its URL (a server, master/serving/serving.h): stored with the allocation
  // that reported it (TaskCoordinator::ReportEndpoint). kFailedPrecondition for a trial.
  Status ReportEndpoint(const steadfast::v1::ReportEndpointRequest& request);
  // A task's own output (TrialLink ReportLogs): checked, then stored once per (task,
  // incarnation, sequence) through the LogWriter, as the agents' batches are.
  Status ReportLogs(const steadfast::v1::ReportLogsRequest& request);
  // A rank of an external manager's job says how its program ended (sf-task): a failure is kept
  // as the run's first failure ("rank 1 on slurm:node2: ValueError: bad shape"), used when the
  // manager reports the job's end. kFailedPrecondition for a trial on agents.
  Status ReportExit(const steadfast::v1::ReportExitRequest& request);
  // The chief ends its operation early for a reason (TrialLink ReportEarlyExit): kept for the
  // run, acted on when the run's processes exit (AllocationExitedLocked).
  Status ReportEarlyExit(const steadfast::v1::ReportEarlyExitRequest& request);
  // Returns once every write committed so far is on disk: for a caller that ran the calls above
  // under a DeferredFlush (master/db/database.h), so their writes did not wait for the disk
  // under the coordinator's lock, before it answers (TrialLinkGrpcService does).
  Status WaitForDurability();
  // The best searcher metric the caller's experiment has seen (none before the first finite one).
  Result<std::optional<double>> ExperimentBestValidation(const steadfast::v1::TrialIdentity& who);
  // Deletes a checkpoint of the caller's experiment (DeleteCheckpoint's rules); kPermissionDenied
  // for another experiment's, kNotFound for an unknown uuid.
  Status DeleteTrialCheckpoint(const steadfast::v1::TrialIdentity& who, const std::string& uuid);
  // The chief will exit with its operation unfinished, to be resumed (TrialLink
  // AcknowledgePreemption): the run counts as told to stop. Other ranks: ignored.
  Status AcknowledgePreemption(const steadfast::v1::TrialIdentity& who);
  // A checkpoint the caller's trial was to resume from failed verification (TrialLink
  // ReportCheckpointUnusable): marked CORRUPTED, the event in the trial's logs, the trial's
  // latest now its newest intact one, whose uuid is returned (empty: none). kPermissionDenied
  // for a checkpoint the trial does not resume from; kNotFound for an unknown uuid.
  Result<std::string> ReportCheckpointUnusable(const steadfast::v1::TrialIdentity& who, const std::string& uuid,
                                               const std::string& reason);

 private:
  struct Trial {
    int64_t id = 0, experiment_id = 0, request_id = 0;
    steadfast::v1::TrialState state = steadfast::v1::TRIAL_STATE_QUEUED;
    Value hparams;
    int restarts = 0;
    int64_t target_length = 0;     // operation in flight (0: none)
    int64_t completed_length = 0;  // last operation completed
    bool closing = false;          // the searcher closed it: finish after the current op
    std::string stop;              // "", "pause", "kill", "preempt"
    // A preempted trial still running past this is killed (and resumes from its last checkpoint).
    std::optional<std::chrono::steady_clock::time_point> preempt_deadline;
    bool preempt_killed = false;
    // The current allocation was told to checkpoint and stop, and took it (its clean exit then
    // resumes it, even when the stop was withdrawn meanwhile): ShouldStop's answer for the
    // native trainer; user code's acknowledgement (AcknowledgePreemption).
    bool told_to_stop = false;
    // Unmanaged trials: the last TrialLink call of its script (its liveness).
    std::chrono::steady_clock::time_point last_call{};
    int64_t submit_order = 0;      // kept when a preempted trial is queued again
    // The trial its last run was preempted for, until it runs again (0: none); persisted, so
    // its queued reason says so after a master restart too.
    int64_t preempted_by = 0;
    std::string latest_checkpoint_uuid;
    std::string latest_checkpoint_path;
    std::optional<double> best_metric;
    std::optional<double> latest_metric;  // of its last completed operation
    // The current allocation: "t<trial>-r<restart>-a<n>", n counting the trial's allocations,
    // so an id is never reused (a late event of an earlier run can't be taken for this one's).
    std::string allocation_id;
    int allocations = 0;
    bool allocated = false;        // its manager runs it (Running), until it exits
    // allocation_id, allocated and stop change only through SetAllocationLocked,
    // SetAllocatedLocked and SetStopLocked, which keep the allocation registry (registry_) in
    // step. Its total batches live there.
    // Where it runs, why it waits and how its ranks ended are the allocation service's
    // (allocations_); the trial keeps what its exit is decided on.
    int world_size = 0;
    std::map<int, int> exit_codes;  // as the manager's Exited event gave them
    // The first rank that failed on its own (not killed by us): "rank 1 on agent-2: <why>".
    std::string first_failure;
    std::string error;           // why it ended in ERROR (set with that state)
    // The current run's chief reported an early exit (ReportEarlyExitRequest::Reason; 0: none).
    int early_exit = 0;
    std::string restore;         // the checkpoint path its ranks restore ("" from scratch)
    // Whether a run of it is due when it is not running: an operation is left, or the searcher
    // closed it and its last run failed after the operation (run once more, it hears
    // "complete" and exits, which completes it).
    bool HasRunLeft() const { return target_length > completed_length || closing; }
  };
  struct Experiment {
    int64_t id = 0;
    config::ExperimentConfig config;
    std::string config_yaml;
    steadfast::v1::ExperimentState state = steadfast::v1::EXPERIMENT_STATE_ACTIVE;
    std::unique_ptr<SearchMethod> searcher;
    bool searcher_done = false;
    bool search_failed = false;
    std::map<int64_t, int64_t> trial_by_request;
    std::optional<double> best;
    std::string initial_checkpoint;  // uuid each new trial starts from (CreateExperiment)
    std::string context_sha256;      // its context archive's digest ("" without one)
    int64_t context_bytes = 0;
    bool unmanaged = false;          // CreateUnmanagedTrial: no searcher runs, nothing is scheduled
  };

  // The experiments row of a parsed config (state, context and `unmanaged` left to the caller).
  static NewExperiment ExperimentRow(const config::ExperimentConfig& c, const std::string& config_yaml,
                                     const std::string& owner, int64_t workspace_id);
  // All *Locked methods require mu_.
  void ApplyOpsLocked(Experiment& e, std::vector<SearcherOp> ops);
  // The searcher's snapshot, with `trials`' updates in the same transaction (Store).
  void SaveSearcherLocked(Experiment& e, const std::vector<std::pair<int64_t, TrialUpdate>>& trials = {});
  // Hands the trial's next allocation to its pool's manager; keep_place: with the submit order
  // it had (a preempted trial keeps its place among its peers).
  void SubmitLocked(Trial& t, bool keep_place = false);
  // The coordinator's pass over its queue: publishes why each queued trial waits (the managers'
  // Pending events, or the searcher), for PendingReason(). A pass walks every trial, so what
  // changes which trials wait (a start, an exit, a new experiment) asks for one through
  // PublishReasonsSoonLocked: at once when none ran for kReasonsEvery, else the housekeeping
  // thread's next pass runs it. A burst of thousands of starts costs a few passes, not one each;
  // a trial's own reason is still set (a Pending event) or dropped (it leaves the queue) at once.
  void PublishReasonsLocked();
  void PublishReasonsSoonLocked();
  // The trial's gang as its manager gets it; with `with_ranks`, each rank's StartTask.
  rm::GangLaunch GangLocked(const Experiment& e, const Trial& t, bool with_ranks);
  // Rank `rank`'s StartTask of the trial's current allocation (no slot), its token included.
  steadfast::v1::StartTask TaskSpecLocked(const Experiment& e, const Trial& t, int rank, int world_size,
                                          const std::string& restore, const std::string& master_address);
  void KillTrialTasksLocked(Trial& t);
  // Takes back a queued (not running) allocation from its manager.
  void WithdrawLocked(Trial& t);
  // What the allocation service says about the trial's allocation (OnAllocationUpdate takes
  // mu_ and calls it, on the manager's delivery thread).
  void OnAllocationUpdate(const AllocationUpdate& update);
  void AllocationUpdateLocked(const AllocationUpdate& update);
  // The manager says it runs, or one of an external manager's ranks called in first: RUNNING.
  void AllocationRunningLocked(Trial& t, const std::string& where);
  // ---- cluster_external.cc: what only another resource manager's allocations need.
  bool ExternalLocked(const Experiment& e) const;
  // Recover(): the trial's latest allocation, submitted before the restart, is watched again.
  void AdoptExternalLocked(Trial& t, const std::string& allocation_id, const std::string& external_id,
                           const std::string& allocation_state);
  void ReleaseLocked(Trial& t);
  void SetAllocationLocked(Trial& t, const std::string& allocation_id);
  // The stop asked of the trial's run, kept in the registry too (ShouldStop's lock-free answer).
  void SetStopLocked(Trial& t, const std::string& stop);
  void SetAllocatedLocked(Trial& t, bool allocated);
  // Every rank has exited (rank_hosts: where each ran, for the failure's words).
  void AllocationExitedLocked(Trial& t, const std::map<int, std::string>& rank_hosts = {});
  void TrialFailedLocked(Trial& t, const std::string& why);
  void SetTrialStateLocked(Trial& t, steadfast::v1::TrialState s, const std::string& error = "");
  void SetExperimentStateLocked(Experiment& e, steadfast::v1::ExperimentState s,
                                const std::string& error = "");
  void MaybeFinishExperimentLocked(Experiment& e);
  Trial* FindTrialLocked(int64_t trial_id);
  Result<Trial*> CheckIdentityLocked(const steadfast::v1::TrialIdentity& who);
  // Checks a metric report (kinds, caller's identity) and raises the trial's in-memory total
  // against the allocation registry, without mu_ (only a rank whose allocation its manager has
  // not yet reported running takes it). The rows, ready for the MetricWriter.
  Result<MetricBatch> MetricBatchFor(const steadfast::v1::ReportMetricsRequest& request);
  std::string CheckpointDirLocked(const Experiment& e, const Trial& t) const;
  // The trial's seed (Determined's trial_seed, docs/core-api.md): a hash of the experiment's
  // seed (reproducibility.experiment_seed, else its id) and the trial's request id, in
  // [0, 2^31): the same for every rank and restart of the trial, different for its siblings.
  static int64_t TrialSeed(const Experiment& e, const Trial& t);
  // Queues a checkpoint retention pass over the experiment (its checkpoint_storage policy).
  void RequestRetentionLocked(const Experiment& e);
  void HousekeepingLoop();
  // Unmanaged trials whose scripts went quiet past options_.unmanaged_timeout: ERROR.
  void EndSilentUnmanagedLocked(std::chrono::steady_clock::time_point now);
  Status NotLive(int64_t id, const std::string& verb);

  Store* store_;
  ClusterOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;  // wakes long-polls (next operation)
  // Each trial's current allocation and total, for ingestion to check reports against outside
  // mu_ (written under mu_, read by anyone).
  AllocationRegistry registry_;
  // Every allocation between its submission and its end, with the managers behind it and the
  // rendezvous of its ranks (outside mu_).
  AllocationService allocations_;
  // Tasks that are not trials (servers): the allocation service's other owner. The TrialLink
  // calls a task's ranks make (ShouldStop, ReportEndpoint, ReportExit, ReportLogs) go there.
  TaskCoordinator tasks_;
  std::mutex reasons_mu_;                            // guards pending_reasons_ only
  std::map<int64_t, std::string> pending_reasons_;   // queued trial -> why, set by PublishReasonsLocked
  std::chrono::steady_clock::time_point reasons_published_{};  // the last PublishReasonsLocked
  bool reasons_stale_ = false;  // a pass was asked for since (PublishReasonsSoonLocked)
  std::map<int64_t, Experiment> experiments_;
  std::map<int64_t, Trial> trials_;
  bool stopping_ = false;
  std::thread housekeeping_;
  // Metric reports and task logs go to PostgreSQL through these, outside mu_ (group commit).
  MetricWriter metric_writer_;
  LogWriter log_writer_;
  // Checkpoint retention passes run on its own thread, outside mu_.
  CheckpointRetention retention_{store_->db(), std::chrono::seconds(1)};
  // ReportLogs senders ("task:<task id>", incarnation) registered since the start: each one's
  // record in agent_deliveries is made by its first batch (task_log_ledger_.Register).
  DeliveryLedger task_log_ledger_{store_->db()};
  std::mutex log_senders_mu_;
  std::set<std::pair<std::string, std::string>> log_senders_;
};

// "EXPERIMENT_STATE_ACTIVE" etc. are terminal when COMPLETED, CANCELED or ERROR.
bool IsTerminal(steadfast::v1::ExperimentState s);
bool IsTerminal(steadfast::v1::TrialState s);

}  // namespace sf::master
