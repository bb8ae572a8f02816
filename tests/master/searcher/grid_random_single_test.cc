// single, grid and random search: what they create, in what order, how many at once, and that
// they run to a shutdown under a simulated master.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "master/searcher/hyperparameter_sampling.h"
#include "master/searcher/search_method.h"
#include "tests/master/searcher/search_driver.h"

namespace sf::master {
namespace {

using testing::ConfigYaml;
using testing::ParseConfig;
using testing::SearchDriver;

double ConstantMetric(int64_t, const Value&, int64_t) { return 1.0; }

std::unique_ptr<SearchMethod> Make(const config::ExperimentConfig& c) {
  auto m = MakeSearchMethod(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

const char* kGridSpaces =
    "{dropout: {type: double, minval: 0.0, maxval: 0.2, count: 3},"
    " lr: {type: log, minval: -4, maxval: -2, base: 10, count: 2},"
    " optimizer: {type: adamw, weight_decay: {type: categorical, vals: [0.0, 0.01]}},"
    " label_smoothing: 0.1}";

TEST(SingleSearchTest, RunsOneTrialWithTheConstantsToShutdown) {
  auto c = ParseConfig(
      ConfigYaml("{dropout: 0.2, optimizer: {type: radam, betas: [0.9, 0.98]}}",
                 "{name: single, metric: validation_loss, max_length: {batches: 300}}"));
  auto m = Make(c);
  ASSERT_NE(m, nullptr);
  SearchDriver d(ConstantMetric);
  d.Start(*m);
  d.Run(*m);
  const Value expected = config::ConstantHyperparameters(c.hyperparameters);
  EXPECT_EQ(d.log(), (std::vector<std::string>{"create(1, " + expected.ToJson() + ")",
                                               "train(1, 300)", "close(1)", "shutdown(ok)"}));
  EXPECT_TRUE(config::ValidateTrialHyperparameters(d.hparams().at(1)).empty());
  EXPECT_DOUBLE_EQ(m->Progress(), 1.0);
}

TEST(GridSearchTest, EnumeratesExactlyTheProduct) {
  auto c =
      ParseConfig(ConfigYaml(kGridSpaces,
                             "{name: grid, metric: validation_loss, max_length: {batches: 10}, "
                             "max_concurrent_trials: 0}"));
  auto m = Make(c);
  ASSERT_NE(m, nullptr);
  SearchDriver d(ConstantMetric);
  d.Start(*m);
  d.Run(*m);
  ASSERT_EQ(d.hparams().size(), 12u);  // 3 x 2 x 2
  std::set<std::string> distinct;
  std::set<double> dropouts, lrs, decays;
  for (const auto& [id, hp] : d.hparams()) {
    distinct.insert(hp.ToJson());
    EXPECT_TRUE(config::ValidateTrialHyperparameters(hp).empty()) << hp.ToJson();
    dropouts.insert(hp.Find("dropout")->as_double());
    lrs.insert(hp.Find("lr")->as_double());
    ASSERT_TRUE(hp.Find("optimizer")->is_map());  // nested groups stay maps
    EXPECT_EQ(hp.Find("optimizer")->Find("type")->as_string(), "adamw");
    decays.insert(hp.Find("optimizer")->Find("weight_decay")->as_double());
    EXPECT_DOUBLE_EQ(hp.Find("label_smoothing")->as_double(), 0.1);
  }
  EXPECT_EQ(distinct.size(), 12u);
  EXPECT_EQ(dropouts, (std::set<double>{0.0, 0.1, 0.2}));
  ASSERT_EQ(lrs.size(), 2u);
  EXPECT_NEAR(*lrs.begin(), 1e-4, 1e-15);
  EXPECT_NEAR(*lrs.rbegin(), 1e-2, 1e-15);
  EXPECT_EQ(decays, (std::set<double>{0.0, 0.01}));
  EXPECT_TRUE(d.shut_down());
  EXPECT_FALSE(d.failure());
  EXPECT_EQ(d.closed().size(), 12u);
  EXPECT_TRUE(d.violations().empty()) << d.violations()[0];
}

TEST(GridSearchTest, OrderIsDeterministicWithTheLastNameVaryingFastest) {
  auto c = ParseConfig(
      ConfigYaml(kGridSpaces, "{name: grid, metric: validation_loss, max_length: {batches: 10}}"));
  auto points = GridPoints(c.hyperparameters, 1000);
  ASSERT_TRUE(points.ok());
  // Sorted names: dropout, label_smoothing, lr, optimizer -> optimizer varies fastest.
  EXPECT_DOUBLE_EQ(points->at(0).Find("optimizer")->Find("weight_decay")->as_double(), 0.0);
  EXPECT_DOUBLE_EQ(points->at(1).Find("optimizer")->Find("weight_decay")->as_double(), 0.01);
  EXPECT_DOUBLE_EQ(points->at(0).Find("dropout")->as_double(), 0.0);
  EXPECT_DOUBLE_EQ(points->at(11).Find("dropout")->as_double(), 0.2);
  auto again = GridPoints(c.hyperparameters, 1000);
  EXPECT_EQ(*points, *again);
}

TEST(GridSearchTest, SpacesGiveEvenlySpacedPointsIncludingTheEnds) {
  config::Hyperparameter i;
  i.kind = config::Hyperparameter::Kind::kInt;
  i.minval = 1;
  i.maxval = 10;
  i.count = 4;
  EXPECT_EQ(SpaceGridPoints(i), (std::vector<Value>{Value(1), Value(4), Value(7), Value(10)}));
  i.count.reset();
  i.maxval = 4;
  EXPECT_EQ(SpaceGridPoints(i), (std::vector<Value>{Value(1), Value(2), Value(3), Value(4)}));
  i.count = 10;  // more points than integers: every integer
  EXPECT_EQ(SpaceGridPoints(i).size(), 4u);

  config::Hyperparameter l;
  l.kind = config::Hyperparameter::Kind::kLog;
  l.minval = -5;
  l.maxval = -1;
  l.base = 10;
  l.count = 5;
  auto pts = SpaceGridPoints(l);
  ASSERT_EQ(pts.size(), 5u);
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(pts[k].as_double(), std::pow(10.0, -5 + k), 1e-18);

  config::Hyperparameter d;
  d.kind = config::Hyperparameter::Kind::kDouble;
  d.minval = 0.5;
  d.maxval = 1.5;
  d.count = 3;
  EXPECT_EQ(SpaceGridPoints(d), (std::vector<Value>{Value(0.5), Value(1.0), Value(1.5)}));
  d.count = 1;  // a single point: the midpoint
  EXPECT_EQ(SpaceGridPoints(d), (std::vector<Value>{Value(1.0)}));
}

TEST(GridSearchTest, RespectsMaxConcurrentTrials) {
  auto c =
      ParseConfig(ConfigYaml(kGridSpaces,
                             "{name: grid, metric: validation_loss, max_length: {batches: 10}, "
                             "max_concurrent_trials: 3}"));
  auto m = Make(c);
  ASSERT_NE(m, nullptr);
  SearchDriver d(ConstantMetric);
  d.Start(*m);
  EXPECT_EQ(d.hparams().size(), 3u);  // the initial batch stops at the limit
  d.Run(*m);
  EXPECT_EQ(d.max_alive(), 3);
  EXPECT_EQ(d.hparams().size(), 12u);
  EXPECT_TRUE(d.shut_down());
  EXPECT_TRUE(d.violations().empty());
}

TEST(GridSearchTest, ExitedTrialsAreReplacedByTheNextPointAndAllErroredIsAFailure) {
  auto c =
      ParseConfig(ConfigYaml("{dropout: {type: double, minval: 0.0, maxval: 0.2, count: 3}}",
                             "{name: grid, metric: validation_loss, max_length: {batches: 10}, "
                             "max_concurrent_trials: 1}"));
  auto m = Make(c);
  ASSERT_NE(m, nullptr);
  SearchDriver d(ConstantMetric);
  d.ExitNext(1, ExitReason::kErrored);
  d.Start(*m);
  d.Step(*m);  // trial 1 errors instead of being created
  EXPECT_EQ(d.hparams().size(), 2u);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_FALSE(d.failure());  // two trials finished

  auto m2 = Make(c);
  SearchDriver all_fail(ConstantMetric);
  for (int64_t id = 1; id <= 3; ++id) all_fail.ExitNext(id, ExitReason::kErrored);
  all_fail.Start(*m2);
  all_fail.Run(*m2);
  EXPECT_TRUE(all_fail.shut_down());
  EXPECT_TRUE(all_fail.failure());
  EXPECT_TRUE(all_fail.violations().empty());
}

std::vector<std::string> RandomRun(int64_t seed) {
  auto c = ParseConfig(ConfigYaml(
      "{dropout: {type: double, minval: 0.0, maxval: 0.3}, lr: {type: log, minval: -4, maxval: -2},"
      " encoder_layers: {type: int, minval: 1, maxval: 4},"
      " label_smoothing: {type: categorical, vals: [0.0, 0.1, 0.2]},"
      " optimizer: {type: adamw, weight_decay: {type: double, minval: 0.0, maxval: 0.1}}}",
      "{name: random, metric: bleu, max_trials: 8, seed: " + std::to_string(seed) +
          ", max_concurrent_trials: 2, max_length: {batches: 50}}"));
  auto m = Make(c);
  if (!m) return {};
  SearchDriver d(ConstantMetric);
  d.Start(*m);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_EQ(d.hparams().size(), 8u);
  EXPECT_LE(d.max_alive(), 2);
  for (const auto& [id, hp] : d.hparams()) {
    EXPECT_TRUE(config::ValidateTrialHyperparameters(hp).empty()) << hp.ToJson();
    const double dropout = hp.Find("dropout")->as_double();
    EXPECT_GE(dropout, 0.0);
    EXPECT_LT(dropout, 0.3);
    const double lr = hp.Find("lr")->as_double();
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-2);
    const int64_t layers = hp.Find("encoder_layers")->as_int();
    EXPECT_GE(layers, 1);
    EXPECT_LE(layers, 4);
    const double smoothing = hp.Find("label_smoothing")->as_double();
    EXPECT_TRUE(smoothing == 0.0 || smoothing == 0.1 || smoothing == 0.2) << smoothing;
    const double decay = hp.Find("optimizer")->Find("weight_decay")->as_double();
    EXPECT_GE(decay, 0.0);
    EXPECT_LT(decay, 0.1);
  }
  return d.log();
}

TEST(RandomSearchTest, IsReproducibleBySeedAndDiffersAcrossSeeds) {
  auto a = RandomRun(7), b = RandomRun(7), other = RandomRun(8);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
}

TEST(RandomSearchTest, IntSamplesCoverTheInclusiveRange) {
  config::Hyperparameters hps;
  config::Hyperparameter i;
  i.kind = config::Hyperparameter::Kind::kInt;
  i.minval = 1;
  i.maxval = 3;
  hps["encoder_layers"] = i;
  SearchRng rng(1);
  std::set<int64_t> seen;
  for (int k = 0; k < 200; ++k) {
    seen.insert(SampleHyperparameters(hps, rng).Find("encoder_layers")->as_int());
  }
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3}));
}

