// CTC decoding (trainer/speech/ctc_decoder.h): greedy as best path; prefix beam search with a
// wide beam giving every labeling's exact probability (enumerated over all alignments), its best
// equal to the most probable labeling; a narrow beam still finding it on a peaked utterance.
#include "trainer/speech/ctc_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "tests/trainer/speech/ctc_enumeration.h"

namespace sf::speech {
namespace {

std::vector<float> RandomLogProbs(int64_t frames, int64_t vocab, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, spread);
  std::vector<float> z(frames * vocab);
  for (float& x : z) x = n(rng);
  LogSoftmaxRows(z.data(), z.data(), frames, vocab);
  return z;
}

// Every labeling's probability, summed over all vocab^frames alignments.
std::map<std::vector<int32_t>, double> Enumerate(const std::vector<float>& lp, int64_t frames, int64_t vocab,
                                                 int32_t blank) {
  std::map<std::vector<int32_t>, double> probs;
  test::EnumerateLabelings(lp, frames, vocab, blank, &probs);
  return probs;
}

TEST(CtcGreedy, TakesTheBestPathCollapsingRepeatsAndDroppingBlanks) {
  // Frames' best symbols: 1 1 0 1 2 2 0 -> labels 1 1 2.
  const std::vector<int32_t> best = {1, 1, 0, 1, 2, 2, 0};
  std::vector<float> lp(best.size() * 3, std::log(0.1f));
  for (size_t t = 0; t < best.size(); ++t) lp[t * 3 + best[t]] = std::log(0.8f);
  const CtcHypothesis h = CtcGreedy(lp.data(), static_cast<int64_t>(best.size()), 3, 0);
  EXPECT_EQ(h.labels, (std::vector<int32_t>{1, 1, 2}));
  EXPECT_NEAR(h.log_prob, 7 * std::log(0.8), 1e-5);
}

TEST(CtcPrefixBeamSearch, WideBeamScoresEveryLabelingExactly) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const int64_t frames = 5, vocab = 3;
    const std::vector<float> lp = RandomLogProbs(frames, vocab, seed, 1.0f);
    const auto exact = Enumerate(lp, frames, vocab, 0);
    CtcBeamOptions o;
    o.beam = 1000;
    o.nbest = 1000;
    const auto hyps = CtcPrefixBeamSearch(lp.data(), frames, vocab, 0, o);
    ASSERT_EQ(hyps.size(), exact.size());
    double total = 0;
    for (const CtcHypothesis& h : hyps) {
      ASSERT_TRUE(exact.count(h.labels));
      EXPECT_NEAR(std::exp(h.log_prob), exact.at(h.labels), 1e-6);
      total += std::exp(h.log_prob);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);  // the labelings' probabilities sum to one
    // The best is the most probable labeling.
    auto best = std::max_element(exact.begin(), exact.end(), [](auto& a, auto& b) { return a.second < b.second; });
    EXPECT_EQ(hyps[0].labels, best->first);
  }
}

TEST(CtcPrefixBeamSearch, NarrowBeamFindsAPeakedUtterancesLabels) {
  // Labels 2 2 1 (the repeat needs a blank between): frames 2 2 0 2 1 1, peaked.
  const std::vector<int32_t> best = {2, 2, 0, 2, 1, 1};
  std::vector<float> z(best.size() * 4, 0.0f);
  for (size_t t = 0; t < best.size(); ++t) z[t * 4 + best[t]] = 6.0f;
  LogSoftmaxRows(z.data(), z.data(), static_cast<int64_t>(best.size()), 4);
  CtcBeamOptions o;
  o.beam = 2;
  o.nbest = 2;
  const auto hyps = CtcPrefixBeamSearch(z.data(), static_cast<int64_t>(best.size()), 4, 0, o);
  ASSERT_EQ(hyps.size(), 2u);
  EXPECT_EQ(hyps[0].labels, (std::vector<int32_t>{2, 2, 1}));
  EXPECT_GT(hyps[0].log_prob, hyps[1].log_prob);
  EXPECT_EQ(CtcGreedy(z.data(), static_cast<int64_t>(best.size()), 4, 0).labels, hyps[0].labels);
  // Pruning every symbol but the frame's best leaves exactly the best path's labeling.
  o.prune = std::log(0.5f);
  const auto pruned = CtcPrefixBeamSearch(z.data(), static_cast<int64_t>(best.size()), 4, 0, o);
  ASSERT_EQ(pruned.size(), 1u);
  EXPECT_EQ(pruned[0].labels, hyps[0].labels);
}

}  // namespace
}  // namespace sf::speech
