#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace sf {

LrSchedule::~LrSchedule() = default;

namespace {

// Shared warmup, then a schedule-specific decay from `lr` as a function of steps since warmup.
class WarmupSchedule : public LrSchedule {
 public:
  explicit WarmupSchedule(const LrScheduleOptions& o) : o_(o) {
    warmup_init_ = o.warmup_init_lr >= 0 ? o.warmup_init_lr : (o.warmup_steps > 0 ? 0.0 : o.lr);
  }

  double LearningRate(int64_t step) const final {
    step = std::max<int64_t>(step, 0);
    if (step < o_.warmup_steps) {
      // fairseq: warmup_init_lr + num_updates * (lr - warmup_init_lr) / warmup_updates
      const double lr_step = (o_.lr - warmup_init_) / static_cast<double>(o_.warmup_steps);
      return warmup_init_ + static_cast<double>(step) * lr_step;
    }
    return AfterWarmup(step);
  }

 protected:
  virtual double AfterWarmup(int64_t step) const = 0;
  const LrScheduleOptions o_;
  double warmup_init_;
};

class Constant final : public WarmupSchedule {
 public:
  using WarmupSchedule::WarmupSchedule;
  std::string_view type() const override { return "constant"; }
  double AfterWarmup(int64_t) const override { return o_.lr; }
};

class InverseSqrt final : public WarmupSchedule {
 public:
  using WarmupSchedule::WarmupSchedule;
  std::string_view type() const override { return "inverse_sqrt"; }
  // fairseq: decay_factor = lr * sqrt(warmup_updates); lr = decay_factor * num_updates**-0.5
  double AfterWarmup(int64_t step) const override {
    const double decay_factor = o_.lr * std::sqrt(static_cast<double>(o_.warmup_steps));
    return decay_factor * std::pow(static_cast<double>(step), -0.5);
  }
};

double Progress(const LrScheduleOptions& o, int64_t step) {
  const double span = static_cast<double>(o.total_steps - o.warmup_steps);
  return std::clamp(static_cast<double>(step - o.warmup_steps) / span, 0.0, 1.0);
}

class Linear final : public WarmupSchedule {
 public:
  using WarmupSchedule::WarmupSchedule;
  std::string_view type() const override { return "linear"; }
  double AfterWarmup(int64_t step) const override {
    return o_.lr + (o_.min_lr - o_.lr) * Progress(o_, step);
  }
};

class Cosine final : public WarmupSchedule {
 public:
  using WarmupSchedule::WarmupSchedule;
  std::string_view type() const override { return "cosine"; }
  double AfterWarmup(int64_t step) const override {
    const double progress = Progress(o_, step);
    return o_.min_lr + (o_.lr - o_.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
  }
};

class Exponential final : public WarmupSchedule {
 public:
  using WarmupSchedule::WarmupSchedule;
  std::string_view type() const override { return "exponential"; }
  double AfterWarmup(int64_t step) const override {
    double exponent =
        static_cast<double>(step - o_.warmup_steps) / static_cast<double>(o_.decay_steps);
    if (o_.staircase) exponent = std::floor(exponent);
    return std::max(o_.min_lr, o_.lr * std::pow(o_.gamma, exponent));
  }
};

template <typename T>
std::unique_ptr<LrSchedule> Make(const LrScheduleOptions& o) {
  return std::make_unique<T>(o);
}

struct Entry {
  const char* name;
  std::unique_ptr<LrSchedule> (*make)(const LrScheduleOptions&);
};

// The registry: adding a schedule is one class plus one line here.
constexpr Entry kRegistry[] = {
    {"constant", &Make<Constant>}, {"inverse_sqrt", &Make<InverseSqrt>}, {"linear", &Make<Linear>},
    {"cosine", &Make<Cosine>},     {"exponential", &Make<Exponential>},
};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status Validate(const LrScheduleOptions& o) {
  const std::string p = "lr_schedule.";
  if (!std::isfinite(o.lr) || o.lr < 0) return InvalidArgument("lr: " + Num(o.lr) + " is negative");
  if (o.warmup_steps < 0) {
    return InvalidArgument(p + "warmup: " + std::to_string(o.warmup_steps) + " is negative");
  }
  if (std::isfinite(o.warmup_init_lr) == false) {
    return InvalidArgument(p + "warmup_init_lr: not a finite number");
  }
  if (o.type == "inverse_sqrt" && o.warmup_steps < 1) {
    return InvalidArgument(p + "warmup: inverse_sqrt needs warmup >= 1 (got " +
                           std::to_string(o.warmup_steps) + ")");
  }
  if (o.type == "linear" || o.type == "cosine") {
    if (o.total_steps <= o.warmup_steps) {
      return InvalidArgument(p + "total_steps: " + std::to_string(o.total_steps) +
                             " must exceed warmup " + std::to_string(o.warmup_steps));
    }
  }
  if (!std::isfinite(o.min_lr) || o.min_lr < 0) {
    return InvalidArgument(p + "min_lr: " + Num(o.min_lr) + " is negative");
  }
  if (o.type == "exponential") {
    if (!(o.gamma > 0 && o.gamma <= 1)) {
      return InvalidArgument(p + "gamma: " + Num(o.gamma) + " is not in (0, 1]");
    }
    if (o.decay_steps < 1) {
      return InvalidArgument(p + "decay_steps: " + std::to_string(o.decay_steps) + " is not >= 1");
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> LrScheduleNames() {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

Result<std::unique_ptr<LrSchedule>> MakeLrSchedule(const LrScheduleOptions& options) {
  for (const Entry& e : kRegistry) {
    if (options.type == e.name) {
      SF_RETURN_IF_ERROR(Validate(options));
      return e.make(options);
    }
  }
  std::string known;
  for (const Entry& e : kRegistry) known += std::string(known.empty() ? "" : ", ") + e.name;
  return InvalidArgument("lr_schedule.type: unknown schedule '" + options.type +
                         "' (known: " + known + ")");
}

}  // namespace sf
