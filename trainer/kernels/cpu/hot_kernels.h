// Contracts of the hottest CPU loops; implementations in hot_kernels_impl.h, compiled as
// sf::portable (any x86-64-v3 CPU) and sf::avx512 (call only when cpu::HasAvx512()).
// Single-threaded (callers parallelise), pure, allocation-free.
#pragma once

#include <cstdint>

#include "trainer/core/philox.h"

namespace sf {
#define SF_DECLARE_HOT_KERNELS                                                                \
  /* out[i] = 0 or 1/(1-p): the dropout factor of flat element start+i (philox.h layout). */ \
  void DropoutFactors(const DropoutKey& key, int64_t start, int64_t n, float p, float* out);   \
  /* One row of logits: its max, sum of exp(z - max) and sum of z. */                         \
  void CeRowForward(const float* z, int64_t vocab, float* max_out, float* sumexp_out,          \
                    float* zsum_out);                                                          \
  /* d = grad_scale * (exp(z - lse) - eps_i - on_target * [v == target]). */                   \
  void CeRowBackward(const float* z, float lse, int32_t target, float eps_i, float on_target,  \
                     float grad_scale, int64_t vocab, float* d);
namespace portable {
SF_DECLARE_HOT_KERNELS
}
namespace avx512 {
SF_DECLARE_HOT_KERNELS
}
#undef SF_DECLARE_HOT_KERNELS
}  // namespace sf
