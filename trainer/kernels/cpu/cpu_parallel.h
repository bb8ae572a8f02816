// Internal to CpuBackend (cpu_backend.cc, cpu_norm.cc): how its elementwise kernels share the
// cores and their scratch.
//
// - Rows are split statically over the OpenMP team (the same split every call, so reductions
//   combined in thread order give the same sums every run); below kMinParallelWork elements a
//   kernel stays on the calling thread, where waking the team would cost more than the work.
// - Scratch never comes from the heap in steady state: ThreadScratch is one growing buffer per
//   thread; PartialBuffer one growing buffer of per-thread partial rows for column reductions
//   (sized threads x columns by its caller, filled before the parallel region).
// - DropoutFactors picks the AVX-512 or the portable build of the mask generator at run time.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "trainer/core/cpu_features.h"
#include "trainer/core/philox.h"
#include "trainer/kernels/cpu/hot_kernels.h"

namespace sf::cpu_internal {

inline const bool kUseAvx512 = cpu::HasAvx512();

inline void DropoutFactors(const DropoutKey& key, int64_t start, int64_t n, float p, float* out) {
  if (kUseAvx512) avx512::DropoutFactors(key, start, n, p, out);
  else portable::DropoutFactors(key, start, n, p, out);
}

inline constexpr int64_t kChunk = 4096;  // elements per dropout work item

// A per-thread float buffer of at least n elements that only grows.
inline float* ThreadScratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// Per-thread partial-sum rows shared by the column reductions (grows, never shrinks). Used by
// one kernel at a time (a backend serves one training loop).
inline std::vector<float>& PartialBuffer(int64_t n) {
  static std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf;
}

inline constexpr int64_t kMinParallelWork = 1 << 15;

template <typename F>
void ParallelRows(int64_t rows, int64_t cols, F f) {
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) f(r);
}

// sum[c] += sum_r x[r,c], parallel over rows with per-thread partials.
inline void ColumnSumImpl(const float* x, float* sum, int64_t rows, int64_t cols) {
  const int nt = omp_get_max_threads();
  std::vector<float>& partial = PartialBuffer(static_cast<int64_t>(nt) * cols);
  std::fill(partial.begin(), partial.begin() + static_cast<int64_t>(nt) * cols, 0.0f);
#pragma omp parallel if (rows * cols >= kMinParallelWork)
  {
    float* mine = partial.data() + static_cast<int64_t>(omp_get_thread_num()) * cols;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) mine[c] += xr[c];
    }
  }
  for (int t = 0; t < nt; ++t)
    for (int64_t c = 0; c < cols; ++c) sum[c] += partial[static_cast<size_t>(t) * cols + c];
}

}  // namespace sf::cpu_internal
