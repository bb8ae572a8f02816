// `sf experiment continue`: train a completed single-trial experiment further, as a new
// experiment whose trial starts from the old trial's latest checkpoint (ApiHandlers::
// ContinueExperiment states the rules).
#include "common/config/experiment_config.h"
#include "master/api/api_handlers.h"

namespace sf::master {
namespace v1 = steadfast::v1;

Result<v1::CreateExperimentResponse> ApiHandlers::ContinueExperiment(const v1::ContinueExperimentRequest& r,
                                                                     const std::string& owner) {
  const std::string name = "experiment " + std::to_string(r.id());
  SF_ASSIGN_OR_RETURN(std::optional<v1::Experiment> experiment, store_->GetExperiment(r.id()));
  if (!experiment) return NotFound(name + " does not exist");
  if (experiment->state() != v1::EXPERIMENT_STATE_COMPLETED) {
    return FailedPrecondition(name + " is " + ExperimentStateName(experiment->state()) +
                              "; only a completed experiment can be continued");
  }
  if (experiment->searcher() != "single") {
    return FailedPrecondition(name + " uses the " + experiment->searcher() +
                              " searcher; continue takes a single-searcher experiment (fork this one instead)");
  }
  SF_ASSIGN_OR_RETURN(std::vector<v1::Trial> trials, store_->ListTrials(r.id()));
  if (trials.size() != 1) {
    return FailedPrecondition(name + " has " + std::to_string(trials.size()) + " trials; continue takes one");
  }
  const v1::Trial& trial = trials[0];
  const std::string trial_name = "trial " + std::to_string(trial.id());
  if (trial.latest_checkpoint_uuid().empty()) return FailedPrecondition(trial_name + " has no checkpoint to continue from");
  SF_ASSIGN_OR_RETURN(std::optional<v1::Checkpoint> checkpoint, store_->GetCheckpoint(trial.latest_checkpoint_uuid()));
  if (!checkpoint || checkpoint->state() != "ACTIVE") {
    return FailedPrecondition(trial_name + "'s latest checkpoint " + trial.latest_checkpoint_uuid() +
                              " has been deleted; there is nothing to continue from");
  }
  if (r.max_length() <= checkpoint->batches()) {
    return InvalidArgument("max_length: " + std::to_string(r.max_length()) + " must be more than the " +
                           std::to_string(checkpoint->batches()) + " batches " + trial_name + " has trained");
  }
  SF_ASSIGN_OR_RETURN(std::string yaml,
                      config::ApplyOverride(experiment->config_yaml(), "searcher.max_length={batches: " +
                                                                           std::to_string(r.max_length()) + "}"));
  // The continuation stays in the original's workspace.
  int64_t workspace_id = 1;
  SF_RETURN_IF_ERROR(store_->db()->Transact("experiment workspace", [&](pqxx::work& tx) {
    workspace_id = tx.exec_params1("SELECT workspace_id FROM experiments WHERE id = $1", r.id())[0].as<int64_t>();
    return Status::Ok();
  }));
  // A user trial's code comes along (the same context archive).
  std::string context;
  if (Result<std::string> stored = store_->ExperimentContext(r.id()); stored.ok()) {
    context = std::move(stored).value();
  } else if (stored.status().code() != StatusCode::kNotFound) {
    return stored.status();
  }
  Cluster::CreateResult created =
      cluster_->CreateExperiment(yaml, true, false, owner, checkpoint->uuid(), workspace_id, context);
  if (!created.errors.empty()) {
    // The config was valid when it was submitted; what the cluster refuses now (a pool that
    // has gone, a data file removed since) is a precondition of continuing, named here.
    return FailedPrecondition(name + " cannot be continued: " + created.errors[0].path + ": " +
                              created.errors[0].message);
  }
  v1::CreateExperimentResponse out;
  if (created.id) {
    SF_ASSIGN_OR_RETURN(std::optional<v1::Experiment> row, store_->GetExperiment(*created.id));
    if (row) {
      *out.mutable_experiment() = *row;
      out.mutable_experiment()->set_config_yaml(config::RedactConfigSecrets(row->config_yaml()));
    }
  }
  return out;
}

}  // namespace sf::master
