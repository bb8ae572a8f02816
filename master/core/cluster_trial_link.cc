// The coordinator's trainer side (class Cluster, master/core/cluster.h): the TrialLink calls of
// native trainers and user trials (next operation, metrics, checkpoints, stop checks,
// rendezvous, contexts, progress, the end of an unmanaged trial) and unmanaged trials' creation.
// Split out of cluster.cc; the same lock (mu_) guards it all.
#include "master/core/cluster.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "common/log.h"
#include "common/utf8.h"
#include "master/allocation/task_ids.h"
#include "master/ingest/metric_groups.h"
#include "master/serving/serving.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;
using std::chrono::steady_clock;

namespace {

bool Better(double a, double b, bool smaller_is_better) { return smaller_is_better ? a < b : a > b; }

}  // namespace

Cluster::Trial* Cluster::FindTrialLocked(int64_t trial_id) {
  auto it = trials_.find(trial_id);
  return it == trials_.end() ? nullptr : &it->second;
}

Result<Cluster::Trial*> Cluster::CheckIdentityLocked(const v1::TrialIdentity& who) {
  // A trainer of an earlier allocation (orphaned while its agent was cut off, then replaced)
  // must not report for the trial's current run (the registry's check, the same for every call).
  SF_ASSIGN_OR_RETURN(AllocationRegistry::Admission admission, registry_.Admit(who));
  Trial* t = FindTrialLocked(who.trial_id());
  if (!t) return NotFound("trial " + std::to_string(who.trial_id()) + " is not active on this master");
  t->last_call = steady_clock::now();  // an unmanaged script's liveness
  // A rank of an external manager's job called before the manager saw the job run (its poll
  // lags): the job runs, so the trial does.
  if (admission == AllocationRegistry::Admission::kAskCoordinator) {
    auto e = experiments_.find(t->experiment_id);
    if (e != experiments_.end() && ExternalLocked(e->second)) {
      allocations_.MarkRunning(t->allocation_id);
      AllocationRunningLocked(*t, "");
    }
  }
  return t;
}

Result<v1::GetNextOperationResponse> Cluster::NextOperation(const v1::TrialIdentity& who,
                                                            std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = steady_clock::now() + wait;
  while (true) {
    SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(who));
    v1::GetNextOperationResponse r;
    if (t->target_length > t->completed_length) {
      auto* op = r.mutable_train();
      op->set_target_length(t->target_length);
      op->set_unit(experiments_[t->experiment_id].config.searcher.max_length.unit ==
                           config::Length::Unit::kEpochs
                       ? "epochs"
                       : "batches");
      op->set_validate_after(true);
      return r;
    }
    if (t->closing || IsTerminal(t->state) || t->stop == "kill") {
      r.set_complete(true);
      return r;
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout || stopping_) {
      // The searcher has nothing for this trial yet (ASHA: waiting on a promotion). Let the
      // trainer exit (it checkpointed at the end of its operation) and free its slots; a later
      // train operation re-queues the trial from that checkpoint.
      r.set_complete(true);
      return r;
    }
  }
}

Status Cluster::ReportMetrics(const v1::ReportMetricsRequest& request) {
  SF_ASSIGN_OR_RETURN(MetricBatch batch, MetricBatchFor(request));
  SF_RETURN_IF_ERROR(metric_writer_.Write(std::move(batch)));
  changed_.notify_all();
  return Status::Ok();
}

void Cluster::ReportMetricsAsync(const v1::ReportMetricsRequest& request, std::function<void(Status)> done) {
  Result<MetricBatch> batch = MetricBatchFor(request);
  if (!batch.ok()) {
    done(batch.status());
    return;
  }
  metric_writer_.WriteAsync(std::move(batch).value(), [this, done = std::move(done)](Status st) {
    if (st.ok()) changed_.notify_all();
    done(std::move(st));
  });
}