TEST(SearchMethodTest, ImpossibleConfigsAreErrors) {
  // Grid over a double space without count (the parser refuses it too; configs built by hand).
  auto grid = ParseConfig(ConfigYaml(
      "{dropout: 0.1}", "{name: grid, metric: validation_loss, max_length: {batches: 10}}"));
  config::Hyperparameter space;
  space.kind = config::Hyperparameter::Kind::kDouble;
  space.minval = 0;
  space.maxval = 0.3;
  grid.hyperparameters["dropout"] = space;
  auto r = MakeSearchMethod(grid);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hyperparameters.dropout"), std::string::npos)
      << r.status().message();

  auto single = ParseConfig(ConfigYaml(
      "{dropout: 0.1}", "{name: single, metric: validation_loss, max_length: {batches: 10}}"));
  single.hyperparameters["dropout"] = space;
  EXPECT_FALSE(MakeSearchMethod(single).ok());

  auto zero = ParseConfig(ConfigYaml(
      "{dropout: 0.1}", "{name: single, metric: validation_loss, max_length: {batches: 10}}"));
  zero.searcher.max_length.value = 0;
  r = MakeSearchMethod(zero);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("searcher.max_length"), std::string::npos);

  auto asha = ParseConfig(ConfigYaml(
      "{dropout: {type: double, minval: 0.0, maxval: 0.3}}",
      "{name: adaptive_asha, metric: validation_loss, max_trials: 2, bracket_rungs: [3, 2, 1], "
      "max_length: {batches: 100}}"));
  r = MakeSearchMethod(asha);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("searcher.max_trials"), std::string::npos);
}

