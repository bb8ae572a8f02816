#include "trainer/run/cluster_mode.h"

#include <grpcpp/grpcpp.h>
#include <omp.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_schema.h"
#include "common/log.h"
#include "trainer/core/dtype.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/transformer.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/text_run.h"
#include "trainer/run/train_step.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf {
namespace v1 = steadfast::v1;
namespace {

std::atomic<bool> g_terminate{false};
void OnTerminate(int) { g_terminate = true; }

std::string Env(const char* name, const std::string& def = "") {
  const char* v = std::getenv(name);
  return v ? v : def;
}

// TrialLink with retries: UNAVAILABLE (master restarting) and DEADLINE_EXCEEDED are retried
// with backoff for up to `patience`; other errors are returned.
class TrialLinkClient {
 public:
  TrialLinkClient(const std::string& address, v1::TrialIdentity who)
      : stub_(v1::TrialLink::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        who_(std::move(who)) {}

  const v1::TrialIdentity& who() const { return who_; }

  template <typename Req, typename Resp, typename Method>
  Status Call(const char* what, Method method, Req req, Resp* resp,
              std::chrono::seconds timeout = std::chrono::seconds(60)) {
    *req.mutable_who() = who_;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    int delay_ms = 200;
    while (true) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + timeout);
      grpc::Status st = (stub_.get()->*method)(&ctx, req, resp);
      if (st.ok()) return Status::Ok();
      // A master going down cancels calls in flight; one coming up may not know the trial for
      // a moment. Both are waited out.
      bool retry = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                   st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                   st.error_code() == grpc::StatusCode::CANCELLED ||
                   st.error_code() == grpc::StatusCode::ABORTED;
      if (!retry || std::chrono::steady_clock::now() > deadline) {
        return Unavailable(std::string(what) + ": " + st.error_message() + " (gRPC code " +
                           std::to_string(st.error_code()) + ")");
      }
      log::Warn("trial_link", {{"event", "retry"}, {"call", what}, {"error", st.error_message()}});
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      delay_ms = std::min(delay_ms * 2, 5000);
    }
  }

  v1::TrialLink::Stub* stub() { return stub_.get(); }

 private:
  std::unique_ptr<v1::TrialLink::Stub> stub_;
  v1::TrialIdentity who_;
};

google::protobuf::Struct ToStruct(const std::vector<std::pair<std::string, double>>& values) {
  google::protobuf::Struct s;
  for (const auto& [k, v] : values) (*s.mutable_fields())[k].set_number_value(v);
  return s;
}

}  // namespace

