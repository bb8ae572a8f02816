#include "trainer/run/cluster_mode.h"

#include <omp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <unistd.h>

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_schema.h"
#include "common/env.h"
#include "common/log.h"
#include "common/storage/checkpoint_storage.h"
#include "core_api/steadfast_core.h"
#include "trainer/core/dtype.h"
#include "trainer/distributed/host_network.h"
#include "trainer/distributed/mpi_communicator.h"
#if defined(SF_HAVE_CUDA)
#include "trainer/distributed/nccl_communicator.h"
#endif
#include "trainer/models/transformer.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/training_run.h"
#include "trainer/run/train_step.h"
#include "trainer/run/validation_transcripts.h"
#include "steadfast/v1/common.pb.h"

namespace sf {
namespace v1 = steadfast::v1;
namespace {

std::atomic<bool> g_terminate{false};
void OnTerminate(int) { g_terminate = true; }

// Where this trial's checkpoints go: written in place on a shared filesystem, or staged in a
// local directory and stored (uploaded) by common/storage/checkpoint_storage.h.
struct CheckpointPlace {
  std::optional<config::CheckpointStorageConfig> config;
  std::unique_ptr<storage::CheckpointStorage> store;  // set when staged (s3)
  std::string staging;                                // a local directory of this process's own
  ~CheckpointPlace() {
    if (staging.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);
  }
};

// One trial's training loop under the master. With world_size > 1 every rank runs it: rank 0
// talks to the searcher and reports for the trial, and every decision that changes what the
// ranks do next (the operation, stop, pause) is made collectively, so no rank is left waiting in
// a collective the others never enter.
// Resumes from the checkpoint the master named, or, when that one fails verification (a file
// missing, truncated or changed: ReadCheckpoint), from the newest of the trial's other intact
// checkpoints (SF_RESTORE_FALLBACKS), reporting each unusable one to the master, which marks it
// CORRUPTED and says so in the trial's logs. A checkpoint that verifies but does not fit this
// model (Restore) is an error as before: an older one would not fit either.
// On object storage (checkpoint_storage type s3) a checkpoint is fetched into `staging` first
// and verified there; one whose upload never completed (no manifest) or whose files do not
// match counts as unusable like a damaged directory, while storage that does not answer fails
// the restore (the checkpoint may be fine: the trial restarts rather than give it up).
Status RestoreNewestIntact(core::Context& ctx, TrainingRun& run, const CheckpointPlace& place) {
  const core::Info& info = ctx.info();
  std::vector<core::Info::Fallback> candidates = {{info.latest_checkpoint, info.restore_checkpoint}};
  candidates.insert(candidates.end(), info.restore_fallbacks.begin(), info.restore_fallbacks.end());
  std::optional<Status> first_failure;
  for (const core::Info::Fallback& c : candidates) {
    std::string dir = c.dir;
    Status fetched = Status::Ok();
    if (storage::IsS3Url(c.dir)) {
      SF_ASSIGN_OR_RETURN(auto store, storage::CheckpointStorage::ForPath(c.dir, place.config));
      dir = place.staging + "/restore-" + (c.uuid.empty() ? std::string("checkpoint") : c.uuid);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      fetched = store->Fetch(c.dir, dir).status();
      if (!fetched.ok() && fetched.code() != StatusCode::kDataLoss) {  // not the checkpoint's fault
        return fetched.WithContext("fetching checkpoint " + c.dir);
      }
    }
    auto ck = fetched.ok() ? ReadCheckpoint(dir) : Result<CheckpointContents>(fetched);
    if (ck.ok()) {
      if (first_failure) {
        log::Warn("trainer", {{"event", "restore_fallback"}, {"uuid", c.uuid}, {"checkpoint", c.dir}});
      }
      Status restored = run.Restore(dir, *ck);
      if (dir != c.dir) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
      return restored;
    }
    log::Warn("trainer", {{"event", "checkpoint_unusable"}, {"uuid", c.uuid}, {"error", ck.status().message()}});
    if (!first_failure) first_failure = ck.status();
    if (c.uuid.empty()) continue;  // a directory the master did not name by uuid (an old master)
    auto reported = ctx.checkpoint().ReportUnusable(c.uuid, ck.status().message());
    if (!reported.ok()) {
      log::Warn("trainer", {{"event", "report_unusable_failed"}, {"uuid", c.uuid},
                            {"error", reported.status().message()}});
    }
  }
  const size_t older = candidates.size() - 1;
  if (older == 0) return *first_failure;
  return Status(first_failure->code(), first_failure->message() + " (and the trial's " + std::to_string(older) +
                                           " older checkpoint" + (older == 1 ? "" : "s") + " failed verification too)");
}

int RunTrial(core::Context& ctx, std::unique_ptr<dist::Communicator>& comm) {
  const core::Info& info = ctx.info();
  const int world_size = info.world_size;
  std::ifstream cfg_in(info.config_file);
  std::string config_yaml((std::istreambuf_iterator<char>(cfg_in)), std::istreambuf_iterator<char>());
  config::ParseResult parsed = config::ParseExperimentConfig(config_yaml);
  if (!parsed.ok()) {
    std::cerr << "sf-trainer cluster: invalid experiment config:\n" << parsed.ErrorText();
    return 2;
  }
  const config::ExperimentConfig& cfg = *parsed.config;
  auto hp_errors = config::ValidateTrialHyperparameters(info.hparams);
  if (!hp_errors.empty()) {
    for (const auto& e : hp_errors) std::cerr << "sf-trainer cluster: " << e.ToString() << "\n";
    return 2;
  }
  const Value hp = config::WithDefaults(info.hparams);
  const int rank = info.rank;
  const bool chief = info.chief();
  auto fail = [&](const std::string& what, const Status& st) {
    std::cerr << "sf-trainer cluster: " << (world_size > 1 ? "rank " + std::to_string(rank) + ": " : "") << what
              << (what.empty() ? "" : ": ") << st.message() << "\n";
    return 1;
  };

  // The device comes from the slots the agent gave this task (CUDA_VISIBLE_DEVICES holds them).
  const DeviceChoice device = DeviceFromSlots(info.slot_ids);
  if (world_size > 1) {
    // Meet the other ranks through the master, then connect them: NCCL for GPU ranks (the
    // gradients stay on the device), Open MPI for CPU ranks.
    const int timeout_s = std::atoi(Env("SF_RENDEZVOUS_TIMEOUT_S", "300").c_str());
    auto rendezvous = [&](const std::string& round, const std::string& payload,
                          std::vector<std::string>* addresses) -> Result<std::vector<std::string>> {
      return ctx.distributed().Gather(round, payload, std::chrono::seconds(timeout_s), addresses);
    };
    // Each rank says which host (kernel and network namespace) it runs on: ranks that share one
    // talk over loopback (host_network.h).
    auto members = rendezvous("members", dist::HostKey(), nullptr);
    if (!members.ok()) return fail("", members.status());
    const auto collective_timeout = std::chrono::seconds(std::atoi(Env("SF_COLLECTIVE_TIMEOUT_S", "300").c_str()));
    auto meet = [&](const std::string& round, const std::string& payload) {
      return rendezvous(round, payload, nullptr);
    };
    Result<std::unique_ptr<dist::Communicator>> connected = Unavailable("no communicator");
    if (device.device == Device::kCuda) {
#if defined(SF_HAVE_CUDA)
      dist::NcclConnectOptions no;
      no.rank = rank;
      no.world_size = world_size;
      no.rendezvous = meet;
      no.timeout = collective_timeout;
      no.device = device.ordinal;
      connected = dist::NcclConnect(no);
#else
      connected = FailedPrecondition("this sf-trainer was built without CUDA (SF_CUDA=OFF): no NCCL for GPU ranks");
#endif
    } else {
      dist::MpiConnectOptions mo;
      mo.rank = rank;
      mo.world_size = world_size;
      mo.rendezvous = meet;
      mo.work_dir = info.task_dir.empty() ? "/tmp" : info.task_dir;
      const std::vector<std::string>& hosts = *members;
      mo.across_machines =
          std::any_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h != hosts[0]; });
      mo.tcp_interfaces = Env("SF_DIST_TCP_INTERFACES");
      if (mo.across_machines && mo.tcp_interfaces.empty()) mo.tcp_interfaces = dist::RouteInterface(info.master_address);
      mo.timeout = collective_timeout;
      connected = dist::MpiConnect(mo);
    }
    if (!connected.ok()) return fail("connecting the ranks", connected.status());
    comm = std::move(connected).value();
  }

