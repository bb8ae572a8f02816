// The CTC loss (Backend::CtcLoss): its gradient against f64 central finite differences, the CPU
// backend's losses and gradients against PyTorch's F.ctc_loss (repeated labels, an empty target,
// a target too long for its input with and without zero_infinity, blank first and last), the
// gradient computed in place, and every other backend against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/support/testing.h"
#include "tests/trainer/test_backends.h"
#include "trainer/core/safetensors.h"
#include "trainer/core/tensor.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/reference.h"

namespace sf {
namespace {

// A batch of utterances: logits [B, T, C] and the labels.
struct CtcCase {
  int64_t frames = 0, batch = 0, classes = 0, max_target = 0;
  int32_t blank = 0;
  std::vector<int32_t> input_lengths, targets, target_lengths;
  std::vector<float> logits;
};

// Five utterances of up to 12 frames over 7 classes: labels, repeated labels (a blank must
// separate them), an empty target, a target longer than its input allows (4 labels with two
// repeats need 6 frames; it has 3), and a full one. The labels avoid `blank`.
CtcCase FiveUtterances(int32_t blank) {
  CtcCase c;
  c.frames = 12;
  c.batch = 5;
  c.classes = 7;
  c.max_target = 4;
  c.blank = blank;
  c.input_lengths = {12, 9, 5, 3, 12};
  const std::vector<std::vector<int32_t>> labels = {{1, 2, 3}, {2, 2, 3, 3}, {}, {1, 1, 2, 2}, {4, 5, 3, 1}};
  c.targets.assign(c.batch * c.max_target, 0);
  for (int64_t b = 0; b < c.batch; ++b) {
    c.target_lengths.push_back(static_cast<int32_t>(labels[b].size()));
    for (size_t i = 0; i < labels[b].size(); ++i) {
      // Labels are given for blank 0; with another blank, shift the ones at or above it down.
      const int32_t l = labels[b][i];
      c.targets[b * c.max_target + i] = blank == 0 ? l : (l >= blank ? l - 1 : l);
    }
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.5f);
  c.logits.resize(c.frames * c.batch * c.classes);
  for (float& x : c.logits) x = n(rng);
  return c;
}

struct CtcResult {
  std::vector<float> losses, dlogits;
};

CtcResult RunCtc(Backend<float>& backend, const CtcCase& c, bool zero_infinity, float grad_scale, bool in_place = false) {
  auto stage_i = [&](const std::vector<int32_t>& h) {
    Tensor t({static_cast<int64_t>(h.size())}, DType::kI32, backend.allocator());
    t.CopyFromHost(h.data());
    return t;
  };
  Tensor logits({static_cast<int64_t>(c.logits.size())}, DType::kF32, backend.allocator());
  logits.CopyFromHost(c.logits.data());
  Tensor il = stage_i(c.input_lengths), tg = stage_i(c.targets), tl = stage_i(c.target_lengths);
  Tensor losses({c.batch}, DType::kF32, backend.allocator());
  Tensor grad({static_cast<int64_t>(c.logits.size())}, DType::kF32, backend.allocator());
  float* dlogits = in_place ? logits.data<float>() : grad.data<float>();
  backend.CtcLoss(logits.data<float>(), il.data<int32_t>(), tg.data<int32_t>(), tl.data<int32_t>(), c.frames, c.batch,
                  c.classes, c.max_target, c.blank, zero_infinity, grad_scale, losses.data<float>(), dlogits);
  CtcResult r;
  r.losses.resize(c.batch);
  r.dlogits.resize(c.logits.size());
  backend.CopyToHost(r.losses.data(), losses.data<float>(), c.batch * sizeof(float));
  backend.CopyToHost(r.dlogits.data(), dlogits, c.logits.size() * sizeof(float));
  return r;
}

TEST(CtcLoss, MatchesPyTorchsCtcLoss) {
  for (int32_t blank : {0, 6}) {
    for (bool zero_infinity : {false, true}) {
      const CtcCase c = FiveUtterances(blank);
      CpuBackend cpu;
      const CtcResult r = RunCtc(cpu, c, zero_infinity, 0.5f);
      // The infeasible utterance (3): +inf, or 0 with zero_infinity; the others finite.
      EXPECT_EQ(std::isinf(r.losses[3]), !zero_infinity);
      if (zero_infinity) {
        EXPECT_EQ(r.losses[3], 0.0f);
      }
      for (int b : {0, 1, 2, 4}) EXPECT_TRUE(std::isfinite(r.losses[b]) && r.losses[b] > 0) << b;
      // Frames past an utterance's input length get no gradient.
      for (int64_t t = c.input_lengths[1]; t < c.frames; ++t) {
        for (int64_t k = 0; k < c.classes; ++k) EXPECT_EQ(r.dlogits[(1 * c.frames + t) * c.classes + k], 0.0f);
      }
      const std::vector<int32_t> flags = {blank, zero_infinity ? 1 : 0};
      const std::vector<float> scale = {0.5f};
      std::vector<safetensors::TensorView> views = {
          safetensors::F32View("input.logits", {c.batch, c.frames, c.classes}, c.logits),
          {"input.input_lengths", safetensors::DType::kI32, {c.batch}, std::as_bytes(std::span(c.input_lengths))},
          {"input.targets", safetensors::DType::kI32, {c.batch, c.max_target}, std::as_bytes(std::span(c.targets))},
          {"input.target_lengths", safetensors::DType::kI32, {c.batch}, std::as_bytes(std::span(c.target_lengths))},
          {"input.blank", safetensors::DType::kI32, {1}, std::as_bytes(std::span(flags).first(1))},
          {"input.zero_infinity", safetensors::DType::kI32, {1}, std::as_bytes(std::span(flags).subspan(1))},
          safetensors::F32View("input.grad_scale", {1}, scale),
          safetensors::F32View("ours.losses", {c.batch}, r.losses),
          safetensors::F32View("ours.dlogits", {c.batch, c.frames, c.classes}, r.dlogits)};
      testing::TempDir dir;
      const std::string path = dir.path() + "/case.safetensors";
      ASSERT_TRUE(safetensors::WriteFile(path, views, {}).ok());
      int status = 0;
      const std::string out = testing::RunShellCommand(
          "/usr/bin/python3 " + testing::SourceDir() + "/tests/trainer/reference/ctc_reference.py " + path, &status);
      std::printf("blank %d zero_infinity %d:\n%s", blank, zero_infinity, out.c_str());
      EXPECT_EQ(status, 0) << out;
      EXPECT_NE(out.find("worst:"), std::string::npos) << out;
      // Without zero_infinity the infeasible utterance's gradient is NaN in both.
      EXPECT_NE(out.find(zero_infinity ? "gradient: 0 NaN" : "gradient: 21 NaN"), std::string::npos) << out;
    }
  }
}

// The gradient of grad_scale * Σ losses against central differences of the f64 reference (the
// per-utterance losses in double, ctc_host.h), for feasible utterances with repeats, an empty
// target and uneven lengths.
TEST(CtcLoss, GradientMatchesFiniteDifferences) {
  constexpr int64_t T = 6, B = 3, C = 4, L = 3;
  const std::vector<int32_t> il = {6, 4, 5}, tg = {1, 1, 2, 3, 0, 0, 0, 0, 0}, tl = {3, 1, 0};
  std::mt19937 rng(3);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<double> logits(T * B * C), grad(T * B * C);
  for (double& x : logits) x = n(rng);
  ReferenceBackend<double> ref;
  std::vector<float> losses(B);
  const float scale = 0.7f;
  ref.CtcLoss(logits.data(), il.data(), tg.data(), tl.data(), T, B, C, L, 0, false, scale, losses.data(), grad.data());
  auto loss = [&] {
    CtcWorkspace w;
    double sum = 0;
    for (int64_t b = 0; b < B; ++b) {
      sum += CtcLossOneUtterance(logits.data(), tg.data() + b * L, il[b], tl[b], T, B, b, C, 0, false, scale,
                                 static_cast<double*>(nullptr), w);
    }
    return scale * sum;
  };
  double worst = 0;
  for (int64_t i = 0; i < T * B * C; ++i) {
    const double v = logits[i], h = 1e-5;
    logits[i] = v + h;
    const double lp = loss();
    logits[i] = v - h;
    const double lm = loss();
    logits[i] = v;
    const double numeric = (lp - lm) / (2 * h);
    const double err = std::fabs(numeric - grad[i]) / std::max(1.0, std::fabs(numeric));
    worst = std::max(worst, err);
    EXPECT_LT(err, 1e-8) << "logit " << i << ": analytic " << grad[i] << " numeric " << numeric;
  }
  std::printf("worst relative difference %.3e over %lld logits\n", worst, static_cast<long long>(T * B * C));
  // Each frame's gradient sums to 0 over the classes (softmax minus a distribution); frames past
  // an utterance's input length have none.
  for (int64_t r = 0; r < T * B; ++r) {
    double s = 0, a = 0;
    for (int64_t k = 0; k < C; ++k) {
      s += grad[r * C + k];
      a += std::fabs(grad[r * C + k]);
    }
    EXPECT_NEAR(s, 0.0, 1e-12) << "row " << r;
    if (r % T >= il[r / T]) {
      EXPECT_EQ(a, 0.0) << "row " << r;
    }
  }
}

TEST(CtcLoss, GradientInPlaceEqualsSeparate) {
  const CtcCase c = FiveUtterances(0);
  CpuBackend cpu;
  const CtcResult a = RunCtc(cpu, c, true, 1.0f), b = RunCtc(cpu, c, true, 1.0f, true);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.dlogits, b.dlogits);
  // Loss only: the same losses.
  ReferenceBackend<float> ref;
  const CtcResult r = RunCtc(ref, c, true, 1.0f);
  for (int64_t i = 0; i < c.batch; ++i) EXPECT_NEAR(r.losses[i], a.losses[i], 1e-5 * std::fabs(a.losses[i]) + 1e-6);
}

class CtcBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(CtcBackends, EqualTheCpu) {
  std::string why;
  std::unique_ptr<Backend<float>> backend = testing::MakeTestBackend(GetParam(), &why);
  if (!backend) GTEST_SKIP() << why;
  const double tolerance = GetParam() == "guarded" ? 0 : 1e-4;
  for (bool zero_infinity : {false, true}) {
    const CtcCase c = FiveUtterances(0);
    CpuBackend cpu;
    const CtcResult want = RunCtc(cpu, c, zero_infinity, 2.0f), got = RunCtc(*backend, c, zero_infinity, 2.0f);
    for (int64_t b = 0; b < c.batch; ++b) {
      if (std::isinf(want.losses[b])) {
        EXPECT_TRUE(std::isinf(got.losses[b])) << b;
        continue;
      }
      EXPECT_LE(std::fabs(got.losses[b] - want.losses[b]), tolerance * std::fabs(want.losses[b])) << b;
    }
    for (size_t i = 0; i < want.dlogits.size(); ++i) {
      if (std::isnan(want.dlogits[i])) {
        EXPECT_TRUE(std::isnan(got.dlogits[i])) << i;
        continue;
      }
      EXPECT_LE(std::fabs(got.dlogits[i] - want.dlogits[i]), tolerance + 1e-6) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CtcBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sf
