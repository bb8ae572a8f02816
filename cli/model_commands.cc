// `sf model create|list|describe|edit|register|archive|unarchive|delete` and
// `sf model version describe|delete`: the model registry (docs/registry.md), through the master's
// Api methods (cluster_command.h has what they share).
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

// The model commands' own flags, beside the shared Flags (whose `id` is the model's NAME).
struct ModelFlags {
  std::string description, checkpoint, notes, label;
  bool description_given = false;
  std::vector<std::string> labels, remove_labels;
  bool force = false;
  int version = 0;
};

void PrintFields(const std::vector<std::pair<const char*, std::string>>& lines) {
  for (const auto& [label, text] : lines) std::cout << label << ": " << text << "\n";
}

std::string Labels(const v1::Model& m) {
  std::string out;
  for (const std::string& l : m.labels()) out += (out.empty() ? "" : ",") + l;
  return out;
}

void PrintModel(const v1::Model& m) {
  PrintFields({{"id", std::to_string(m.id())},
               {"name", m.name()},
               {"description", m.description()},
               {"labels", Labels(m)},
               {"owner", m.owner()},
               {"workspace", m.workspace()},
               {"archived", BoolText(m.archived())},
               {"versions", std::to_string(m.num_versions())},
               {"latestVersion", std::to_string(m.latest_version())},
               {"createdAt", TimeText(m.has_created_at(), m.created_at())},
               {"updatedAt", TimeText(m.has_updated_at(), m.updated_at())}});
}

int CreateModel(const Flags& f, const ModelFlags& m, Api& api) {
  v1::CreateModelRequest request;
  request.set_name(f.id);
  request.set_description(m.description);
  for (const std::string& l : m.labels) request.add_labels(l);
  request.set_workspace(f.workspace);
  return CallAndPrint<v1::ModelResponse>(f, api, "CreateModel", request, [](const v1::ModelResponse& r) {
    std::cout << "model " << r.model().name() << " created\n";
  });
}

int ListModels(const Flags& f, const ModelFlags& m, Api& api) {
  v1::ListModelsRequest request;
  request.set_name(f.name);
  request.set_label(m.label);
  request.set_include_archived(f.include_archived);
  request.set_workspace(f.workspace);
  request.set_limit(f.limit);
  return CallAndPrint<v1::ListModelsResponse>(f, api, "ListModels", request, [](const v1::ListModelsResponse& r) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::Model& model : r.models()) {
      rows.push_back({std::to_string(model.id()), model.name(), std::to_string(model.num_versions()),
                      std::to_string(model.latest_version()), Labels(model), model.owner(), model.workspace(),
                      BoolText(model.archived()), TimeText(model.has_updated_at(), model.updated_at())});
    }
    PrintTable({"ID", "NAME", "VERSIONS", "LATEST", "LABELS", "OWNER", "WORKSPACE", "ARCHIVED", "UPDATED"}, rows);
  });
}

int DescribeModel(const Flags& f, const ModelFlags&, Api& api) {
  v1::GetModelRequest request;
  request.set_name(f.id);
  return CallAndPrint<v1::GetModelResponse>(f, api, "GetModel", request, [](const v1::GetModelResponse& r) {
    PrintModel(r.model());
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const v1::ModelVersion& v : r.versions()) {
      rows.push_back({std::to_string(v.version()), v.checkpoint_uuid(), std::to_string(v.experiment_id()),
                      std::to_string(v.trial_id()), v.creator(), TimeText(v.has_created_at(), v.created_at()),
                      v.notes()});
    }
    PrintTable({"VERSION", "CHECKPOINT", "EXPERIMENT", "TRIAL", "CREATOR", "CREATED", "NOTES"}, rows);
  });
}

int EditModel(const Flags& f, const ModelFlags& m, Api& api) {
  v1::UpdateModelRequest request;
  request.set_name(f.id);
  if (m.description_given) request.set_description(m.description);
  for (const std::string& l : m.labels) request.add_add_labels(l);
  for (const std::string& l : m.remove_labels) request.add_remove_labels(l);
  return CallAndPrint<v1::ModelResponse>(f, api, "UpdateModel", request,
                                         [](const v1::ModelResponse& r) { PrintModel(r.model()); });
}

int RegisterVersion(const Flags& f, const ModelFlags& m, Api& api) {
  v1::RegisterModelVersionRequest request;
  request.set_name(f.id);
  request.set_checkpoint_uuid(m.checkpoint);
  request.set_notes(m.notes);
  // The version number alone on stdout, for scripts: VERSION=$(sf model register ...).
  return CallAndPrint<v1::ModelVersionResponse>(f, api, "RegisterModelVersion", request,
                                                [](const v1::ModelVersionResponse& r) {
                                                  std::cout << r.version().version() << "\n";
                                                });
}

template <bool kArchive>
int ArchiveModel(const Flags& f, const ModelFlags&, Api& api) {
  v1::ModelActionRequest request;
  request.set_name(f.id);
  return CallAndPrint<v1::ModelResponse>(
      f, api, kArchive ? "ArchiveModel" : "UnarchiveModel", request, [](const v1::ModelResponse& r) {
        std::cout << "model " << r.model().name() << (kArchive ? " archived\n" : " unarchived\n");
      });
}

int DeleteModel(const Flags& f, const ModelFlags& m, Api& api) {
  v1::DeleteModelRequest request;
  request.set_name(f.id);
  request.set_force(m.force);
  return CallAndPrint<v1::DeleteModelResponse>(
      f, api, "DeleteModel", request, [&](const v1::DeleteModelResponse&) { std::cout << "model " << f.id << " deleted\n"; });
}

