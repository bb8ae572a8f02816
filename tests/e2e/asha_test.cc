// End to end: an adaptive_asha experiment of sf-trainer trials on a local cluster (real
// PostgreSQL, sf-master, sf-agent, sf-trainer). The searcher stops trials at a rung and promotes
// the best of it by the validation metric the trainers reported, and its summary agrees with
// what the trials did.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {

// Two brackets of two rungs (bracket_rungs: [2, 2]), four trials each, divisor 4: rung 0 trains
// to ceil(40 / 4) = 10 batches, rung 1 to 40. A rung promotes its best floor(results / divisor),
// so the first promotion of each bracket happens only when all four of its results are in: the
// promoted trial must be the best of its four, and the other three stop at 10 batches. (With
// more trials per rung than the divisor, ASHA promotes asynchronously: a trial promoted early may
// rightly be worse than one that reports later and is stopped, so "every promoted trial is at
// least as good as every stopped one" holds only for a rung decided at once, as here.)
// Learning rates span three orders of magnitude, so after 10 batches the validation losses
// differ by far more than noise. A searcher promoting at random would pass with odds 1/16.
constexpr int kTrials = 8;
constexpr int kBrackets = 2;
constexpr int64_t kRungLength = 10;
constexpr int64_t kMaxLength = 40;
constexpr bool kSmallerIsBetter = true;  // validation_loss

// One YAML line per source line.
// clang-format off
std::string AshaExperiment() {
  const std::string data = DataCopy("multi30k-de-en-tiny");
  return "name: asha-e2e\n"
         "data:\n"
         "  train: {src: " + data + "/train.de, tgt: " + data + "/train.en}\n"
         "  valid: {src: " + data + "/valid.de, tgt: " + data + "/valid.en}\n"
         "hyperparameters:\n"
         "  arch: transformer_tiny\n"
         "  d_model: 32\n  heads: 2\n  encoder_layers: 1\n  decoder_layers: 1\n  ffn_dim: 64\n"
         "  dropout: 0.0\n"
         "  lr: {type: log, base: 10, minval: -5, maxval: -2}\n"
         "  lr_schedule: {type: inverse_sqrt, warmup: 5}\n"
         "  max_tokens: 512\n"
         "searcher:\n"
         "  name: adaptive_asha\n"
         "  metric: validation_loss\n"
         "  smaller_is_better: true\n"
         "  max_trials: " + std::to_string(kTrials) + "\n"
         "  max_length: {batches: " + std::to_string(kMaxLength) + "}\n"
         "  divisor: 4\n"
         "  bracket_rungs: [2, 2]\n"
         "  max_concurrent_trials: 2\n"
         "  seed: 11\n"
         "scheduling_unit: 10\n"
         "max_restarts: 0\n";
}
// clang-format on

// A JSON int64 as the REST API writes it (a string) or as a number.
int64_t AsInt(const Value& v) { return v.is_string() ? std::stoll(v.as_string()) : v.as_int(); }

bool AtLeastAsGood(double a, double b) { return kSmallerIsBetter ? a <= b : a >= b; }

struct TrialRecord {
  int64_t id = 0;
  std::string state;
  int64_t total_batches = 0;
  int64_t target_batches = 0;
  double lr = 0;
  std::map<int64_t, double> validation;  // batches -> validation_loss
};

