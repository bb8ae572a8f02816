#include "master/api/api_methods.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include "common/context/context_archive.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/utf8.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;
namespace pb = google::protobuf;

Status OwnerIsText(const Principal& p) {
  return IsText(p.username) ? Status::Ok() : InvalidArgument("X-SF-User is not UTF-8 text");
}

}  // namespace

std::vector<const v1::ConfigError*> ReplyConfigErrors(const pb::Message& reply) {
  std::vector<const v1::ConfigError*> out;
  const pb::FieldDescriptor* field = reply.GetDescriptor()->FindFieldByName("errors");
  if (!field || !field->is_repeated() || field->message_type() != v1::ConfigError::descriptor()) return out;
  const pb::Reflection* reflection = reply.GetReflection();
  for (int i = 0; i < reflection->FieldSize(reply, field); ++i) {
    out.push_back(static_cast<const v1::ConfigError*>(&reflection->GetRepeatedMessage(reply, field, i)));
  }
  return out;
}

ApiMethods::ApiMethods(ApiDependencies deps) : deps_(deps) {
  ApiHandlers* h = deps_.handlers;
  Authorizer* authz = deps_.authorizer;
  // The workspace a new experiment goes to (empty name: Uncategorized), if the caller may create there.
  auto workspace = [authz](const Principal& p, const std::string& name) -> Result<int64_t> {
    if (!authz) return Accounts::kDefaultWorkspace;
    return authz->WorkspaceForNewExperiment(p, name);
  };

  Add<v1::CreateExperimentRequest>("CreateExperiment", [h, workspace](const v1::CreateExperimentRequest& r,
                                                                      const Principal& p)
                                                           -> Result<v1::CreateExperimentResponse> {
    SF_RETURN_IF_ERROR(OwnerIsText(p));
    SF_ASSIGN_OR_RETURN(int64_t ws, workspace(p, r.workspace()));
    return h->CreateExperiment(r, p.username, ws);
  });
  Add<v1::CreateUnmanagedTrialRequest>(
      "CreateUnmanagedTrial",
      [h, workspace](const v1::CreateUnmanagedTrialRequest& r, const Principal& p)
          -> Result<v1::CreateUnmanagedTrialResponse> {
        SF_RETURN_IF_ERROR(OwnerIsText(p));
        SF_ASSIGN_OR_RETURN(int64_t ws, workspace(p, r.workspace()));
        return h->CreateUnmanagedTrial(r, p.username, ws);
      });
  Add<v1::ContinueExperimentRequest>("ContinueExperiment", [h](const v1::ContinueExperimentRequest& r,
                                                               const Principal& p) -> Result<v1::CreateExperimentResponse> {
    SF_RETURN_IF_ERROR(OwnerIsText(p));
    return h->ContinueExperiment(r, p.username);
  });
  Add<v1::GetExperimentsRequest>("GetExperiments",
                                 [h](const v1::GetExperimentsRequest& r, const Principal&) { return h->GetExperiments(r); });
  Add<v1::GetExperimentRequest>("GetExperiment",
                                [h](const v1::GetExperimentRequest& r, const Principal&) { return h->GetExperiment(r); });
  using Action = Result<v1::ExperimentActionResponse> (ApiHandlers::*)(const v1::ExperimentActionRequest&);
  for (const auto& [name, action] : std::map<std::string, Action>{{"KillExperiment", &ApiHandlers::KillExperiment},
                                                                  {"PauseExperiment", &ApiHandlers::PauseExperiment},
                                                                  {"ActivateExperiment", &ApiHandlers::ActivateExperiment},
                                                                  {"ArchiveExperiment", &ApiHandlers::ArchiveExperiment},
                                                                  {"UnarchiveExperiment", &ApiHandlers::UnarchiveExperiment}}) {
    Add<v1::ExperimentActionRequest>(name, [h, action](const v1::ExperimentActionRequest& r, const Principal&) {
      return (h->*action)(r);
    });
  }
  Add<v1::ExperimentActionRequest>("DeleteExperiment",
                                   [h](const v1::ExperimentActionRequest& r, const Principal&) { return h->DeleteExperiment(r); });
  using Bulk = ApiHandlers::BulkAction;
  for (const auto& [name, action, verb] : std::vector<std::tuple<std::string, Bulk, std::string>>{
           {"KillExperiments", Bulk::kKill, "kill"},
           {"PauseExperiments", Bulk::kPause, "pause"},
           {"ActivateExperiments", Bulk::kActivate, "activate"},
           {"ArchiveExperiments", Bulk::kArchive, "archive"},
           {"UnarchiveExperiments", Bulk::kUnarchive, "unarchive"},
           {"DeleteExperiments", Bulk::kDelete, "delete"}}) {
    Add<v1::BulkExperimentActionRequest>(
        name, [h, authz, action = action, verb = verb](const v1::BulkExperimentActionRequest& r, const Principal& p) {
          ApiHandlers::RefusedExperiments refused;
          if (authz) {
            refused = [authz, p, verb](const std::vector<int64_t>& ids) { return authz->RefusedExperiments(p, ids, verb); };
          }
          return h->BulkExperimentAction(action, r, refused);
        });
  }
  Add<v1::DeleteCheckpointsRequest>("DeleteCheckpoints", [h, authz](const v1::DeleteCheckpointsRequest& r,
                                                                    const Principal& p) {
    ApiHandlers::RefusedCheckpoints refused;
    if (authz) {
      refused = [authz, p](const std::vector<std::string>& uuids) {
        return authz->RefusedCheckpoints(p, uuids, "delete checkpoints of");
      };
    }
    return h->DeleteCheckpoints(r, refused);
  });
  Add<v1::DeleteCheckpointRequest>("DeleteCheckpoint", [h](const v1::DeleteCheckpointRequest& r,
                                                           const Principal&) -> Result<v1::DeleteCheckpointResponse> {
    if (!IsText(r.uuid())) return InvalidArgument("uuid: not UTF-8 text without NUL");
    SF_RETURN_IF_ERROR(h->cluster()->DeleteCheckpoint(r.uuid()));
    return v1::DeleteCheckpointResponse();
  });
  Add<v1::GetResourcePoolsRequest>("GetResourcePools", [h](const v1::GetResourcePoolsRequest& r, const Principal&) {
    return h->GetResourcePools(r);
  });
  Add<v1::GetExperimentTrialsRequest>("GetExperimentTrials", [h](const v1::GetExperimentTrialsRequest& r,
                                                                 const Principal&) { return h->GetExperimentTrials(r); });
  Add<v1::GetCheckpointRequest>("GetCheckpoint", [h](const v1::GetCheckpointRequest& r, const Principal&) {
    return h->GetCheckpoint(r);
  });
  Add<v1::GetExperimentCheckpointsRequest>(
      "GetExperimentCheckpoints",
      [h](const v1::GetExperimentCheckpointsRequest& r, const Principal&) { return h->GetExperimentCheckpoints(r); });
  Add<v1::GetExperimentContextRequest>(
      "GetExperimentContext",
      [h](const v1::GetExperimentContextRequest& r, const Principal&) -> Result<v1::GetExperimentContextResponse> {
        v1::GetExperimentRequest get;
        get.set_experiment_id(r.id());
        SF_RETURN_IF_ERROR(h->GetExperiment(get).status());  // 404 for an unknown experiment
        SF_ASSIGN_OR_RETURN(std::string archive, h->store()->ExperimentContext(r.id()));
        // Checked when it was stored; listed with the same checks (a damaged row says so).
        SF_ASSIGN_OR_RETURN(std::vector<context::ContextEntry> entries, context::ListContext(archive));
        v1::GetExperimentContextResponse out;
        out.set_sha256(Sha256Hex(archive));
        out.set_archive_bytes(static_cast<int64_t>(archive.size()));
        int64_t file_bytes = 0;
        for (const context::ContextEntry& e : entries) {
          v1::ContextFile* f = out.add_files();
          f->set_path(ReplaceInvalidUtf8(e.path));
          f->set_size(e.size);
          f->set_link_target(ReplaceInvalidUtf8(e.link_target));
          file_bytes += e.size;
        }
        out.set_file_bytes(file_bytes);
        if (r.include_archive()) out.set_archive(std::move(archive));
        return out;
      });
  Add<v1::GetExperimentSearcherRequest>(
      "GetExperimentSearcher",
      [h](const v1::GetExperimentSearcherRequest& r, const Principal&) -> Result<v1::GetExperimentSearcherResponse> {
        v1::GetExperimentRequest get;
        get.set_experiment_id(r.id());
        SF_RETURN_IF_ERROR(h->GetExperiment(get).status());  // 404 for an unknown experiment
        v1::GetExperimentSearcherResponse out;
        auto st = pb::util::JsonStringToMessage(h->cluster()->SearcherSummary(r.id()).ToJson(), out.mutable_summary());
        if (!st.ok()) return Internal("searcher summary: " + st.ToString());
        return out;
      });
  Add<v1::GetTrialRequest>("GetTrial", [h](const v1::GetTrialRequest& r, const Principal&) { return h->GetTrial(r); });
  Add<v1::GetTrialMetricsRequest>("GetTrialMetrics",
                                  [h](const v1::GetTrialMetricsRequest& r, const Principal&) { return h->GetTrialMetrics(r); });
  Add<v1::GetTrialLogsRequest>("GetTrialLogs",
                               [h](const v1::GetTrialLogsRequest& r, const Principal&) { return h->GetTrialLogs(r); });
  Add<v1::GetAgentsRequest>("GetAgents", [h](const v1::GetAgentsRequest& r, const Principal&) { return h->GetAgents(r); });
  Add<v1::GetMasterRequest>("GetMaster", [h](const v1::GetMasterRequest& r, const Principal&) { return h->GetMaster(r); });
  Add<v1::GetClusterUtilizationRequest>(
      "GetClusterUtilization",
      [h](const v1::GetClusterUtilizationRequest& r, const Principal&) { return h->GetClusterUtilization(r); });
  AgentRevocations* revocations = deps_.revocations;
  for (const bool revoke : {true, false}) {
    Add<v1::AgentRevocationRequest>(
        revoke ? "RevokeAgent" : "RestoreAgent",
        [revocations, revoke](const v1::AgentRevocationRequest& r, const Principal& p) -> Result<v1::AgentRevocationResponse> {
          if (!revocations) return NotFound("this master keeps no agent revocations");
          if (!IsText(r.agent_id()) || r.agent_id().empty()) return InvalidArgument("agent_id: not UTF-8 text");
          SF_RETURN_IF_ERROR(revoke ? revocations->Revoke(r.agent_id(), p.username) : revocations->Restore(r.agent_id()));
          log::Info("auth", {{"event", revoke ? "agent_revoked" : "agent_restored"}, {"agent", r.agent_id()}, {"by", p.username}});
          v1::AgentRevocationResponse out;
          out.set_agent_id(r.agent_id());
          out.set_revoked(revoke);
          return out;
        });
  }
  AddAccountMethods();
  AddModelMethods();
  AddWebhookMethods();
  AddServingMethods();
  AddTaskMethods();
  AuditLog* audit = deps_.audit;
  Add<v1::GetAuditLogRequest>("GetAuditLog", [audit](const v1::GetAuditLogRequest& r,
                                                     const Principal&) -> Result<v1::GetAuditLogResponse> {
    using pb::util::TimeUtil;
    if (!audit) return NotFound("this master keeps no audit log");
    AuditFilter f;
    if (r.has_since()) f.since = static_cast<double>(r.since().seconds()) + r.since().nanos() / 1e9;
    f.limit = r.has_limit() ? r.limit() : 100;
    if (f.limit < 1 || f.limit > 1000) return InvalidArgument("limit: must be 1-1000");
    f.actor = r.actor();
    if (!IsText(f.actor)) return InvalidArgument("actor is not UTF-8 text");
    SF_ASSIGN_OR_RETURN(std::vector<AuditEntry> entries, audit->List(f));
    v1::GetAuditLogResponse out;
    for (const AuditEntry& e : entries) {
      v1::AuditLogEntry* o = out.add_entries();
      o->set_id(e.id);
      *o->mutable_time() = TimeUtil::NanosecondsToTimestamp(static_cast<int64_t>(e.at * 1e9));
      o->set_actor(e.actor);
      o->set_peer(e.peer);
      o->set_method(e.method);
      o->set_path(e.path);
      o->set_status(e.status);
    }
    return out;
  });
}

ApiMethods::Reply ApiMethods::Invoke(const std::string& name, const pb::Message& request, const Principal& caller) const {
  auto it = methods_.find(name);
  if (it == methods_.end()) return NotFound("Api method " + name + " is not served here");
  return it->second(request, caller);
}

std::vector<std::string> ApiMethods::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, method] : methods_) out.push_back(name);
  return out;
}

}  // namespace sf::master