Result<MetricBatch> Cluster::MetricBatchFor(const v1::ReportMetricsRequest& request) {
  MetricBatch batch{0, 0, {request.reports().begin(), request.reports().end()}};
  for (const auto& m : batch.rows) {
    if (std::string problem = MetricGroupProblem(m.kind()); !problem.empty()) {
      return InvalidArgument("metric group \"" + (IsText(m.kind()) ? m.kind() : "?") + "\" " + problem +
                             " (training, validation, or a group of the trial's own)");
    }
  }
  // Only the identity check and the in-memory total here, against the allocation registry and
  // not under mu_: the database write happens later, together with other trainers' reports
  // (master/ingest/metric_writer.h).
  SF_ASSIGN_OR_RETURN(AllocationRegistry::Admission admission, registry_.Admit(request.who()));
  if (admission == AllocationRegistry::Admission::kAskCoordinator) {
    std::lock_guard<std::mutex> lock(mu_);
    SF_RETURN_IF_ERROR(CheckIdentityLocked(request.who()).status());
  }
  const int64_t trial_id = request.who().trial_id();
  int64_t trained = 0;
  for (auto& m : batch.rows) {
    m.set_trial_id(trial_id);
    m.set_restart(request.who().restart());
    if (m.kind() == "training") trained = std::max(trained, m.batches());
  }
  batch.trial_id = trial_id;
  batch.total_batches = registry_.RaiseTotal(trial_id, trained);
  return batch;
}

Result<std::optional<double>> Cluster::ExperimentBestValidation(const v1::TrialIdentity& who) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(who));
  auto e = experiments_.find(t->experiment_id);
  if (e == experiments_.end()) return std::optional<double>();
  return e->second.best;
}

Status Cluster::AcknowledgePreemption(const v1::TrialIdentity& who) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(who));
  if (who.rank() != 0) return Status::Ok();  // the chief speaks for the trial
  t->told_to_stop = true;
  log::Info("trial", {{"event", "preemption_acknowledged"}, {"id", std::to_string(t->id)},
                      {"allocation", t->allocation_id}, {"stop", t->stop}});
  return Status::Ok();
}

Status Cluster::DeleteTrialCheckpoint(const v1::TrialIdentity& who, const std::string& uuid) {
  int64_t experiment_id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(who));
    experiment_id = t->experiment_id;
  }
  // Off mu_: a read, then the deletion's own transaction and the files (DeleteCheckpoint).
  if (uuid.empty() || uuid.find('\0') != std::string::npos) {
    return InvalidArgument("delete_checkpoint: a checkpoint uuid is required (text without NUL)");
  }
  SF_ASSIGN_OR_RETURN(std::optional<v1::Checkpoint> checkpoint, store_->GetCheckpoint(uuid));
  if (!checkpoint) return NotFound("checkpoint " + uuid + " does not exist");
  if (checkpoint->experiment_id() != experiment_id) {
    return PermissionDenied("checkpoint " + uuid + " belongs to experiment " +
                            std::to_string(checkpoint->experiment_id()) + ", not to trial " +
                            std::to_string(who.trial_id()) + "'s experiment " + std::to_string(experiment_id));
  }
  return DeleteCheckpoint(uuid);
}

Result<std::string> Cluster::ReportCheckpointUnusable(const v1::TrialIdentity& who, const std::string& uuid,
                                                      const std::string& reason) {
  int64_t trial_id = 0;
  std::string latest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(who));
    trial_id = t->id;
    latest = t->latest_checkpoint_uuid;
  }
  // Off mu_: reads, then the marking's own transaction.
  if (uuid.empty() || uuid.find('\0') != std::string::npos) {
    return InvalidArgument("report_checkpoint_unusable: a checkpoint uuid is required (text without NUL)");
  }
  SF_ASSIGN_OR_RETURN(std::optional<v1::Checkpoint> checkpoint, store_->GetCheckpoint(uuid));
  if (!checkpoint) return NotFound("checkpoint " + uuid + " does not exist");
  // Its own, or the one it was continued from (sf experiment continue), which it resumes from.
  if (checkpoint->trial_id() != trial_id && uuid != latest) {
    return PermissionDenied("checkpoint " + uuid + " belongs to trial " + std::to_string(checkpoint->trial_id()) +
                            ", and trial " + std::to_string(trial_id) + " does not resume from it");
  }
  SF_ASSIGN_OR_RETURN(std::vector<Store::CheckpointPlace> next, store_->RestoreFallbacks(trial_id, uuid, 1));
  std::string line = "checkpoint " + uuid + " (batch " + std::to_string(checkpoint->batches()) +
                     ") failed verification and is marked CORRUPTED: " +
                     ReplaceInvalidUtf8(reason.substr(0, 1000)) + "; ";
  line += next.empty() ? "no intact checkpoint of this trial is left"
                       : "resuming from checkpoint " + next.front().uuid + " instead";
  SF_ASSIGN_OR_RETURN(Store::CheckpointPlace now, store_->MarkCheckpointCorrupted(trial_id, uuid, line));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Trial* t = FindTrialLocked(trial_id); t && t->latest_checkpoint_uuid == uuid) {
      t->latest_checkpoint_uuid = now.uuid;
      t->latest_checkpoint_path = now.path;
    }
  }
  log::Warn("checkpoint", {{"event", "corrupted"}, {"uuid", uuid}, {"trial", std::to_string(trial_id)},
                           {"rank", std::to_string(who.rank())}, {"latest", now.uuid}});
  return now.uuid;
}

