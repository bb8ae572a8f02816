// The model registry's half of the method table (api_methods.h; docs/registry.md): named models
// and their numbered versions, stored by ModelStore (master/db/model_store.h). What each method
// needs is checked by the access policy from its proto option (kModel: the model's owner, an
// editor of its workspace, or an admin); creating one checks the workspace here, as
// CreateExperiment does.
#include "common/utf8.h"
#include "master/api/api_methods.h"
#include "master/db/model_store.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;

// The model a request names, checked before it reaches SQL.
Status ModelNamed(const std::string& name) {
  if (name.empty()) return InvalidArgument("name: required (a model's name or id)");
  if (!IsText(name)) return InvalidArgument("name: is not UTF-8 text without NUL");
  return Status::Ok();
}

v1::ModelResponse ModelReply(v1::Model m) {
  v1::ModelResponse out;
  *out.mutable_model() = std::move(m);
  return out;
}

}  // namespace

void ApiMethods::AddModelMethods() {
  ApiHandlers* h = deps_.handlers;
  Authorizer* authz = deps_.authorizer;
  // The coordinator's pool (ApiHandlers::writes(): registering is a write, and the tables are
  // small; every call is one short transaction). Made when first called: the method table is also built without a database (RouteTableTest).
  auto models = [h]() { return ModelStore(h->writes()); };

  Add<v1::CreateModelRequest>("CreateModel", [models, authz](const v1::CreateModelRequest& r,
                                                             const Principal& p) -> Result<v1::ModelResponse> {
    if (!IsText(p.username)) return InvalidArgument("X-SF-User is not UTF-8 text");
    SF_RETURN_IF_ERROR(ValidateModelName(r.name()));
    if (!IsText(r.workspace())) return InvalidArgument("workspace: is not UTF-8 text without NUL");
    NewModel m;
    m.workspace_id = Accounts::kDefaultWorkspace;
    if (authz) {
      SF_ASSIGN_OR_RETURN(m.workspace_id, authz->WorkspaceForNewExperiment(p, r.workspace(), "models"));
    }
    m.name = r.name();
    m.description = r.description();
    m.labels.assign(r.labels().begin(), r.labels().end());
    m.owner = p.username;
    SF_ASSIGN_OR_RETURN(v1::Model created, models().Create(m));
    return ModelReply(std::move(created));
  });
  Add<v1::ListModelsRequest>("ListModels", [models](const v1::ListModelsRequest& r,
                                                    const Principal&) -> Result<v1::ListModelsResponse> {
    ModelFilter f;
    f.name_contains = r.name();
    f.label = r.label();
    f.include_archived = r.include_archived();
    f.workspace = r.workspace();
    f.sort_by = r.sort_by();
    f.descending = r.descending();
    f.offset = r.offset();
    f.limit = r.limit() == 0 ? 100 : r.limit();
    SF_ASSIGN_OR_RETURN(auto page, models().List(f));
    v1::ListModelsResponse out;
    for (v1::Model& m : page.first) *out.add_models() = std::move(m);
    v1::Pagination* pagination = out.mutable_pagination();
    pagination->set_offset(f.offset);
    pagination->set_limit(f.limit);
    pagination->set_total(page.second);
    pagination->set_start_index(f.offset);
    pagination->set_end_index(f.offset + out.models_size());
    return out;
  });
  Add<v1::GetModelRequest>("GetModel", [models](const v1::GetModelRequest& r,
                                                const Principal&) -> Result<v1::GetModelResponse> {
    SF_RETURN_IF_ERROR(ModelNamed(r.name()));
    return models().Get(r.name());
  });
  Add<v1::UpdateModelRequest>("UpdateModel", [models](const v1::UpdateModelRequest& r,
                                                      const Principal&) -> Result<v1::ModelResponse> {
    SF_RETURN_IF_ERROR(ModelNamed(r.name()));
    ModelEdit edit;
    if (r.has_description()) edit.description = r.description();
    edit.add_labels.assign(r.add_labels().begin(), r.add_labels().end());
    edit.remove_labels.assign(r.remove_labels().begin(), r.remove_labels().end());
    SF_ASSIGN_OR_RETURN(v1::Model m, models().Update(r.name(), edit));
    return ModelReply(std::move(m));
  });
  for (const bool archive : {true, false}) {
    Add<v1::ModelActionRequest>(archive ? "ArchiveModel" : "UnarchiveModel",
                                [models, archive](const v1::ModelActionRequest& r,
                                                  const Principal&) -> Result<v1::ModelResponse> {
                                  SF_RETURN_IF_ERROR(ModelNamed(r.name()));
                                  SF_ASSIGN_OR_RETURN(v1::Model m, models().SetArchived(r.name(), archive));
                                  return ModelReply(std::move(m));
                                });
  }
  Add<v1::DeleteModelRequest>("DeleteModel", [models](const v1::DeleteModelRequest& r,
                                                      const Principal&) -> Result<v1::DeleteModelResponse> {
    SF_RETURN_IF_ERROR(ModelNamed(r.name()));
    SF_RETURN_IF_ERROR(models().Delete(r.name(), r.force()));
    return v1::DeleteModelResponse();
  });
  Add<v1::RegisterModelVersionRequest>(
      "RegisterModelVersion",
      [models](const v1::RegisterModelVersionRequest& r, const Principal& p) -> Result<v1::ModelVersionResponse> {
        SF_RETURN_IF_ERROR(ModelNamed(r.name()));
        if (!IsText(p.username)) return InvalidArgument("X-SF-User is not UTF-8 text");
        SF_ASSIGN_OR_RETURN(v1::ModelVersion v,
                            models().RegisterVersion(r.name(), r.checkpoint_uuid(), r.notes(), p.username));
        v1::ModelVersionResponse out;
        *out.mutable_version() = std::move(v);
        return out;
      });
  Add<v1::ModelVersionRequest>("GetModelVersion", [models, h](const v1::ModelVersionRequest& r,
                                                              const Principal&) -> Result<v1::GetModelVersionResponse> {
    SF_RETURN_IF_ERROR(ModelNamed(r.name()));
    SF_ASSIGN_OR_RETURN(VersionDetails d, models().GetVersion(r.name(), r.version()));
    v1::GetModelVersionResponse out;
    SF_ASSIGN_OR_RETURN(std::optional<v1::Checkpoint> checkpoint, h->store()->GetCheckpoint(d.version.checkpoint_uuid()));
    if (checkpoint) *out.mutable_checkpoint() = std::move(*checkpoint);
    *out.mutable_version() = std::move(d.version);
    out.set_metric(d.metric);
    out.set_smaller_is_better(d.smaller_is_better);
    if (d.best_validation_metric) out.set_best_validation_metric(*d.best_validation_metric);
    if (d.latest_validation_metric) out.set_latest_validation_metric(*d.latest_validation_metric);
    if (d.latest_validation) *out.mutable_latest_validation() = std::move(*d.latest_validation);
    return out;
  });
  Add<v1::ModelVersionRequest>("DeleteModelVersion", [models](const v1::ModelVersionRequest& r,
                                                              const Principal&) -> Result<v1::DeleteModelVersionResponse> {
    SF_RETURN_IF_ERROR(ModelNamed(r.name()));
    SF_RETURN_IF_ERROR(models().DeleteVersion(r.name(), r.version()));
    return v1::DeleteModelVersionResponse();
  });
}

}  // namespace sf::master
