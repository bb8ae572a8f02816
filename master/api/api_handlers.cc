#include "master/api/api_handlers.h"

#include <algorithm>

#include "common/utf8.h"
#include "master/db/utilization_store.h"
#include "master/ingest/metric_groups.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

namespace {

config::ConfigError EmptyDocument() {
  return {"<document>", "the document is empty (send the experiment YAML in configYaml)", 0, 0};
}

// A config's errors into a response's `errors` (CreateExperimentResponse and the like).
template <typename Response>
void AddConfigErrors(const std::vector<config::ConfigError>& errors, Response& out) {
  for (const auto& err : errors) {
    auto* e = out.add_errors();
    e->set_path(err.path);
    e->set_message(err.message);
    e->set_line(err.line);
    e->set_column(err.column);
  }
}

}  // namespace

Result<v1::CreateExperimentResponse> ApiHandlers::CreateExperiment(const v1::CreateExperimentRequest& r,
                                                                   const std::string& owner, int64_t workspace_id) {
  v1::CreateExperimentResponse out;
  if (r.config_yaml().empty()) {
    AddConfigErrors({EmptyDocument()}, out);
    return out;
  }
  std::string context = r.context();
  if (context.empty() && r.context_of() > 0) {
    auto stored = store_->ExperimentContext(r.context_of());
    if (stored.ok()) {
      context = std::move(stored).value();
    } else if (stored.status().code() != StatusCode::kNotFound) {
      return stored.status();
    }
  }
  Cluster::CreateResult created = cluster_->CreateExperiment(r.config_yaml(), !r.has_activate() || r.activate(), r.validate_only(), owner, "",
                                                              workspace_id, context);
  AddConfigErrors(created.errors, out);
  if (created.id) {
    auto row = store_->GetExperiment(*created.id);
    if (!row.ok()) return row.status();
    if (row->has_value()) *out.mutable_experiment() = **row;
  }
  return out;
}

Result<v1::CreateUnmanagedTrialResponse> ApiHandlers::CreateUnmanagedTrial(const v1::CreateUnmanagedTrialRequest& r,
                                                                           const std::string& owner,
                                                                           int64_t workspace_id) {
  v1::CreateUnmanagedTrialResponse out;
  if (r.config_yaml().empty()) {
    AddConfigErrors({EmptyDocument()}, out);
    return out;
  }
  Cluster::UnmanagedTrial made = cluster_->CreateUnmanagedTrial(r.config_yaml(), owner, workspace_id);
  AddConfigErrors(made.created.errors, out);
  if (!made.created.id) return out;
  auto experiment = store_->GetExperiment(*made.created.id);
  if (!experiment.ok()) return experiment.status();
  if (experiment->has_value()) *out.mutable_experiment() = **experiment;
  auto trial = store_->GetTrial(made.trial_id);
  if (!trial.ok()) return trial.status();
  if (trial->has_value()) *out.mutable_trial() = **trial;
  out.set_task_id(made.task_id);
  out.set_task_token(made.task_token);
  out.set_trial_link_address(made.trial_link_address);
  out.set_checkpoint_dir(made.checkpoint_dir);
  out.set_trial_seed(made.trial_seed);
  return out;
}

