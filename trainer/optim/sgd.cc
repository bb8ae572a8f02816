// SGD with momentum, as torch.optim.SGD (PyTorch 1.13, dampening 0):
//   d ← g + wd·p                           (L2 weight decay)
//   b ← μ·b + d        (first step: b = d; our b starts at 0, and μ·0 + d = d exactly)
//   d ← d + μ·b  (Nesterov)   or   d ← b
//   p ← p − lr·d
// With μ = 0 there is no buffer and p ← p − lr·(g + wd·p).
// add_(x, alpha) is one fused multiply-add in torch's CPU kernels, so it is std::fma here;
// bit-exact against PyTorch 1.13.
#include <cmath>

#include "trainer/optim/optimizer_impl.h"
#include "trainer/optim/update_rules.h"

namespace sf::optim_internal {
namespace {

std::vector<std::string> SgdBuffers(const OptimizerOptions& o) {
  if (o.momentum == 0) return {};
  return {"momentum_buffer"};
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& o) : Optimizer(o, SgdBuffers(o)) {}
  std::string_view type() const override { return "sgd"; }

 protected:
  UpdateRule rule() const override { return UpdateRule::kSgd; }

  UpdateScalars ComputeScalars(int64_t, double lr) const override {
    using namespace sgd_rule;
    UpdateScalars s;
    s.a[kNegLr] = static_cast<float>(-lr);
    s.a[kMomentum] = static_cast<float>(options_.momentum);
    s.a[kWeightDecay] = static_cast<float>(options_.weight_decay);
    s.variant = options_.momentum == 0 ? kSgdPlain : options_.nesterov ? kSgdNesterov : kSgdMomentum;
    return s;
  }

  void UpdateSlice(const ParamRef& param, float* const* state, size_t begin, size_t end,
                   const UpdateScalars& s, float gf) const override {
    float* __restrict p = param.value + begin;
    const float* __restrict g = param.grad + begin;
    const size_t n = end - begin;
    const bool decay = param.weight_decay;
    float unused = 0;
    float* __restrict b = s.variant == sgd_rule::kSgdPlain ? nullptr : state[0] + begin;
    if (b == nullptr) {
#pragma omp simd
      for (size_t i = 0; i < n; ++i) SgdElement(s, decay, p[i], g[i] * gf, unused);
    } else {
#pragma omp simd
      for (size_t i = 0; i < n; ++i) SgdElement(s, decay, p[i], g[i] * gf, b[i]);
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(const OptimizerOptions& options) {
  return std::make_unique<Sgd>(options);
}

}  // namespace sf::optim_internal
