// Joint CTC/attention decoding (trainer/decoding/speech_joint_search.h, trainer/speech/
// ctc_prefix_score.h):
//  - the CTC prefix score of every prefix, and the exact-labeling score, against enumeration of
//    every alignment;
//  - the search at ctc_weight 1 with an exhaustive beam finds the most probable CTC labeling,
//    with its log-probability as score;
//  - at ctc_weight 0 and beam 1 the incremental host decoder picks, at every step, the symbol the
//    teacher-forced training forward ranks first, and its score is that forward's
//    log-probability of the hypothesis and <eos> (the cached decoder equals the model);
//  - beam search never scores below greedy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "tests/trainer/speech/ctc_enumeration.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/decoding/speech_joint_search.h"
#include "trainer/speech/ctc_decoder.h"
#include "trainer/speech/ctc_prefix_score.h"

namespace sf {
namespace {

std::vector<float> RandomLogProbs(int64_t frames, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.5f);
  std::vector<float> z(frames * vocab);
  for (float& x : z) x = n(rng);
  speech::LogSoftmaxRows(z.data(), z.data(), frames, vocab);
  return z;
}

void Enumerate(const std::vector<float>& lp, int64_t frames, int64_t vocab,
               std::map<std::vector<int32_t>, double>* exact, std::map<std::vector<int32_t>, double>* prefix) {
  speech::test::EnumerateLabelings(lp, frames, vocab, 0, exact, prefix);
}

TEST(CtcPrefixScorer, ScoresEveryPrefixAndLabelingLikeEnumeration) {
  for (uint32_t seed : {1u, 2u}) {
    const int64_t frames = 6, vocab = 3;
    const std::vector<float> lp = RandomLogProbs(frames, vocab, seed);
    std::map<std::vector<int32_t>, double> exact, prefix;
    Enumerate(lp, frames, vocab, &exact, &prefix);
    speech::CtcPrefixScorer scorer(lp.data(), frames, vocab, 0);
    // Depth-first over every prefix of up to four labels (repeats included).
    int checked = 0;
    std::vector<std::pair<std::vector<int32_t>, speech::CtcPrefixState>> stack = {{{}, scorer.Initial()}};
    while (!stack.empty()) {
      auto [labels, state] = std::move(stack.back());
      stack.pop_back();
      const double want_prefix = prefix.count(labels) ? std::log(prefix[labels]) : -INFINITY;
      const double want_exact = exact.count(labels) ? std::log(exact[labels]) : -INFINITY;
      if (std::isinf(want_prefix)) {
        EXPECT_TRUE(std::isinf(state.psi)) << labels.size();
      } else {
        EXPECT_NEAR(state.psi, want_prefix, 2e-5) << "prefix of " << labels.size() << " labels";
      }
      if (std::isinf(want_exact)) {
        EXPECT_TRUE(std::isinf(scorer.Final(state)));
      } else {
        EXPECT_NEAR(scorer.Final(state), want_exact, 2e-5) << "labeling of " << labels.size() << " labels";
      }
      ++checked;
      if (labels.size() == 4) continue;
      for (int32_t c = 1; c < vocab; ++c) {
        speech::CtcPrefixState next;
        scorer.Extend(state, c, &next);
        std::vector<int32_t> longer = labels;
        longer.push_back(c);
        stack.emplace_back(std::move(longer), std::move(next));
      }
    }
    EXPECT_EQ(checked, 1 + 2 + 4 + 8 + 16);
  }
}

// A tiny joint model after Forward over a batch of two utterances (5 and 4 encoder frames).
struct TinyJoint {
  CpuBackend cpu;
  SpeechCtcModel<float> model;
  std::vector<float> features;
  std::vector<int32_t> frames = {23, 19}, targets = {1, 2, 3, 0}, target_lengths = {2, 1};
  std::vector<float> log_probs;  // [2, T', V]

  static SpeechCtcConfig Config(bool pre) {
    SpeechCtcConfig c;
    c.mels = 11;
    c.conv_channels = 3;
    c.d_model = 8;
    c.heads = 2;
    c.layers = 2;
    c.ffn_dim = 12;
    c.vocab = 5;
    c.normalize_before = pre;
    c.decoder_layers = 2;
    c.ctc_weight = 0.3f;
    c.max_positions = 64;
    return c;
  }
  explicit TinyJoint(bool pre, uint64_t seed) : model(Config(pre), &cpu, DType::kF32) {
    model.InitParameters(seed);
    model.context().training = false;
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> n(0.0f, 1.0f);
    features.assign(2 * 23 * 11, 0.0f);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < frames[b] * 11; ++i) features[b * 23 * 11 + i] = n(rng);
    }
    Run(targets, target_lengths, 2);
  }
  // Forward with these transcripts ([2, width]); refreshes the CTC log-probabilities.
  void Run(const std::vector<int32_t>& t, const std::vector<int32_t>& lengths, int64_t width) {
    SpeechBatchView v{features.data(), frames.data(), t.data(), lengths.data(), 2, 23, width};
    auto s = model.Forward(v);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const int64_t V = model.config().vocab;
    log_probs.resize(2 * model.frames() * V);
    cpu.CopyToHost(log_probs.data(), model.logits(), log_probs.size() * sizeof(float));
    speech::LogSoftmaxRows(log_probs.data(), log_probs.data(), 2 * model.frames(), V);
  }
};

