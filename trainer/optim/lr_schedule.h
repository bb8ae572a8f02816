// Learning-rate schedules, chosen by name.
//
// LearningRate(step) is the rate for the update that follows `step` completed updates, i.e.
// pass Optimizer::step_count() before calling Step (0 for the very first update). This is
// fairseq's convention (lr_scheduler.step_update(num_updates) sets the rate of the next update),
// so with warmup_init_lr = 0 the first update runs at lr 0, exactly as in fairseq. Skipped
// (overflowed) steps do not advance step_count, so they do not advance the schedule.
//
//   constant      lr (after the optional warmup)
//   inverse_sqrt  fairseq: warmup linearly from warmup_init_lr to lr over warmup_steps, then
//                 lr·√warmup_steps / √step. warmup_steps must be ≥ 1.
//   linear        warmup, then linear from lr to min_lr at total_steps (min_lr after that)
//   cosine        warmup, then min_lr + (lr − min_lr)·(1 + cos(π·progress))/2, progress =
//                 (step − warmup)/(total − warmup) clamped to [0, 1]
//   exponential   warmup, then lr·gamma^((step − warmup)/decay_steps) (floor of the exponent
//                 when staircase), never below min_lr
// Warmup (all schedules; warmup_steps = 0 disables it): lr(step) = warmup_init_lr +
// (lr − warmup_init_lr)·step/warmup_steps for step < warmup_steps.
//
// Schedules are immutable after construction and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf {

struct LrScheduleOptions {
  std::string type = "constant";  // constant | inverse_sqrt | linear | cosine | exponential
  double lr = 1e-3;               // the peak rate (reached at the end of warmup)
  int64_t warmup_steps = 0;
  // Rate at step 0 of the warmup. Negative = the fairseq default: 0 when warmup_steps > 0.
  double warmup_init_lr = -1;
  int64_t total_steps = 0;  // linear, cosine: the step where the rate reaches min_lr
  double min_lr = 0;        // linear, cosine: final rate; exponential: floor
  double gamma = 0.5;       // exponential: decay factor per decay_steps
  int64_t decay_steps = 1;  // exponential
  bool staircase = false;   // exponential
};

class LrSchedule {
 public:
  virtual ~LrSchedule();
  virtual std::string_view type() const = 0;
  // The rate for the update after `step` completed updates (step ≥ 0; negative reads as 0).
  virtual double LearningRate(int64_t step) const = 0;
};

// Names MakeLrSchedule knows, in registry order.
std::vector<std::string> LrScheduleNames();

// Validates `options` (errors name the field, "lr_schedule.warmup: ...") and builds the
// schedule named by options.type.
Result<std::unique_ptr<LrSchedule>> MakeLrSchedule(const LrScheduleOptions& options);

}  // namespace sf
