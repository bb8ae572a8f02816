#include "trainer/optim/grad_stats.h"

#include <array>
#include <cmath>

#include "trainer/optim/multi_tensor.h"

namespace sf {
namespace {

using optim_internal::ForEachSlice;
using optim_internal::kMaxThreads;
using optim_internal::SliceThreads;
using optim_internal::TotalElements;

// Σ x² in double. Eight independent accumulators via the simd reduction keep the FMA latency
// chain short; the float→double conversion is exact.
double SumSquares(const float* __restrict x, size_t n) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    acc += v * v;
  }
  return acc;
}

void Scale(float* __restrict x, size_t n, float factor) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace

double GradStats::norm() const { return std::sqrt(sum_squares); }

GradStats ScanGrads(std::span<const ParamRef> params) {
  // Per-thread partial sums, padded to a cache line each, combined in thread order so the
  // result does not depend on scheduling.
  struct alignas(64) Partial {
    double sum = 0;
  };
  std::array<Partial, kMaxThreads> partial{};
  const int threads = SliceThreads(TotalElements(params));
  ForEachSlice(params, threads, [&](int t, size_t i, size_t b, size_t e) {
    partial[t].sum += SumSquares(params[i].grad + b, e - b);
  });
  GradStats stats;
  for (int t = 0; t < threads; ++t) stats.sum_squares += partial[t].sum;
  stats.non_finite = !std::isfinite(stats.sum_squares);
  return stats;
}

void ScaleGrads(std::span<const ParamRef> params, float factor) {
  if (factor == 1.0f) return;
  ForEachSlice(params, SliceThreads(TotalElements(params)), [&](int, size_t i, size_t b, size_t e) {
    Scale(params[i].grad + b, e - b, factor);
  });
}

UnscaleClip UnscaleAndClipFactor(float unscale, double max_norm, const GradStats& stats) {
  UnscaleClip r;
  const double norm = stats.norm() * std::fabs(static_cast<double>(unscale));
  r.norm = static_cast<float>(norm);
  if (!std::isfinite(norm)) return r;
  double factor = unscale;
  if (max_norm > 0 && norm > max_norm) factor *= max_norm / (norm + 1e-6);
  r.factor = static_cast<float>(factor);
  r.scale = r.factor != 1.0f;
  return r;
}

float UnscaleAndClipGrads(std::span<const ParamRef> params, float unscale, double max_norm,
                          const GradStats& stats) {
  const UnscaleClip c = UnscaleAndClipFactor(unscale, max_norm, stats);
  if (c.scale) ScaleGrads(params, c.factor);
  return c.norm;
}

float ClipGradNorm(std::span<const ParamRef> params, double max_norm, const GradStats& stats) {
  return UnscaleAndClipGrads(params, 1.0f, max_norm, stats);
}

}  // namespace sf