Status Cluster::WaitForDurability() { return store_->db()->WaitForDurability(); }

Status Cluster::CompleteOperation(const v1::CompleteOperationRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  if (request.who().rank() != 0) return Status::Ok();  // the chief speaks for the trial
  Experiment& e = experiments_[t->experiment_id];
  int64_t length = request.op().target_length();
  if (length <= t->completed_length) return Status::Ok();  // a retry of what we already have
  t->completed_length = length;
  double metric = request.searcher_metric();
  t->latest_metric = metric;
  TrialUpdate u;
  u.completed_length = length;
  u.latest_validation_metric = metric;
  // A metric that is not finite (a diverged run's NaN loss) is stored as the latest, shown as
  // it is, and never becomes a best: searchers rank it below every real value (docs/config.md).
  const bool finite = std::isfinite(metric);
  if (finite && (!t->best_metric || Better(metric, *t->best_metric, e.config.searcher.smaller_is_better))) {
    t->best_metric = metric;
    u.best_validation_metric = metric;
  }
  if (finite && (!e.best || Better(metric, *e.best, e.config.searcher.smaller_is_better))) e.best = metric;
  // The checkpoint taken at the end of this operation, registered before the operation's metric
  // was known (Core API scripts store, then complete), carries it from now on: retention's
  // save_trial_best and save_experiment_best rank it like a native one.
  if (auto changed = store_->SetCheckpointMetric(t->id, length, metric); changed.ok() && *changed > 0) {
    RequestRetentionLocked(e);
  }
  if (e.unmanaged) {  // no searcher decides: the script ends the trial itself (EndTrial)
    (void)store_->UpdateTrial(t->id, u);
    (void)store_->SetExperimentProgress(e.id, 1.0, e.best);
    return Status::Ok();
  }
  // The completion is stored with the searcher's state that took it in, not before: a master
  // that died between the two would answer the trainer's retry "already have it" (the length
  // below), and the searcher, restored without it, would wait for ever for this operation.
  ApplyOpsLocked(e, e.searcher->ValidationCompleted(t->request_id, metric, length));
  SaveSearcherLocked(e, {{t->id, u}});
  return Status::Ok();
}

Status Cluster::ReportCheckpoint(const v1::ReportCheckpointRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  v1::Checkpoint c = request.checkpoint();
  if (c.uuid().empty() || c.path().empty()) return InvalidArgument("checkpoint needs a uuid and a path");
  c.set_trial_id(t->id);
  SF_RETURN_IF_ERROR(store_->InsertCheckpoint(c));
  t->latest_checkpoint_uuid = c.uuid();
  t->latest_checkpoint_path = c.path();
  auto e = experiments_.find(t->experiment_id);
  if (e != experiments_.end()) RequestRetentionLocked(e->second);
  return Status::Ok();
}

