#include "trainer/run/bench.h"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/command_line.h"
#include "common/value.h"

#include "trainer/core/cpu_features.h"
#include "trainer/kernels/profiling_backend.h"
#include "trainer/models/transformer.h"
#include "common/config/hyperparameter_schema.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/data_parallel.h"
#include "trainer/run/device_select.h"
#include "trainer/run/speech_run.h"
#include "trainer/run/train_step.h"

namespace sf {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Fmt(double v, int prec = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", prec, v);
  return buf;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct GemmShape {
  int64_t m, k, n;
};

// The reference GEMM of a device: C[m, n] = A[m, k] . W^T, W [n, k].
GemmShape PeakShape(Device d) {
  return d == Device::kCpu ? GemmShape{4096, 512, 2048} : GemmShape{8192, 8192, 8192};
}

std::string ShapeName(GemmShape s) {
  return std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
}

// The device's reference GEMM, operands in the backend's memory. Sample() times one call and
// returns its GFLOP/s. The bench samples it between the timed steps as well as after them, so
// on a shared host whose speed drifts the reference is measured over the same minutes as the
// step it is compared with.
class ReferenceGemm {
 public:
  ReferenceGemm(Backend<float>& be, DType dt) : be_(be), dt_(dt), s_(PeakShape(be.device())) {
    const int64_t m = s_.m, k = s_.k, n = s_.n;
    CachingAllocator& mem = be.allocator();
    a_.Resize({m * k}, DType::kF32, mem);
    w_.Resize({n * k}, DType::kF32, mem);
    c_.Resize({m * n}, DType::kF32, mem);
    std::vector<float> ha(static_cast<size_t>(m * k), 0.01f), hw(static_cast<size_t>(n * k), 0.02f);
    a_.CopyFromHost(ha.data());
    w_.CopyFromHost(hw.data());
    ap_ = a_.raw();
    wp_ = w_.raw();
    if (dt != DType::kF32) {
      al_.Resize({m * k}, dt, mem);
      wl_.Resize({n * k}, dt, mem);
      be.Cast(a_.data<float>(), al_.raw(), dt, m * k);
      be.Cast(w_.data<float>(), wl_.raw(), dt, n * k);
      ap_ = al_.raw();
      wp_ = wl_.raw();
    }
    Run();  // the first call creates the kernel
    be.Synchronize();
  }
  double Sample() {
    const double t0 = Now();
    Run();
    be_.Synchronize();
    return 2.0 * s_.m * s_.n * s_.k / (Now() - t0) / 1e9;
  }

 private:
  void Run() {
    be_.Gemm(1, s_.m, s_.n, s_.k, GemmOperand{ap_, dt_, false, s_.k, 0},
             GemmOperand{wp_, dt_, true, s_.k, 0}, c_.data<float>(), s_.n, 0, 1.0f, 0.0f);
  }
  Backend<float>& be_;
  DType dt_;
  GemmShape s_;
  Tensor a_, w_, c_, al_, wl_;
  const void* ap_ = nullptr;
  const void* wp_ = nullptr;
};

}  // namespace

void AddBenchFlags(CLI::App& cmd, BenchOptions* o) {
  const auto precisions = CLI::IsMember({"fp32", "bf16", "fp16"});
  cmd.add_option("--arch", o->arch, "model preset (transformer_tiny, transformer_base, transformer_big, lstm, lstm_small, "
                 "transformer_lm_small, ...)");
  cmd.add_option("--precision", o->precision, "compute precision")->check(precisions);
  cmd.add_option("--device", o->device, "cpu, cuda (the first visible GPU), cuda:N or auto");
  cmd.add_option("--batch", o->batch, "sentences per step (per rank under mpirun)")->check(cmdline::AtLeast(1));
  cmd.add_option("--src-len", o->src_len, "source tokens per sentence (speech: feature frames per utterance)")
      ->check(cmdline::AtLeast(1));
  cmd.add_option("--tgt-len", o->tgt_len, "target tokens per sentence (speech: characters per transcript)")
      ->check(cmdline::AtLeast(1));
  cmd.add_option("--vocab", o->vocab, "vocabulary size (source and target; default 8000, speech: 32 characters)")
      ->check(cmdline::AtLeast(1));
  cmd.add_option("--steps", o->steps, "timed steps")->check(cmdline::AtLeast(1));
  cmd.add_option("--warmup", o->warmup, "untimed steps first")->check(cmdline::AtLeast(0));
  cmd.add_option("--threads", o->threads, "OpenMP threads (0: OpenMP's default)")->check(cmdline::AtLeast(0));
  cmd.add_option("--dropout", o->dropout, "dropout rate")->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--attention-dropout", o->attention_dropout, "attention dropout rate")->check(CLI::Range(0.0, 1.0));
  cmd.add_flag("--json", o->json, "print the report as one JSON object");
  cmd.add_flag_callback("--no-gemm-peak", [o] { o->gemm_peak = false; }, "skip timing the reference GEMM");
  cmd.add_flag("--profile", o->profile,
               "time every kernel of the timed steps and print the step per op family and per GEMM shape");
  cmd.add_option("--logit-block-rows", o->logit_block_rows,
                 "transformer, bf16: rows per block of the output projection and its loss (0: automatic)")
      ->check(cmdline::AtLeast(0));
  cmd.add_option("--bucket-mb", o->bucket_mb, "data parallel: gradient bucket size in MiB")->check(cmdline::AtLeast(1));
  cmd.add_option("--allreduce-dtype", o->allreduce_dtype, "data parallel: gradient type on the wire")->check(precisions);
}

Status CheckBenchOptions(const BenchOptions& o) {
  if (o.batch < 1 || o.src_len < 1 || o.tgt_len < 1 || o.steps < 1)
    return InvalidArgument("--batch, --src-len, --tgt-len and --steps must be >= 1");
  SF_RETURN_IF_ERROR(ParseDevice(o.device).status());
  return Status::Ok();
}

Result<BenchReport> RunBench(const BenchOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  // The preset as a trial gets it (config::WithDefaults), with the bench's dropout rates.
  const std::string family = config::ArchFamily(o.arch);
  if (family.empty()) {
    std::string known;
    for (const std::string& a : config::FindHyperparameterSpec("arch")->options) known += (known.empty() ? "" : ", ") + a;
    return InvalidArgument("--arch: unknown model '" + o.arch + "' (known: " + known + ")");
  }
  Value::Map hp{{"arch", o.arch}, {"dropout", o.dropout}};
  if (config::AppliesTo(*config::FindHyperparameterSpec("attention_dropout"), family)) {
    hp["attention_dropout"] = o.attention_dropout;
  }
  SF_ASSIGN_OR_RETURN(const config::TrialHyperparameters hparams, config::DecodeTrialHyperparameters(Value(std::move(hp))));
  const bool speech = config::IsSpeechFamily(family);
  const int64_t vocab = o.vocab > 0 ? o.vocab : speech ? 32 : 8000;
  // "fp32" | "bf16" | "fp16" (validated by ParseBenchArgs) as the engine's dtype.
  auto dtype_of = [](const std::string& precision) {
    return precision == "bf16" ? DType::kBF16 : precision == "fp16" ? DType::kF16 : DType::kF32;
  };
  const DType compute = dtype_of(o.precision);
  SF_ASSIGN_OR_RETURN(DeviceChoice device, ParseDevice(o.device));
  SF_ASSIGN_OR_RETURN(std::unique_ptr<Backend<float>> backend_owner, MakeTrainingBackend(device));
  ProfilingBackend* profiler = nullptr;
  if (o.profile) {
    auto wrapped = std::make_unique<ProfilingBackend>(std::move(backend_owner));
    profiler = wrapped.get();
    backend_owner = std::move(wrapped);
  }
  Backend<float>& backend = *backend_owner;
  // The model, and how one step's batch is made and trained: token batches for the text
  // families, feature batches (80 log-mel bins, src_len frames, tgt_len labels) for speech.
  std::unique_ptr<TrainableModel<float>> model_owner;
  std::unique_ptr<Seq2SeqModel<float>> seq2seq;
  std::unique_ptr<SpeechCtcModel<float>> recogniser;
  if (speech) {
    SF_ASSIGN_OR_RETURN(SpeechCtcConfig mc, SpeechCtcConfigFromHyperparameters(hparams, 80, vocab));
    mc.max_positions = std::max<int64_t>(mc.max_positions, SpeechCtcConfig::Subsampled(o.src_len) + 2);
    recogniser = std::make_unique<SpeechCtcModel<float>>(mc, &backend, compute);
  } else {
    SF_ASSIGN_OR_RETURN(ModelSpec spec, ModelSpecFromHyperparameters(
                                            hparams, vocab, vocab, std::max<int64_t>(1024, std::max(o.src_len, o.tgt_len) + 2)));
    seq2seq = MakeModel(spec, &backend, compute);
    if (auto* t = dynamic_cast<Transformer<float>*>(seq2seq.get())) {
      t->set_logit_block_rows(o.logit_block_rows);
    }
  }
  TrainableModel<float>& model = speech ? static_cast<TrainableModel<float>&>(*recogniser) : *seq2seq;
  model.InitParameters(1);
  OptimizerOptions oo;
  oo.type = "adamw";
  oo.beta1 = 0.9;
  oo.beta2 = 0.98;
  oo.weight_decay = 0.0001;
  SF_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt, MakeOptimizer(oo));
  LossScalerOptions so;
  so.type = o.precision == "fp16" ? "dynamic" : "none";
  SF_ASSIGN_OR_RETURN(LossScaler scaler, LossScaler::Make(so));
  TrainStep step(&model, std::move(opt), std::move(scaler), 0.0);
  // The phases of each timed step on the device's clock (Backend::Mark): on a GPU the host
  // timings above only say when the phase's kernels were queued.
  bool timing = false;
  std::vector<std::pair<std::string, int>> marks;
  step.set_phase_hook([&](const char* phase) {
    if (profiler) profiler->SetPhase(phase);
    if (timing) marks.emplace_back(phase, backend.Mark());
  });
  std::unique_ptr<dist::GradReducer> reducer;
  const int world = o.comm ? o.comm->world_size() : 1;
  if (o.comm && world > 1) {
    dist::GradReducerOptions ro;
    ro.bucket_bytes = o.bucket_mb << 20;
    ro.wire = dtype_of(o.allreduce_dtype);
    reducer = MakeGradReducer(*o.comm, model, ro);  // GPU ranks under mpirun: staged through the host
    step.set_grad_reducer(reducer.get());
  }

