// The Api service's handlers, shared by the gRPC server and the REST gateway: each takes the
// request message and returns the response message or a Status (mapped to a gRPC code or an
// HTTP status by the caller). Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include <string>
#include <vector>

#include "common/status.h"
#include "master/core/cluster.h"
#include "master/db/snapshot_cache.h"
#include "master/db/store.h"
#include "steadfast/v1/api.pb.h"

namespace sf::master {

struct MasterInfo {
  std::string version;
  std::string master_id;
  std::string cluster_name;
};

class ApiHandlers {
 public:
  // `store` serves the handlers' reads; the master gives it a pool of its own (database.h), so
  // reads never wait behind the coordinator's or ingestion's transactions. `cluster` may be null
  // (tests of the transport and the reads alone): what only the coordinator knows is then absent.
  ApiHandlers(Store* store, Cluster* cluster, MasterInfo info)
      : store_(store), cluster_(cluster), info_(std::move(info)) {}

  // From now on GetExperiments answers repeated pages from memory while nothing has committed
  // on `writes` (every write but ingestion's) and the page is younger than `max_age`
  // (snapshot_cache.h). Call before serving.
  void CacheExperimentPages(const Database* writes, std::chrono::milliseconds max_age);
  SnapshotCacheStats experiment_page_cache_stats() const;

