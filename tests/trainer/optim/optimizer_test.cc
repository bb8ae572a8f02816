// Optimizers against torch.optim (PyTorch 1.13 via /usr/bin/python3), plus state save/load,
// parameter matching by name, option validation and the no-allocation guarantee.
#include "trainer/optim/optimizer.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "tests/trainer/optim/test_util.h"
#include "trainer/core/safetensors.h"
#include "trainer/optim/grad_stats.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/state_io.h"

// ---- Allocation counting (this test binary only) ----
// GCC cannot see that these replacements pair malloc with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }  // NOLINT
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace sf {
namespace {

namespace st = sf::safetensors;

// A model-shaped set of parameters: one large enough to take the multi-threaded path, odd
// sizes, and no-decay parameters (bias, layernorm gain, a scalar).
struct Params {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values, grads;
  std::vector<bool> decay;

  std::vector<ParamRef> Refs() {
    std::vector<ParamRef> refs;
    for (size_t i = 0; i < names.size(); ++i) {
      refs.push_back({names[i], values[i].data(), grads[i].data(), values[i].size(), decay[i]});
    }
    return refs;
  }
};

Params MakeParams(uint32_t seed) {
  Params p;
  const std::vector<std::pair<std::string, size_t>> shapes = {
      {"embed.weight", 40000}, {"fc.weight", 1000}, {"fc.bias", 33}, {"ln.gain", 7}, {"scalar", 1}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (const auto& [name, n] : shapes) {
    p.names.push_back(name);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    p.values.push_back(v);
    p.grads.emplace_back(n, 0.0f);
    p.decay.push_back(name.find("bias") == std::string::npos &&
                      name.find("gain") == std::string::npos && name != "scalar");
  }
  return p;
}

// Gradients for steps 1..steps: per parameter a different magnitude (1e-3 .. 1), so the
// adaptive denominators differ.
std::vector<std::vector<std::vector<float>>> MakeGrads(const Params& p, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<std::vector<float>>> grads(steps);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < p.names.size(); ++i) {
      const float magnitude = std::pow(10.0f, -static_cast<float>(i % 4));
      std::vector<float> g(p.values[i].size());
      for (float& x : g) x = magnitude * normal(rng);
      grads[s].push_back(std::move(g));
    }
  }
  return grads;
}

std::string Fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

struct Mismatch {
  double worst = 0;
  std::string where;
};

// Element-wise relative error |a - b| / max(|b|, rms(b)). The floor at the tensor's RMS keeps
// elements that happen to cancel to ~0 (a momentum sum of alternating gradients, a weight
// crossing zero) from turning one fp32 rounding difference (torch's kernels fuse some
// multiply-adds and not others) into a large ratio; for every typical element this is the plain
// relative error.
void Compare(const std::string& label, std::span<const float> ours, std::span<const float> ref,
             Mismatch* m) {
  ASSERT_EQ(ours.size(), ref.size()) << label;
  double sum_squares = 0;
  for (float r : ref) sum_squares += static_cast<double>(r) * r;
  const double floor = std::max(std::sqrt(sum_squares / std::max<size_t>(ref.size(), 1)), 1e-30);
  for (size_t i = 0; i < ours.size(); ++i) {
    const double err = std::fabs(static_cast<double>(ours[i]) - ref[i]) /
                       std::max(std::fabs(static_cast<double>(ref[i])), floor);
    if (!(err <= m->worst)) {  // also catches NaN
      m->worst = std::isnan(err) ? INFINITY : err;
      m->where =
          label + "[" + std::to_string(i) + "] ours=" + Fmt(ours[i]) + " torch=" + Fmt(ref[i]);
    }
  }
}

struct TorchCase {
  const char* label;
  OptimizerOptions options;
  float lr;
  int steps;
};

void PrintTo(const TorchCase& c, std::ostream* os) { *os << c.label; }

class MatchesTorch : public ::testing::TestWithParam<TorchCase> {};

TEST_P(MatchesTorch, WeightsAndStateAfterSteps) {
  const TorchCase& c = GetParam();
  Params p = MakeParams(1234);
  const auto grads = MakeGrads(p, c.steps, 99);
  sf::testing::ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());

  // Inputs for the reference: initial weights and every step's gradients.
  std::vector<st::TensorView> views;
  for (size_t i = 0; i < p.names.size(); ++i) {
    const auto n = static_cast<int64_t>(p.values[i].size());
    views.push_back(st::F32View("param." + p.names[i], {n}, p.values[i]));
    for (int s = 0; s < c.steps; ++s) {
      views.push_back(
          st::F32View("grad." + std::to_string(s + 1) + "." + p.names[i], {n}, grads[s][i]));
    }
  }
  std::string no_decay;
  for (size_t i = 0; i < p.names.size(); ++i) {
    if (!p.decay[i]) no_decay += (no_decay.empty() ? "" : ",") + p.names[i];
  }
  const OptimizerOptions& o = c.options;
  const std::map<std::string, std::string> meta = {
      {"type", o.type},
      {"steps", std::to_string(c.steps)},
      {"lr", Fmt(c.lr)},
      {"beta1", Fmt(o.beta1)},
      {"beta2", Fmt(o.beta2)},
      {"eps", Fmt(o.eps)},
      {"weight_decay", Fmt(o.weight_decay)},
      {"momentum", Fmt(o.momentum)},
      {"nesterov", o.nesterov ? "1" : "0"},
      {"decoupled", o.decoupled_weight_decay ? "1" : "0"},
      {"no_decay", no_decay}};
  const std::string in = dir.File("in.safetensors"), out = dir.File("out.safetensors");
  ASSERT_TRUE(st::WriteFile(in, views, meta).ok());

  // Ours.
  auto made = MakeOptimizer(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Optimizer& opt = **made;
  std::vector<ParamRef> refs = p.Refs();
  for (int s = 0; s < c.steps; ++s) {
    for (size_t i = 0; i < p.names.size(); ++i) p.grads[i] = grads[s][i];
    opt.Step(refs, c.lr);
  }
  EXPECT_EQ(opt.step_count(), c.steps);

  // Theirs.
  std::string log;
  const int rc = sf::testing::RunReference("torch_optim.py", "'" + in + "' '" + out + "'", &log);
  ASSERT_EQ(rc, 0) << "the PyTorch reference failed (needs /usr/bin/python3 with torch and "
                      "numpy: apt-get install python3-torch python3-numpy):\n"
                   << log;
  auto ref = st::SafetensorsFile::Open(out);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  Mismatch weights, state;
  for (size_t i = 0; i < p.names.size(); ++i) {
    auto w = ref->ReadF32("param." + p.names[i]);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    Compare("param " + p.names[i], p.values[i], *w, &weights);
  }
  const std::vector<NamedBuffer> ours = opt.State();
  int compared_state = 0;
  for (const NamedBuffer& b : ours) {
    if (b.name == "step") continue;
    auto theirs = ref->ReadF32("state." + b.name);
    ASSERT_TRUE(theirs.ok()) << "torch has no state for " << b.name << ": "
                             << theirs.status().ToString();
    Compare("state " + b.name, b.AsF32(), *theirs, &state);
    ++compared_state;
  }
  const size_t buffers_per_param = o.type == "sgd" ? (o.momentum != 0 ? 1 : 0) : 2;
  EXPECT_EQ(compared_state, static_cast<int>(p.names.size() * buffers_per_param));
  std::printf("[%s] worst relative error: weights %.3g (%s), state %.3g (%s)\n", c.label,
              weights.worst, weights.where.c_str(), state.worst, state.where.c_str());
  EXPECT_LE(weights.worst, 2e-6) << weights.where;
  EXPECT_LE(state.worst, 2e-6) << state.where;
}

OptimizerOptions Adamw(double beta2, double wd) {
  OptimizerOptions o;
  o.type = "adamw";
  o.beta2 = beta2;
  o.weight_decay = wd;
  return o;
}
OptimizerOptions Radam(double beta2, double wd, bool decoupled) {
  OptimizerOptions o;
  o.type = "radam";
  o.beta2 = beta2;
  o.weight_decay = wd;
  o.decoupled_weight_decay = decoupled;
  return o;
}
OptimizerOptions Sgd(double momentum, double wd, bool nesterov) {
  OptimizerOptions o;
  o.type = "sgd";
  o.momentum = momentum;
  o.weight_decay = wd;
  o.nesterov = nesterov;
  return o;
}

// RAdam with β2 = 0.999 or 0.98: ρ_t ≤ 5 for t = 1..5 (un-adapted steps), rectified from t = 6;
// 12 steps cover both phases and the switch.
INSTANTIATE_TEST_SUITE_P(
    Optim, MatchesTorch,
    ::testing::Values(TorchCase{"adamw", Adamw(0.999, 0.01), 1e-3f, 10},
                      TorchCase{"adamw_b098_wd0", Adamw(0.98, 0.0), 3e-3f, 10},
                      TorchCase{"radam", Radam(0.999, 0.0, false), 1e-3f, 12},
                      TorchCase{"radam_b098_l2", Radam(0.98, 0.01, false), 1e-3f, 12},
                      TorchCase{"radam_decoupled", Radam(0.999, 0.1, true), 1e-3f, 12},
                      TorchCase{"sgd_momentum", Sgd(0.9, 1e-4, false), 0.05f, 10},
                      TorchCase{"sgd_nesterov", Sgd(0.9, 1e-4, true), 0.05f, 10},
                      TorchCase{"sgd_plain", Sgd(0.0, 1e-4, false), 0.05f, 5}),
    [](const ::testing::TestParamInfo<TorchCase>& info) { return std::string(info.param.label); });

// ---- RAdam threshold: a scalar double reference of the update with a configurable ρ bound ----

TEST(RAdam, RhoThresholdIsAParameter) {
  // With threshold 4, step 5 (ρ_5 ≈ 4.996 for β2 = 0.999) is already rectified; with the
  // default 5 it is an un-adapted momentum step.
  for (double threshold : {4.0, 5.0}) {
    OptimizerOptions o = Radam(0.999, 0.0, false);
    o.radam_rho_threshold = threshold;
    auto opt = MakeOptimizer(o);
    ASSERT_TRUE(opt.ok()) << opt.status().ToString();
    std::vector<float> w = {0.5f, -1.0f, 2.0f}, g(3);
    std::vector<double> wd(w.begin(), w.end()), m(3, 0), v(3, 0);
    std::vector<ParamRef> refs = {{"w", w.data(), g.data(), 3, true}};
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, rho_inf = 2 / (1 - b2) - 1;
    for (int t = 1; t <= 8; ++t) {
      for (int i = 0; i < 3; ++i) g[i] = 0.1f * static_cast<float>(i + 1) * (t % 2 ? 1.f : -0.5f);
      (*opt)->Step(refs, static_cast<float>(lr));
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      const double rho = rho_inf - 2 * t * std::pow(b2, t) / bc2;
      for (int i = 0; i < 3; ++i) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        if (rho > threshold) {
          const double r =
              std::sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho));
          wd[i] -= lr * (m[i] / bc1) * r * std::sqrt(bc2) / (std::sqrt(v[i]) + 1e-8);
        } else {
          wd[i] -= lr * m[i] / bc1;
        }
        EXPECT_NEAR(w[i], wd[i], 1e-6 * std::fabs(wd[i]))
            << "threshold " << threshold << " step " << t;
      }
    }
  }
}