TEST(AshaEndToEnd, StopsTrialsAtTheRungAndPromotesTheBestByTheSearcherMetric) {
  // One agent with four CPU slots of one thread each: two trials train at a time on two cores
  // (max_concurrent_trials 2, one per bracket) while the trainer of a trial waiting at a rung
  // may still hold a slot, idle, asking the master for its next operation.
  ClusterLayout layout;
  layout.agent_flags = {{"--cpu-threads-per-slot", "1"}};
  Cluster cluster(1, 4, layout);
  const int64_t id = cluster.Submit(AshaExperiment());
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", std::chrono::seconds(240)))
      << cluster.ExperimentState(id);

  // Every trial, with its searcher request id (the summary's name for it) and its metrics.
  std::map<int64_t, TrialRecord> by_request;  // request_id -> trial
  {
    pqxx::connection conn(cluster.db());
    pqxx::work tx(conn);
    for (const auto& row :
         tx.exec("SELECT id, request_id FROM trials WHERE experiment_id = " + std::to_string(id))) {
      by_request[row[1].as<int64_t>()].id = row[0].as<int64_t>();
    }
  }
  const Value trials = cluster.Trials(id);
  ASSERT_EQ(trials.as_list().size(), static_cast<size_t>(kTrials)) << trials.ToJson();
  ASSERT_EQ(by_request.size(), static_cast<size_t>(kTrials));
  std::map<int64_t, TrialRecord*> by_id;
  for (auto& [request, t] : by_request) by_id[t.id] = &t;
  for (const Value& t : trials.as_list()) {
    ASSERT_TRUE(by_id.count(Id(t))) << t.ToJson();
    TrialRecord& r = *by_id[Id(t)];
    r.state = t.Find("state")->as_string();
    r.total_batches = AsInt(*t.Find("totalBatches"));
    r.target_batches = AsInt(*t.Find("targetBatches"));
    r.lr = t.Find("hparams")->Find("lr")->as_double();
    auto [code, m] =
        cluster.Get("/api/v1/trials/" + std::to_string(r.id) + "/metrics?kind=validation");
    ASSERT_EQ(code, 200) << m.ToJson();
    for (const Value& report : m.Find("metrics")->as_list()) {
      r.validation[AsInt(*report.Find("batches"))] =
          report.Find("values")->Find("validation_loss")->as_double();
    }
  }

  // The searcher's account: per bracket, rung 0 at 10 batches with four results and one
  // promotion, rung 1 at 40 batches with the promoted trial's result.
  auto [code, searcher] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/searcher");
  ASSERT_EQ(code, 200) << searcher.ToJson();
  const Value* summary = searcher.Find("summary");
  ASSERT_TRUE(summary && summary->Find("brackets")) << searcher.ToJson();
  const Value::List& brackets = summary->Find("brackets")->as_list();
  ASSERT_EQ(brackets.size(), static_cast<size_t>(kBrackets)) << searcher.ToJson();

  std::set<int64_t> seen;
  for (const Value& bracket : brackets) {
    SCOPED_TRACE(bracket.ToJson());
    const Value::List& rungs = bracket.Find("rungs")->as_list();
    ASSERT_EQ(rungs.size(), 2u);
    ASSERT_EQ(AsInt(*rungs[0].Find("length")), kRungLength);
    ASSERT_EQ(AsInt(*rungs[1].Find("length")), kMaxLength);
    const Value::List& bottom = rungs[0].Find("trials")->as_list();
    const Value::List& top = rungs[1].Find("trials")->as_list();
    ASSERT_EQ(bottom.size(), static_cast<size_t>(kTrials / kBrackets));
    ASSERT_EQ(top.size(), 1u);

    std::vector<const TrialRecord*> promoted, stopped;
    for (const Value& entry : bottom) {
      const int64_t request = AsInt(*entry.Find("request_id"));
      ASSERT_TRUE(by_request.count(request)) << request;
      EXPECT_TRUE(seen.insert(request).second) << "request " << request << " in two brackets";
      const TrialRecord& t = by_request[request];
      std::cout << "request " << request << " trial " << t.id << " lr " << t.lr << " batches "
                << t.total_batches << " validation_loss@" << kRungLength << " "
                << (t.validation.count(kRungLength) ? std::to_string(t.validation.at(kRungLength))
                                                    : "none")
                << (entry.Find("promoted")->as_bool() ? " promoted" : " stopped") << std::endl;
      SCOPED_TRACE("trial " + std::to_string(t.id) + " lr " + std::to_string(t.lr));
      // Every trial validated at the rung; the searcher ranked it by that very metric.
      ASSERT_TRUE(t.validation.count(kRungLength)) << "no validation at the rung's length";
      ASSERT_TRUE(entry.Find("metric")->is_number()) << "an exited trial";
      EXPECT_NEAR(entry.Find("metric")->as_double(), t.validation.at(kRungLength),
                  1e-9 * std::max(1.0, std::abs(t.validation.at(kRungLength))));
      // Stopped or promoted, each trial ends COMPLETED (not errored, not cancelled).
      EXPECT_EQ(t.state, "TRIAL_STATE_COMPLETED");
      if (entry.Find("promoted")->as_bool()) {
        promoted.push_back(&t);
        EXPECT_EQ(AsInt(*top[0].Find("request_id")), request)
            << "promoted, but not in the next rung";
        // Trained on to the top rung and validated there.
        EXPECT_EQ(t.total_batches, kMaxLength);
        EXPECT_EQ(t.target_batches, kMaxLength);
        ASSERT_TRUE(t.validation.count(kMaxLength));
        EXPECT_NEAR(top[0].Find("metric")->as_double(), t.validation.at(kMaxLength),
                    1e-9 * std::max(1.0, std::abs(t.validation.at(kMaxLength))));
      } else {
        stopped.push_back(&t);
        // Stopped at the rung: no batch beyond it, no validation after it.
        EXPECT_EQ(t.total_batches, kRungLength);
        EXPECT_EQ(t.target_batches, kRungLength);
        EXPECT_EQ(t.validation.rbegin()->first, kRungLength);
      }
    }
    ASSERT_EQ(promoted.size(), 1u) << "a rung of four promotes its best one (divisor 4)";
    ASSERT_EQ(stopped.size(), 3u);
    // The promoted trial is at least as good at the rung as every trial stopped there.
    const double best = promoted[0]->validation.at(kRungLength);
    for (const TrialRecord* s : stopped) {
      EXPECT_TRUE(AtLeastAsGood(best, s->validation.at(kRungLength)))
          << "promoted trial " << promoted[0]->id << " (lr " << promoted[0]->lr
          << ", validation_loss " << best << ") is worse than stopped trial " << s->id << " (lr "
          << s->lr << ", validation_loss " << s->validation.at(kRungLength) << ")";
    }
    // The ranking is not noise: the learning rates move the metric by a clear margin.
    double lowest = best, highest = best;
    for (const TrialRecord* s : stopped) {
      lowest = std::min(lowest, s->validation.at(kRungLength));
      highest = std::max(highest, s->validation.at(kRungLength));
    }
    EXPECT_GT(highest - lowest, 0.05) << "validation losses at the rung barely differ";
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kTrials))
      << "every trial is in a bracket's first rung";
}

}  // namespace
}  // namespace sf::testing