  // The data, model, optimizer and schedule: the same TrainingRun as `sf-trainer train`.
  log::Info("trainer", {{"event", "start"}, {"trial", std::to_string(info.trial_id)},
                        {"restart", std::to_string(info.restart)}, {"rank", std::to_string(rank)},
                        {"world_size", std::to_string(world_size)},
                        {"train", config::DataFiles(cfg.data).front().second},
                        {"precision", config::PrecisionName(cfg.precision)}});
  TrainingRunOptions ro;
  ro.device = device;
  ro.rank = rank;
  ro.world_size = world_size;
  ro.comm = comm.get();
  auto created = MakeTrainingRun(cfg, config_yaml, hp, ro);
  if (!created.ok()) {
    fail("", created.status());
    const StatusCode c = created.status().code();
    return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound ? 2 : 1;
  }
  TrainingRun& run = **created;
  const int64_t parameters = run.parameter_count();
  log::Info("trainer", {{"event", "model"}, {"parameters", std::to_string(parameters)},
                        {"steps_per_epoch", std::to_string(run.steps_per_epoch())},
                        {"threads", std::to_string(omp_get_max_threads())}});

  CheckpointPlace place;
  place.config = cfg.checkpoint_storage;
  if (storage::IsS3Url(info.checkpoint_dir) || storage::IsS3Url(info.restore_checkpoint)) {
    std::error_code ec;
    place.staging = (std::filesystem::temp_directory_path(ec) /
                     ("sf-checkpoints-" + std::to_string(info.trial_id) + "-" + std::to_string(getpid())))
                        .string();
    std::filesystem::create_directories(place.staging, ec);
    if (ec) return fail("checkpoint staging directory " + place.staging, Internal(ec.message()));
  }
  if (storage::IsS3Url(info.checkpoint_dir)) {
    auto store = storage::CheckpointStorage::ForPath(info.checkpoint_dir, place.config);
    if (!store.ok()) return fail("checkpoint storage", store.status());
    place.store = std::move(store).value();
  }
  if (!info.restore_checkpoint.empty()) {
    Status st = RestoreNewestIntact(ctx, run, place);
    if (!st.ok()) {
      fail("cannot restore", st);
      return 2;
    }
  }