Result<v1::ShouldStopResponse> Cluster::ShouldStop(const v1::ShouldStopRequest& request) {
  if (TaskCoordinator::Names(request.who())) return tasks_.ShouldStop(request.who());
  // The common answer, without the coordinator's lock: a rank of the trial's running allocation
  // with no stop asked continues (the registry is written under that lock with every change).
  if (registry_.Undisturbed(request.who())) {
    v1::ShouldStopResponse r;
    r.set_action(v1::ShouldStopResponse::ACTION_CONTINUE);
    return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  v1::ShouldStopResponse r;
  if (t->stop == "kill") r.set_action(v1::ShouldStopResponse::ACTION_STOP_NOW);
  else if (t->stop == "pause" || t->stop == "preempt") {
    r.set_action(v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP);
    // User code takes the stop by acknowledging it (AcknowledgePreemption); the native trainer
    // always does.
    if (!experiments_[t->experiment_id].config.has_entrypoint()) t->told_to_stop = true;
  }
  else r.set_action(v1::ShouldStopResponse::ACTION_CONTINUE);
  return r;
}

Result<v1::RendezvousResponse> Cluster::Rendezvous(const v1::RendezvousRequest& request,
                                                   std::chrono::milliseconds wait) {
  std::string allocation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
    if (request.who().restart() != t->restarts || !t->allocated) {
      return FailedPrecondition("rendezvous: rank " + std::to_string(request.who().rank()) + " belongs to restart " +
                                std::to_string(request.who().restart()) + " of trial " + std::to_string(t->id) +
                                ", which is no longer running");
    }
    if (request.world_size() != t->world_size) {
      return InvalidArgument("rendezvous: world size " + std::to_string(request.world_size()) + " but the trial runs " +
                             std::to_string(t->world_size) + " ranks");
    }
    allocation = t->allocation_id;
  }
  // The wait happens on the board, without the coordinator's lock.
  SF_ASSIGN_OR_RETURN(RendezvousBoard::Result met,
                      allocations_.rendezvous().Arrive(allocation, request.round(), request.who().rank(), request.payload(), wait));
  v1::RendezvousResponse r;
  for (size_t rank = 0; rank < met.payloads.size(); ++rank) {
    r.add_payloads(met.payloads[rank]);
    r.add_addresses(met.agents[rank]);
  }
  return r;
}

Result<std::string> Cluster::Context(const v1::TrialIdentity& who) {
  if (TaskCoordinator::Names(who)) return tasks_.Context(who);
  int64_t experiment_id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(who));
    experiment_id = t->experiment_id;
  }
  // Up to 96 MiB from PostgreSQL: outside the lock.
  return store_->ExperimentContext(experiment_id);
}

Status Cluster::ReportProgress(const v1::ReportProgressRequest& request) {
  if (request.batches() < 0) return InvalidArgument("report_progress: batches " + std::to_string(request.batches()) + " < 0");
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  if (request.who().rank() != 0 || request.batches() <= registry_.Total(t->id)) return Status::Ok();
  TrialUpdate u;
  u.total_batches = registry_.RaiseTotal(t->id, request.batches());
  return store_->UpdateTrial(t->id, u);
}