TEST(SearchMethodTest, EventsForUnknownTrialsAreIgnored) {
  auto c = ParseConfig(ConfigYaml(
      "{dropout: 0.1}", "{name: single, metric: validation_loss, max_length: {batches: 10}}"));
  auto m = Make(c);
  ASSERT_NE(m, nullptr);
  m->InitialOperations();
  EXPECT_TRUE(m->TrialCreated(42).empty());
  EXPECT_TRUE(m->ValidationCompleted(42, 1.0, 10).empty());
  EXPECT_TRUE(m->TrialClosed(42).empty());
  EXPECT_TRUE(m->TrialExitedEarly(42, ExitReason::kErrored).empty());
  EXPECT_TRUE(m->ValidationCompleted(1, 1.0, 10).empty());  // not created yet
}

}  // namespace
}  // namespace sf::master

namespace sf::master {
namespace {

TEST(RandomSearchTest, TrialsWithInvalidHyperparametersAreReplaced) {
  auto c = testing::ParseConfig(testing::ConfigYaml(
      "{dropout: {type: double, minval: 0.0, maxval: 0.3}}",
      "{name: random, metric: validation_loss, max_trials: 3, max_concurrent_trials: 1, "
      "max_length: {batches: 10}}"));
  auto m = std::move(MakeSearchMethod(c)).value();
  testing::SearchDriver d([](int64_t, const Value&, int64_t) { return 1.0; });
  d.ExitNext(2, ExitReason::kInvalidHyperparameters);
  d.ExitNext(3, ExitReason::kErrored);  // an error is not replaced
  d.Start(*m);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_EQ(d.hparams().size(), 4u);  // 3 + one replacement
  EXPECT_EQ(d.closed(), (std::set<int64_t>{1, 4}));
  EXPECT_TRUE(d.violations().empty());
}

}  // namespace
}  // namespace sf::master
