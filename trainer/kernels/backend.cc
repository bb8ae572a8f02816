#include "trainer/kernels/backend.h"

#include <cmath>

#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf {
namespace {

template <typename T>
VectorStats SumSquaresImpl(const T* x, int64_t n) {
  double acc = 0;
#pragma omp parallel for reduction(+ : acc) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  // The square of a non-finite element is non-finite and stays so through the sum; the square
  // of the largest finite float fits a double.
  return VectorStats{acc, !std::isfinite(acc)};
}

template <typename Fn>
void ForEachChunk(const OptimizerUpdate& u, Fn&& fn) {
#pragma omp parallel for schedule(dynamic, 1) if (u.num_chunks > 1)
  for (int64_t c = 0; c < u.num_chunks; ++c) {
    const ParamChunk chunk = u.chunks[c];
    fn(chunk.begin, chunk.end, chunk.decay != 0);
  }
}

}  // namespace

VectorStats SumSquaresOnHost(const float* x, int64_t n) { return SumSquaresImpl(x, n); }
VectorStats SumSquaresOnHost(const double* x, int64_t n) { return SumSquaresImpl(x, n); }

// Compiled with -ffp-contract=off (trainer/CMakeLists.txt): the element functions place their
// own fused multiply-adds.
void ApplyOptimizerUpdateOnHost(const OptimizerUpdate& u) {
  const UpdateScalars& s = u.scalars;
  float* __restrict p = u.values;
  const float* __restrict g = u.grads;
  float* __restrict m = u.state[0];
  float* __restrict v = u.state[1];
  switch (u.rule) {
    case UpdateRule::kAdamW:
      ForEachChunk(u, [&](int64_t b, int64_t e, bool decay) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) AdamWElement(s, decay, p[i], g[i], m[i], v[i]);
      });
      break;
    case UpdateRule::kRAdam:
      ForEachChunk(u, [&](int64_t b, int64_t e, bool decay) {
        if (s.flag) {
#pragma omp simd
          for (int64_t i = b; i < e; ++i) RAdamStep<true>(s, decay, p[i], g[i], m[i], v[i]);
        } else {
#pragma omp simd
          for (int64_t i = b; i < e; ++i) RAdamStep<false>(s, decay, p[i], g[i], m[i], v[i]);
        }
      });
      break;
    case UpdateRule::kSgd:
      ForEachChunk(u, [&](int64_t b, int64_t e, bool decay) {
        float unused = 0;
        for (int64_t i = b; i < e; ++i) SgdElement(s, decay, p[i], g[i], m ? m[i] : unused);
      });
      break;
  }
}

std::unique_ptr<Backend<float>> MakeBackend(Device device) {
  if (device == Device::kCpu) return std::make_unique<CpuBackend>();
  return nullptr;  // the CUDA backend is created through MakeCudaBackend() (cuda_backend.h)
}

}  // namespace sf