Status Cluster::ReportEarlyExit(const v1::ReportEarlyExitRequest& request) {
  if (request.reason() == v1::ReportEarlyExitRequest::REASON_UNSPECIFIED ||
      !v1::ReportEarlyExitRequest::Reason_IsValid(request.reason())) {
    return InvalidArgument("report_early_exit: a reason is required (ERRORED, USER_REQUESTED_STOP or "
                           "INVALID_HYPERPARAMETERS)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  if (experiments_[t->experiment_id].unmanaged) {
    return FailedPrecondition("report_early_exit: trial " + std::to_string(t->id) +
                              " is unmanaged: its script ends it (EndTrial)");
  }
  if (request.who().rank() != 0) return Status::Ok();  // the chief speaks for the trial
  t->early_exit = request.reason();
  log::Info("trial", {{"event", "early_exit"}, {"id", std::to_string(t->id)},
                      {"reason", v1::ReportEarlyExitRequest::Reason_Name(request.reason())}});
  return Status::Ok();
}

Status Cluster::ReportEndpoint(const v1::ReportEndpointRequest& request) {
  SF_RETURN_IF_ERROR(CheckEndpointUrl(request.url()));
  if (TaskCoordinator::Names(request.who())) return tasks_.ReportEndpoint(request);
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  return FailedPrecondition("trial " + std::to_string(t->id) +
                            " is no server (sf serve start): it has no endpoint to report");
}

Status Cluster::ReportLogs(const v1::ReportLogsRequest& request) {
  const std::string& incarnation = request.incarnation();
  if (incarnation.empty() || incarnation.size() > 64 ||
      !std::all_of(incarnation.begin(), incarnation.end(), [](char c) { return c > ' ' && c <= '~'; })) {
    return InvalidArgument("report_logs: incarnation must be 1-64 printable characters");
  }
  if (request.sequence() < 1) return InvalidArgument("report_logs: sequence " + std::to_string(request.sequence()) + " < 1");
  if (request.lines_size() > 1000) {
    return InvalidArgument("report_logs: " + std::to_string(request.lines_size()) + " lines; at most 1000 per call");
  }
  for (int i = 0; i < request.lines_size(); ++i) {
    const v1::LogLine& l = request.lines(i);
    const std::string where = "report_logs: lines[" + std::to_string(i) + "]";
    if (l.stream() != "stdout" && l.stream() != "stderr") {
      return InvalidArgument(where + ".stream: \"" + l.stream().substr(0, 32) + "\" must be stdout or stderr");
    }
    if (l.message().size() > 16 * 1024) return InvalidArgument(where + ".message: longer than 16 KiB");
    if (!IsText(l.message())) return InvalidArgument(where + ".message: is not UTF-8 text without NUL");
  }
  if (request.host().size() > 256 || !IsText(request.host())) {
    return InvalidArgument("report_logs: host must be UTF-8 text of at most 256 bytes");
  }
  int64_t trial_id = 0;
  if (TaskCoordinator::Names(request.who())) {
    SF_RETURN_IF_ERROR(tasks_.Admit(request.who()).status());  // its lines are named by the task id
  } else {
    // Checked against the allocation registry, not under mu_, as metric reports are: a long
    // scheduling pass does not hold up a trainer's output (master/allocation/allocation_registry.h).
    SF_ASSIGN_OR_RETURN(AllocationRegistry::Admission admission, registry_.Admit(request.who()));
    if (admission == AllocationRegistry::Admission::kAskCoordinator) {
      std::lock_guard<std::mutex> lock(mu_);
      SF_RETURN_IF_ERROR(CheckIdentityLocked(request.who()).status());
    }
    trial_id = request.who().trial_id();
  }
  const DeliveryStamp stamp{"task:" + request.who().task_id(), incarnation, request.sequence()};
  // The sender's record, once per (task, incarnation): a new incarnation starts it at 0. The
  // database call is made outside log_senders_mu_ (two first batches racing both register: the
  // same incarnation keeps its record).
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(log_senders_mu_);
    known = log_senders_.count({stamp.agent_id, incarnation}) > 0;
  }
  if (!known) {
    SF_RETURN_IF_ERROR(task_log_ledger_.Register(stamp.agent_id, incarnation).status());
    std::lock_guard<std::mutex> lock(log_senders_mu_);
    if (log_senders_.size() > 100000) log_senders_.clear();  // re-registering keeps the record
    log_senders_.insert({stamp.agent_id, incarnation});
  }
  std::vector<v1::LogLine> lines;
  lines.reserve(request.lines_size());
  const auto now = google::protobuf::util::TimeUtil::GetCurrentTime();
  for (const v1::LogLine& l : request.lines()) {
    v1::LogLine line;
    line.set_trial_id(trial_id);
    line.set_task_id(request.who().task_id());
    line.set_rank(request.who().rank());
    line.set_agent_id(request.host());
    line.set_stream(l.stream());
    line.set_message(l.message());
    *line.mutable_time() = l.has_time() ? l.time() : now;
    lines.push_back(std::move(line));
  }
  // Stored with the sender's record advanced in the same transaction: a re-sent batch is left out.
  Status st = log_writer_.Write(std::move(lines), stamp);
  changed_.notify_all();  // log followers
  return st;
}

