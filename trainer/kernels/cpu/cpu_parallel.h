// Internal to CpuBackend (cpu_backend.cc, cpu_norm.cc): how its elementwise kernels share the
// cores and their scratch.
//
// - Rows are split statically over the OpenMP team (the same split every call, so reductions
//   combined in thread order give the same sums every run); below kMinParallelWork elements a
//   kernel stays on the calling thread, where waking the team would cost more than the work.
// - Scratch never comes from the heap in steady state: ThreadScratch is one growing buffer per
//   thread; ZeroedPartials one growing buffer of per-thread partial rows for column reductions
//   (threads x width, zeroed before the parallel region, added in thread order by AddPartials).
// - ForEachDropoutChunk walks a flat buffer in fixed chunks with each chunk's dropout factors.
// - DropoutFactors picks the AVX-512 or the portable build of the mask generator at run time.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
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

// A per-thread float buffer of at least n elements that only grows.
inline float* ThreadScratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// Per-thread partial rows for column reductions: `threads` rows of `width` floats, zeroed; row t
// belongs to OpenMP thread t. One buffer that grows and never shrinks, used by one kernel at a
// time (a backend serves one training loop).
inline float* ZeroedPartials(int threads, int64_t width) {
  static std::vector<float> buf;
  const size_t n = static_cast<size_t>(threads) * static_cast<size_t>(width);
  if (buf.size() < n) buf.resize(n);
  std::fill(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);
  return buf.data();
}

// out[c] += the sum over threads of partials[t * width + offset + c], in thread order (the same
// sums every run). out may be null (that reduction is not wanted).
inline void AddPartials(const float* partials, int threads, int64_t width, int64_t offset,
                        int64_t cols, float* out) {
  if (!out) return;
  for (int t = 0; t < threads; ++t)
    for (int64_t c = 0; c < cols; ++c) out[c] += partials[t * width + offset + c];
}

inline constexpr int64_t kMinParallelWork = 1 << 15;
inline constexpr int64_t kChunk = 4096;  // elements per dropout work item

template <typename F>
void ParallelRows(int64_t rows, int64_t cols, F f) {
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) f(r);
}

// Elements [0, n) as kChunk-element work items over the team, each with its dropout factors
// (DropoutFactors of elements s .. s+len): f(s, len, factor) on the thread that owns the item.
template <typename F>
void ForEachDropoutChunk(int64_t n, const DropoutKey& key, float p, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel if (n >= kMinParallelWork)
  {
    float factor[kChunk];
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t s = ch * kChunk, len = std::min(kChunk, n - s);
      DropoutFactors(key, s, len, p, factor);
      f(s, len, factor);
    }
  }
}

// sum[c] += sum_r x[r,c], parallel over rows with per-thread partials.
inline void ColumnSumImpl(const float* x, float* sum, int64_t rows, int64_t cols) {
  const int nt = omp_get_max_threads();
  float* partials = ZeroedPartials(nt, cols);
#pragma omp parallel if (rows * cols >= kMinParallelWork)
  {
    float* mine = partials + static_cast<int64_t>(omp_get_thread_num()) * cols;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) mine[c] += xr[c];
    }
  }
  AddPartials(partials, nt, cols, 0, cols, sum);
}

}  // namespace sf::cpu_internal
