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
#include "trainer/optim/update_rules.h"

namespace sf::optim_internal {
namespace {

// The update loop, compiled twice (AVX-512 and the x86-64-v3 baseline) and picked at load time
// by the CPU: the same IEEE operations in 16 or 8 lanes, so both give the same bits.
__attribute__((target_clones("avx512f", "default"))) void AdamWLoop(
    const UpdateScalars& s, bool decay, float* __restrict p, const float* __restrict g,
    float* __restrict m, float* __restrict v, size_t n, float gf) {
  if (gf == 1.0f) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) AdamWElement(s, decay, p[i], g[i], m[i], v[i]);
  } else {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) AdamWElement(s, decay, p[i], g[i] * gf, m[i], v[i]);
  }
}

class AdamW final : public Optimizer {
 public:
  explicit AdamW(const OptimizerOptions& o) : Optimizer(o, {"exp_avg", "exp_avg_sq"}) {}
  std::string_view type() const override { return "adamw"; }

 protected:
  UpdateRule rule() const override { return UpdateRule::kAdamW; }

  UpdateScalars ComputeScalars(int64_t step, double lr) const override {
    using namespace adamw_rule;
    const OptimizerOptions& o = options_;
    const double t = static_cast<double>(step);
    const double bias_correction1 = 1 - std::pow(o.beta1, t);
    const double bias_correction2 = 1 - std::pow(o.beta2, t);
    UpdateScalars s;
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
                   const UpdateScalars& s, float gf) const override {
    AdamWLoop(s, param.weight_decay, param.value + begin, param.grad + begin, state[0] + begin,
              state[1] + begin, end - begin, gf);
  }
};

}  // namespace

std::unique_ptr<Optimizer> MakeAdamW(const OptimizerOptions& options) {
  return std::make_unique<AdamW>(options);
}

}  // namespace sf::optim_internal
