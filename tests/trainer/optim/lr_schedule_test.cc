// LR schedules against closed forms and fairseq's inverse_sqrt code.
#include "trainer/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace sf {
namespace {

std::unique_ptr<LrSchedule> Make(const LrScheduleOptions& o) {
  auto made = MakeLrSchedule(o);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(made).value() : nullptr;
}

// fairseq/optim/lr_scheduler/inverse_square_root_schedule.py, transcribed.
struct FairseqInverseSqrt {
  double warmup_init_lr, lr_step, decay_factor;
  int64_t warmup_updates;
  FairseqInverseSqrt(double lr, int64_t warmup_updates, double warmup_init_lr)
      : warmup_updates(warmup_updates) {
    if (warmup_init_lr < 0) warmup_init_lr = warmup_updates > 0 ? 0 : lr;
    this->warmup_init_lr = warmup_init_lr;
    lr_step = (lr - warmup_init_lr) / warmup_updates;
    decay_factor = lr * std::pow(warmup_updates, 0.5);
  }
  double step_update(int64_t num_updates) const {
    if (num_updates < warmup_updates) return warmup_init_lr + num_updates * lr_step;
    return decay_factor * std::pow(num_updates, -0.5);
  }
};

TEST(InverseSqrt, MatchesFairseq) {
  for (double init : {-1.0, 1e-7}) {
    LrScheduleOptions o;
    o.type = "inverse_sqrt";
    o.lr = 5e-4;
    o.warmup_steps = 4000;
    o.warmup_init_lr = init;
    auto s = Make(o);
    const FairseqInverseSqrt ref(5e-4, 4000, init);
    for (int64_t step : {0, 1, 2, 100, 3999, 4000, 4001, 10000, 1000000}) {
      EXPECT_DOUBLE_EQ(s->LearningRate(step), ref.step_update(step)) << step << " init " << init;
    }
  }
}

TEST(InverseSqrt, ClosedForm) {
  LrScheduleOptions o;
  o.type = "inverse_sqrt";
  o.lr = 1e-3;
  o.warmup_steps = 100;
  auto s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(0), 0.0);  // fairseq: warmup_init_lr defaults to 0
  EXPECT_DOUBLE_EQ(s->LearningRate(50), 0.5e-3);
  EXPECT_DOUBLE_EQ(s->LearningRate(100), 1e-3);    // peak at the end of warmup
  EXPECT_DOUBLE_EQ(s->LearningRate(400), 0.5e-3);  // √(100/400) = 1/2
  EXPECT_NEAR(s->LearningRate(10000), 1e-4, 1e-18);
}

TEST(Constant, WithAndWithoutWarmup) {
  LrScheduleOptions o;
  o.lr = 3e-4;
  auto s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(0), 3e-4);
  EXPECT_DOUBLE_EQ(s->LearningRate(123456), 3e-4);
  o.warmup_steps = 10;
  o.warmup_init_lr = 1e-4;
  s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(0), 1e-4);
  EXPECT_DOUBLE_EQ(s->LearningRate(5), 2e-4);
  EXPECT_DOUBLE_EQ(s->LearningRate(10), 3e-4);
}

TEST(Linear, WarmupThenLinearToEndLr) {
  LrScheduleOptions o;
  o.type = "linear";
  o.lr = 1.0;
  o.warmup_steps = 10;
  o.total_steps = 110;
  o.min_lr = 0.1;
  auto s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(0), 0.0);
  EXPECT_DOUBLE_EQ(s->LearningRate(4), 0.4);
  EXPECT_DOUBLE_EQ(s->LearningRate(10), 1.0);
  EXPECT_DOUBLE_EQ(s->LearningRate(60), 0.55);
  EXPECT_DOUBLE_EQ(s->LearningRate(110), 0.1);
  EXPECT_DOUBLE_EQ(s->LearningRate(1000), 0.1);
}

TEST(Cosine, WarmupThenHalfCosine) {
  LrScheduleOptions o;
  o.type = "cosine";
  o.lr = 2.0;
  o.warmup_steps = 100;
  o.total_steps = 1100;
  auto s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(50), 1.0);
  EXPECT_DOUBLE_EQ(s->LearningRate(100), 2.0);
  EXPECT_NEAR(s->LearningRate(600), 1.0, 1e-12);
  for (int64_t step : {150, 333, 999}) {
    const double progress = (step - 100) / 1000.0;
    EXPECT_NEAR(s->LearningRate(step), 2.0 * 0.5 * (1 + std::cos(std::numbers::pi * progress)),
                1e-12);
  }
  EXPECT_NEAR(s->LearningRate(1100), 0.0, 1e-15);
  EXPECT_NEAR(s->LearningRate(5000), 0.0, 1e-15);
}

TEST(Exponential, DecaysByGammaPerDecaySteps) {
  LrScheduleOptions o;
  o.type = "exponential";
  o.lr = 1.0;
  o.gamma = 0.5;
  o.decay_steps = 10;
  auto s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(0), 1.0);
  EXPECT_DOUBLE_EQ(s->LearningRate(10), 0.5);
  EXPECT_NEAR(s->LearningRate(5), std::sqrt(0.5), 1e-15);
  o.staircase = true;
  o.min_lr = 0.2;
  s = Make(o);
  EXPECT_DOUBLE_EQ(s->LearningRate(19), 0.5);
  EXPECT_DOUBLE_EQ(s->LearningRate(20), 0.25);
  EXPECT_DOUBLE_EQ(s->LearningRate(30), 0.2);  // floor
}

TEST(LrSchedule, RegistryAndValidationErrorsNameTheField) {
  EXPECT_EQ(LrScheduleNames(), (std::vector<std::string>{"constant", "inverse_sqrt", "linear",
                                                         "cosine", "exponential"}));
  LrScheduleOptions o;
  o.type = "noam";
  auto r = MakeLrSchedule(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown schedule 'noam'"), std::string::npos);
  o.type = "inverse_sqrt";
  o.warmup_steps = 0;
  r = MakeLrSchedule(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lr_schedule.warmup"), std::string::npos);
  o.type = "cosine";
  o.warmup_steps = 10;
  o.total_steps = 10;
  r = MakeLrSchedule(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lr_schedule.total_steps"), std::string::npos);
}

}  // namespace
}  // namespace sf
