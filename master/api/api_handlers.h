// The Api service's handlers, shared by the gRPC server and the REST gateway: each takes the
// request message and returns the response message or a Status (mapped to a gRPC code or an
// HTTP status by the caller). Thread-safe.
#pragma once

#include <string>

#include "common/status.h"
#include "master/core/cluster.h"
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
  ApiHandlers(Store* store, Cluster* cluster, MasterInfo info)
      : store_(store), cluster_(cluster), info_(std::move(info)) {}

  // An invalid config is not an error of the call: the response carries `errors` and no
  // experiment, and the caller maps it to 400 / INVALID_ARGUMENT.
  Result<steadfast::v1::CreateExperimentResponse> CreateExperiment(
      const steadfast::v1::CreateExperimentRequest& r, const std::string& owner);
  // A page of experiment summaries, straight from the Store (no coordinator lock): config_yaml
  // is left out unless r.fields names "config"; GetExperiment returns the whole experiment.
  Result<steadfast::v1::GetExperimentsResponse> GetExperiments(const steadfast::v1::GetExperimentsRequest& r);
  Result<steadfast::v1::GetExperimentResponse> GetExperiment(const steadfast::v1::GetExperimentRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> PauseExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> ActivateExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> KillExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::ExperimentActionResponse> ArchiveExperiment(const steadfast::v1::ExperimentActionRequest& r);
  Result<steadfast::v1::GetExperimentTrialsResponse> GetExperimentTrials(
      const steadfast::v1::GetExperimentTrialsRequest& r);
  Result<steadfast::v1::GetExperimentCheckpointsResponse> GetExperimentCheckpoints(
      const steadfast::v1::GetExperimentCheckpointsRequest& r);
  Result<steadfast::v1::GetTrialResponse> GetTrial(const steadfast::v1::GetTrialRequest& r);
  Result<steadfast::v1::GetTrialMetricsResponse> GetTrialMetrics(const steadfast::v1::GetTrialMetricsRequest& r);
  Result<steadfast::v1::GetTrialLogsResponse> GetTrialLogs(const steadfast::v1::GetTrialLogsRequest& r);
  Result<steadfast::v1::GetAgentsResponse> GetAgents(const steadfast::v1::GetAgentsRequest& r);
  Result<steadfast::v1::GetMasterResponse> GetMaster(const steadfast::v1::GetMasterRequest& r);
  // The recorded utilisation history (UtilizationStore::Read): since unset means 24 hours ago.
  Result<steadfast::v1::GetClusterUtilizationResponse> GetClusterUtilization(
      const steadfast::v1::GetClusterUtilizationRequest& r);

  Cluster* cluster() { return cluster_; }
  Store* store() { return store_; }

 private:
  Result<steadfast::v1::ExperimentActionResponse> AfterAction(int64_t id, Status st);

  Store* store_;
  Cluster* cluster_;
  MasterInfo info_;
};

}  // namespace sf::master