Result<v1::GetExperimentsResponse> ApiHandlers::GetExperiments(const v1::GetExperimentsRequest& r) {
  ExperimentFilter f;
  for (int s : r.states()) {
    if (s == v1::EXPERIMENT_STATE_UNSPECIFIED || !v1::ExperimentState_IsValid(s)) {
      return InvalidArgument("states: " + std::to_string(s) + " is not an experiment state");
    }
    f.states.push_back(ExperimentStateName(static_cast<v1::ExperimentState>(s)));
  }
  f.name_contains = r.name();
  if (!r.sort_by().empty()) f.sort_by = r.sort_by();
  f.descending = r.descending();
  if (r.offset() < 0) return InvalidArgument("offset: " + std::to_string(r.offset()) + " must be >= 0");
  if (r.limit() < 0 || r.limit() > 1000) {
    return InvalidArgument("limit: " + std::to_string(r.limit()) + " must be between 0 and 1000");
  }
  f.offset = r.offset();
  f.limit = r.limit() == 0 ? 100 : r.limit();
  f.include_archived = r.include_archived();
  for (const std::string& field : r.fields()) {
    if (field != "config") return InvalidArgument("fields: \"" + field + "\" is not a field to include (config)");
    f.include_config = true;
  }
  auto load = [&]() -> Result<v1::GetExperimentsResponse> {
    auto rows = store_->ListExperiments(f);
    if (!rows.ok()) return rows.status();
    v1::GetExperimentsResponse out;
    for (auto& e : rows->first) {
      if (e.has_config_yaml()) e.set_config_yaml(config::RedactConfigSecrets(e.config_yaml()));
      *out.add_experiments() = std::move(e);
    }
    auto* p = out.mutable_pagination();
    p->set_offset(f.offset);
    p->set_limit(f.limit);
    p->set_total(rows->second);
    p->set_start_index(f.offset);
    p->set_end_index(f.offset + out.experiments_size());
    return out;
  };
  if (!experiment_pages_) return load();
  // Every field of the filter, in a fixed order: two requests share a page only when they ask
  // for the same one.
  std::string key = std::to_string(f.name_contains.size()) + ':' + f.name_contains + '\0' + f.sort_by + '\0' + std::to_string(f.offset) + ',' +
                    std::to_string(f.limit) + ',' + (f.descending ? 'd' : 'a') + (f.include_archived ? 'A' : '-') +
                    (f.include_config ? 'C' : '-');
  for (const std::string& s : f.states) key += '\0' + s;
  return experiment_pages_->Get(key, load);
}

void ApiHandlers::CacheExperimentPages(const Database* writes, std::chrono::milliseconds max_age) {
  experiment_pages_ = std::make_unique<SnapshotCache<v1::GetExperimentsResponse>>(writes, max_age);
}

SnapshotCacheStats ApiHandlers::experiment_page_cache_stats() const {
  return experiment_pages_ ? experiment_pages_->stats() : SnapshotCacheStats{};
}

Result<v1::GetExperimentResponse> ApiHandlers::GetExperiment(const v1::GetExperimentRequest& r) {
  auto row = store_->GetExperiment(r.experiment_id());
  if (!row.ok()) return row.status();
  if (!row->has_value()) return NotFound("experiment " + std::to_string(r.experiment_id()) + " does not exist");
  v1::GetExperimentResponse out;
  *out.mutable_experiment() = **row;
  out.mutable_experiment()->set_config_yaml(config::RedactConfigSecrets(out.experiment().config_yaml()));
  return out;
}