  // Only rank 0 writes the checkpoint: it holds everything every rank needs to resume.
  auto checkpoint = [&](std::optional<double> metric) -> Status {
    if (!chief) return Status::Ok();
    Value::Map extra{{"trial_id", info.trial_id}, {"restart", static_cast<int64_t>(info.restart)},
                     {"world_size", static_cast<int64_t>(world_size)}};
    if (metric) extra["validation_metric"] = *metric;
    CheckpointContents c = run.Snapshot(extra);
    auto written = WriteCheckpoint(place.store ? place.staging : info.checkpoint_dir, c);
    if (!written.ok()) return written.status();
    std::string path = written->dir;
    if (place.store) {  // staged: stored (manifest last) before the master hears of it
      path = info.checkpoint_dir + "/" + written->uuid;
      const auto t0 = std::chrono::steady_clock::now();
      Status stored = place.store->Store(written->dir, path);
      std::error_code ec;
      std::filesystem::remove_all(written->dir, ec);
      if (!stored.ok()) return stored.WithContext("storing checkpoint " + written->uuid);
      log::Info("trainer", {{"event", "checkpoint_stored"}, {"uuid", written->uuid}, {"path", path},
                            {"bytes", std::to_string(written->size)},
                            {"seconds", std::to_string(std::chrono::duration<double>(
                                                           std::chrono::steady_clock::now() - t0)
                                                           .count())}});
    }
    steadfast::v1::Checkpoint ck;
    ck.set_uuid(written->uuid);
    ck.set_path(path);
    ck.set_batches(run.steps());
    ck.set_size(written->size);
    if (metric) ck.set_validation_metric(*metric);
    for (const auto& f : written->files) {
      auto* out = ck.add_files();
      out->set_path(f.path);
      out->set_size(f.size);
      out->set_sha256(f.sha256);
    }
    (*ck.mutable_metadata()->mutable_fields())["steps"].set_number_value(static_cast<double>(run.steps()));
    (*ck.mutable_metadata()->mutable_fields())["epoch"].set_number_value(static_cast<double>(run.epoch()));
    log::Info("trainer", {{"event", "checkpoint"}, {"uuid", written->uuid}, {"steps", std::to_string(run.steps())}});
    return ctx.checkpoint().Report(ck);
  };

  // What every rank does next, decided by rank 0 (the master's answer) and any rank's signal:
  // the largest action wins, so one SIGTERM'd rank checkpoints the whole gang.
  enum Action : int32_t { kContinue = 0, kCheckpointAndStop = 1, kStopNow = 2 };
  auto agree = [&](int32_t action) -> Result<int32_t> {
    int32_t v = std::max(action, g_terminate ? int32_t{kCheckpointAndStop} : int32_t{kContinue});
    if (comm) SF_RETURN_IF_ERROR(comm->Allreduce(&v, 1, DType::kI32, dist::ReduceOp::kMax).WithContext("stop decision"));
    return v;
  };

