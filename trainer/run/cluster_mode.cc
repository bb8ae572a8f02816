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
#include "trainer/run/synthetic_task.h"
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

double Num(const Value& v, const std::string& key, double def) {
  const Value* x = v.Find(key);
  return x && x->is_number() ? x->as_double() : def;
}
int64_t Int(const Value& v, const std::string& key, int64_t def) {
  const Value* x = v.Find(key);
  return x && x->is_int() ? x->as_int() : def;
}
std::string Text(const Value& v, const std::string& key, const std::string& def) {
  const Value* x = v.Find(key);
  return x && x->is_string() ? x->as_string() : def;
}
bool Flag(const Value& v, const std::string& key, bool def) {
  const Value* x = v.Find(key);
  return x && x->is_bool() ? x->as_bool() : def;
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
  if (cfg.searcher.metric == "bleu") {
    std::cerr << "sf-trainer cluster: searcher.metric bleu needs beam search and the text pipeline, which this "
                 "trainer build does not have yet; use validation_loss\n";
    return 2;
  }

  // The data: the text pipeline is not wired into the cluster trainer yet, so trials train on the
  // synthetic reversal task (same model, optimizer, schedule and precision as configured).
  const uint64_t seed = static_cast<uint64_t>(Int(hp, "seed", 1));
  const int64_t max_tokens = Int(hp, "max_tokens", 4096);
  const int64_t seq_len = 12;
  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(256, max_tokens / (2 * (seq_len + 1))));
  SyntheticReversalTask task(64, 4, seq_len, batch, seed);
  constexpr int64_t kBatchesPerEpoch = 100;
  log::Info("trainer", {{"event", "start"}, {"trial", std::to_string(who.trial_id())},
                        {"restart", std::to_string(who.restart())}, {"data", "synthetic_reversal"},
                        {"batch", std::to_string(batch)}, {"precision", config::PrecisionName(cfg.precision)}});

  TransformerConfig mc;
  mc.d_model = Int(hp, "d_model", 512);
  mc.heads = Int(hp, "heads", 8);
  mc.encoder_layers = Int(hp, "encoder_layers", 6);
  mc.decoder_layers = Int(hp, "decoder_layers", 6);
  mc.ffn_dim = Int(hp, "ffn_dim", 2048);
  mc.dropout = static_cast<float>(Num(hp, "dropout", 0.1));
  mc.attention_dropout = static_cast<float>(Num(hp, "attention_dropout", 0.0));
  mc.activation = Text(hp, "activation", "relu") == "gelu" ? Activation::kGelu : Activation::kRelu;
  mc.normalize_before = Flag(hp, "normalize_before", false);
  mc.share_embeddings = Flag(hp, "share_embeddings", false);
  mc.src_vocab = task.vocab();
  mc.tgt_vocab = task.vocab();
  mc.max_positions = std::max<int64_t>(64, seq_len + 2);
  mc.label_smoothing = static_cast<float>(Num(hp, "label_smoothing", 0.1));
  Status valid = mc.Validate();
  if (!valid.ok()) {
    std::cerr << "sf-trainer cluster: " << valid.message() << "\n";
    return 2;
  }
  const DType compute = cfg.precision == config::Precision::kBf16   ? DType::kBF16
                        : cfg.precision == config::Precision::kFp16 ? DType::kF16
                                                                    : DType::kF32;
  CpuBackend backend;
  Transformer<float> model(mc, &backend, compute);
  model.InitParameters(seed);
  model.context().seed = seed;

  const Value& opt = *hp.Find("optimizer");
  OptimizerOptions oo;
  oo.type = Text(opt, "type", "adamw");
  if (const Value* betas = opt.Find("betas"); betas && betas->is_list() && betas->as_list().size() == 2) {
    oo.beta1 = betas->as_list()[0].as_double();
    oo.beta2 = betas->as_list()[1].as_double();
  }
  oo.eps = Num(opt, "eps", 1e-8);
  oo.weight_decay = Num(opt, "weight_decay", 0.0);
  oo.momentum = Num(opt, "momentum", 0.9);
  oo.nesterov = Flag(opt, "nesterov", false);
  oo.radam_rho_threshold = Num(opt, "rho_threshold", 5.0);
  oo.decoupled_weight_decay = Flag(opt, "decoupled_weight_decay", false);
  auto optimizer = MakeOptimizer(oo);
  if (!optimizer.ok()) {
    std::cerr << "sf-trainer cluster: optimizer: " << optimizer.status().message() << "\n";
    return 2;
  }
  const int64_t max_length_batches = cfg.searcher.max_length.unit == config::Length::Unit::kEpochs
                                         ? cfg.searcher.max_length.value * kBatchesPerEpoch
                                         : cfg.searcher.max_length.value;
  const Value& sched = *hp.Find("lr_schedule");
  LrScheduleOptions so;
  so.type = Text(sched, "type", "inverse_sqrt");
  so.lr = Num(hp, "lr", 5e-4);
  so.warmup_steps = Int(sched, "warmup", 4000);
  so.warmup_init_lr = Num(sched, "warmup_init_lr", 0.0);
  so.total_steps = Int(sched, "total_steps", max_length_batches);
  so.min_lr = Num(sched, "min_lr", 0.0);
  if (so.type == "exponential") so.gamma = Num(sched, "gamma", 0.9999);
  auto schedule = MakeLrSchedule(so);
  if (!schedule.ok()) {
    std::cerr << "sf-trainer cluster: " << schedule.status().message() << "\n";
    return 2;
  }
  LossScalerOptions lso;
  lso.type = cfg.loss_scaling.type == config::LossScalingConfig::Type::kNone     ? "none"
             : cfg.loss_scaling.type == config::LossScalingConfig::Type::kStatic ? "static"
                                                                                 : "dynamic";
  lso.scale = cfg.loss_scaling.scale;
  lso.init_scale = cfg.loss_scaling.init_scale;
  lso.growth_interval = cfg.loss_scaling.growth_interval.value_or(0);
  lso.scale_factor = cfg.loss_scaling.scale_factor;
  lso.min_scale = cfg.loss_scaling.min_scale;
  lso.world_size = world_size;
  lso.aggregation_frequency = static_cast<int>(cfg.optimizations.aggregation_frequency);
  auto scaler = LossScaler::Make(lso);
  if (!scaler.ok()) {
    std::cerr << "sf-trainer cluster: loss_scaling: " << scaler.status().message() << "\n";
    return 2;
  }
  TrainStep step(&model, std::move(optimizer).value(), std::move(scaler).value(), Num(hp, "clip_norm", 0.0));
  std::vector<ParamRef> params = model.Parameters();
  Status prepared = step.optimizer().Prepare(params);
  if (!prepared.ok()) {
    std::cerr << "sf-trainer cluster: " << prepared.message() << "\n";
    return 1;
  }

  int64_t steps_done = 0;
  int64_t skipped_total = 0;
  // ---- restore
  if (!restore_dir.empty()) {
    auto ck = ReadCheckpoint(restore_dir);
    if (!ck.ok()) {
      std::cerr << "sf-trainer cluster: cannot restore: " << ck.status().message() << "\n";
      return 2;
    }
    auto& store = model.params();
    for (const auto& info : store.params()) {
      const NamedBuffer* b = FindBuffer(ck->model, info.name);
      int64_t numel = 1;
      for (int64_t d : info.shape) numel *= d;
      if (!b || b->AsF32().size() != static_cast<size_t>(numel)) {
        std::cerr << "sf-trainer cluster: checkpoint " << restore_dir << " does not fit this model (parameter "
                  << info.name << ")\n";
        return 2;
      }
      std::copy(b->AsF32().begin(), b->AsF32().end(), store.value(store.Find(info.name)));
    }
    model.WeightsUpdated();
    std::vector<NamedBuffer> opt_state, scaler_state;
    for (const auto& b : ck->optimizer) {
      (b.name.rfind("loss_scaler.", 0) == 0 ? scaler_state : opt_state).push_back(b);
    }
    for (auto& b : scaler_state) b.name = b.name.substr(12);
    Status st = step.optimizer().LoadState(opt_state, params);
    if (st.ok()) st = const_cast<LossScaler&>(step.loss_scaler()).LoadState(scaler_state);
    if (!st.ok()) {
      std::cerr << "sf-trainer cluster: cannot restore optimizer state: " << st.message() << "\n";
      return 2;
    }
    steps_done = Int(ck->state, "steps", 0);
    skipped_total = Int(ck->state, "skipped_steps", 0);
    model.context().seed = static_cast<uint64_t>(Int(ck->state, "dropout_seed", static_cast<int64_t>(seed)));
    model.context().micro_batch = static_cast<uint64_t>(Int(ck->state, "micro_batch", 0));
    log::Info("trainer", {{"event", "restored"}, {"checkpoint", restore_dir}, {"steps", std::to_string(steps_done)}});
  }

  TrialLinkClient link(master, who);
  auto checkpoint = [&](int64_t at_step, std::optional<double> metric) -> Status {
    CheckpointContents c;
    for (const auto& info : model.params().params()) {
      int64_t numel = 1;
      for (int64_t d : info.shape) numel *= d;
      const float* v = model.params().value(model.params().Find(info.name));
      NamedBuffer b = NamedBuffer::F32(info.name, std::span<const float>(v, static_cast<size_t>(numel)));
      b.shape = info.shape;
      c.model.push_back(std::move(b));
    }
    c.optimizer = step.optimizer().State();
    for (NamedBuffer b : step.loss_scaler().State()) {
      b.name = "loss_scaler." + b.name;
      c.optimizer.push_back(std::move(b));
    }
    c.state = Value(Value::Map{{"steps", at_step},
                               {"skipped_steps", skipped_total},
                               {"dropout_seed", static_cast<int64_t>(model.context().seed)},
                               {"micro_batch", static_cast<int64_t>(model.context().micro_batch)},
                               {"trial_id", who.trial_id()},
                               {"restart", static_cast<int64_t>(who.restart())},
                               {"data", "synthetic_reversal"},
                               {"hparams", *hparams_in}});
    c.config_yaml = config_yaml;
    auto written = WriteCheckpoint(checkpoint_dir, c);
    if (!written.ok()) return written.status();
    v1::ReportCheckpointRequest req;
    auto* ck = req.mutable_checkpoint();
    ck->set_uuid(written->uuid);
    ck->set_path(written->dir);
    ck->set_batches(at_step);
    ck->set_size(written->size);
    if (metric) ck->set_validation_metric(*metric);
    for (const auto& f : written->files) {
      auto* out = ck->add_files();
      out->set_path(f.path);
      out->set_size(f.size);
      out->set_sha256(f.sha256);
    }
    (*ck->mutable_metadata()->mutable_fields())["steps"].set_number_value(static_cast<double>(at_step));
    v1::ReportCheckpointResponse resp;
    log::Info("trainer", {{"event", "checkpoint"}, {"uuid", written->uuid}, {"steps", std::to_string(at_step)}});
    return link.Call("ReportCheckpoint", &v1::TrialLink::Stub::ReportCheckpoint, req, &resp);
  };

  const int64_t aggregation = cfg.optimizations.aggregation_frequency;
  const int64_t unit = cfg.scheduling_unit;
  auto to_batches = [&](const config::Length& l) {
    return l.unit == config::Length::Unit::kEpochs ? l.value * kBatchesPerEpoch : l.value;
  };
  const int64_t ckpt_period = cfg.min_checkpoint_period ? to_batches(*cfg.min_checkpoint_period) : 0;
  int64_t last_checkpoint = steps_done;
  std::vector<SyntheticBatch> micro(aggregation);
  std::vector<Seq2SeqBatch> views(aggregation);

  while (true) {
    v1::GetNextOperationRequest nreq;
    v1::GetNextOperationResponse op;
    Status st = link.Call("GetNextOperation", &v1::TrialLink::Stub::GetNextOperation, nreq, &op,
                          std::chrono::seconds(30));
    if (!st.ok()) {
      std::cerr << "sf-trainer cluster: " << st.message() << "\n";
      return 1;
    }
    if (op.has_complete() && op.complete()) {
      log::Info("trainer", {{"event", "done"}, {"steps", std::to_string(steps_done)}});
      return 0;
    }
    if (!op.has_train()) {
      if (g_terminate) return 0;
      continue;  // nothing yet: ask again
    }
    const int64_t target = op.train().unit() == "epochs" ? op.train().target_length() * kBatchesPerEpoch
                                                         : op.train().target_length();
    auto window_start = std::chrono::steady_clock::now();
    double window_loss = 0, window_nll = 0;
    int64_t window_tokens = 0, window_steps = 0;
    while (steps_done < target) {
      for (int64_t i = 0; i < aggregation; ++i) {
        micro[i] = task.TrainBatch(steps_done * aggregation + i);
        views[i] = micro[i].View();
      }
      const float lr = static_cast<float>((*schedule)->LearningRate(steps_done));
      auto r = step.Run(views, lr);
      if (!r.ok()) {
        std::cerr << "sf-trainer cluster: training step " << steps_done << " failed: " << r.status().message() << "\n";
        return 1;
      }
      if (r->skipped) {
        ++skipped_total;
      } else {
        ++steps_done;
      }
      window_loss += r->loss;
      window_nll += r->nll;
      window_tokens += r->tokens;
      ++window_steps;
      bool report = steps_done % unit == 0 || steps_done == target;
      if (report && !r->skipped && window_steps > 0) {
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
        v1::ReportMetricsRequest mreq;
        auto* m = mreq.add_reports();
        m->set_kind("training");
        m->set_batches(steps_done);
        *m->mutable_values() = ToStruct({{"loss", window_loss / std::max<int64_t>(1, window_tokens)},
                                         {"nll_loss", window_nll / std::max<int64_t>(1, window_tokens)},
                                         {"tokens_per_second", window_tokens / std::max(1e-9, seconds)},
                                         {"lr", lr},
                                         {"loss_scale", r->loss_scale},
                                         {"grad_norm", r->grad_norm},
                                         {"skipped_steps", static_cast<double>(skipped_total)}});
        v1::ReportMetricsResponse mresp;
        st = link.Call("ReportMetrics", &v1::TrialLink::Stub::ReportMetrics, mreq, &mresp);
        if (!st.ok()) {
          std::cerr << "sf-trainer cluster: " << st.message() << "\n";
          return 1;
        }
        std::cout << "step " << steps_done << " loss " << window_loss / std::max<int64_t>(1, window_tokens)
                  << " tokens/s " << static_cast<int64_t>(window_tokens / std::max(1e-9, seconds)) << std::endl;
        window_loss = window_nll = 0;
        window_tokens = window_steps = 0;
        window_start = std::chrono::steady_clock::now();
        // Between steps: should we stop?
        v1::ShouldStopRequest sreq;
        sreq.set_batches(steps_done);
        v1::ShouldStopResponse sresp;
        st = link.Call("ShouldStop", &v1::TrialLink::Stub::ShouldStop, sreq, &sresp);
        if (st.ok() && sresp.action() == v1::ShouldStopResponse::ACTION_STOP_NOW) {
          log::Info("trainer", {{"event", "killed"}, {"steps", std::to_string(steps_done)}});
          return 0;
        }
        if ((st.ok() && sresp.action() == v1::ShouldStopResponse::ACTION_CHECKPOINT_AND_STOP) || g_terminate) {
          Status cs = checkpoint(steps_done, std::nullopt);
          if (!cs.ok()) {
            std::cerr << "sf-trainer cluster: checkpoint failed: " << cs.message() << "\n";
            return 1;
          }
          log::Info("trainer", {{"event", "paused"}, {"steps", std::to_string(steps_done)}});
          return 0;
        }
      }
      if (g_terminate) {
        Status cs = checkpoint(steps_done, std::nullopt);
        return cs.ok() ? 0 : 1;
      }
      if (ckpt_period > 0 && steps_done - last_checkpoint >= ckpt_period && steps_done < target) {
        Status cs = checkpoint(steps_done, std::nullopt);
        if (!cs.ok()) {
          std::cerr << "sf-trainer cluster: checkpoint failed: " << cs.message() << "\n";
          return 1;
        }
        last_checkpoint = steps_done;
      }
    }
    // Validate on the held-out batches (no dropout).
    model.context().training = false;
    double vloss = 0, vnll = 0;
    int64_t vtokens = 0;
    for (int64_t i = 0; i < 8; ++i) {
      SyntheticBatch vb = task.ValidBatch(i);
      auto stats = model.Forward(vb.View());
      if (!stats.ok()) {
        std::cerr << "sf-trainer cluster: validation failed: " << stats.status().message() << "\n";
        return 1;
      }
      vloss += stats->loss;
      vnll += stats->nll;
      vtokens += stats->tokens;
    }
    model.context().training = true;
    const double validation_loss = vloss / std::max<int64_t>(1, vtokens);
    const double perplexity = std::exp(vnll / std::max<int64_t>(1, vtokens));
    v1::ReportMetricsRequest mreq;
    auto* m = mreq.add_reports();
    m->set_kind("validation");
    m->set_batches(steps_done);
    *m->mutable_values() = ToStruct({{"validation_loss", validation_loss}, {"validation_perplexity", perplexity}});
    v1::ReportMetricsResponse mresp;
    st = link.Call("ReportMetrics", &v1::TrialLink::Stub::ReportMetrics, mreq, &mresp);
    if (!st.ok()) {
      std::cerr << "sf-trainer cluster: " << st.message() << "\n";
      return 1;
    }
    const double metric = cfg.searcher.metric == "validation_perplexity" ? perplexity : validation_loss;
    std::cout << "validation at step " << steps_done << ": loss " << validation_loss << " perplexity " << perplexity
              << std::endl;
    st = checkpoint(steps_done, metric);
    if (!st.ok()) {
      std::cerr << "sf-trainer cluster: checkpoint failed: " << st.message() << "\n";
      return 1;
    }
    last_checkpoint = steps_done;
    v1::CompleteOperationRequest creq;
    *creq.mutable_op() = op.train();
    creq.set_searcher_metric(metric);
    v1::CompleteOperationResponse cresp;
    st = link.Call("CompleteOperation", &v1::TrialLink::Stub::CompleteOperation, creq, &cresp);
    if (!st.ok()) {
      std::cerr << "sf-trainer cluster: " << st.message() << "\n";
      return 1;
    }
  }
}

}  // namespace sf
