// Optimizer / schedule / loss-scaler options from the experiment config's hyperparameters.
#include "trainer/optim/from_config.h"

#include <gtest/gtest.h>

#include "common/config/trial_hyperparameters.h"

namespace sf {
namespace {

TEST(FromConfig, OptimizerFromTheDesignExample) {
  // docs/optim.md: optimizer: {type: radam, betas: [0.9, 0.98], eps: 1.0e-8, weight_decay: 0.0001}
  Value hp(Value::Map{{"optimizer", Value(Value::Map{{"type", "radam"},
                                                     {"betas", Value(Value::List{0.9, 0.98})},
                                                     {"eps", 1e-8},
                                                     {"weight_decay", 0.0001}})}});
  auto hps = config::DecodeTrialHyperparameters(hp);
  ASSERT_TRUE(hps.ok()) << hps.status().ToString();
  const OptimizerOptions o_value = OptimizerOptionsFromHyperparameters(hps->optimization.optimizer);
  const OptimizerOptions* o = &o_value;
  EXPECT_EQ(o->type, "radam");
  EXPECT_EQ(o->beta1, 0.9);
  EXPECT_EQ(o->beta2, 0.98);
  EXPECT_EQ(o->eps, 1e-8);
  EXPECT_EQ(o->weight_decay, 0.0001);
  EXPECT_EQ(o->radam_rho_threshold, 5.0);
  EXPECT_FALSE(o->decoupled_weight_decay);
  EXPECT_TRUE(MakeOptimizer(*o).ok());
}

TEST(FromConfig, ScheduleFromTheDesignExample) {
  // lr: 1e-3 (sampled), lr_schedule: {type: inverse_sqrt, warmup: 4000}
  Value hp(Value::Map{
      {"lr", 1e-3},
      {"lr_schedule", Value(Value::Map{{"type", "inverse_sqrt"}, {"warmup", int64_t{4000}}})}});
  auto hps = config::DecodeTrialHyperparameters(hp);
  ASSERT_TRUE(hps.ok()) << hps.status().ToString();
  const LrScheduleOptions o_value =
      LrScheduleOptionsFromHyperparameters(hps->optimization.lr, hps->optimization.lr_schedule, 20000);
  const LrScheduleOptions* o = &o_value;
  EXPECT_EQ(o->type, "inverse_sqrt");
  EXPECT_EQ(o->lr, 1e-3);
  EXPECT_EQ(o->warmup_steps, 4000);
  EXPECT_EQ(o->total_steps, 20000);
  auto s = MakeLrSchedule(*o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_DOUBLE_EQ((*s)->LearningRate(4000), 1e-3);
}

TEST(FromConfig, WrongTypesNameTheField) {
  Value hp(Value::Map{{"optimizer", Value(Value::Map{{"type", "adamw"}, {"betas", 0.9}})}});
  auto o = config::DecodeTrialHyperparameters(hp);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("hyperparameters.optimizer.betas"), std::string::npos);
}

// A schedule without total_steps decays over the trainer's length; one with it over its own.
TEST(FromConfig, TotalStepsFromTheScheduleOrTheSearcher) {
  Value hp(Value::Map{{"lr_schedule", Value(Value::Map{{"type", "cosine"}, {"total_steps", int64_t{700}}})}});
  auto hps = config::DecodeTrialHyperparameters(hp);
  ASSERT_TRUE(hps.ok()) << hps.status().ToString();
  EXPECT_EQ(LrScheduleOptionsFromHyperparameters(1e-3, hps->optimization.lr_schedule, 20000).total_steps, 700);
  hps->optimization.lr_schedule.total_steps.reset();
  EXPECT_EQ(LrScheduleOptionsFromHyperparameters(1e-3, hps->optimization.lr_schedule, 20000).total_steps, 20000);
}

TEST(FromConfig, LossScaling) {
  config::LossScalingConfig c;
  c.type = config::LossScalingConfig::Type::kDynamic;
  c.init_scale = 256;
  const LossScalerOptions o = LossScalerOptionsFromConfig(c, 2, 4);
  auto s = LossScaler::Make(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->scale(), 256.0f);
  EXPECT_EQ(s->growth_interval(), 2048);
  c.growth_interval = 2000;
  EXPECT_EQ(LossScaler::Make(LossScalerOptionsFromConfig(c, 2, 4))->growth_interval(), 2000);
}

}  // namespace
}  // namespace sf
