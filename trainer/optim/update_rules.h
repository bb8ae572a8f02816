// The per-element update of each optimizer, shared by the CPU loops (adamw.cc, radam.cc,
// sgd.cc), the host default of Backend::ApplyOptimizerUpdate and the CUDA kernel
// (kernels/cuda/multi_tensor.cu), so that every device applies the same arithmetic.
//
// Each function updates one parameter element p (and its state) from its gradient g, given the
// step's scalars (computed once per step in double by the optimizer, then rounded to fp32) and
// whether weight decay applies to the element's parameter. The order of operations and the
// explicit fmaf calls are the ones that make the CPU optimizers bit-exact against torch.optim
// (see adamw.cc); every translation unit that includes this header must be compiled without
// floating-point contraction (GCC -ffp-contract=off, nvcc --fmad=false), or the compiler adds
// fused multiply-adds of its own.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>

#include "trainer/core/philox.h"  // SF_HOST_DEVICE

namespace sf {

enum class UpdateRule : uint8_t { kAdamW, kRAdam, kSgd };

// The scalars of one step. `a` is indexed by the rule's enum below; `flag` is RAdam's
// "rectified" switch; `variant` is SGD's kind (kSgdPlain, kSgdMomentum, kSgdNesterov).
struct UpdateScalars {
  float a[12] = {};
  bool flag = false;
  int variant = 0;
};

namespace adamw_rule {
enum { kBeta1, kOneMinusBeta1, kBeta2, kOneMinusBeta2, kDecay, kBc2Sqrt, kEps, kNegStepSize };
}  // namespace adamw_rule

// torch.optim.AdamW: p·(1−lr·wd), then the bias-corrected Adam step (m = exp_avg, v = exp_avg_sq).
SF_HOST_DEVICE inline void AdamWElement(const UpdateScalars& s, bool decay, float& p, float g, float& m,
                                 float& v) {
  using namespace adamw_rule;
  const float pi = p * (decay ? s.a[kDecay] : 1.0f);
  const float mi = fmaf(s.a[kOneMinusBeta1], g, m * s.a[kBeta1]);
  const float vi = fmaf(s.a[kOneMinusBeta2] * g, g, v * s.a[kBeta2]);
  const float denom = sqrtf(vi) / s.a[kBc2Sqrt] + s.a[kEps];
  m = mi;
  v = vi;
  p = pi + s.a[kNegStepSize] * mi / denom;
}

namespace radam_rule {
// kL2: the L2 coefficient for decayed parameters (0 when decoupled or no decay); kShrink: the
// decoupled factor 1 − lr·wd for decayed parameters (1 otherwise).
enum { kBeta1, kOneMinusBeta1, kBeta2, kOneMinusBeta2, kBc1, kLr, kBc2Sqrt, kRect, kEps, kL2,
       kShrink };
}  // namespace radam_rule

// torch.optim.RAdam: the rectified adaptive step (Rectified, s.flag set) or the un-adapted
// momentum step before it. The step kind is a template parameter so CPU loops over one kind
// vectorise; RAdamElement picks it from s.flag.
template <bool Rectified>
SF_HOST_DEVICE inline void RAdamStep(const UpdateScalars& s, bool decay, float& p, float g, float& m,
                                     float& v) {
  using namespace radam_rule;
  const float pi = p * (decay ? s.a[kShrink] : 1.0f);
  const float gi = fmaf(decay ? s.a[kL2] : 0.0f, pi, g);
  const float mi = fmaf(s.a[kOneMinusBeta1], gi, m * s.a[kBeta1]);
  const float vi = fmaf(s.a[kOneMinusBeta2] * gi, gi, v * s.a[kBeta2]);
  m = mi;
  v = vi;
  if (Rectified) {
    const float adaptive = (1.0f / (sqrtf(vi) + s.a[kEps])) * s.a[kBc2Sqrt];
    p = pi - (mi / s.a[kBc1]) * s.a[kLr] * adaptive * s.a[kRect];
  } else {
    p = pi - (mi / s.a[kBc1]) * s.a[kLr];
  }
}

SF_HOST_DEVICE inline void RAdamElement(const UpdateScalars& s, bool decay, float& p, float g,
                                        float& m, float& v) {
  if (s.flag) {
    RAdamStep<true>(s, decay, p, g, m, v);
  } else {
    RAdamStep<false>(s, decay, p, g, m, v);
  }
}

namespace sgd_rule {
enum { kNegLr, kMomentum, kWeightDecay };
enum Variant { kSgdPlain = 0, kSgdMomentum = 1, kSgdNesterov = 2 };
}  // namespace sgd_rule

// torch.optim.SGD (dampening 0): L2 weight decay, then plain, momentum or Nesterov steps. `b`
// (momentum_buffer) is untouched by the plain variant.
SF_HOST_DEVICE inline void SgdElement(const UpdateScalars& s, bool decay, float& p, float g, float& b) {
  using namespace sgd_rule;
  const float wd = decay ? s.a[kWeightDecay] : 0.0f;
  const float d = fmaf(wd, p, g);
  if (s.variant == kSgdPlain) {
    p = fmaf(s.a[kNegLr], d, p);
    return;
  }
  const float bi = b * s.a[kMomentum] + d;
  b = bi;
  p = fmaf(s.a[kNegLr], s.variant == kSgdNesterov ? fmaf(s.a[kMomentum], bi, d) : bi, p);
}

}  // namespace sf
