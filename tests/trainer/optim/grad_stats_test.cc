// ScanGrads / ScaleGrads / ClipGradNorm / UnscaleAndClipGrads.
#include "trainer/optim/grad_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace sf {
namespace {

// Sizes chosen so the concatenated vector (> 32768 elements) takes the multi-threaded path and
// thread boundaries fall inside parameters; plus tiny and odd sizes.
struct Grads {
  std::vector<std::vector<float>> g;
  std::vector<std::vector<float>> w;
  std::vector<ParamRef> refs;

  explicit Grads(uint32_t seed, std::vector<size_t> sizes = {1, 17, 40000, 3, 25001, 64}) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t n : sizes) {
      std::vector<float> v(n);
      for (float& x : v) x = normal(rng);
      g.push_back(v);
      w.emplace_back(n, 0.0f);
    }
    for (size_t i = 0; i < g.size(); ++i) {
      refs.push_back({"p" + std::to_string(i), w[i].data(), g[i].data(), g[i].size(), true});
    }
  }
  double ReferenceSumSquares() const {
    long double s = 0;
    for (const auto& v : g) {
      for (float x : v) s += static_cast<long double>(x) * x;
    }
    return static_cast<double>(s);
  }
};

TEST(ScanGrads, SumOfSquaresMatchesADoubleReference) {
  Grads grads(1);
  const GradStats stats = ScanGrads(grads.refs);
  EXPECT_FALSE(stats.non_finite);
  const double ref = grads.ReferenceSumSquares();
  EXPECT_NEAR(stats.sum_squares, ref, 1e-12 * ref);
  EXPECT_NEAR(stats.norm(), std::sqrt(ref), 1e-12 * std::sqrt(ref));
}

TEST(ScanGrads, EmptyAndZeroSizedParameters) {
  EXPECT_EQ(ScanGrads({}).sum_squares, 0.0);
  Grads grads(2, {0, 5, 0});
  EXPECT_NEAR(ScanGrads(grads.refs).sum_squares, grads.ReferenceSumSquares(), 1e-12);
}

TEST(ScanGrads, HugeFiniteValuesAreNotOverflow) {
  // fp16-scaled gradients can be large; their squares fit a double.
  Grads grads(3, {4});
  grads.g[0] = {3e38f, -3e38f, 1.0f, 0.0f};
  const GradStats stats = ScanGrads(grads.refs);
  EXPECT_FALSE(stats.non_finite);
  const double big = 3e38f;
  EXPECT_DOUBLE_EQ(stats.sum_squares, 2 * big * big + 1);
}

TEST(ScanGrads, DetectsInfAndNanAtEveryPositionIncludingTheLast) {
  Grads grads(4);
  const float bad[] = {std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
  for (size_t p = 0; p < grads.g.size(); ++p) {
    const size_t n = grads.g[p].size();
    // First, last, and a few inside (thread boundaries fall at arbitrary places).
    std::vector<size_t> positions = {0, n - 1, n / 2, n / 3};
    for (size_t i : positions) {
      for (float value : bad) {
        const float saved = grads.g[p][i];
        grads.g[p][i] = value;
        const GradStats stats = ScanGrads(grads.refs);
        EXPECT_TRUE(stats.non_finite) << "param " << p << " element " << i << " value " << value;
        grads.g[p][i] = saved;
      }
    }
  }
  // The very last element of the last parameter, explicitly.
  grads.g.back().back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(ScanGrads(grads.refs).non_finite);
}

TEST(ScanGrads, DetectsEveryElementInAWholeSweep) {
  // Every position of a parameter of odd length that straddles vector widths.
  Grads grads(5, {37, 70000});
  for (size_t i = 0; i < 37; ++i) {
    grads.g[0][i] = std::numeric_limits<float>::infinity();
    EXPECT_TRUE(ScanGrads(grads.refs).non_finite) << i;
    grads.g[0][i] = 1.0f;
  }
  EXPECT_FALSE(ScanGrads(grads.refs).non_finite);
}

TEST(ScaleGrads, MultipliesEveryElement) {
  Grads grads(6);
  const Grads original(6);
  ScaleGrads(grads.refs, 0.25f);
  for (size_t p = 0; p < grads.g.size(); ++p) {
    for (size_t i = 0; i < grads.g[p].size(); ++i) {
      ASSERT_EQ(grads.g[p][i], original.g[p][i] * 0.25f);
    }
  }
}

// torch.nn.utils.clip_grad_norm_: coef = max_norm / (total_norm + 1e-6), applied when < 1.
TEST(ClipGradNorm, ScalesToMaxNormAndReturnsTheNormBefore) {
  Grads grads(7);
  const Grads original(7);
  const GradStats stats = ScanGrads(grads.refs);
  const double norm = stats.norm();
  const double max_norm = norm / 10;
  const float returned = ClipGradNorm(grads.refs, max_norm, stats);
  EXPECT_FLOAT_EQ(returned, static_cast<float>(norm));
  const float coef = static_cast<float>(max_norm / (norm + 1e-6));
  for (size_t p = 0; p < grads.g.size(); ++p) {
    for (size_t i = 0; i < grads.g[p].size(); ++i) {
      ASSERT_EQ(grads.g[p][i], original.g[p][i] * coef);
    }
  }
  EXPECT_NEAR(ScanGrads(grads.refs).norm(), max_norm, 1e-5 * max_norm);
}

TEST(ClipGradNorm, LeavesSmallNormsAndDisabledClippingAlone) {
  Grads grads(8);
  const Grads original(8);
  const GradStats stats = ScanGrads(grads.refs);
  ClipGradNorm(grads.refs, stats.norm() * 2, stats);
  ClipGradNorm(grads.refs, 0.0, stats);
  EXPECT_EQ(grads.g, original.g);
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradientsUntouched) {
  Grads grads(9);
  grads.g[2][5] = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> before = grads.g;
  const GradStats stats = ScanGrads(grads.refs);
  EXPECT_TRUE(std::isinf(ClipGradNorm(grads.refs, 1.0, stats)));
  EXPECT_EQ(grads.g[0], before[0]);
}

TEST(UnscaleAndClipGrads, EqualsUnscaleThenClip) {
  const float unscale = 1.0f / 1024;
  Grads fused(10), two_pass(10);
  for (auto* g : {&fused, &two_pass}) ScaleGrads(g->refs, 1024.0f);  // "scaled" gradients
  const GradStats scaled = ScanGrads(fused.refs);
  const float norm = UnscaleAndClipGrads(fused.refs, unscale, 1.0, scaled);

  ScaleGrads(two_pass.refs, unscale);
  const GradStats unscaled = ScanGrads(two_pass.refs);
  const float norm2 = ClipGradNorm(two_pass.refs, 1.0, unscaled);
  EXPECT_FLOAT_EQ(norm, norm2);
  for (size_t p = 0; p < fused.g.size(); ++p) {
    for (size_t i = 0; i < fused.g[p].size(); ++i) {
      ASSERT_NEAR(fused.g[p][i], two_pass.g[p][i], 1e-6f * std::fabs(two_pass.g[p][i]) + 1e-12f);
    }
  }
}

}  // namespace
}  // namespace sf