int RunClusterTrial() {
  signal(SIGTERM, OnTerminate);
  signal(SIGINT, OnTerminate);
  v1::TrialIdentity who;
  who.set_trial_id(std::atoll(Env("SF_TRIAL_ID", "0").c_str()));
  who.set_rank(std::atoi(Env("SF_RANK", "0").c_str()));
  who.set_task_id(Env("SF_TASK_ID"));
  who.set_restart(std::atoi(Env("SF_RESTART", "0").c_str()));
  const int world_size = std::atoi(Env("SF_WORLD_SIZE", "1").c_str());
  const std::string master = Env("SF_MASTER_ADDRESS");
  const std::string checkpoint_dir = Env("SF_CHECKPOINT_DIR");
  const std::string restore_dir = Env("SF_RESTORE_CHECKPOINT");
  if (master.empty() || who.trial_id() == 0 || checkpoint_dir.empty()) {
    std::cerr << "sf-trainer cluster: SF_MASTER_ADDRESS, SF_TRIAL_ID and SF_CHECKPOINT_DIR must be set "
                 "(the agent sets them)\n";
    return 2;
  }
  std::ifstream cfg_in(Env("SF_CONFIG_FILE"));
  std::string config_yaml((std::istreambuf_iterator<char>(cfg_in)), std::istreambuf_iterator<char>());
  config::ParseResult parsed = config::ParseExperimentConfig(config_yaml);
  if (!parsed.ok()) {
    std::cerr << "sf-trainer cluster: invalid experiment config:\n" << parsed.ErrorText();
    return 2;
  }
  const config::ExperimentConfig& cfg = *parsed.config;
  auto hparams_in = Value::FromJson(Env("SF_HPARAMS", "{}"));
  if (!hparams_in.ok()) {
    std::cerr << "sf-trainer cluster: SF_HPARAMS is not JSON: " << hparams_in.status().message() << "\n";
    return 2;
  }
  auto hp_errors = config::ValidateTrialHyperparameters(*hparams_in);
  if (!hp_errors.empty()) {
    for (const auto& e : hp_errors) std::cerr << "sf-trainer cluster: " << e.ToString() << "\n";
    return 2;
  }
  const Value hp = config::WithDefaults(*hparams_in);
  if (world_size != 1) {
    std::cerr << "sf-trainer cluster: distributed training (world size " << world_size
              << ") is not built yet; use slots_per_trial: 1\n";
    return 2;
  }
  // The data, model, optimizer and schedule: the same TextRun as `sf-trainer train`.
  log::Info("trainer", {{"event", "start"}, {"trial", std::to_string(who.trial_id())},
                        {"restart", std::to_string(who.restart())}, {"train", cfg.data.train.src},
                        {"precision", config::PrecisionName(cfg.precision)}});
  TextRunOptions ro;
  ro.rank = static_cast<int>(who.rank());
  ro.world_size = world_size;
  auto created = TextRun::Create(cfg, config_yaml, hp, ro);
  if (!created.ok()) {
    std::cerr << "sf-trainer cluster: " << created.status().message() << "\n";
    const StatusCode c = created.status().code();
    return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound ? 2 : 1;
  }
  TextRun& run = **created;
  log::Info("trainer", {{"event", "model"}, {"parameters", std::to_string(run.model().params().total_numel())},
                        {"steps_per_epoch", std::to_string(run.steps_per_epoch())},
                        {"threads", std::to_string(omp_get_max_threads())}});

  if (!restore_dir.empty()) {
    auto ck = ReadCheckpoint(restore_dir);
    Status st = ck.ok() ? run.Restore(restore_dir, *ck) : ck.status();
    if (!st.ok()) {
      std::cerr << "sf-trainer cluster: cannot restore: " << st.message() << "\n";
      return 2;
    }
  }

  TrialLinkClient link(master, who);
  auto checkpoint = [&](std::optional<double> metric) -> Status {
    Value::Map extra{{"trial_id", who.trial_id()}, {"restart", static_cast<int64_t>(who.restart())}};
    if (metric) extra["validation_metric"] = *metric;
    CheckpointContents c = run.Snapshot(extra);
    auto written = WriteCheckpoint(checkpoint_dir, c);
    if (!written.ok()) return written.status();
    v1::ReportCheckpointRequest req;
    auto* ck = req.mutable_checkpoint();
    ck->set_uuid(written->uuid);
    ck->set_path(written->dir);
    ck->set_batches(run.steps());
    ck->set_size(written->size);
    if (metric) ck->set_validation_metric(*metric);
    for (const auto& f : written->files) {
      auto* out = ck->add_files();
      out->set_path(f.path);
      out->set_size(f.size);
      out->set_sha256(f.sha256);
    }
    (*ck->mutable_metadata()->mutable_fields())["steps"].set_number_value(static_cast<double>(run.steps()));
    (*ck->mutable_metadata()->mutable_fields())["epoch"].set_number_value(static_cast<double>(run.epoch()));
    v1::ReportCheckpointResponse resp;
    log::Info("trainer", {{"event", "checkpoint"}, {"uuid", written->uuid}, {"steps", std::to_string(run.steps())}});
    return link.Call("ReportCheckpoint", &v1::TrialLink::Stub::ReportCheckpoint, req, &resp);
  };
  auto fail = [](const std::string& what, const Status& st) {
    std::cerr << "sf-trainer cluster: " << what << (what.empty() ? "" : ": ") << st.message() << "\n";
    return 1;
  };

  const int64_t unit = std::max<int64_t>(1, cfg.scheduling_unit);
  const int64_t ckpt_period = cfg.min_checkpoint_period ? run.StepsFor(*cfg.min_checkpoint_period) : 0;
  const int64_t val_period = cfg.min_validation_period ? run.StepsFor(*cfg.min_validation_period) : 0;
  int64_t last_checkpoint = run.steps(), last_validation = run.steps();
  double last_window_loss = 0;

  // Validation: report it, and return the searcher metric.
  auto validate = [&]() -> Result<double> {
    auto t0 = std::chrono::steady_clock::now();
    SF_ASSIGN_OR_RETURN(TextValidation v, run.Validate(last_window_loss));
    std::vector<std::pair<std::string, double>> values;
    for (const auto& [k, x] : v.values) values.emplace_back(k, x.as_double());
    values.emplace_back("validation_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    v1::ReportMetricsRequest mreq;
    auto* m = mreq.add_reports();
    m->set_kind("validation");
    m->set_batches(run.steps());
    *m->mutable_values() = ToStruct(values);
    v1::ReportMetricsResponse mresp;
    SF_RETURN_IF_ERROR(link.Call("ReportMetrics", &v1::TrialLink::Stub::ReportMetrics, mreq, &mresp));
    std::cout << "validation at step " << run.steps();
    for (const auto& [k, x] : values) std::cout << " " << k << " " << x;
    std::cout << std::endl;
    last_validation = run.steps();
    return v.metric;
  };

  while (true) {
    v1::GetNextOperationRequest nreq;
    v1::GetNextOperationResponse op;
    Status st = link.Call("GetNextOperation", &v1::TrialLink::Stub::GetNextOperation, nreq, &op,
                          std::chrono::seconds(30));
    if (!st.ok()) return fail("", st);
    if (op.has_complete() && op.complete()) {
      log::Info("trainer", {{"event", "done"}, {"steps", std::to_string(run.steps())}});
      return 0;
    }
    if (!op.has_train()) {
      if (g_terminate) return 0;
      continue;  // nothing yet: ask again
    }
    const int64_t target = op.train().unit() == "epochs" ? op.train().target_length() * run.steps_per_epoch()
                                                         : op.train().target_length();
    auto window_start = std::chrono::steady_clock::now();
    double window_loss = 0, window_nll = 0;
    int64_t window_tokens = 0, window_steps = 0;
    while (run.steps() < target) {
      auto r = run.Step();
      if (!r.ok()) return fail("training", r.status());
      const StepReport& rep = r->report;
      const int64_t steps = run.steps();
      window_loss += rep.loss;
      window_nll += rep.nll;
      window_tokens += rep.tokens;
      ++window_steps;
      bool report = steps % unit == 0 || steps == target;
      if (report && !rep.skipped && window_steps > 0) {
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
        const double tokens = static_cast<double>(std::max<int64_t>(1, window_tokens));
        last_window_loss = window_loss / tokens;
        v1::ReportMetricsRequest mreq;
        auto* m = mreq.add_reports();
        m->set_kind("training");
        m->set_batches(steps);
        *m->mutable_values() = ToStruct({{"loss", window_loss / tokens},
                                         {"nll_loss", window_nll / tokens},
                                         {"tokens_per_second", static_cast<double>(window_tokens) / std::max(1e-9, seconds)},
                                         {"lr", r->lr},
                                         {"loss_scale", rep.loss_scale},
                                         {"grad_norm", rep.grad_norm},
                                         {"epoch", static_cast<double>(run.epoch())},
                                         {"skipped_steps", static_cast<double>(run.skipped_steps())}});
        v1::ReportMetricsResponse mresp;
        st = link.Call("ReportMetrics", &v1::TrialLink::Stub::ReportMetrics, mreq, &mresp);
        if (!st.ok()) return fail("", st);
        std::cout << "step " << steps << " loss " << window_loss / tokens << " epoch " << run.epoch()
                  << " tokens/s " << static_cast<int64_t>(static_cast<double>(window_tokens) / std::max(1e-9, seconds))
                  << std::endl;
        window_loss = window_nll = 0;
        window_tokens = window_steps = 0;
        window_start = std::chrono::steady_clock::now();
        // Between steps: should we stop?
        v1::ShouldStopRequest sreq;
        sreq.set_batches(steps);
        v1::ShouldStopResponse sresp;
        st = link.Call("ShouldStop", &v1::TrialLink::Stub::ShouldStop, sreq, &sresp);
        if (st.ok() && sresp.action() == v1::ShouldStopResponse::ACTION_STOP_NOW) {
          log::Info("trainer", {{"event", "killed"}, {"steps", std::to_string(steps)}});
          return 0;
        }
        if ((st.ok() && sresp.action() == v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP) || g_terminate) {
          Status cs = checkpoint(std::nullopt);
          if (!cs.ok()) return fail("checkpoint failed", cs);
          log::Info("trainer", {{"event", "paused"}, {"steps", std::to_string(steps)}});
          return 0;
        }
      }
      if (g_terminate) {
        Status cs = checkpoint(std::nullopt);
        return cs.ok() ? 0 : 1;
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
    st = checkpoint(metric);
    if (!st.ok()) return fail("checkpoint failed", st);
    last_checkpoint = run.steps();
    v1::CompleteOperationRequest creq;
    *creq.mutable_op() = op.train();
    creq.set_searcher_metric(metric);
    v1::CompleteOperationResponse cresp;
    st = link.Call("CompleteOperation", &v1::TrialLink::Stub::CompleteOperation, creq, &cresp);
    if (!st.ok()) return fail("", st);
  }
}

}  // namespace sf
