#include "trainer/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sf {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options) {
  if (options.type == "static") {
    scale_ = options.scale;
  } else if (options.type == "dynamic") {
    scale_ = options.init_scale;
  } else {
    scale_ = 1;
  }
  last_used_scale_ = scale_;
  growth_interval_ = options.growth_interval;
  if (growth_interval_ <= 0) {
    const int64_t divisor =
        std::max<int64_t>(1, int64_t{options.world_size} * options.aggregation_frequency);
    growth_interval_ = std::max<int64_t>(1, (int64_t{1} << 14) / divisor);
  }
}

Result<LossScaler> LossScaler::Make(const LossScalerOptions& o) {
  const std::string p = "loss_scaling.";
  if (o.type != "none" && o.type != "static" && o.type != "dynamic") {
    return InvalidArgument(p + "type: unknown loss scaling '" + o.type +
                           "' (known: none, static, dynamic)");
  }
  if (o.type == "static" && !(std::isfinite(o.scale) && o.scale > 0)) {
    return InvalidArgument(p + "scale: " + Num(o.scale) + " is not a positive number");
  }
  if (o.type == "dynamic") {
    if (!(std::isfinite(o.init_scale) && o.init_scale > 0)) {
      return InvalidArgument(p + "init_scale: " + Num(o.init_scale) + " is not a positive number");
    }
    if (!(std::isfinite(o.scale_factor) && o.scale_factor > 1)) {
      return InvalidArgument(p + "scale_factor: " + Num(o.scale_factor) + " is not > 1");
    }
    if (!(std::isfinite(o.min_scale) && o.min_scale > 0)) {
      return InvalidArgument(p + "min_scale: " + Num(o.min_scale) + " is not a positive number");
    }
    if (o.init_scale <= o.min_scale) {
      return InvalidArgument(p + "init_scale: " + Num(o.init_scale) + " is not above min_scale " +
                             Num(o.min_scale));
    }
    if (o.growth_interval < 0) {
      return InvalidArgument(p + "growth_interval: " + std::to_string(o.growth_interval) +
                             " is negative");
    }
  }
  if (o.world_size < 1 || o.aggregation_frequency < 1) {
    return InvalidArgument(p + "world_size and aggregation_frequency must be >= 1");
  }
  return LossScaler(o);
}

Result<LossScaler::Action> LossScaler::Update(const GradStats& stats) {
  return Update(stats.non_finite);
}

Result<LossScaler::Action> LossScaler::Update(bool non_finite) {
  last_used_scale_ = scale_;
  const bool dynamic = options_.type == "dynamic";
  if (non_finite) {
    if (dynamic) {
      const double next = scale_ / options_.scale_factor;
      if (next <= options_.min_scale) {
        // fairseq: keep the previous scale and stop training.
        return FailedPrecondition(
            "loss_scaling: gradients still overflow at loss scale " + Num(scale_) +
            "; the next scale " + Num(next) + " would reach min_scale " + Num(options_.min_scale) +
            " (the model is probably diverging; lower the learning rate or use bf16/fp32)");
      }
      scale_ = next;
    }
    clean_steps_ = 0;
    ++skipped_steps_;
    return Action::kSkip;
  }
  if (dynamic && ++clean_steps_ >= growth_interval_) {
    scale_ *= options_.scale_factor;
    clean_steps_ = 0;
  }
  return Action::kStep;
}

std::vector<NamedBuffer> LossScaler::State() const {
  return {NamedBuffer::F64Scalar("loss_scale", scale_),
          NamedBuffer::I64Scalar("clean_steps", clean_steps_),
          NamedBuffer::I64Scalar("skipped_steps", skipped_steps_)};
}

Status LossScaler::LoadState(std::span<const NamedBuffer> state) {
  double scale = 0;
  int64_t clean = 0, skipped = 0;
  const NamedBuffer* b = FindBuffer(state, "loss_scale");
  if (b == nullptr || !b->ScalarF64(&scale) || !(std::isfinite(scale) && scale > 0)) {
    return DataLoss("loss scaler state: 'loss_scale' missing or not a positive F64 scalar");
  }
  b = FindBuffer(state, "clean_steps");
  if (b == nullptr || !b->ScalarI64(&clean) || clean < 0) {
    return DataLoss("loss scaler state: 'clean_steps' missing or not a non-negative I64 scalar");
  }
  b = FindBuffer(state, "skipped_steps");
  if (b == nullptr || !b->ScalarI64(&skipped) || skipped < 0) {
    return DataLoss("loss scaler state: 'skipped_steps' missing or not a non-negative I64 scalar");
  }
  scale_ = scale;
  last_used_scale_ = scale;
  clean_steps_ = clean;
  skipped_steps_ = skipped;
  return Status::Ok();
}

}  // namespace sf
