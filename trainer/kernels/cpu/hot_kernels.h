// Contracts of the hottest CPU loops; implementations in hot_kernels_impl.h, compiled as
// sf::portable (any x86-64-v3 CPU) and sf::avx512 (call only when cpu::HasAvx512()).
// Single-threaded (callers parallelise), pure, allocation-free.
#pragma once

#include <cstdint>

#include "trainer/core/philox.h"
#include "trainer/kernels/backend.h"

namespace sf {
#define SF_DECLARE_HOT_KERNELS                                                                \
  /* out[i] = 0 or 1/(1-p): the dropout factor of flat element start+i (philox.h layout). */ \
  void DropoutFactors(const DropoutKey& key, int64_t start, int64_t n, float p, float* out);   \
  /* One row of logits: its max, sum of exp(z - max) and sum of z. */                         \
  void CeRowForward(const float* z, int64_t vocab, float* max_out, float* sumexp_out,          \
                    float* zsum_out);                                                          \
  /* d = grad_scale * (exp(z - lse) - eps_i - on_target * [v == target]). */                   \
  void CeRowBackward(const float* z, float lse, int32_t target, float eps_i, float on_target,  \
                     float grad_scale, int64_t vocab, float* d);                                 \
  /* A residual block's tail on one row (Backend::ResidualLayerNormForward): h = residual +    \
     (x + bias) * factor (x null: h as given; bias, residual, factor null: 0, 0, 1), then      \
     y = LN(h), and y_low (null: none) = y as low_dtype; the row's mean and rstd out. */        \
  void ResidualNormRow(const float* x, const float* bias, const float* residual,              \
                       const float* factor, float* h, const float* gamma, const float* beta,  \
                       float eps, int64_t cols, float* y, void* y_low, DType low_dtype,        \
                       float* mean, float* rstd);                                              \
  /* Its backward: dh = dL/dh through LN; branch = dh * factor (null: 1) as branch_dtype;      \
     dbias (may be null), dgamma, dbeta += this row's terms. */                                 \
  void ResidualNormRowBackward(const float* dy, const float* h, const float* gamma,            \
                               float mean, float rstd, const float* factor, int64_t cols,      \
                               float* dh, void* branch, DType branch_dtype, float* dbias,      \
                               float* dgamma, float* dbeta);                                   \
  /* dpre = dout * act'(saved) (saved widened to fp32: pre, or ReLU's output) as dpre_dtype;   \
     dbias (may be null) += dpre before rounding. */                                             \
  void ActivationGradRow(const float* dout, const float* saved, Activation act, int64_t cols,  \
                         void* dpre, DType dpre_dtype, float* dbias);
namespace portable {
SF_DECLARE_HOT_KERNELS
}
namespace avx512 {
SF_DECLARE_HOT_KERNELS
}
#undef SF_DECLARE_HOT_KERNELS
}  // namespace sf
