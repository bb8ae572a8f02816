// Servers scheduled on the cluster: their part of the method table (api_methods.h;
// master/serving/serving.h; docs/serving.md "On the cluster"). StartServing resolves the model
// version and its checkpoint and creates the server's task (master/tasks/task_coordinator.h)
// with its servings row; StopServing stops that task (its output is its task's: GetTaskLogs). What each
// method needs is checked by the access policy from its proto option (StopServing: acting on
// the server's task).
#include "common/utf8.h"
#include "master/api/api_methods.h"
#include "master/db/model_store.h"
#include "master/serving/serving.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;

v1::ServingResponse ServingReply(v1::Serving s) {
  v1::ServingResponse out;
  *out.mutable_serving() = std::move(s);
  return out;
}

}  // namespace

void ApiMethods::AddServingMethods() {
  ApiHandlers* h = deps_.handlers;
  Authorizer* authz = deps_.authorizer;
  // Reads and the servings row's writes are small: the coordinator's pool (ApiHandlers::writes()).
  auto servings = [h]() { return ServingStore(h->writes()); };

  Add<v1::StartServingRequest>("StartServing", [h, authz, servings](const v1::StartServingRequest& r,
                                                                  const Principal& p) -> Result<v1::ServingResponse> {
    if (!IsText(p.username)) return InvalidArgument("X-SF-User is not UTF-8 text");
    if (r.model().empty()) return InvalidArgument("model: required (a model's name or id)");
    if (!IsText(r.model())) return InvalidArgument("model: is not UTF-8 text without NUL");
    if (r.version() < 0) return InvalidArgument("version: " + std::to_string(r.version()) + " must be >= 1 (0: the latest)");
    if (!IsText(r.workspace()) || !IsText(r.resource_pool())) {
      return InvalidArgument("workspace and resource_pool must be UTF-8 text without NUL");
    }
    ModelStore models(h->writes());
    SF_ASSIGN_OR_RETURN(v1::GetModelResponse model, models.Get(r.model()));
    int32_t version = r.version();
    if (version == 0) {
      if (model.model().latest_version() == 0) {
        return FailedPrecondition("model \"" + model.model().name() + "\" has no versions to serve (sf model register)");
      }
      version = model.model().latest_version();
    }
    SF_ASSIGN_OR_RETURN(VersionDetails details, models.GetVersion(model.model().name(), version));
    SF_ASSIGN_OR_RETURN(std::optional<v1::Checkpoint> checkpoint,
                        h->store()->GetCheckpoint(details.version.checkpoint_uuid()));
    if (!checkpoint || checkpoint->state() != "ACTIVE" || checkpoint->path().empty()) {
      return FailedPrecondition("model \"" + model.model().name() + "\" version " + std::to_string(version) +
                                ": its checkpoint " + details.version.checkpoint_uuid() + " is no longer stored");
    }
    int64_t workspace_id = Accounts::kDefaultWorkspace;
    if (authz) {
      const std::string workspace = r.workspace().empty() ? model.model().workspace() : r.workspace();
      SF_ASSIGN_OR_RETURN(workspace_id, authz->WorkspaceForNewExperiment(p, workspace, "servers"));
    }
    ServingLaunch launch;
    launch.model_name = model.model().name();
    launch.model_version = version;
    launch.checkpoint_uuid = checkpoint->uuid();
    launch.checkpoint_dir = checkpoint->path();
    launch.location = h->CheckpointLocationOf(checkpoint->experiment_id());
    SF_ASSIGN_OR_RETURN(TaskSpec spec, ServingTaskSpec(r, launch));
    spec.owner = p.username;
    spec.workspace_id = workspace_id;
    NewServing row;
    row.model_id = model.model().id();
    row.model_name = launch.model_name;
    row.model_version = version;
    row.checkpoint_uuid = launch.checkpoint_uuid;
    row.slots = spec.slots;
    row.resource_pool = spec.resource_pool;
    SF_ASSIGN_OR_RETURN(int64_t id, h->cluster()->tasks().Create(spec, [&row](pqxx::work& tx, int64_t task) {
      ServingStore::InsertRow(tx, task, row);
    }));
    SF_ASSIGN_OR_RETURN(v1::Serving serving, servings().Get(id));
    serving.set_token(h->cluster()->tasks().ServingToken(serving.id()));
    return ServingReply(std::move(serving));
  });
  Add<v1::ListServingsRequest>("ListServings", [servings](const v1::ListServingsRequest& r,
                                                          const Principal&) -> Result<v1::ListServingsResponse> {
    SF_ASSIGN_OR_RETURN(std::vector<v1::Serving> found, servings().List(r.include_stopped()));
    v1::ListServingsResponse out;
    for (auto& s : found) *out.add_servings() = std::move(s);
    return out;
  });
  Add<v1::ServingRequest>("GetServing", [h, authz, servings](const v1::ServingRequest& r,
                                                            const Principal& p) -> Result<v1::ServingResponse> {
    SF_ASSIGN_OR_RETURN(v1::Serving s, servings().Get(r.id()));
    // The token, to those who may stop it (as the access policy decides for StopServing).
    if (!authz || authz->MayActOnTask(p, r.id(), "read the token of").ok()) {
      s.set_token(h->cluster()->tasks().ServingToken(s.id()));
    }
    return ServingReply(std::move(s));
  });
  Add<v1::ServingRequest>("StopServing", [h, servings](const v1::ServingRequest& r,
                                                       const Principal&) -> Result<v1::ServingResponse> {
    SF_ASSIGN_OR_RETURN(v1::Serving s, servings().Get(r.id()));  // only a server's task
    if (s.state() != "STOPPED" && s.state() != "FAILED") {
      Status stopped = h->cluster()->tasks().Stop(r.id());
      // Ended meanwhile: the reply shows where it is.
      if (!stopped.ok() && stopped.code() != StatusCode::kNotFound) return stopped;
    }
    SF_ASSIGN_OR_RETURN(v1::Serving now, servings().Get(r.id()));
    return ServingReply(std::move(now));
  });
}

}  // namespace sf::master