  const int64_t unit = std::max<int64_t>(1, cfg.scheduling_unit);
  const int64_t ckpt_period = cfg.min_checkpoint_period ? run.StepsFor(*cfg.min_checkpoint_period) : 0;
  const int64_t val_period = cfg.min_validation_period ? run.StepsFor(*cfg.min_validation_period) : 0;
  int64_t last_checkpoint = run.steps(), last_validation = run.steps();
  double last_window_loss = 0;

  // Validation (every rank, sharded): rank 0 reports it, and a speech run's sample transcripts
  // as their own group; returns the searcher metric.
  auto validate = [&]() -> Result<double> {
    auto t0 = std::chrono::steady_clock::now();
    SF_ASSIGN_OR_RETURN(RunValidation v, run.Validate(last_window_loss));
    last_validation = run.steps();
    if (!chief) return v.metric;
    core::Train::Values values;
    for (const auto& [k, x] : v.values) values.emplace_back(k, x.as_double());
    values.emplace_back("validation_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    SF_RETURN_IF_ERROR(ctx.train().ReportValidation(run.steps(), values));
    if (!v.transcripts.empty()) {
      SF_RETURN_IF_ERROR(ctx.train().ReportMetrics(kValidationTranscriptsGroup, run.steps(),
                                                   ValidationTranscriptsValue(v.transcripts)));
    }
    std::cout << "validation at step " << run.steps();
    for (const auto& [k, x] : values) std::cout << " " << k << " " << x;
    std::cout << std::endl;
    return v.metric;
  };

  while (true) {
    // Rank 0 asks the master for the next operation and passes it on: {kind, target, unit}.
    int64_t op_msg[3] = {0, 0, 0};  // kind: 0 ask again, 1 train, 2 complete
    if (chief) {
      auto next = ctx.searcher().Next();
      if (!next.ok()) return fail("", next.status());
      op_msg[0] = next->has_value() ? 1 : 2;
      if (next->has_value()) {
        op_msg[1] = (*next)->length;
        op_msg[2] = (*next)->unit == "epochs" ? 1 : 0;
      }
    }
    if (comm) {
      Status st = comm->Broadcast(op_msg, sizeof(op_msg), 0);
      if (!st.ok()) return fail("next operation", st);
    }
    if (op_msg[0] == 2) {
      log::Info("trainer", {{"event", "done"}, {"steps", std::to_string(run.steps())}});
      return 0;
    }
    if (op_msg[0] == 0) {
      auto a = agree(kContinue);
      if (!a.ok()) return fail("", a.status());
      if (*a != kContinue) return 0;
      continue;  // nothing yet: ask again
    }
    const int64_t target_length = op_msg[1];
    const int64_t target = op_msg[2] ? op_msg[1] * run.steps_per_epoch() : op_msg[1];
    auto window_start = std::chrono::steady_clock::now();
    double window_loss = 0, window_nll = 0;
    int64_t window_tokens = 0, window_steps = 0;
    dist::SyncStats window_sync;
    while (run.steps() < target) {
      auto r = run.Step();
      if (!r.ok()) return fail("training", r.status());
      const StepReport& rep = r->report;
      const int64_t steps = run.steps();
      window_loss += rep.loss;
      window_nll += rep.nll;
      window_tokens += rep.tokens;
      window_sync.busy_seconds += rep.sync.busy_seconds;
      window_sync.wait_seconds += rep.sync.wait_seconds;
      window_sync.bytes += rep.sync.bytes;
      ++window_steps;
      int32_t action = kContinue;
      bool report = steps % unit == 0 || steps == target;
      if (report && !rep.skipped && window_steps > 0) {
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
        const double tokens = static_cast<double>(std::max<int64_t>(1, window_tokens));
        last_window_loss = window_loss / tokens;
        if (chief) {
          // Losses and tokens are already summed over the ranks (the step reduces them).
          core::Train::Values values = {
              {"loss", window_loss / tokens},
              {"nll_loss", window_nll / tokens},
              {"tokens_per_second", static_cast<double>(window_tokens) / std::max(1e-9, seconds)},
              {"lr", r->lr},
              {"loss_scale", rep.loss_scale},
              {"grad_norm", rep.grad_norm},
              {"epoch", static_cast<double>(run.epoch())},
              {"skipped_steps", static_cast<double>(run.skipped_steps())},
              // The model's size, in every report so that any window of them (the dashboard
              // reads a downsampled few) has it; a double holds it exactly below 2^53.
              {"parameters", static_cast<double>(parameters)}};
          if (comm) {
            values.push_back({"world_size", static_cast<double>(world_size)});
            values.push_back({"allreduce_s", window_sync.busy_seconds});
            values.push_back({"allreduce_wait_s", window_sync.wait_seconds});
            values.push_back({"allreduce_bytes", static_cast<double>(window_sync.bytes)});
            values.push_back({"allreduce_hidden", window_sync.hidden_fraction()});
          }
          Status st = ctx.train().ReportTraining(steps, values);
          if (!st.ok()) return fail("", st);
          std::cout << "step " << steps << " loss " << window_loss / tokens << " epoch " << run.epoch()
                    << " tokens/s " << static_cast<int64_t>(static_cast<double>(window_tokens) / std::max(1e-9, seconds))
                    << std::endl;
          // Between steps: should we stop?
          auto stop = ctx.preempt().ShouldStop(steps);
          if (stop.ok() && *stop == core::Preempt::Action::kStopNow) action = kStopNow;
          if (stop.ok() && *stop == core::Preempt::Action::kCheckpointAndStop) action = kCheckpointAndStop;
        }
        window_loss = window_nll = 0;
        window_tokens = window_steps = 0;
        window_sync = dist::SyncStats{};
        window_start = std::chrono::steady_clock::now();
      }
      auto agreed = agree(action);
      if (!agreed.ok()) return fail("", agreed.status());
      if (*agreed == kStopNow) {
        log::Info("trainer", {{"event", "killed"}, {"steps", std::to_string(steps)}});
        return 0;
      }
      if (*agreed == kCheckpointAndStop) {
        Status cs = checkpoint(std::nullopt);
        if (!cs.ok()) return fail("checkpoint failed", cs);
        log::Info("trainer", {{"event", "paused"}, {"steps", std::to_string(steps)}});
        return 0;
      }
      std::optional<double> metric;
      if (val_period > 0 && steps - last_validation >= val_period && steps < target) {
        auto v = validate();
        if (!v.ok()) return fail("validation", v.status());
        metric = *v;
      }
      if (ckpt_period > 0 && steps - last_checkpoint >= ckpt_period && steps < target) {
        Status cs = checkpoint(metric);
        if (!cs.ok()) return fail("checkpoint failed", cs);
        last_checkpoint = steps;
      }
    }
    // The operation's length is reached: validate, checkpoint, tell the searcher.
    auto v = validate();
    if (!v.ok()) return fail("validation", v.status());
    const double metric = *v;
    Status st = checkpoint(metric);
    if (!st.ok()) return fail("checkpoint failed", st);
    last_checkpoint = run.steps();
    const core::Operation op{target_length, op_msg[2] ? "epochs" : "batches"};
    st = ctx.searcher().Complete(op, metric);
    if (!st.ok()) return fail("", st);
  }
}

// Leaves the exit status in $SF_TASK_DIR/exit_status (written to a temporary name, then
// renamed), so an agent that restarted while this trainer ran, and so cannot wait for it,
// still reports how it ended (docs/agent.md, "Agent restarts").
void RecordExitStatus(int code) {
  const std::string dir = Env("SF_TASK_DIR");
  if (dir.empty()) return;
  const std::string tmp = dir + "/.exit_status.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << code << "\n";
    if (!out) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir + "/exit_status", ec);
}

}  // namespace

int RunClusterTrial() {
  signal(SIGTERM, OnTerminate);
  signal(SIGINT, OnTerminate);
  auto ctx = core::Context::FromEnvironment();
  if (!ctx.ok()) {
    std::cerr << "sf-trainer cluster: " << ctx.status().message() << "\n";
    RecordExitStatus(2);
    return 2;
  }
  std::unique_ptr<dist::Communicator> comm;
  const int code = RunTrial(**ctx, comm);
  RecordExitStatus(code);
  if (code != 0 && comm) {
    // A failed rank cannot leave MPI cleanly (peers may be inside a collective it will never
    // enter): exit now; the master stops the rest of the gang and restarts the trial. The
    // metrics reported so far go first (a bounded wait: ~Context is skipped by _Exit).
    (void)(*ctx)->train().Flush(std::chrono::seconds(5));
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  }
  return code;  // the communicator (if any) leaves MPI together with the other ranks
}

}  // namespace sf
