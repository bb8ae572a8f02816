// Loss scaling for mixed-precision training (fairseq's DynamicLossScaler rules).
//
// The trainer multiplies the loss by scale() before backward, then, once per optimizer step
// (after all micro-batches and the allreduce), calls Update(stats) with the ScanGrads result:
//
//   auto stats = ScanGrads(params);
//   SF_ASSIGN_OR_RETURN(LossScaler::Action action, scaler.Update(stats));   // error: stop
//   if (action == LossScaler::Action::kSkip) { zero grads; continue; }      // no step, no LR
//   UnscaleAndClipGrads(params, 1 / (scale_used * tokens), clip_norm, stats); optimizer.Step(...)
//
// Note that Update may already have changed scale() (growth): unscale with the scale the loss
// was multiplied by, which scale_used_for_step() still returns after Update.
//
// Modes:
//   none     scale 1. Non-finite gradients skip the step (counted) and nothing else happens.
//   static   fixed scale. Non-finite gradients skip the step (counted).
//   dynamic  start at init_scale (default 128). Non-finite gradients: the step is skipped and
//            counted, and the scale is divided by scale_factor (2). If the new scale would be
//            <= min_scale (1e-4), the scale stays where it was and Update returns a
//            FailedPrecondition error naming min_scale — training should stop (fairseq raises
//            FloatingPointError there). After growth_interval consecutive clean steps the scale
//            is multiplied by scale_factor. growth_interval 0 means fairseq's default
//            2^14 / (world_size · aggregation_frequency) (at least 1).
//
// A LossScaler is a small value type (copyable), not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/optim/grad_stats.h"
#include "trainer/optim/param.h"

namespace sf {

struct LossScalerOptions {
  std::string type = "none";      // none | static | dynamic
  double scale = 1;               // static: the scale
  double init_scale = 128;        // dynamic: the starting scale
  int64_t growth_interval = 0;    // dynamic: clean steps before growing; 0 = fairseq default
  double scale_factor = 2;        // dynamic
  double min_scale = 1e-4;        // dynamic
  int world_size = 1;             // for the default growth_interval
  int aggregation_frequency = 1;  // for the default growth_interval
};

class LossScaler {
 public:
  enum class Action { kStep, kSkip };

  // Validates the options (errors name the field, "loss_scaling.init_scale: ...").
  static Result<LossScaler> Make(const LossScalerOptions& options);

  // The scale to multiply the next loss by.
  float scale() const { return static_cast<float>(scale_); }
  // The scale the gradients passed to the last Update were computed with.
  float scale_used_for_step() const { return static_cast<float>(last_used_scale_); }
  // Steps skipped because of inf/NaN gradients, over the whole run (checkpointed).
  int64_t skipped_steps() const { return skipped_steps_; }
  // Clean steps since the last overflow or growth.
  int64_t clean_steps() const { return clean_steps_; }
  int64_t growth_interval() const { return growth_interval_; }
  const std::string& type() const { return options_.type; }

  // Records the outcome of one optimizer step's gradients; see the header comment.
  Result<Action> Update(const GradStats& stats);
  Result<Action> Update(bool non_finite);

  // Checkpoint state: loss_scale (F64), clean_steps, skipped_steps (I64).
  std::vector<NamedBuffer> State() const;
  Status LoadState(std::span<const NamedBuffer> state);

 private:
  explicit LossScaler(const LossScalerOptions& options);

  LossScalerOptions options_;
  double scale_ = 1;
  double last_used_scale_ = 1;
  int64_t growth_interval_ = 1;
  int64_t clean_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

}  // namespace sf
