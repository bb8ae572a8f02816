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

namespace sf::optim_internal {
namespace {

class RAdam final : public Optimizer {
 public:
  explicit RAdam(const OptimizerOptions& o) : Optimizer(o, {"exp_avg", "exp_avg_sq"}) {}
  std::string_view type() const override { return "radam"; }

 protected:
  enum { kBeta1, kOneMinusBeta1, kBeta2, kOneMinusBeta2, kBc1, kLr, kBc2Sqrt, kRect };
  // Weight decay and eps do not fit the 8 slots above with the rest; they are constant, so
  // they are read from options_ in UpdateSlice.

  StepScalars ComputeScalars(int64_t step, double lr) const override {
    const OptimizerOptions& o = options_;
    const double t = static_cast<double>(step);
    const double bias_correction1 = 1 - std::pow(o.beta1, t);
    const double bias_correction2 = 1 - std::pow(o.beta2, t);
    const double rho_inf = 2 / (1 - o.beta2) - 1;
    const double rho_t = rho_inf - 2 * t * std::pow(o.beta2, t) / bias_correction2;
    StepScalars s;
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
    const float bc1 = s.a[kBc1], lr = s.a[kLr], bc2_sqrt = s.a[kBc2Sqrt], rect = s.a[kRect];
    const float eps = static_cast<float>(options_.eps);
    const bool decay = param.weight_decay && options_.weight_decay != 0;
    // L2: g + wd·p. Decoupled: p·(1 − lr·wd). Neutral values when not applied.
    const float l2 = decay && !options_.decoupled_weight_decay
                         ? static_cast<float>(options_.weight_decay)
                         : 0.0f;
    const float shrink =
        decay && options_.decoupled_weight_decay
            ? static_cast<float>(1 - static_cast<double>(lr) * options_.weight_decay)
            : 1.0f;
    if (s.flag) {
#pragma omp simd
      for (size_t i = 0; i < n; ++i) {
        const float pi = p[i] * shrink;
        const float gi = std::fma(l2, pi, g[i]);
        const float mi = std::fma(one_minus_beta1, gi, m[i] * beta1);
        const float vi = std::fma(one_minus_beta2 * gi, gi, v[i] * beta2);
        const float adaptive = (1.0f / (std::sqrt(vi) + eps)) * bc2_sqrt;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - (mi / bc1) * lr * adaptive * rect;
      }
    } else {
#pragma omp simd
      for (size_t i = 0; i < n; ++i) {
        const float pi = p[i] * shrink;
        const float gi = std::fma(l2, pi, g[i]);
        const float mi = std::fma(one_minus_beta1, gi, m[i] * beta1);
        const float vi = std::fma(one_minus_beta2 * gi, gi, v[i] * beta2);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - (mi / bc1) * lr;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> MakeRAdam(const OptimizerOptions& options) {
  return std::make_unique<RAdam>(options);
}

}  // namespace sf::optim_internal
