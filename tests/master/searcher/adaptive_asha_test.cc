// adaptive_asha: promotion of the top 1/divisor of each rung, metric direction, brackets by
// mode, and that a search finishes with the expected number of trials.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "master/searcher/search_method.h"
#include "tests/master/searcher/search_driver.h"

namespace sf::master {
namespace {

using testing::ConfigYaml;
using testing::ParseConfig;
using testing::SearchDriver;

const char* kSpace = "{dropout: {type: double, minval: 0.0, maxval: 0.3}}";

std::unique_ptr<SearchMethod> MakeAsha(const std::string& searcher) {
  auto c = ParseConfig(ConfigYaml(kSpace, searcher));
  auto m = MakeSearchMethod(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Trials that were trained past the bottom rung.
std::set<int64_t> Promoted(const SearchDriver& d) {
  std::set<int64_t> out;
  for (const auto& [id, targets] : d.trains()) {
    if (targets.size() > 1) out.insert(id);
  }
  return out;
}

// 16 trials, one bracket of two rungs (16 and 64 batches), divisor 4: all 16 train to 16 and
// report in request-id order; trial i reports metric(i).
SearchDriver RunTwoRungs(const std::string& metric_name, bool smaller_is_better,
                         SearchDriver::MetricFn metric) {
  auto m = MakeAsha("{name: adaptive_asha, metric: " + metric_name +
                    ", smaller_is_better: " + (smaller_is_better ? "true" : "false") +
                    ", mode: aggressive, max_rungs: 2, divisor: 4, max_trials: 16, "
                    "max_concurrent_trials: 16, max_length: {batches: 64}}");
  SearchDriver d(std::move(metric));
  if (!m) return d;
  d.Start(*m);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_FALSE(d.failure());
  EXPECT_TRUE(d.violations().empty()) << d.violations()[0];
  EXPECT_EQ(d.hparams().size(), 16u);
  EXPECT_EQ(d.closed().size(), 16u);
  return d;
}

TEST(AdaptiveAshaTest, AshaPromotesTopQuarterOfRung) {
  // Best first: trial 1 is best. Each time the rung gains four results one more is promoted.
  SearchDriver d = RunTwoRungs("validation_loss", true, [](int64_t id, const Value&, int64_t) {
    return static_cast<double>(id);
  });
  EXPECT_EQ(Promoted(d), (std::set<int64_t>{1, 2, 3, 4}));
  for (const auto& [id, targets] : d.trains()) {
    if (id <= 4) {
      EXPECT_EQ(targets, (std::vector<int64_t>{16, 64})) << id;
    } else {
      EXPECT_EQ(targets, (std::vector<int64_t>{16})) << id;  // stopped after the bottom rung
    }
  }
}

TEST(AdaptiveAshaTest, LateBetterTrialIsPromotedWhenTheRungGrows) {
  // Trial 8 is the best of the rung but reports late: it is promoted once the rung has 8
  // results (floor(8/4) = 2 promotions: trial 1 earlier, trial 8 now).
  SearchDriver d = RunTwoRungs("validation_loss", true, [](int64_t id, const Value&, int64_t len) {
    if (len > 16) return 0.0;
    return id == 8 ? 0.5 : static_cast<double>(id);
  });
  std::set<int64_t> promoted = Promoted(d);
  EXPECT_TRUE(promoted.count(8));
  EXPECT_TRUE(promoted.count(1));
  EXPECT_EQ(promoted.size(), 4u);
}

TEST(AdaptiveAshaTest, RespectsSmallerIsBetter) {
  auto metric = [](int64_t id, const Value&, int64_t) { return 100.0 - static_cast<double>(id); };
  // Higher is better (bleu): trial 1 has the highest metric and reports first.
  SearchDriver higher = RunTwoRungs("bleu", false, metric);
  EXPECT_EQ(Promoted(higher), (std::set<int64_t>{1, 2, 3, 4}));
  // Lower is better: from the fourth report on, each new report is the best of the rung so far,
  // so it is within the top quarter and goes up at once (asynchronous promotion).
  SearchDriver lower = RunTwoRungs("validation_loss", true, metric);
  std::set<int64_t> expected;
  for (int64_t id = 4; id <= 16; ++id) expected.insert(id);
  EXPECT_EQ(Promoted(lower), expected);
}

TEST(AdaptiveAshaTest, MetricsThatAreNotFiniteRankBelowEveryRealOne) {
  // Trial 1 reports -inf, trial 2 NaN (a diverged loss): with smaller-is-better, -inf would
  // otherwise be the best of the rung. Both rank worst, so trials 3..6 are the top quarter.
  SearchDriver d = RunTwoRungs("validation_loss", true, [](int64_t id, const Value&, int64_t) {
    if (id == 1) return -std::numeric_limits<double>::infinity();
    if (id == 2) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<double>(id);
  });
  EXPECT_EQ(Promoted(d), (std::set<int64_t>{3, 4, 5, 6}));
  // Higher is better: +inf likewise ranks worst.
  SearchDriver h = RunTwoRungs("bleu", false, [](int64_t id, const Value&, int64_t) {
    return id == 1 ? std::numeric_limits<double>::infinity() : 100.0 - static_cast<double>(id);
  });
  EXPECT_EQ(Promoted(h), (std::set<int64_t>{2, 3, 4, 5}));
}

TEST(AdaptiveAshaTest, FinishesWithTheExpectedNumberOfTrials) {
  for (const char* mode : {"aggressive", "standard", "conservative"}) {
    auto m = MakeAsha(std::string("{name: adaptive_asha, metric: validation_loss, mode: ") + mode +
                      ", max_trials: 40, max_concurrent_trials: 4, seed: 3, "
                      "max_length: {batches: 1000}}");
    ASSERT_NE(m, nullptr);
    SearchDriver d([](int64_t, const Value& hp, int64_t len) {
      return hp.Find("dropout")->as_double() + 1.0 / static_cast<double>(len);
    });
    d.Start(*m);
    d.Run(*m);
    EXPECT_TRUE(d.shut_down()) << mode;
    EXPECT_TRUE(d.violations().empty()) << mode << ": " << d.violations()[0];
    EXPECT_EQ(d.hparams().size(), 40u) << mode;
    EXPECT_EQ(d.closed().size(), 40u) << mode;
    int64_t reached_top = 0;
    for (const auto& [id, targets] : d.trains()) {
      for (size_t k = 1; k < targets.size(); ++k) EXPECT_LT(targets[k - 1], targets[k]);
      EXPECT_LE(targets.back(), 1000);
      reached_top += targets.back() == 1000;
    }
    EXPECT_GE(reached_top, 1) << mode;
    EXPECT_DOUBLE_EQ(m->Progress(), 1.0);
    for (const auto& [id, hp] : d.hparams()) {
      EXPECT_TRUE(config::ValidateTrialHyperparameters(hp).empty());
    }
  }
}

TEST(AdaptiveAshaTest, BracketsFollowTheMode) {
  auto brackets = [](const std::string& mode) {
    auto m = MakeAsha("{name: adaptive_asha, metric: validation_loss, mode: " + mode +
                      ", max_rungs: 4, divisor: 4, max_trials: 256, max_length: {batches: 6400}}");
    return m ? m->Summary().Find("brackets")->as_list() : Value::List{};
  };
  auto aggressive = brackets("aggressive");
  ASSERT_EQ(aggressive.size(), 1u);
  EXPECT_EQ(aggressive[0].Find("num_rungs")->as_int(), 4);
  const auto& rungs = aggressive[0].Find("rungs")->as_list();
  ASSERT_EQ(rungs.size(), 4u);
  // 6400 / 4^3 = 100, then 400, 1600, 6400.
  EXPECT_EQ(rungs[0].Find("length")->as_int(), 100);
  EXPECT_EQ(rungs[1].Find("length")->as_int(), 400);
  EXPECT_EQ(rungs[3].Find("length")->as_int(), 6400);
  EXPECT_EQ(brackets("standard").size(), 3u);
  auto conservative = brackets("conservative");
  ASSERT_EQ(conservative.size(), 4u);
  int64_t total = 0;
  for (const Value& b : conservative) total += b.Find("max_trials")->as_int();
  EXPECT_EQ(total, 256);
  // More rungs, more trials (equal budget per bracket).
  EXPECT_GT(conservative[0].Find("max_trials")->as_int(),
            conservative[3].Find("max_trials")->as_int());
}

TEST(AdaptiveAshaTest, RespectsMaxConcurrentTrials) {
  auto m = MakeAsha(
      "{name: adaptive_asha, metric: validation_loss, mode: aggressive, max_rungs: 3,"
      " max_trials: 32, max_concurrent_trials: 3, max_length: {batches: 160}}");
  ASSERT_NE(m, nullptr);
  // Trials holding slots (training, or finishing their last rung) never exceed the limit;
  // trials waiting for a promotion have given theirs back. The snapshot says which hold slots.
  SearchDriver d([](int64_t id, const Value&, int64_t) { return static_cast<double>(id % 7); });
  d.Start(*m);
  EXPECT_EQ(d.hparams().size(), 3u);
  int64_t most = 0;
  while (d.Step(*m)) {
    int64_t holding = 0;
    const Value snap = m->Snapshot();
    for (const Value& t : snap.Find("trials")->as_list()) {
      holding += t.Find("holds_slots")->as_bool();
    }
    most = std::max(most, holding);
  }
  EXPECT_EQ(most, 3);
  EXPECT_TRUE(d.shut_down());
  EXPECT_EQ(d.hparams().size(), 32u);
  EXPECT_TRUE(d.violations().empty());
}

TEST(AdaptiveAshaTest, InvalidHyperparametersAreReplacedAndErrorsCountAsWorst) {
  auto m = MakeAsha(
      "{name: adaptive_asha, metric: validation_loss, mode: aggressive, max_rungs: 2,"
      " divisor: 4, max_trials: 8, max_concurrent_trials: 8, max_length: {batches: 64}}");
  ASSERT_NE(m, nullptr);
  SearchDriver d([](int64_t id, const Value&, int64_t) { return static_cast<double>(id); });
  d.ExitNext(1, ExitReason::kInvalidHyperparameters);
  d.ExitNext(2, ExitReason::kErrored);
  d.Start(*m);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_FALSE(d.failure());
  EXPECT_EQ(d.hparams().size(), 9u);  // 8 + one replacement for the invalid trial
  EXPECT_TRUE(d.violations().empty()) << d.violations()[0];
  // Trial 3 is the best valid result; trial 2's error counts in rung 0 as the worst result.
  EXPECT_TRUE(Promoted(d).count(3));
}

TEST(AdaptiveAshaTest, ThousandsOfTrialsFinish) {
  auto m = MakeAsha(
      "{name: adaptive_asha, metric: bleu, mode: conservative, max_trials: 3000,"
      " max_concurrent_trials: 0, seed: 9, max_length: {batches: 100000}}");
  ASSERT_NE(m, nullptr);
  SearchDriver d([](int64_t id, const Value& hp, int64_t len) {
    return hp.Find("dropout")->as_double() * static_cast<double>(len % 97 + id % 13);
  });
  d.Start(*m);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_EQ(d.hparams().size(), 3000u);
  EXPECT_EQ(d.closed().size(), 3000u);
  EXPECT_TRUE(d.violations().empty());
}

TEST(AdaptiveAshaTest, AllTrialsErroredIsAFailure) {
  auto m = MakeAsha(
      "{name: adaptive_asha, metric: validation_loss, mode: aggressive, max_rungs: 2,"
      " max_trials: 4, max_length: {batches: 64}}");
  ASSERT_NE(m, nullptr);
  SearchDriver d([](int64_t, const Value&, int64_t) { return 1.0; });
  for (int64_t id = 1; id <= 4; ++id) d.ExitNext(id, ExitReason::kErrored);
  d.Start(*m);
  d.Run(*m);
  EXPECT_TRUE(d.shut_down());
  EXPECT_TRUE(d.failure());
  EXPECT_TRUE(d.violations().empty()) << d.violations()[0];
}

}  // namespace
}  // namespace sf::master
