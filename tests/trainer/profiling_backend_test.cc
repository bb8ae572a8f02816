// The per-op profiler (trainer/kernels/profiling_backend.h): a profiled training step computes
// exactly what an unprofiled one does, every op lands in its family, GEMMs are listed per shape
// with their FLOP count, and the rows (outside-kernel time included) add up to the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/trainer/seq2seq_batches.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/profiling_backend.h"
#include "trainer/run/train_step.h"

namespace sf {
namespace {

struct TrainedState {
  std::vector<float> values;
  double loss = 0;
};

// Three steps of a small bf16 Transformer with dropout on `backend`.
TrainedState TrainThreeSteps(Backend<float>* backend, ProfilingBackend* profiler, double* seconds) {
  TransformerConfig c = SmallConfig();
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  Transformer<float> model(c, backend, DType::kBF16);
  model.InitParameters(5);
  OptimizerOptions o;
  o.type = "adamw";
  TrainStep step(&model, std::move(MakeOptimizer(o)).value(),
                 std::move(LossScaler::Make({})).value(), 1.0);
  if (profiler) step.set_phase_hook([profiler](const char* p) { profiler->SetPhase(p); });
  TrainedState r;
  // What construction and initialisation ran through the profiler is not part of the steps
  // (left in, it made the rows add up to more than the timed steps, by ~1e-3 under load).
  if (profiler) profiler->Reset();
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < 3; ++s) {
    HostBatch hb = RandomBatch(6, 7, 5, c.tgt_vocab, 40 + s);
    Seq2SeqBatch v = hb.view();
    auto rep = step.Run({&v, 1}, 1e-3f);
    EXPECT_TRUE(rep.ok());
    if (rep.ok()) r.loss = rep->loss;
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const float* v = model.params().host_values();
  r.values.assign(v, v + model.params().total_numel());
  return r;
}

const ProfileRow* Find(const std::vector<ProfileRow>& rows, const std::string& prefix) {
  for (const ProfileRow& r : rows)
    if (r.name.rfind(prefix, 0) == 0) return &r;
  return nullptr;
}

TEST(ProfilingBackend, StepIsBitIdenticalAndEveryOpIsAccounted) {
  CpuBackend plain;
  double plain_s = 0, profiled_s = 0;
  const TrainedState want = TrainThreeSteps(&plain, nullptr, &plain_s);
  ProfilingBackend profiler(std::make_unique<CpuBackend>());
  const TrainedState got = TrainThreeSteps(&profiler, &profiler, &profiled_s);
  EXPECT_EQ(got.loss, want.loss);
  ASSERT_EQ(got.values, want.values) << "profiling changed what the step computes";

  const ProfileReport r = profiler.Report(3, profiled_s);
  EXPECT_NEAR(r.step_seconds, profiled_s / 3, 1e-12);
  double sum = 0;
  for (const ProfileRow& row : r.families) {
    EXPECT_GE(row.seconds, 0) << row.name;
    sum += row.seconds;
  }
  // The rows partition the step: kernels, each phase's outside time, the rest between phases.
  EXPECT_NEAR(sum, r.step_seconds, 1e-3 * r.step_seconds);
  // The fused kernels the CPU has reach it through the wrapper (a wrapper that leaves an op out
  // runs the op's composed default, which shows up here as the separate kernels).
  for (const char* family : {"GEMM", "residual + dropout + layer norm (fused)",
                             "attention: fused", "cross-entropy", "embedding",
                             "outside kernels: forward", "outside kernels: backward",
                             "outside kernels: optimizer"}) {
    EXPECT_NE(Find(r.families, family), nullptr) << family << "\n" << ProfilingBackend::Format(r, 0);
  }
  for (const char* unfused : {"attention: softmax", "attention: head split", "layer norm"}) {
    EXPECT_EQ(Find(r.families, unfused), nullptr) << unfused << "\n" << ProfilingBackend::Format(r, 0);
  }
  // Per shape: the decoder's output projection (rows = 6 x 5 target tokens, n = vocab, k =
  // d_model) runs once per step forward, with its FLOP count.
  const std::string vocab_proj = "30x47x32 A.B^T(w) bf16";
  const ProfileRow* g = Find(r.gemm_shapes, vocab_proj);
  ASSERT_NE(g, nullptr) << ProfilingBackend::Format(r, 0);
  EXPECT_EQ(g->calls, 1);
  EXPECT_DOUBLE_EQ(g->flops, 2.0 * 30 * 47 * 32);
  const std::string table = ProfilingBackend::Format(r, 100.0);
  EXPECT_NE(table.find(vocab_proj), std::string::npos) << table;
  EXPECT_NE(table.find("of ref"), std::string::npos) << table;
}

TEST(ProfilingBackend, ResetForgetsWarmUp) {
  ProfilingBackend profiler(std::make_unique<CpuBackend>());
  std::vector<float> x(64, 1.0f);
  std::vector<uint16_t> y(64);
  profiler.Cast(x.data(), y.data(), DType::kBF16, 64);
  profiler.Reset();
  profiler.Cast(x.data(), y.data(), DType::kBF16, 64);
  profiler.Cast(x.data(), y.data(), DType::kBF16, 64);
  const ProfileReport r = profiler.Report(1, 1.0);
  const ProfileRow* casts = Find(r.families, "casts");
  ASSERT_NE(casts, nullptr);
  EXPECT_EQ(casts->calls, 2);
}

}  // namespace
}  // namespace sf