TEST(RAdam, ThresholdBelowFourIsRejected) {
  OptimizerOptions o = Radam(0.999, 0, false);
  o.radam_rho_threshold = 3;
  auto opt = MakeOptimizer(o);
  ASSERT_FALSE(opt.ok());
  EXPECT_NE(opt.status().message().find("rho_threshold"), std::string::npos);
}

// ---- State, matching, validation, allocation ----

void RunSteps(Optimizer& opt, Params& p, const std::vector<std::vector<std::vector<float>>>& g,
              int from, int to, float lr) {
  std::vector<ParamRef> refs = p.Refs();
  for (int s = from; s < to; ++s) {
    for (size_t i = 0; i < p.names.size(); ++i) p.grads[i] = g[s][i];
    opt.Step(refs, lr);
  }
}

TEST(OptimizerState, SaveAndLoadContinuesBitForBit) {
  for (const char* type : {"adamw", "radam", "sgd"}) {
    OptimizerOptions o;
    o.type = type;
    o.weight_decay = 0.01;
    Params straight = MakeParams(7);
    const auto grads = MakeGrads(straight, 10, 8);
    auto a = MakeOptimizer(o);
    ASSERT_TRUE(a.ok());
    RunSteps(**a, straight, grads, 0, 10, 1e-3f);

    Params resumed = MakeParams(7);
    auto b = MakeOptimizer(o);
    RunSteps(**b, resumed, grads, 0, 4, 1e-3f);
    const std::vector<NamedBuffer> saved = (*b)->State();
    auto c = MakeOptimizer(o);
    std::vector<ParamRef> refs = resumed.Refs();
    ASSERT_TRUE((*c)->LoadState(saved, refs).ok()) << type;
    EXPECT_EQ((*c)->step_count(), 4);
    RunSteps(**c, resumed, grads, 4, 10, 1e-3f);
    for (size_t i = 0; i < straight.names.size(); ++i) {
      EXPECT_EQ(straight.values[i], resumed.values[i]) << type << " " << straight.names[i];
    }
  }
}