v1::ModelVersionRequest VersionRequest(const Flags& f, const ModelFlags& m) {
  v1::ModelVersionRequest request;
  request.set_name(f.id);
  request.set_version(m.version);
  return request;
}

int DescribeVersion(const Flags& f, const ModelFlags& m, Api& api) {
  return CallAndPrint<v1::GetModelVersionResponse>(f, api, "GetModelVersion", VersionRequest(f, m),
                                                   [](const v1::GetModelVersionResponse& d) {
    const v1::ModelVersion& v = d.version();
    PrintFields({{"model", v.model_name()},
                 {"version", std::to_string(v.version())},
                 {"checkpoint", v.checkpoint_uuid()},
                 {"checkpointState", d.checkpoint().state()},
                 {"checkpointPath", d.checkpoint().path()},
                 {"batches", std::to_string(d.checkpoint().batches())},
                 {"experimentId", std::to_string(v.experiment_id())},
                 {"trialId", std::to_string(v.trial_id())},
                 {"metric", d.metric()},
                 {"bestValidationMetric", NumberText(d.has_best_validation_metric(), d.best_validation_metric())},
                 {"latestValidationMetric",
                  NumberText(d.has_latest_validation_metric(), d.latest_validation_metric())},
                 {"latestValidation", d.has_latest_validation() ? StructJson(d.latest_validation().values()) : ""},
                 {"creator", v.creator()},
                 {"createdAt", TimeText(v.has_created_at(), v.created_at())},
                 {"notes", v.notes()}});
  });
}

int DeleteVersion(const Flags& f, const ModelFlags& m, Api& api) {
  return CallAndPrint<v1::DeleteModelVersionResponse>(
      f, api, "DeleteModelVersion", VersionRequest(f, m), [&](const v1::DeleteModelVersionResponse&) {
        std::cout << "version " << m.version << " of model " << f.id << " deleted\n";
      });
}

using ModelRun = int (*)(const Flags&, const ModelFlags&, Api&);

// A model command: the shared flags, NAME (unless `named` is false), and its own flags in `*model`.
std::pair<ClusterCommand, std::shared_ptr<ModelFlags>> AddModelCommand(CLI::App* parent, const std::string& name,
                                                                       const std::string& description,
                                                                       CommandAction& action, ModelRun run,
                                                                       bool named = true) {
  auto model = std::make_shared<ModelFlags>();
  ClusterCommand command = AddCommand(parent, name, description, action,
                                      [model, run](const Flags& f, Api& api) { return run(f, *model, api); });
  if (named) command.Id("NAME", "the model's name (or id)");
  return {command, model};
}

}  // namespace

void AddModelCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* model = sf.add_subcommand("model", "the model registry: named models whose versions are checkpoints");
  model->require_subcommand(1);

  auto [create, create_flags] =
      AddModelCommand(model, "create", "create a model (in a workspace, with labels)", action, CreateModel);
  create.app->add_option("--description", create_flags->description, "what the model is");
  create.app->add_option("--label", create_flags->labels, "a label (repeatable)")->type_name("LABEL");
  create.app->add_option("-w,--workspace", create.flags->workspace,
                         "the workspace it belongs to (default Uncategorized; editor there needed)");

  auto [list, list_flags] = AddModelCommand(model, "list", "list models", action, ListModels, /*named=*/false);
  list.app->add_option("--name", list.flags->name, "models whose name contains this");
  list.app->add_option("--label", list_flags->label, "models with this label");
  list.app->add_option("-w,--workspace", list.flags->workspace, "models of this workspace");
  list.app->add_flag("--include-archived", list.flags->include_archived, "also archived models");
  list.app->add_option("--limit", list.flags->limit, "at most this many (1-1000, default 100)")
      ->check(CLI::Range(1, 1000));

  AddModelCommand(model, "describe", "show a model and its versions", action, DescribeModel);

  auto [edit, edit_flags] =
      AddModelCommand(model, "edit", "change a model's description or labels", action, EditModel);
  edit.app->add_option("--description", edit_flags->description, "the new description")
      ->each([flags = edit_flags](const std::string&) { flags->description_given = true; });
  edit.app->add_option("--add-label", edit_flags->labels, "add a label (repeatable)")->type_name("LABEL");
  edit.app->add_option("--remove-label", edit_flags->remove_labels, "remove a label (repeatable)")
      ->type_name("LABEL");

  auto [reg, reg_flags] = AddModelCommand(
      model, "register", "register a checkpoint as the model's next version; prints the version", action,
      RegisterVersion);
  reg.app->add_option("--checkpoint", reg_flags->checkpoint, "the checkpoint's uuid")->required();
  reg.app->add_option("--notes", reg_flags->notes, "notes on this version");

  AddModelCommand(model, "archive", "archive a model (hidden from lists; no new versions)", action,
                  ArchiveModel<true>);
  AddModelCommand(model, "unarchive", "unarchive a model", action, ArchiveModel<false>);
  auto [del, del_flags] = AddModelCommand(
      model, "delete", "delete a model (refused while it has versions, unless --force)", action, DeleteModel);
  del.app->add_flag("--force", del_flags->force, "also delete its versions (their checkpoints stay)");

  CLI::App* version = model->add_subcommand("version", "one version of a model");
  version->require_subcommand(1);
  for (const auto& [name, description, run] :
       std::vector<std::tuple<std::string, std::string, ModelRun>>{
           {"describe", "show a version: its checkpoint, trial and validation metrics", DescribeVersion},
           {"delete", "delete a version (its checkpoint stays, no longer protected)", DeleteVersion}}) {
    auto [command, flags] = AddModelCommand(version, name, description, action, run);
    command.app->add_option("VERSION", flags->version, "the version's number")->required();
  }
}

}  // namespace sf::cli