Status Cluster::EndTrial(const v1::EndTrialRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  SF_ASSIGN_OR_RETURN(Trial * t, CheckIdentityLocked(request.who()));
  Experiment& e = experiments_[t->experiment_id];
  if (!e.unmanaged) {
    return FailedPrecondition("trial " + std::to_string(t->id) +
                              " is managed: it ends when its processes exit, not with EndTrial");
  }
  if (IsTerminal(t->state)) return Status::Ok();  // a retry, or killed meanwhile
  std::string error = request.error().substr(0, 1000);
  if (request.failed() && error.empty()) error = "the script failed";
  SetTrialStateLocked(*t, request.failed() ? v1::TRIAL_STATE_ERROR : v1::TRIAL_STATE_COMPLETED,
                      request.failed() ? "trial " + std::to_string(t->id) + ": " + error : "");
  e.searcher_done = true;
  e.search_failed = request.failed();
  if (!IsTerminal(e.state)) {
    SetExperimentStateLocked(e, request.failed() ? v1::EXPERIMENT_STATE_ERROR : v1::EXPERIMENT_STATE_COMPLETED,
                             request.failed() ? "trial " + std::to_string(t->id) + ": " + error : "");
  }
  log::Info("trial", {{"event", "unmanaged_end"}, {"id", std::to_string(t->id)},
                      {"failed", request.failed() ? "true" : "false"}});
  return Status::Ok();
}

Cluster::UnmanagedTrial Cluster::CreateUnmanagedTrial(const std::string& config_yaml, const std::string& owner,
                                                      int64_t workspace_id) {
  UnmanagedTrial out;
  config::ParseResult parsed = config::ParseExperimentConfig(config_yaml);
  if (!parsed.ok()) {
    out.created.errors = parsed.errors;
    return out;
  }
  config::ExperimentConfig& c = *parsed.config;
  for (const auto& [name, hp] : c.hyperparameters) {
    if (hp.is_space()) {
      out.created.errors.push_back({"hyperparameters." + name,
                                    "an unmanaged trial takes constants; a search space needs the scheduler "
                                    "(sf experiment create)",
                                    0, 0});
    }
  }
  if (!out.created.errors.empty()) return out;
  auto searcher = MakeSearchMethod(c);
  if (!searcher.ok()) {
    out.created.errors.push_back({"searcher", searcher.status().message(), 0, 0});
    return out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  NewExperiment row = ExperimentRow(c, config_yaml, owner, workspace_id);
  row.state = "ACTIVE";
  row.unmanaged = true;
  auto id = store_->CreateExperiment(row);
  if (!id.ok()) {
    out.created.errors.push_back({"<server>", id.status().message(), 0, 0});
    return out;
  }
  Experiment& e = experiments_[*id];
  e.id = *id;
  e.config = std::move(c);
  e.config_yaml = config_yaml;
  e.state = v1::EXPERIMENT_STATE_ACTIVE;
  e.searcher = std::move(searcher).value();
  e.unmanaged = true;
  const Value hparams = config::ConstantHyperparameters(e.config.hyperparameters);
  auto trial_id = store_->CreateTrial(e.id, /*request_id=*/1, hparams, "RUNNING");
  if (!trial_id.ok()) {
    SetExperimentStateLocked(e, v1::EXPERIMENT_STATE_ERROR, trial_id.status().message());
    out.created.errors.push_back({"<server>", trial_id.status().message(), 0, 0});
    return out;
  }
  Trial& t = trials_[*trial_id];
  t.id = *trial_id;
  registry_.Track(t.id, 0);
  t.experiment_id = e.id;
  t.request_id = 1;
  t.state = v1::TRIAL_STATE_RUNNING;
  t.hparams = hparams;
  t.target_length = e.config.searcher.max_length.value;
  t.last_call = steady_clock::now();
  TrialUpdate u;
  u.target_length = t.target_length;
  (void)store_->UpdateTrial(t.id, u);
  e.trial_by_request[1] = t.id;
  SaveSearcherLocked(e);
  out.created.id = e.id;
  out.trial_id = t.id;
  // Not "<allocation>.<rank>": no allocation of the scheduler's is ever current for it.
  out.task_id = "unmanaged-t" + std::to_string(t.id);
  if (options_.task_tokens) out.task_token = options_.task_tokens->Issue({t.id, 0, 0, out.task_id});
  out.checkpoint_dir = CheckpointDirLocked(e, t);
  out.trial_link_address = options_.trial_link_address;
  out.trial_seed = TrialSeed(e, t);
  log::Info("experiment", {{"event", "created_unmanaged"}, {"id", std::to_string(e.id)},
                           {"trial", std::to_string(t.id)}, {"name", e.config.name}});
  return out;
}

}  // namespace sf::master