TEST(OptimizerState, RoundTripsThroughASafetensorsFile) {
  OptimizerOptions o;
  o.type = "radam";
  Params straight = MakeParams(21), resumed = MakeParams(21);
  const auto grads = MakeGrads(straight, 9, 22);
  auto a = MakeOptimizer(o), b = MakeOptimizer(o);
  RunSteps(**a, straight, grads, 0, 9, 1e-3f);
  RunSteps(**b, resumed, grads, 0, 3, 1e-3f);

  LossScalerOptions lo;
  lo.type = "dynamic";
  auto scaler = LossScaler::Make(lo);
  ASSERT_TRUE(scaler.ok());
  ASSERT_TRUE(scaler->Update(true).ok());
  const std::vector<NamedBuffer> opt_state = (*b)->State(), scaler_state = scaler->State();
  std::vector<st::TensorView> views = ToTensorViews(opt_state, "optimizer.");
  for (auto& v : ToTensorViews(scaler_state, "loss_scaler.")) views.push_back(v);
  sf::testing::ScratchDir dir;
  ASSERT_TRUE(st::WriteFile(dir.File("ckpt.safetensors"), views).ok());

  auto file = st::SafetensorsFile::Open(dir.File("ckpt.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto loaded = BuffersFromFile(*file, "optimizer.");
  ASSERT_TRUE(loaded.ok());
  auto c = MakeOptimizer(o);
  std::vector<ParamRef> refs = resumed.Refs();
  ASSERT_TRUE((*c)->LoadState(*loaded, refs).ok());
  RunSteps(**c, resumed, grads, 3, 9, 1e-3f);
  for (size_t i = 0; i < straight.names.size(); ++i) {
    EXPECT_EQ(straight.values[i], resumed.values[i]) << straight.names[i];
  }
  auto scaler_loaded = BuffersFromFile(*file, "loss_scaler.");
  ASSERT_TRUE(scaler_loaded.ok());
  auto scaler2 = LossScaler::Make(lo);
  ASSERT_TRUE(scaler2->LoadState(*scaler_loaded).ok());
  EXPECT_EQ(scaler2->scale(), 64.0f);
  EXPECT_EQ(scaler2->skipped_steps(), 1);
}

TEST(OptimizerState, LoadRejectsMismatchedState) {
  OptimizerOptions o;
  o.type = "adamw";
  Params p = MakeParams(3);
  auto opt = MakeOptimizer(o);
  std::vector<ParamRef> refs = p.Refs();
  (*opt)->Step(refs, 1e-3f);
  const std::vector<NamedBuffer> good = (*opt)->State();

  auto fresh = MakeOptimizer(o);
  {
    std::vector<NamedBuffer> missing(good.begin(), good.end() - 1);
    Status s = (*fresh)->LoadState(missing, refs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("no buffer"), std::string::npos) << s.message();
  }
  {
    std::vector<NamedBuffer> wrong = good;
    wrong.back() = NamedBuffer::F32(wrong.back().name, std::vector<float>(2));
    Status s = (*fresh)->LoadState(wrong, refs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(wrong.back().name), std::string::npos) << s.message();
  }
  {
    std::vector<NamedBuffer> extra = good;
    extra.push_back(NamedBuffer::F32("ghost.weight.exp_avg", std::vector<float>(2)));
    Status s = (*fresh)->LoadState(extra, refs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("ghost.weight.exp_avg"), std::string::npos) << s.message();
  }
  {
    OptimizerOptions so;
    so.type = "sgd";
    auto sgd = MakeOptimizer(so);
    Status s = (*sgd)->LoadState(good, refs);  // AdamW state into SGD
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("momentum_buffer"), std::string::npos) << s.message();
  }
  EXPECT_EQ((*fresh)->step_count(), 0);  // failed loads change nothing
}

TEST(Optimizer, MatchesStateByNameWhenParametersAreReordered) {
  OptimizerOptions o;
  o.type = "adamw";
  Params a = MakeParams(5), b = MakeParams(5);
  const auto grads = MakeGrads(a, 6, 6);
  auto oa = MakeOptimizer(o), ob = MakeOptimizer(o);
  RunSteps(**oa, a, grads, 0, 6, 1e-2f);
  for (int s = 0; s < 6; ++s) {
    for (size_t i = 0; i < b.names.size(); ++i) b.grads[i] = grads[s][i];
    std::vector<ParamRef> refs = b.Refs();
    if (s % 2 == 1) std::reverse(refs.begin(), refs.end());
    (*ob)->Step(refs, 1e-2f);
  }
  for (size_t i = 0; i < a.names.size(); ++i) EXPECT_EQ(a.values[i], b.values[i]);
}

TEST(Optimizer, PrepareRejectsDuplicateNames) {
  OptimizerOptions o;
  o.type = "sgd";
  auto opt = MakeOptimizer(o);
  std::vector<float> w(4), g(4);
  std::vector<ParamRef> refs = {{"w", w.data(), g.data(), 4, true},
                                {"w", w.data(), g.data(), 4, true}};
  Status s = (*opt)->Prepare(refs);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'w' appears twice"), std::string::npos) << s.message();
}

TEST(Optimizer, StepAllocatesNothingAfterTheFirst) {
  for (const char* type : {"adamw", "radam", "sgd"}) {
    OptimizerOptions o;
    o.type = type;
    Params p = MakeParams(11);
    auto opt = MakeOptimizer(o);
    std::vector<ParamRef> refs = p.Refs();
    (*opt)->Step(refs, 1e-3f);  // allocates the state
    (*opt)->Step(refs, 1e-3f);  // warms up the OpenMP team
    const long before = g_allocations.load();
    for (int s = 0; s < 5; ++s) (*opt)->Step(refs, 1e-3f);
    EXPECT_EQ(g_allocations.load() - before, 0) << type;
  }
}

TEST(Optimizer, GradientPassesAllocateNothing) {
  Params p = MakeParams(12);
  std::vector<ParamRef> refs = p.Refs();
  ScanGrads(refs);  // warms up the OpenMP team
  const long before = g_allocations.load();
  const GradStats stats = ScanGrads(refs);
  ScaleGrads(refs, 0.5f);
  UnscaleAndClipGrads(refs, 2.0f, 1.0, stats);
  EXPECT_EQ(g_allocations.load() - before, 0);
}

// The update is element-wise, so how the concatenated parameters are split between threads
// must not change a single bit; 7 threads put slice boundaries inside every large parameter.
TEST(Optimizer, ThreadCountDoesNotChangeTheUpdate) {
  const int saved = omp_get_max_threads();
  for (const char* type : {"adamw", "radam", "sgd"}) {
    OptimizerOptions o;
    o.type = type;
    o.weight_decay = 0.01;
    Params one = MakeParams(31), many = MakeParams(31);
    const auto grads = MakeGrads(one, 7, 32);
    auto a = MakeOptimizer(o), b = MakeOptimizer(o);
    omp_set_num_threads(1);
    RunSteps(**a, one, grads, 0, 7, 1e-3f);
    omp_set_num_threads(7);
    RunSteps(**b, many, grads, 0, 7, 1e-3f);
    for (size_t i = 0; i < one.names.size(); ++i) {
      EXPECT_EQ(one.values[i], many.values[i]) << type << " " << one.names[i];
    }
    const double s1 = ScanGrads(many.Refs()).sum_squares;
    omp_set_num_threads(1);
    const double s7 = ScanGrads(many.Refs()).sum_squares;
    EXPECT_NEAR(s1, s7, 1e-12 * s1);
  }
  omp_set_num_threads(saved);
}

TEST(Optimizer, RegistryNamesAndValidationErrors) {
  EXPECT_EQ(OptimizerNames(), (std::vector<std::string>{"adamw", "radam", "sgd"}));
  OptimizerOptions o;
  o.type = "adam";
  auto bad = MakeOptimizer(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown optimizer 'adam'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("adamw, radam, sgd"), std::string::npos);
  o.type = "adamw";
  o.beta2 = 1.0;
  bad = MakeOptimizer(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("optimizer.beta2"), std::string::npos);
  o = OptimizerOptions{};
  o.type = "sgd";
  o.momentum = 0;
  o.nesterov = true;
  bad = MakeOptimizer(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nesterov"), std::string::npos);
}

}  // namespace
}  // namespace sf
