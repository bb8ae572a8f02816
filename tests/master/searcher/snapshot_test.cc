// Snapshot -> Restore in the middle of a search continues exactly as the original would: the
// op streams of the original and of a restored copy match, for every method and cut point.
#include <gtest/gtest.h>

#include "master/searcher/search_method.h"
#include "tests/master/searcher/search_driver.h"

namespace sf::master {
namespace {

using testing::ConfigYaml;
using testing::ParseConfig;
using testing::SearchDriver;

double Metric(int64_t id, const Value& hp, int64_t length) {
  const Value* dropout = hp.Find("dropout");
  return (dropout ? dropout->as_double() : 0.0) + static_cast<double>(id % 5) / length;
}

struct Case {
  const char* name;
  const char* hyperparameters;
  const char* searcher;
};

const Case kCases[] = {
    {"grid",
     "{dropout: {type: double, minval: 0.0, maxval: 0.3, count: 4}, lr: {type: categorical, vals: "
     "[0.001, 0.0005]}}",
     "{name: grid, metric: validation_loss, max_concurrent_trials: 3, max_length: {batches: 10}}"},
    {"random", "{dropout: {type: double, minval: 0.0, maxval: 0.3}}",
     "{name: random, metric: validation_loss, max_trials: 9, seed: 11, max_concurrent_trials: 2, "
     "max_length: {batches: 10}}"},
    {"adaptive_asha", "{dropout: {type: double, minval: 0.0, maxval: 0.3}}",
     "{name: adaptive_asha, metric: validation_loss, mode: standard, max_trials: 30, seed: 5, "
     "max_concurrent_trials: 4, max_length: {batches: 270}, divisor: 3}"},
    {"single", "{dropout: 0.1}",
     "{name: single, metric: validation_loss, max_length: {batches: 10}}"},
};

TEST(SearcherSnapshotTest, RestoredSearchContinuesIdentically) {
  for (const Case& c : kCases) {
    const auto config = ParseConfig(ConfigYaml(c.hyperparameters, c.searcher));
    // The whole run, uninterrupted, to know its length.
    auto full_method = std::move(MakeSearchMethod(config)).value();
    SearchDriver full(Metric);
    full.Start(*full_method);
    const int64_t steps = full.Run(*full_method);
    ASSERT_TRUE(full.shut_down()) << c.name;
    for (int64_t cut = 0; cut <= steps; cut += std::max<int64_t>(1, steps / 7)) {
      auto original = std::move(MakeSearchMethod(config)).value();
      SearchDriver a(Metric);
      a.Start(*original);
      a.Run(*original, cut);
      // Persist the snapshot as JSON, as the master does, and restore into a fresh method.
      const std::string json = original->Snapshot().ToJson();
      auto parsed = Value::FromJson(json);
      ASSERT_TRUE(parsed.ok()) << json;
      auto restored = std::move(MakeSearchMethod(config)).value();
      ASSERT_TRUE(restored->Restore(*parsed).ok()) << c.name << " " << json;
      EXPECT_EQ(restored->Snapshot().ToJson(), json) << c.name;
      EXPECT_DOUBLE_EQ(restored->Progress(), original->Progress());
      SearchDriver b = a;  // same pending events
      a.Run(*original);
      b.Run(*restored);
      EXPECT_EQ(a.log(), b.log()) << c.name << " cut at step " << cut;
      EXPECT_EQ(a.log(), full.log()) << c.name;
      EXPECT_TRUE(b.shut_down()) << c.name;
    }
  }
}

TEST(SearcherSnapshotTest, RestoreRefusesForeignOrMalformedSnapshots) {
  const auto grid = ParseConfig(ConfigYaml(kCases[0].hyperparameters, kCases[0].searcher));
  const auto random = ParseConfig(ConfigYaml(kCases[1].hyperparameters, kCases[1].searcher));
  auto g = std::move(MakeSearchMethod(grid)).value();
  auto r = std::move(MakeSearchMethod(random)).value();
  g->InitialOperations();
  const std::string before = r->Snapshot().ToJson();
  EXPECT_FALSE(r->Restore(g->Snapshot()).ok());
  EXPECT_FALSE(r->Restore(Value("garbage")).ok());
  Value bad = r->Snapshot();
  bad.as_map()["extra"] = Value(Value::Map{{"rng", Value("not an engine")}});
  EXPECT_FALSE(r->Restore(bad).ok());
  EXPECT_EQ(r->Snapshot().ToJson(), before);  // unchanged on error
}

}  // namespace
}  // namespace sf::master