  // Synthetic tokens in [4, V): fairseq reserves 0..3 for <s>, <pad>, </s>, <unk>. Speech:
  // N(0, 1) features (what CMVN gives) and labels in [1, V) (0 is the blank).
  std::mt19937 rng(7 + (o.comm ? o.comm->rank() : 0));
  std::uniform_int_distribution<int32_t> tok(speech ? 1 : 4, static_cast<int32_t>(vocab) - 1);
  std::normal_distribution<float> feature;
  const int64_t B = o.batch;
  std::vector<int32_t> src(B * o.src_len), tin(B * o.tgt_len), tout(B * o.tgt_len);
  std::vector<float> feats(speech ? static_cast<size_t>(B * o.src_len * 80) : 0);
  std::vector<int32_t> frames(static_cast<size_t>(B), static_cast<int32_t>(o.src_len)),
      lengths(static_cast<size_t>(B), static_cast<int32_t>(o.tgt_len));
  std::function<void()> refill = [&] {
    for (auto& t : src) t = tok(rng);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < o.tgt_len; ++t) {
        tout[b * o.tgt_len + t] = tok(rng);
        tin[b * o.tgt_len + t] = t == 0 ? 2 : tout[b * o.tgt_len + t - 1];
      }
    for (auto& f : feats) f = feature(rng);
  };
  Seq2SeqBatch mb{src.data(), tin.data(), tout.data(), B, o.src_len, o.tgt_len};
  const SpeechBatchView sb{feats.data(), frames.data(), tout.data(), lengths.data(), B, o.src_len, o.tgt_len};
  std::function<Result<StepReport>()> train = [&]() -> Result<StepReport> {
    if (!speech) return step.Run({&mb, 1}, 5e-4f);
    return step.Run(
        1,
        [&](size_t) -> Result<CrossEntropyStats> {
          SF_ASSIGN_OR_RETURN(CtcStats c, recogniser->Forward(sb));
          return CrossEntropyStats{c.loss, c.loss, c.target_tokens};
        },
        5e-4f);
  };
  for (int i = 0; i < o.warmup; ++i) {
    refill();
    SF_ASSIGN_OR_RETURN(StepReport r, train());
    (void)r;
  }
  backend.Synchronize();
  if (profiler) profiler->Reset();
  // The engine's peak memory, read before the reference GEMM's operands exist: the timed steps
  // allocate nothing (allocations_in_timed_steps says so) and touch what the warm-up touched.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::unique_ptr<ReferenceGemm> reference;
  std::vector<double> reference_rates;
  if (o.gemm_peak) reference = std::make_unique<ReferenceGemm>(profiler ? profiler->inner() : backend, compute);
  const int64_t allocs_before = backend.allocator().stats().system_allocations;
  std::vector<double> total, fwd, bwd, opt_t, ar_busy, ar_wait;
  std::map<std::string, std::vector<double>> device_phases;
  int64_t ar_bytes = 0;
  double last_loss = 0;
  for (int i = 0; i < o.steps; ++i) {
    refill();
    const double t0 = Now();
    marks.clear();
    backend.ClearMarks();
    timing = true;
    SF_ASSIGN_OR_RETURN(StepReport r, train());
    timing = false;
    backend.Synchronize();
    total.push_back(Now() - t0);
    std::map<std::string, double> step_phases;
    for (size_t m = 0; m + 1 < marks.size(); ++m)
      if (!marks[m].first.empty())
        step_phases[marks[m].first] += backend.SecondsBetween(marks[m].second, marks[m + 1].second);
    for (const auto& [phase, seconds] : step_phases) device_phases[phase].push_back(seconds);
    fwd.push_back(r.forward_s);
    bwd.push_back(r.backward_s);
    opt_t.push_back(r.optimizer_s);
    ar_busy.push_back(r.sync.busy_seconds);
    ar_wait.push_back(r.sync.wait_seconds);
    ar_bytes = r.sync.bytes;
    last_loss = r.loss / std::max<int64_t>(1, r.tokens);
    if (reference) reference_rates.push_back(reference->Sample());
  }
  const int64_t allocs_after = backend.allocator().stats().system_allocations;
  const double step_s = Median(total);
  ProfileReport profile;
  if (profiler) {
    double sum = 0;
    for (double t : total) sum += t;
    profile = profiler->Report(o.steps, sum);
  }
  const double tokens = static_cast<double>(B * o.tgt_len * world);
  const double flops = speech ? recogniser->config().TrainingFlops(B * world, o.src_len)
                              : seq2seq->TrainingFlops(B * world, o.src_len, o.tgt_len);
  BenchReport report;
  std::vector<std::pair<std::string, std::string>>& rep = report.values;
  rep.reserve(48);  // also keeps GCC 12's -Warray-bounds false positive on emplace_back quiet
  rep.emplace_back("arch", o.arch);
  rep.emplace_back("precision", o.precision);
  rep.emplace_back("threads", std::to_string(omp_get_max_threads()));
  rep.emplace_back("device", device.description);
  rep.emplace_back("device_name", device.device == Device::kCpu ? cpu::Describe() : backend.description());
  rep.emplace_back("cpu", cpu::Describe());
  rep.emplace_back("world_size", std::to_string(world));
  rep.emplace_back("batch", std::to_string(B));
  rep.emplace_back("src_len", std::to_string(o.src_len));
  rep.emplace_back("tgt_len", std::to_string(o.tgt_len));
  rep.emplace_back("vocab", std::to_string(vocab));
  rep.emplace_back("parameters", std::to_string(ParameterCount(model)));
  rep.emplace_back("steps", std::to_string(o.steps));
  rep.emplace_back("step_s", Fmt(step_s, 4));
  rep.emplace_back("tokens_per_s", Fmt(tokens / step_s, 1));
  if (speech) rep.emplace_back("frames_per_s", Fmt(static_cast<double>(B * o.src_len * world) / step_s, 1));
  rep.emplace_back("forward_s", Fmt(Median(fwd), 4));
  rep.emplace_back("backward_s", Fmt(Median(bwd), 4));
  rep.emplace_back("optimizer_s", Fmt(Median(opt_t), 4));
  // The same phases timed on the device (equal to the host's where ops finish as they return).
  for (const auto& [phase, seconds] : device_phases) {
    std::string key = "device_" + phase + "_s";
    std::replace(key.begin(), key.end(), ' ', '_');
    rep.emplace_back(key, Fmt(Median(seconds), 4));
  }
  if (world > 1) {
    const double busy = Median(ar_busy), wait = Median(ar_wait);
    rep.emplace_back("allreduce_dtype", o.allreduce_dtype);
    rep.emplace_back("allreduce_buckets", std::to_string(reducer->bucket_count()));
    rep.emplace_back("allreduce_bytes_per_step", std::to_string(ar_bytes));
    rep.emplace_back("allreduce_s", Fmt(busy, 4));
    rep.emplace_back("allreduce_wait_s", Fmt(wait, 4));
    rep.emplace_back("allreduce_hidden_fraction", Fmt(busy > 0 ? std::max(0.0, 1.0 - wait / busy) : 0.0, 3));
  }
  rep.emplace_back("model_gflop_per_step", Fmt(flops / 1e9, 2));
  rep.emplace_back("achieved_gflops", Fmt(flops / step_s / 1e9, 1));
  double peak = 0;
  if (reference) {
    for (int i = 0; i < 5; ++i) reference_rates.push_back(reference->Sample());
    peak = Median(reference_rates);
    rep.emplace_back("gemm_" + ShapeName(PeakShape(backend.device())) + "_gflops", Fmt(peak, 1));
    rep.emplace_back("gemm_gflops", Fmt(peak, 1));
    // The reference's own spread over the run: how much the host's speed moved.
    rep.emplace_back("gemm_gflops_min", Fmt(*std::min_element(reference_rates.begin(), reference_rates.end()), 1));
    rep.emplace_back("gemm_gflops_max", Fmt(*std::max_element(reference_rates.begin(), reference_rates.end()), 1));
    rep.emplace_back("fraction_of_gemm_rate", Fmt(flops / step_s / 1e9 / peak, 3));
  }
  rep.emplace_back("peak_rss_mb", Fmt(static_cast<double>(ru.ru_maxrss) / 1024.0, 1));
  rep.emplace_back("engine_peak_buffer_mb",
                   Fmt(static_cast<double>(backend.allocator().stats().peak_bytes_in_use) /
                           (1 << 20), 1));
  rep.emplace_back("allocations_in_timed_steps", std::to_string(allocs_after - allocs_before));
  rep.emplace_back("last_loss_per_token", Fmt(last_loss, 4));
  if (profiler) report.profile = ProfilingBackend::Format(profile, peak);
  return report;
}

std::string FormatReport(const BenchReport& report, bool json) {
  std::string s;
  if (!json) {
    for (const auto& [k, v] : report.values) s += k + ": " + v + "\n";
    return s + report.profile;
  }
  s = "{";
  for (size_t i = 0; i < report.values.size(); ++i) {
    const auto& [k, v] = report.values[i];
    const bool numeric = !v.empty() && v.find_first_not_of("0123456789.-e") == std::string::npos;
    // Figures are written as formatted (their digits are the report's); strings through the
    // project's JSON writer, which escapes them.
    s += (i ? ", " : "") + Value(k).ToJson() + ": " + (numeric ? v : Value(v).ToJson());
  }
  if (!report.profile.empty()) s += ", \"profile\": " + Value(report.profile).ToJson();
  return s + "}\n";
}

}  // namespace sf