TEST(JointBeamSearch, PureCtcWithAnExhaustiveBeamFindsTheMostProbableLabeling) {
  TinyJoint j(true, 3);
  JointSearchOptions o;
  o.ctc_weight = 1.0f;
  o.beam = 2000;
  auto best = JointBeamSearch(j.model, j.log_probs.data(), o);
  ASSERT_TRUE(best.ok()) << best.status().message();
  const int64_t T = j.model.frames(), V = j.model.config().vocab;
  ASSERT_EQ(T, 5);
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t frames = j.model.lengths()[b];
    std::vector<float> lp(j.log_probs.begin() + b * T * V, j.log_probs.begin() + (b * T + frames) * V);
    std::map<std::vector<int32_t>, double> exact, prefix;
    Enumerate(lp, frames, V, &exact, &prefix);
    auto top = std::max_element(exact.begin(), exact.end(), [](auto& a, auto& c) { return a.second < c.second; });
    EXPECT_EQ((*best)[b].labels, top->first) << "utterance " << b;
    EXPECT_NEAR((*best)[b].score, std::log(top->second), 1e-4) << "utterance " << b;
  }
}

TEST(JointBeamSearch, GreedyAttentionDecodingEqualsTheTeacherForcedModel) {
  for (bool pre : {true, false}) {
    SCOPED_TRACE(pre ? "pre-norm" : "post-norm");
    TinyJoint j(pre, 5);
    JointSearchOptions o;
    o.ctc_weight = 0.0f;
    o.beam = 1;
    auto best = JointBeamSearch(j.model, j.log_probs.data(), o);
    ASSERT_TRUE(best.ok()) << best.status().message();
    // Teacher-force the hypotheses: at each position the decoder's best symbol (blank, never
    // emitted, aside) is the next one, and <eos> after the last unless the length ran out.
    const int64_t width = std::max<int64_t>(1, std::max((*best)[0].labels.size(), (*best)[1].labels.size()));
    std::vector<int32_t> t(2 * width, 0), lengths(2);
    for (int64_t b = 0; b < 2; ++b) {
      lengths[b] = static_cast<int32_t>((*best)[b].labels.size());
      std::copy((*best)[b].labels.begin(), (*best)[b].labels.end(), t.begin() + b * width);
    }
    const std::vector<int32_t> enc_lengths = j.model.lengths();
    j.Run(t, lengths, width);
    const int64_t Vd = j.model.config().decoder_vocab(), P = j.model.target_positions();
    std::vector<float> lp(2 * P * Vd);
    j.cpu.CopyToHost(lp.data(), j.model.decoder_logits(), lp.size() * sizeof(float));
    speech::LogSoftmaxRows(lp.data(), lp.data(), 2 * P, Vd);
    for (int64_t b = 0; b < 2; ++b) {
      double score = 0;
      const int64_t n = lengths[b];
      for (int64_t k = 0; k <= n; ++k) {
        const float* row = lp.data() + (b * P + k) * Vd;
        const int32_t want = k < n ? (*best)[b].labels[k] : j.model.config().sos_eos();
        int32_t argmax = 1;
        for (int32_t s = 1; s < Vd; ++s) {
          if (row[s] > row[argmax]) argmax = s;
        }
        if (k < n || n < enc_lengths[b]) {
          EXPECT_EQ(argmax, want) << "utterance " << b << " position " << k;
        }
        score += row[want];
      }
      EXPECT_NEAR((*best)[b].score, score, 1e-4) << "utterance " << b;
    }
  }
}

TEST(JointBeamSearch, AWiderBeamNeverScoresBelowGreedyAndRefusesBadOptions) {
  TinyJoint j(true, 8);
  JointSearchOptions o;
  o.beam = 1;
  auto greedy = JointBeamSearch(j.model, j.log_probs.data(), o);
  o.beam = 6;
  auto wide = JointBeamSearch(j.model, j.log_probs.data(), o);
  ASSERT_TRUE(greedy.ok() && wide.ok());
  for (int64_t b = 0; b < 2; ++b) EXPECT_GE((*wide)[b].score, (*greedy)[b].score - 1e-9);
  o.ctc_weight = 1.5f;
  EXPECT_FALSE(JointBeamSearch(j.model, j.log_probs.data(), o).ok());
  o.ctc_weight = 0.3f;
  o.beam = 0;
  EXPECT_FALSE(JointBeamSearch(j.model, j.log_probs.data(), o).ok());
  SpeechCtcConfig c = TinyJoint::Config(true);
  c.decoder_layers = 0;
  c.ctc_weight = 1.0f;
  CpuBackend cpu;
  SpeechCtcModel<float> ctc_only(c, &cpu, DType::kF32);
  o.beam = 2;
  auto refused = JointBeamSearch(ctc_only, j.log_probs.data(), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs a model with a decoder"), std::string::npos);
}

}  // namespace
}  // namespace sf
