// The multi-tensor loop shared by the optimizers and the gradient passes.
//
// All parameters are treated as one long concatenated vector of `total` elements. Each OpenMP
// thread takes one contiguous, equally sized range of it (boundaries rounded to 64 elements so
// vector loops start aligned within a parameter) and walks the parameters that range overlaps,
// calling fn(thread, param_index, begin, end) on each piece. Pieces cover every element exactly
// once. Nothing is allocated. Below kParallelMinElements elements one thread does everything,
// since waking a team costs more than the work.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <span>

#include "trainer/optim/param.h"

namespace sf::optim_internal {

inline constexpr size_t kParallelMinElements = 1 << 15;
inline constexpr int kMaxThreads = 256;

inline size_t TotalElements(std::span<const ParamRef> params) {
  size_t total = 0;
  for (const ParamRef& p : params) total += p.numel;
  return total;
}

// Number of threads ForEachSlice will use for `total` elements.
inline int SliceThreads(size_t total) {
  if (total < kParallelMinElements) return 1;
  return std::clamp(omp_get_max_threads(), 1, kMaxThreads);
}

// Runs fn(thread, i, begin, end) for the part [lo, hi) of the concatenated vector.
template <typename Fn>
void VisitRange(std::span<const ParamRef> params, int thread, size_t lo, size_t hi, Fn& fn) {
  size_t offset = 0;  // start of params[i] in the concatenated vector
  for (size_t i = 0; i < params.size() && offset < hi; ++i) {
    const size_t n = params[i].numel;
    const size_t b = std::max(lo, offset);
    const size_t e = std::min(hi, offset + n);
    if (b < e) fn(thread, i, b - offset, e - offset);
    offset += n;
  }
}

template <typename Fn>
void ForEachSlice(std::span<const ParamRef> params, int threads, Fn&& fn) {
  const size_t total = TotalElements(params);
  if (threads <= 1) {
    VisitRange(params, 0, 0, total, fn);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int n = omp_get_num_threads();  // may be fewer than asked for
    auto bound = [&](int k) -> size_t {
      if (k >= n) return total;
      return (total / static_cast<size_t>(n) * static_cast<size_t>(k)) & ~size_t{63};
    };
    VisitRange(params, t, bound(t), bound(t + 1), fn);
  }
}

}  // namespace sf::optim_internal
