// Options for the optimizer, the LR schedule and the loss scaler from the experiment config.
//
// From a trial's typed hyperparameters (config::DecodeTrialHyperparameters), so every value is
// the schema's (common/config/hyperparameter_schema.cc) or the user's: nothing here has a default
// of its own. Pure functions, thread-safe.
#pragma once

#include <cstdint>

#include "common/config/experiment_config.h"
#include "common/config/trial_hyperparameters.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"

namespace sf {

// hyperparameters.optimizer: {type, betas: [β1, β2], eps, weight_decay, momentum, nesterov,
// rho_threshold, decoupled_weight_decay}.
OptimizerOptions OptimizerOptionsFromHyperparameters(const config::OptimizerHp& optimizer);

// hyperparameters.lr (the peak rate) and hyperparameters.lr_schedule: {type, warmup,
// warmup_init_lr, total_steps, min_lr, gamma}. total_steps, when the schedule gives none, is
// `default_total_steps` (the trainer passes searcher.max_length in batches).
LrScheduleOptions LrScheduleOptionsFromHyperparameters(double lr, const config::LrScheduleHp& schedule,
                                                       int64_t default_total_steps);

// loss_scaling, with the run's world size and aggregation frequency for the default
// growth_interval.
LossScalerOptions LossScalerOptionsFromConfig(const config::LossScalingConfig& config,
                                              int world_size, int64_t aggregation_frequency);

}  // namespace sf
