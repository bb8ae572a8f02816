// The loss scaler's state machine (fairseq DynamicLossScaler rules).
#include "trainer/optim/loss_scaler.h"

#include <gtest/gtest.h>

namespace sf {
namespace {

LossScaler Dynamic(int64_t growth_interval, double init = 128, double min_scale = 1e-4) {
  LossScalerOptions o;
  o.type = "dynamic";
  o.init_scale = init;
  o.growth_interval = growth_interval;
  o.min_scale = min_scale;
  auto made = LossScaler::Make(o);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return *made;
}

LossScaler::Action Step(LossScaler& s, bool overflow) {
  auto r = s.Update(overflow);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : LossScaler::Action::kSkip;
}

TEST(LossScaler, OverflowHalvesTheScaleAndSkipsTheStep) {
  LossScaler s = Dynamic(1000);
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_EQ(Step(s, true), LossScaler::Action::kSkip);
  EXPECT_EQ(s.scale(), 64.0f);
  EXPECT_EQ(s.scale_used_for_step(), 128.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(Step(s, true), LossScaler::Action::kSkip);
  EXPECT_EQ(s.scale(), 32.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
  EXPECT_EQ(Step(s, false), LossScaler::Action::kStep);
  EXPECT_EQ(s.scale(), 32.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScaler, GrowsAfterGrowthIntervalCleanSteps) {
  LossScaler s = Dynamic(3);
  Step(s, false);
  Step(s, false);
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_EQ(Step(s, false), LossScaler::Action::kStep);
  EXPECT_EQ(s.scale(), 256.0f);                // after the 3rd clean step
  EXPECT_EQ(s.scale_used_for_step(), 128.0f);  // that step's gradients carry the old scale
  // An overflow restarts the window.
  Step(s, false);
  Step(s, false);
  Step(s, true);
  EXPECT_EQ(s.scale(), 128.0f);
  Step(s, false);
  Step(s, false);
  EXPECT_EQ(s.scale(), 128.0f);
  Step(s, false);
  EXPECT_EQ(s.scale(), 256.0f);
}

TEST(LossScaler, MatchesFairseqScaleWindowCounting) {
  // fairseq: grows when (iter - last_overflow_iter) % scale_window == 0 after each clean update.
  LossScaler s = Dynamic(4);
  double scale = 128;
  int64_t iter = 0, last_overflow = -1;
  const bool overflows[] = {false, false, false, false, false, true, false, false, false,
                            false, false, false, false, false, true, true,  false, false};
  for (bool overflow : overflows) {
    Step(s, overflow);
    if (overflow) {
      scale /= 2;
      last_overflow = iter;
    } else if ((iter - last_overflow) % 4 == 0) {
      scale *= 2;
    }
    ++iter;
    ASSERT_EQ(s.scale(), static_cast<float>(scale)) << "iter " << iter;
  }
}

TEST(LossScaler, DefaultGrowthIntervalFollowsFairseq) {
  LossScalerOptions o;
  o.type = "dynamic";
  o.world_size = 2;
  o.aggregation_frequency = 4;
  auto s = LossScaler::Make(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->growth_interval(), (1 << 14) / 8);
  EXPECT_EQ(s->scale(), 128.0f);
}

TEST(LossScaler, ErrorWhenTheScaleWouldFallToMinScale) {
  LossScaler s = Dynamic(1000, /*init=*/1.0, /*min_scale=*/0.25);
  EXPECT_EQ(Step(s, true), LossScaler::Action::kSkip);  // 0.5
  auto r = s.Update(true);                              // 0.25 <= min_scale: stop
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("min_scale"), std::string::npos) << r.status().message();
  EXPECT_EQ(s.scale(), 0.5f);  // fairseq keeps the previous scale
}

TEST(LossScaler, StaticAndNoneSkipOverflowsWithoutChangingTheScale) {
  LossScalerOptions o;
  o.type = "static";
  o.scale = 1024;
  auto s = LossScaler::Make(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s->Update(true), LossScaler::Action::kSkip);
  EXPECT_EQ(s->scale(), 1024.0f);
  EXPECT_EQ(s->skipped_steps(), 1);
  for (int i = 0; i < 100; ++i) s->Update(false);
  EXPECT_EQ(s->scale(), 1024.0f);
  o.type = "none";
  auto n = LossScaler::Make(o);
  EXPECT_EQ(n->scale(), 1.0f);
  EXPECT_EQ(*n->Update(GradStats{0, true}), LossScaler::Action::kSkip);
  EXPECT_EQ(n->scale(), 1.0f);
}

TEST(LossScaler, StateRoundTrip) {
  LossScaler a = Dynamic(5);
  Step(a, true);
  Step(a, false);
  Step(a, false);
  LossScaler b = Dynamic(5);
  ASSERT_TRUE(b.LoadState(a.State()).ok());
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.skipped_steps(), 1);
  EXPECT_EQ(b.clean_steps(), 2);
  for (int i = 0; i < 3; ++i) {
    Step(a, false);
    Step(b, false);
  }
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.scale(), 128.0f);
  EXPECT_FALSE(b.LoadState({}).ok());
}

TEST(LossScaler, ValidationNamesTheField) {
  LossScalerOptions o;
  o.type = "dynamic";
  o.init_scale = -1;
  auto r = LossScaler::Make(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("loss_scaling.init_scale"), std::string::npos);
  o.type = "adaptive";
  r = LossScaler::Make(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("loss_scaling.type"), std::string::npos);
}

}  // namespace
}  // namespace sf