  // An invalid config is not an error of the call: the response carries `errors` and no
  // experiment, and the caller maps it to 400 / INVALID_ARGUMENT.
  Result<steadfast::v1::CreateExperimentResponse> CreateExperiment(
      const steadfast::v1::CreateExperimentRequest& r, const std::string& owner, int64_t workspace_id = 1);
  // Unmanaged mode (docs/core-api.md); an invalid config is reported in `errors` as above. The
  // response carries the trial's TrialLink credential: only its creator gets it.
  Result<steadfast::v1::CreateUnmanagedTrialResponse> CreateUnmanagedTrial(
      const steadfast::v1::CreateUnmanagedTrialRequest& r, const std::string& owner, int64_t workspace_id = 1);
  // A page of experiment summaries, straight from the Store (no coordinator lock): config_yaml
  // is left out unless r.fields names "config"; GetExperiment returns the whole experiment.
  Result<steadfast::v1::GetExperimentsResponse> GetExperiments(const steadfast::v1::GetExperimentsRequest& r);
  Result<steadfast::v1::GetExperimentResponse> GetExperiment(const steadfast::v1::GetExperimentRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> PauseExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> ActivateExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> KillExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> ArchiveExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> UnarchiveExperiment(const steadfast::v1::ExperimentActionRequest& r);
  // Cluster::DeleteExperiment: only terminal experiments (else kFailedPrecondition).
  Result<steadfast::v1::DeleteExperimentResponse> DeleteExperiment(const steadfast::v1::ExperimentActionRequest& r);

  // Bulk actions (api/bulk_actions.cc). The request names experiments by `ids` (at most
  // 10,000; duplicates count once) or selects them by `filter` (at least one criterion; at most
  // 10,000 matches), never both: anything else is kInvalidArgument for the whole call. Each
  // experiment then gets the single action's outcome in its own result (an id that does not
  // exist is its result's NOT_FOUND, a refused transition its FAILED_PRECONDITION), and the
  // others are acted on regardless. Results follow the order of `ids`, or of id for a filter.
  // `refused` (access_policy.h's Authorizer::RefusedExperiments; null: nothing is) is asked once
  // for all the experiments: an id it refuses gets its PERMISSION_DENIED result, and a filter
  // selects only experiments it allows.
  enum class BulkAction { kKill, kPause, kActivate, kArchive, kUnarchive, kDelete };
  using RefusedExperiments = std::function<Result<std::map<int64_t, Status>>(const std::vector<int64_t>& ids)>;
  Result<steadfast::v1::BulkExperimentActionResponse> BulkExperimentAction(
      BulkAction action, const steadfast::v1::BulkExperimentActionRequest& r,
      const RefusedExperiments& refused = nullptr);
  // Cluster::DeleteCheckpoint for each uuid (1 to 10,000, duplicates once), one result each in
  // request order; kInvalidArgument for the whole call only when there are none or too many.
  // `refused` (Authorizer::RefusedCheckpoints; null: nothing is), asked once, refuses a uuid
  // with its PERMISSION_DENIED result.
  using RefusedCheckpoints =
      std::function<Result<std::map<std::string, Status>>(const std::vector<std::string>& uuids)>;
  Result<steadfast::v1::DeleteCheckpointsResponse> DeleteCheckpoints(const steadfast::v1::DeleteCheckpointsRequest& r,
                                                                     const RefusedCheckpoints& refused = nullptr);
  Result<steadfast::v1::GetExperimentTrialsResponse> GetExperimentTrials(
      const steadfast::v1::GetExperimentTrialsRequest& r);
  Result<steadfast::v1::GetCheckpointResponse> GetCheckpoint(const steadfast::v1::GetCheckpointRequest& r);
  // Where an experiment's checkpoints are stored, without keys (shared_fs when it is unknown).
  steadfast::v1::CheckpointLocation CheckpointLocationOf(int64_t experiment_id);
  Result<steadfast::v1::GetExperimentCheckpointsResponse> GetExperimentCheckpoints(
      const steadfast::v1::GetExperimentCheckpointsRequest& r);
  Result<steadfast::v1::GetTrialResponse> GetTrial(const steadfast::v1::GetTrialRequest& r);
  Result<steadfast::v1::GetTrialMetricsResponse> GetTrialMetrics(const steadfast::v1::GetTrialMetricsRequest& r);
  Result<steadfast::v1::GetTrialLogsResponse> GetTrialLogs(const steadfast::v1::GetTrialLogsRequest& r);
  Result<steadfast::v1::GetAgentsResponse> GetAgents(const steadfast::v1::GetAgentsRequest& r);
  Result<steadfast::v1::GetResourcePoolsResponse> GetResourcePools(const steadfast::v1::GetResourcePoolsRequest& r);
  // api/experiment_continue.cc: experiment r.id must be COMPLETED, use the single searcher and
  // have one trial with an ACTIVE latest checkpoint (else kFailedPrecondition naming what is
  // missing), and r.max_length must exceed that checkpoint's batches (else kInvalidArgument). The
  // new experiment has the old config with searcher.max_length {batches: r.max_length}, and its
  // trial starts from that checkpoint (Cluster::CreateExperiment's initial_checkpoint).
  Result<steadfast::v1::CreateExperimentResponse> ContinueExperiment(const steadfast::v1::ContinueExperimentRequest& r,
                                                                     const std::string& owner);
  Result<steadfast::v1::GetMasterResponse> GetMaster(const steadfast::v1::GetMasterRequest& r);
  // The recorded utilisation history (UtilizationStore::Read): since unset means 24 hours ago.
  Result<steadfast::v1::GetClusterUtilizationResponse> GetClusterUtilization(
      const steadfast::v1::GetClusterUtilizationRequest& r);

  Cluster* cluster() { return cluster_; }
  Store* store() { return store_; }
  // Where the methods that write without the coordinator (the model registry) write: the
  // coordinator's pool, so their commits count for the list's cache and they never get the read
  // pool's busy 503. Unset: the read store's pool (tests with one pool).
  void SetWriteDatabase(Database* db) { writes_ = db; }
  Database* writes() { return writes_ ? writes_ : store_->db(); }

 private:
  Result<steadfast::v1::ExperimentActionResponse> AfterAction(int64_t id, Status st);
  // The ids of the experiments `filter` selects, by id (api/bulk_actions.cc).
  Result<std::vector<int64_t>> SelectExperiments(const steadfast::v1::BulkExperimentFilter& filter,
                                                 bool include_archived);

  Store* store_;
  Cluster* cluster_;
  MasterInfo info_;
  Database* writes_ = nullptr;
  std::unique_ptr<SnapshotCache<steadfast::v1::GetExperimentsResponse>> experiment_pages_;
};

}  // namespace sf::master
