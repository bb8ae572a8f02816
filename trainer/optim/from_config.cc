#include "trainer/optim/from_config.h"

#include <algorithm>
#include <climits>

namespace sf {
OptimizerOptions OptimizerOptionsFromHyperparameters(const config::OptimizerHp& h) {
  OptimizerOptions o;
  o.type = h.type;
  o.beta1 = h.beta1;
  o.beta2 = h.beta2;
  o.eps = h.eps;
  o.weight_decay = h.weight_decay;
  o.momentum = h.momentum;
  o.nesterov = h.nesterov;
  o.radam_rho_threshold = h.rho_threshold;
  o.decoupled_weight_decay = h.decoupled_weight_decay;
  return o;
}

LrScheduleOptions LrScheduleOptionsFromHyperparameters(double lr, const config::LrScheduleHp& h,
                                                       int64_t default_total_steps) {
  LrScheduleOptions o;
  o.type = h.type;
  o.lr = lr;
  o.warmup_steps = h.warmup;
  o.warmup_init_lr = h.warmup_init_lr;
  o.total_steps = h.total_steps.value_or(default_total_steps);
  o.min_lr = h.min_lr;
  o.gamma = h.gamma;
  return o;
}

LossScalerOptions LossScalerOptionsFromConfig(const config::LossScalingConfig& c, int world_size,
                                              int64_t aggregation_frequency) {
  LossScalerOptions o;
  switch (c.type) {
    case config::LossScalingConfig::Type::kNone:
      o.type = "none";
      break;
    case config::LossScalingConfig::Type::kStatic:
      o.type = "static";
      break;
    case config::LossScalingConfig::Type::kDynamic:
      o.type = "dynamic";
      break;
  }
  o.scale = c.scale;
  o.init_scale = c.init_scale;
  o.growth_interval = c.growth_interval.value_or(0);
  o.scale_factor = c.scale_factor;
  o.min_scale = c.min_scale;
  o.world_size = std::max(world_size, 1);
  o.aggregation_frequency =
      static_cast<int>(std::clamp<int64_t>(aggregation_frequency, 1, INT_MAX));
  return o;
}

}  // namespace sf