Result<v1::ExperimentActionResponse> ApiHandlers::AfterAction(int64_t id, Status st) {
  if (!st.ok()) return st;
  auto row = store_->GetExperiment(id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return NotFound("experiment " + std::to_string(id) + " does not exist");
  v1::ExperimentActionResponse out;
  *out.mutable_experiment() = **row;
  out.mutable_experiment()->set_config_yaml(config::RedactConfigSecrets(out.experiment().config_yaml()));
  return out;
}

Result<v1::ExperimentActionResponse> ApiHandlers::PauseExperiment(const v1::ExperimentActionRequest& r) {
  return AfterAction(r.id(), cluster_->PauseExperiment(r.id()));
}
Result<v1::ExperimentActionResponse> ApiHandlers::ActivateExperiment(const v1::ExperimentActionRequest& r) {
  return AfterAction(r.id(), cluster_->ActivateExperiment(r.id()));
}
Result<v1::ExperimentActionResponse> ApiHandlers::KillExperiment(const v1::ExperimentActionRequest& r) {
  return AfterAction(r.id(), cluster_->KillExperiment(r.id()));
}
Result<v1::ExperimentActionResponse> ApiHandlers::ArchiveExperiment(const v1::ExperimentActionRequest& r) {
  return AfterAction(r.id(), cluster_->ArchiveExperiment(r.id()));
}
Result<v1::ExperimentActionResponse> ApiHandlers::UnarchiveExperiment(const v1::ExperimentActionRequest& r) {
  return AfterAction(r.id(), cluster_->UnarchiveExperiment(r.id()));
}
Result<v1::DeleteExperimentResponse> ApiHandlers::DeleteExperiment(const v1::ExperimentActionRequest& r) {
  Status st = cluster_->DeleteExperiment(r.id());
  if (!st.ok()) return st;
  return v1::DeleteExperimentResponse{};
}

Result<v1::GetExperimentTrialsResponse> ApiHandlers::GetExperimentTrials(const v1::GetExperimentTrialsRequest& r) {
  auto exp = store_->GetExperiment(r.experiment_id());
  if (!exp.ok()) return exp.status();
  if (!exp->has_value()) return NotFound("experiment " + std::to_string(r.experiment_id()) + " does not exist");
  int limit = r.limit() <= 0 ? 1000 : r.limit();
  auto trials = store_->ListTrials(r.experiment_id(), std::max(0, r.offset()), limit);
  if (!trials.ok()) return trials.status();
  v1::GetExperimentTrialsResponse out;
  for (auto& t : *trials) {
    v1::Trial* row = out.add_trials();
    *row = std::move(t);
    // Queued: why it waits; running: why its manager holds it (Slurm: SUSPENDED), if it does.
    if (cluster_ && (row->state() == v1::TRIAL_STATE_QUEUED || row->state() == v1::TRIAL_STATE_RUNNING)) {
      row->set_pending_reason(cluster_->PendingReason(row->id(), row->state() == v1::TRIAL_STATE_QUEUED));
    }
  }
  auto* p = out.mutable_pagination();
  p->set_offset(std::max(0, r.offset()));
  p->set_limit(limit);
  p->set_total((*exp)->num_trials());
  p->set_start_index(p->offset());
  p->set_end_index(p->offset() + out.trials_size());
  return out;
}

Result<v1::GetCheckpointResponse> ApiHandlers::GetCheckpoint(const v1::GetCheckpointRequest& r) {
  if (r.uuid().empty()) return InvalidArgument("uuid: required");
  auto ck = store_->GetCheckpoint(r.uuid());
  if (!ck.ok()) return ck.status();
  if (!ck->has_value()) return NotFound("checkpoint " + r.uuid() + " does not exist");
  v1::GetCheckpointResponse out;
  *out.mutable_checkpoint() = std::move(**ck);
  *out.mutable_location() = CheckpointLocationOf(out.checkpoint().experiment_id());
  return out;
}

v1::CheckpointLocation ApiHandlers::CheckpointLocationOf(int64_t experiment_id) {
  v1::CheckpointLocation out;
  out.set_type("shared_fs");
  auto exp = store_->GetExperiment(experiment_id);
  if (!exp.ok() || !exp->has_value()) return out;
  config::ParseResult parsed = config::ParseExperimentConfig((*exp)->config_yaml());
  if (parsed.ok() && parsed.config->checkpoint_storage && parsed.config->checkpoint_storage->is_s3()) {
    const auto& s3 = *parsed.config->checkpoint_storage;
    out.set_type("s3");
    out.set_endpoint_url(s3.endpoint_url);
    out.set_region(s3.region);
  }
  return out;
}

Result<v1::GetExperimentCheckpointsResponse> ApiHandlers::GetExperimentCheckpoints(
    const v1::GetExperimentCheckpointsRequest& r) {
  auto exp = store_->GetExperiment(r.id());
  if (!exp.ok()) return exp.status();
  if (!exp->has_value()) return NotFound("experiment " + std::to_string(r.id()) + " does not exist");
  auto cks = store_->ListCheckpoints(r.id());
  if (!cks.ok()) return cks.status();
  v1::GetExperimentCheckpointsResponse out;
  for (auto& c : *cks) *out.add_checkpoints() = std::move(c);
  return out;
}

Result<v1::GetTrialResponse> ApiHandlers::GetTrial(const v1::GetTrialRequest& r) {
  auto t = store_->GetTrial(r.trial_id());
  if (!t.ok()) return t.status();
  if (!t->has_value()) return NotFound("trial " + std::to_string(r.trial_id()) + " does not exist");
  v1::GetTrialResponse out;
  *out.mutable_trial() = **t;
  SF_ASSIGN_OR_RETURN(std::vector<std::string> groups, store_->MetricGroups(r.trial_id()));
  for (std::string& g : groups) out.add_metric_groups(std::move(g));
  if (cluster_ && (out.trial().state() == v1::TRIAL_STATE_QUEUED || out.trial().state() == v1::TRIAL_STATE_RUNNING)) {
    out.mutable_trial()->set_pending_reason(
        cluster_->PendingReason(out.trial().id(), out.trial().state() == v1::TRIAL_STATE_QUEUED));
  }
  return out;
}

Result<v1::GetTrialMetricsResponse> ApiHandlers::GetTrialMetrics(const v1::GetTrialMetricsRequest& r) {
  std::string kind = r.kind().empty() ? "training" : r.kind();
  if (std::string problem = MetricGroupProblem(kind); !problem.empty()) {
    return InvalidArgument("kind: \"" + (IsText(kind) ? kind : "?") + "\" " + problem +
                           " (training, validation, or a metric group the trial reported)");
  }
  if (r.max_points() < 0) return InvalidArgument("max_points: must be >= 0");
  auto t = store_->GetTrial(r.trial_id());
  if (!t.ok()) return t.status();
  if (!t->has_value()) return NotFound("trial " + std::to_string(r.trial_id()) + " does not exist");
  auto rows = store_->GetMetrics(r.trial_id(), kind, r.start_batches(), r.end_batches(), r.max_points());
  if (!rows.ok()) return rows.status();
  v1::GetTrialMetricsResponse out;
  for (auto& m : *rows) *out.add_metrics() = std::move(m);
  return out;
}

Result<v1::GetTrialLogsResponse> ApiHandlers::GetTrialLogs(const v1::GetTrialLogsRequest& r) {
  auto t = store_->GetTrial(r.trial_id());
  if (!t.ok()) return t.status();
  if (!t->has_value()) return NotFound("trial " + std::to_string(r.trial_id()) + " does not exist");
  int limit = r.limit() <= 0 ? 10000 : std::min(r.limit(), 100000);
  auto rows = store_->GetLogs(r.trial_id(), r.after_id(), limit, r.search());
  if (!rows.ok()) return rows.status();
  v1::GetTrialLogsResponse out;
  for (auto& l : *rows) *out.add_logs() = std::move(l);
  return out;
}

Result<v1::GetAgentsResponse> ApiHandlers::GetAgents(const v1::GetAgentsRequest&) {
  v1::GetAgentsResponse out;
  for (auto& a : cluster_->Agents()) *out.add_agents() = std::move(a);
  return out;
}

Result<v1::GetResourcePoolsResponse> ApiHandlers::GetResourcePools(const v1::GetResourcePoolsRequest&) {
  v1::GetResourcePoolsResponse out;
  for (auto& p : cluster_->ResourcePools()) *out.add_resource_pools() = std::move(p);
  return out;
}

Result<v1::GetMasterResponse> ApiHandlers::GetMaster(const v1::GetMasterRequest&) {
  ClusterStats s = cluster_->Stats();
  v1::GetMasterResponse out;
  out.set_version(info_.version);
  out.set_master_id(info_.master_id);
  out.set_cluster_name(info_.cluster_name);
  out.set_schema_version(store_->db()->SchemaVersion());
  out.set_connected_agents(s.agents);
  out.set_total_slots(s.total_slots);
  out.set_used_slots(s.used_slots);
  return out;
}

Result<v1::GetClusterUtilizationResponse> ApiHandlers::GetClusterUtilization(
    const v1::GetClusterUtilizationRequest& r) {
  constexpr int64_t kDefaultWindowSeconds = 24 * 3600;
  // Any int64 may come over gRPC; clamp to the years 1-9999 (what PostgreSQL and Timestamp hold).
  constexpr int64_t kMinSeconds = -62135596800, kMaxSeconds = 253402300799;
  const int64_t since = r.has_since() ? std::clamp<int64_t>(r.since().seconds(), kMinSeconds, kMaxSeconds)
                                      : static_cast<int64_t>(NowSeconds()) - kDefaultWindowSeconds;
  UtilizationStore history(store_->db());
  auto rows = history.Read(since, r.pool());
  if (!rows.ok()) return rows.status();
  v1::GetClusterUtilizationResponse out;
  for (const UtilizationPoint& p : *rows) {
    v1::UtilizationPoint* point = out.add_points();
    point->set_pool(p.pool);
    point->mutable_time()->set_seconds(p.minute);
    point->set_slots_total(p.slots_total);
    point->set_slots_busy(p.busy_avg);
    point->set_slots_busy_max(p.busy_max);
    point->set_samples(p.samples);
  }
  return out;
}

}  // namespace sf::master
