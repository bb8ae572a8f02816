// AdamW, as torch.optim.AdamW (PyTorch 1.13, amsgrad=False, maximize=False):
//   p ← p·(1 − lr·wd)                         decoupled weight decay
//   m ← β1·m + (1−β1)·g
//   v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
// The fp32 operations reproduce torch's CPU kernels rounding for rounding (bit-exact against
// PyTorch 1.13 in tests/trainer/optim): mul_ rounds, add_(x, alpha) and addcmul_ are one fused
// multiply-add, addcdiv_ is self + (value·t1)/t2, scalars are rounded to fp32 first. The file is
// compiled with -ffp-contract=off so the compiler fuses nothing else.
#include <cmath>

#include "trainer/optim/optimizer_impl.h"

namespace sf::optim_internal {
namespace {

class AdamW final : public Optimizer {
 public:
  explicit AdamW(const OptimizerOptions& o) : Optimizer(o, {"exp_avg", "exp_avg_sq"}) {}
  std::string_view type() const override { return "adamw"; }

 protected:
  enum { kBeta1, kOneMinusBeta1, kBeta2, kOneMinusBeta2, kDecay, kBc2Sqrt, kEps, kNegStepSize };

  StepScalars ComputeScalars(int64_t step, double lr) const override {
    const OptimizerOptions& o = options_;
    const double t = static_cast<double>(step);
    const double bias_correction1 = 1 - std::pow(o.beta1, t);
    const double bias_correction2 = 1 - std::pow(o.beta2, t);
    StepScalars s;
    s.a[kBeta1] = static_cast<float>(o.beta1);
    s.a[kOneMinusBeta1] = static_cast<float>(1 - o.beta1);
    s.a[kBeta2] = static_cast<float>(o.beta2);
    s.a[kOneMinusBeta2] = static_cast<float>(1 - o.beta2);
    s.a[kDecay] = static_cast<float>(1 - lr * o.weight_decay);
    s.a[kBc2Sqrt] = static_cast<float>(std::sqrt(bias_correction2));
    s.a[kEps] = static_cast<float>(o.eps);
    s.a[kNegStepSize] = static_cast<float>(-(lr / bias_correction1));
    return s;
  }

  void UpdateSlice(const ParamRef& param, float* const* state, size_t begin, size_t end,
                   const StepScalars& s) const override {
    float* __restrict p = param.value + begin;
    const float* __restrict g = param.grad + begin;
    float* __restrict m = state[0] + begin;
    float* __restrict v = state[1] + begin;
    const size_t n = end - begin;
    const float beta1 = s.a[kBeta1], one_minus_beta1 = s.a[kOneMinusBeta1];
    const float beta2 = s.a[kBeta2], one_minus_beta2 = s.a[kOneMinusBeta2];
    const float decay = param.weight_decay ? s.a[kDecay] : 1.0f;
    const float bc2_sqrt = s.a[kBc2Sqrt], eps = s.a[kEps], neg_step = s.a[kNegStepSize];
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float pi = p[i] * decay;
      const float mi = std::fma(one_minus_beta1, gi, m[i] * beta1);
      const float vi = std::fma(one_minus_beta2 * gi, gi, v[i] * beta2);
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      m[i] = mi;
      v[i] = vi;
      p[i] = pi + neg_step * mi / denom;
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> MakeAdamW(const OptimizerOptions& options) {
  return std::make_unique<AdamW>(options);
}

}  // namespace sf::optim_internal
