// Bulk experiment actions (ApiHandlers::BulkExperimentAction): one request, many experiments,
// one result each. Each experiment goes through the same Cluster call as the single-id route,
// so a bulk action can do nothing a single one could not.
#include <map>
#include <set>

#include "master/api/api_handlers.h"
#include "master/api/grpc_services.h"
#include "master/db/pg_array.h"

namespace sf::master {
namespace v1 = steadfast::v1;
namespace {

constexpr int kMaxBulkExperiments = 10000;

const char* ActionName(ApiHandlers::BulkAction action) {
  switch (action) {
    case ApiHandlers::BulkAction::kKill: return "kill";
    case ApiHandlers::BulkAction::kPause: return "pause";
    case ApiHandlers::BulkAction::kActivate: return "activate";
    case ApiHandlers::BulkAction::kArchive: return "archive";
    case ApiHandlers::BulkAction::kUnarchive: return "unarchive";
    case ApiHandlers::BulkAction::kDelete: return "delete";
  }
  return "?";
}

// Text that travels to PostgreSQL as a parameter must not hold a NUL.
Status CheckText(const std::string& field, const std::string& value) {
  if (value.find('\0') != std::string::npos) return InvalidArgument(field + ": contains a NUL character");
  return Status::Ok();
}

// A per-item result's ok, code (gRPC) and error from the single action's status.
template <typename R>
void SetOutcome(R* result, const Status& st) {
  result->set_ok(st.ok());
  if (st.ok()) return;
  result->set_code(static_cast<int32_t>(ToGrpc(st).error_code()));
  result->set_error(st.message());
}

}  // namespace

Result<std::vector<int64_t>> ApiHandlers::SelectExperiments(const v1::BulkExperimentFilter& filter,
                                                            bool include_archived) {
  std::vector<std::string> state_names;
  for (int s : filter.states()) {
    if (s == v1::EXPERIMENT_STATE_UNSPECIFIED || !v1::ExperimentState_IsValid(s)) {
      return InvalidArgument("filter.states: " + std::to_string(s) + " is not an experiment state");
    }
    state_names.push_back(ExperimentStateName(static_cast<v1::ExperimentState>(s)));
  }
  const std::string states = TextArray(state_names);
  SF_RETURN_IF_ERROR(CheckText("filter.name", filter.name()));
  SF_RETURN_IF_ERROR(CheckText("filter.owner", filter.owner()));
  if (filter.states().empty() && filter.name().empty() && filter.owner().empty()) {
    return InvalidArgument("filter: name at least one of states, name and owner (an empty filter would select "
                           "every experiment)");
  }
  std::vector<int64_t> ids;
  Status st = store_->db()->Transact("select experiments", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT id FROM experiments WHERE ($1 = '{}' OR state = ANY($1::text[])) "
        "AND ($2 = '' OR strpos(lower(name), lower($2)) > 0) AND ($3 = '' OR owner = $3) "
        "AND ($4 OR NOT archived) ORDER BY id LIMIT $5",
        states, filter.name(), filter.owner(), include_archived, kMaxBulkExperiments + 1);
    for (const auto& row : r) ids.push_back(row[0].as<int64_t>());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (static_cast<int>(ids.size()) > kMaxBulkExperiments) {
    return InvalidArgument("filter: selects more than " + std::to_string(kMaxBulkExperiments) +
                           " experiments; narrow it");
  }
  return ids;
}

Result<v1::BulkExperimentActionResponse> ApiHandlers::BulkExperimentAction(
    BulkAction action, const v1::BulkExperimentActionRequest& r, const RefusedExperiments& refused_by_policy) {
  if (!r.ids().empty() && r.has_filter()) return InvalidArgument("ids and filter: give one of them, not both");
  if (r.ids().empty() && !r.has_filter()) {
    return InvalidArgument(std::string("ids or filter: name the experiments to ") + ActionName(action));
  }
  if (r.ids_size() > kMaxBulkExperiments) {
    return InvalidArgument("ids: " + std::to_string(r.ids_size()) + " ids; at most " +
                           std::to_string(kMaxBulkExperiments) + " per request");
  }
  std::vector<int64_t> ids;
  if (r.has_filter()) {
    const bool archived = action == BulkAction::kUnarchive || r.filter().include_archived();
    SF_ASSIGN_OR_RETURN(ids, SelectExperiments(r.filter(), archived));
  } else {
    std::set<int64_t> seen;
    for (int64_t id : r.ids()) {
      if (seen.insert(id).second) ids.push_back(id);
    }
  }
  std::map<int64_t, Status> refused;
  if (refused_by_policy) {
    SF_ASSIGN_OR_RETURN(refused, refused_by_policy(ids));
  }
  if (r.has_filter() && !refused.empty()) {
    // A filter selects only what the caller may act on.
    std::vector<int64_t> allowed;
    for (int64_t id : ids) {
      auto it = refused.find(id);
      if (it == refused.end()) {
        allowed.push_back(id);
      } else if (it->second.code() != StatusCode::kPermissionDenied) {
        return it->second;
      }
    }
    ids = std::move(allowed);
  }
  v1::BulkExperimentActionResponse out;
  for (int64_t id : ids) {
    Status st;
    if (auto it = refused.find(id); it != refused.end()) {
      v1::BulkExperimentActionResult* result = out.add_results();
      result->set_id(id);
      SetOutcome(result, it->second);
      continue;
    }
    switch (action) {
      case BulkAction::kKill: st = cluster_->KillExperiment(id); break;
      case BulkAction::kPause: st = cluster_->PauseExperiment(id); break;
      case BulkAction::kActivate: st = cluster_->ActivateExperiment(id); break;
      case BulkAction::kArchive: st = cluster_->ArchiveExperiment(id); break;
      case BulkAction::kUnarchive: st = cluster_->UnarchiveExperiment(id); break;
      case BulkAction::kDelete: st = cluster_->DeleteExperiment(id); break;
    }
    v1::BulkExperimentActionResult* result = out.add_results();
    result->set_id(id);
    SetOutcome(result, st);
    if (action != BulkAction::kDelete || !st.ok()) {
      auto row = store_->GetExperiment(id);
      if (row.ok() && row->has_value()) result->set_state((*row)->state());
    }
  }
  return out;
}

Result<v1::DeleteCheckpointsResponse> ApiHandlers::DeleteCheckpoints(const v1::DeleteCheckpointsRequest& r,
                                                                     const RefusedCheckpoints& refused_by_policy) {
  if (r.uuids().empty()) return InvalidArgument("uuids: name the checkpoints to delete");
  if (r.uuids_size() > kMaxBulkExperiments) {
    return InvalidArgument("uuids: " + std::to_string(r.uuids_size()) + " uuids; at most " +
                           std::to_string(kMaxBulkExperiments) + " per request");
  }
  std::map<std::string, Status> refused;
  if (refused_by_policy) {
    SF_ASSIGN_OR_RETURN(refused, refused_by_policy(std::vector<std::string>(r.uuids().begin(), r.uuids().end())));
  }
  v1::DeleteCheckpointsResponse out;
  std::set<std::string> seen;
  for (const std::string& uuid : r.uuids()) {
    if (!seen.insert(uuid).second) continue;
    auto it = refused.find(uuid);
    Status st = it != refused.end() ? it->second : cluster_->DeleteCheckpoint(uuid);
    v1::DeleteCheckpointResult* result = out.add_results();
    result->set_uuid(uuid);
    SetOutcome(result, st);
  }
  return out;
}

}  // namespace sf::master
