// RAdam, as torch.optim.RAdam (PyTorch 1.13), with the rectification threshold a parameter:
//   g ← g + wd·p                    (L2, torch 1.13)   or   p ← p·(1 − lr·wd)  (decoupled)
//   m ← β1·m + (1−β1)·g ;  v ← β2·v + (1−β2)·g² ;  m̂ = m / (1−β1^t)
//   ρ∞ = 2/(1−β2) − 1 ;  ρ_t = ρ∞ − 2t·β2^t / (1−β2^t)
//   ρ_t > threshold:  r = √((ρ_t−4)(ρ_t−2)ρ∞ / ((ρ∞−4)(ρ∞−2)ρ_t))
//                     p ← p − m̂·lr · (√(1−β2^t) / (√v + ε)) · r
//   otherwise:        p ← p − m̂·lr          (un-adapted momentum step; v still accumulates)
// torch evaluates √(1−β2^t)/(√v+ε) as (1/(√v+ε))·√(1−β2^t) (Tensor.__rtruediv__); so do we.
// Rounding follows torch's CPU kernels exactly (see adamw.cc); bit-exact against PyTorch 1.13.
#include <cmath>

#include "trainer/optim/optimizer_impl.h"
#include "trainer/optim/update_rules.h"

namespace sf::optim_internal {
namespace {

class RAdam final : public Optimizer {
 public:
  explicit RAdam(const OptimizerOptions& o) : Optimizer(o, {"exp_avg", "exp_avg_sq"}) {}
  std::string_view type() const override { return "radam"; }

 protected:
  UpdateRule rule() const override { return UpdateRule::kRAdam; }

  UpdateScalars ComputeScalars(int64_t step, double lr) const override {
    using namespace radam_rule;
    const OptimizerOptions& o = options_;
    const double t = static_cast<double>(step);
    const double bias_correction1 = 1 - std::pow(o.beta1, t);
    const double bias_correction2 = 1 - std::pow(o.beta2, t);
    const double rho_inf = 2 / (1 - o.beta2) - 1;
    const double rho_t = rho_inf - 2 * t * std::pow(o.beta2, t) / bias_correction2;
    UpdateScalars s;
    s.a[kBeta1] = static_cast<float>(o.beta1);
    s.a[kOneMinusBeta1] = static_cast<float>(1 - o.beta1);
    s.a[kBeta2] = static_cast<float>(o.beta2);
    s.a[kOneMinusBeta2] = static_cast<float>(1 - o.beta2);
    s.a[kBc1] = static_cast<float>(bias_correction1);
    s.a[kLr] = static_cast<float>(lr);
    s.a[kBc2Sqrt] = static_cast<float>(std::sqrt(bias_correction2));
    s.flag = rho_t > o.radam_rho_threshold;
    if (s.flag) {
      s.a[kRect] = static_cast<float>(
          std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)));
    }
    s.a[kEps] = static_cast<float>(o.eps);
    // L2: g + wd·p. Decoupled: p·(1 − lr·wd), with lr as the fp32 the step uses. Neutral values
    // when not applied (the decay flag of each parameter picks them).
    const bool any_decay = o.weight_decay != 0;
    s.a[kL2] = any_decay && !o.decoupled_weight_decay ? static_cast<float>(o.weight_decay) : 0.0f;
    s.a[kShrink] = any_decay && o.decoupled_weight_decay
                       ? static_cast<float>(1 - static_cast<double>(s.a[kLr]) * o.weight_decay)
                       : 1.0f;
    return s;
  }

  void UpdateSlice(const ParamRef& param, float* const* state, size_t begin, size_t end,
                   const UpdateScalars& s, float gf) const override {
    float* __restrict p = param.value + begin;
    const float* __restrict g = param.grad + begin;
    float* __restrict m = state[0] + begin;
    float* __restrict v = state[1] + begin;
    const size_t n = end - begin;
    const bool decay = param.weight_decay;
    // One loop per step kind, so that each vectorises.
    if (s.flag) {
#pragma omp simd
      for (size_t i = 0; i < n; ++i) RAdamStep<true>(s, decay, p[i], g[i] * gf, m[i], v[i]);
    } else {
#pragma omp simd
      for (size_t i = 0; i < n; ++i) RAdamStep<false>(s, decay, p[i], g[i] * gf, m[i], v[i]);
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> MakeRAdam(const OptimizerOptions& options) {
  return std::make_unique<RAdam>(options);
}

}  // namespace sf::optim_internal
