// Frame-budget speech batching (trainer/speech/speech_batches.h): every utterance once per
// epoch, padded frames within the budget (an oversize utterance alone), order following the
// seed, rank shards disjoint and complete, resumable positions; and the padded batch itself.
#include "trainer/speech/speech_batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "tests/trainer/speech/speech_test_support.h"
#include "trainer/speech/char_vocab.h"

namespace sf::speech {
namespace {

// Lengths like a corpus of 1–8 s utterances (100–800 frames), with a few long ones.
std::vector<int64_t> Frames(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(100, 800);
  std::vector<int64_t> f(static_cast<size_t>(n));
  for (auto& x : f) x = d(rng);
  return f;
}

std::vector<int64_t> TargetLengths(const std::vector<int64_t>& frames) {
  std::vector<int64_t> t;
  for (int64_t f : frames) t.push_back(f / 8);
  return t;
}

SpeechBatchIterator Make(const std::vector<int64_t>& frames, int64_t max_frames, uint64_t seed,
                         int rank = 0, int world = 1, bool shuffle = true) {
  SpeechBatchingOptions o;
  o.max_frames = max_frames;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world;
  o.shuffle = shuffle;
  auto it = SpeechBatchIterator::Create(frames, TargetLengths(frames), o);
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  return std::move(it).value();
}

int64_t Padded(const std::vector<int64_t>& frames, const std::vector<int64_t>& batch) {
  int64_t longest = 0;
  for (int64_t i : batch) longest = std::max(longest, frames[size_t(i)]);
  return longest * int64_t(batch.size());
}

TEST(SpeechBatches, EveryUtteranceOncePerEpochWithinTheFrameBudget) {
  const std::vector<int64_t> frames = Frames(1000, 1);
  const int64_t budget = 6000;
  SpeechBatchIterator it = Make(frames, budget, 7);
  EXPECT_EQ(it.oversize(), 0);
  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    std::vector<int64_t> seen;
    for (const auto& b : it.EpochPlan(epoch)) {
      ASSERT_FALSE(b.empty());
      EXPECT_LE(Padded(frames, b), budget);
      seen.insert(seen.end(), b.begin(), b.end());
    }
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(seen.size(), frames.size());
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], int64_t(i));
  }
  // Bucketing keeps padding small: the padded total stays close to the real frames.
  int64_t real = 0, padded = 0;
  for (int64_t f : frames) real += f;
  for (const auto& b : it.EpochPlan(1)) padded += Padded(frames, b);
  EXPECT_LT(double(padded) / double(real), 1.1);
}

TEST(SpeechBatches, UtteranceOverTheBudgetFormsABatchOfOne) {
  std::vector<int64_t> frames = Frames(50, 2);
  frames[7] = 5000;
  frames[30] = 4000;
  SpeechBatchIterator it = Make(frames, 3000, 3);
  EXPECT_EQ(it.oversize(), 2);
  int alone = 0;
  for (const auto& b : it.EpochPlan(1)) {
    if (Padded(frames, b) > 3000) {
      ASSERT_EQ(b.size(), 1u);
      EXPECT_TRUE(b[0] == 7 || b[0] == 30);
      ++alone;
    }
  }
  EXPECT_EQ(alone, 2);
}

TEST(SpeechBatches, OrderFollowsTheSeedAndTheEpoch) {
  const std::vector<int64_t> frames = Frames(400, 4);
  SpeechBatchIterator a = Make(frames, 4000, 1), b = Make(frames, 4000, 1),
                      c = Make(frames, 4000, 2);
  EXPECT_EQ(a.EpochPlan(1), b.EpochPlan(1));
  EXPECT_NE(a.EpochPlan(1), c.EpochPlan(1));
  EXPECT_NE(a.EpochPlan(1), a.EpochPlan(2));
  // Valid/test: no shuffling, the same every epoch, batches in length order.
  SpeechBatchIterator fixed = Make(frames, 4000, 1, 0, 1, false);
  auto plan = fixed.EpochPlan(1);
  EXPECT_EQ(plan, fixed.EpochPlan(5));
  for (size_t i = 1; i < plan.size(); ++i)
    EXPECT_LE(frames[size_t(plan[i - 1].back())], frames[size_t(plan[i].front())]);
}

TEST(SpeechBatches, RanksShareEveryBatchDisjointly) {
  const std::vector<int64_t> frames = Frames(301, 5);
  const int world = 3;
  const int64_t budget = 5000;
  std::vector<SpeechBatchIterator> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(Make(frames, budget, 9, r, world));
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(ranks[size_t(r)].batches_per_epoch(), ranks[0].batches_per_epoch());
  std::vector<int64_t> seen;
  for (int r = 0; r < world; ++r) {
    for (const auto& b : ranks[size_t(r)].EpochPlan(2)) {
      ASSERT_FALSE(b.empty()) << "rank " << r;
      EXPECT_LE(Padded(frames, b), budget);
      seen.insert(seen.end(), b.begin(), b.end());
    }
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), frames.size());
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), frames.size());
}

TEST(SpeechBatches, PositionResumesExactly) {
  const std::vector<int64_t> frames = Frames(200, 6);
  SpeechBatchIterator it = Make(frames, 3000, 11);
  const int64_t n = it.batches_per_epoch();
  for (int64_t i = 0; i < n + 3; ++i) it.Next();
  DataPosition saved = it.position();
  EXPECT_EQ(saved.epoch, 2);
  EXPECT_EQ(saved.batch, 3);
  std::vector<std::vector<int64_t>> after;
  for (int i = 0; i < 5; ++i) after.push_back(it.Next());
  SpeechBatchIterator resumed = Make(frames, 3000, 11);
  ASSERT_TRUE(resumed.SetPosition(saved).ok());
  for (int i = 0; i < 5; ++i) {
    int64_t epoch = 0, index = 0;
    EXPECT_EQ(resumed.Next(&epoch, &index), after[size_t(i)]);
    EXPECT_EQ(epoch, 2);
    EXPECT_EQ(index, 3 + i);
  }
  EXPECT_FALSE(resumed.SetPosition({0, 0}).ok());
  EXPECT_FALSE(resumed.SetPosition({1, n + 1}).ok());
}

TEST(SpeechBatches, RejectsBadOptions) {
  const std::vector<int64_t> frames = Frames(4, 7);
  SpeechBatchingOptions o;
  o.max_frames = 0;
  EXPECT_FALSE(SpeechBatchIterator::Create(frames, TargetLengths(frames), o).ok());
  o = {};
  o.rank = 2;
  o.world_size = 2;
  EXPECT_FALSE(SpeechBatchIterator::Create(frames, TargetLengths(frames), o).ok());
  o = {};
  o.world_size = 5;
  EXPECT_FALSE(SpeechBatchIterator::Create(frames, TargetLengths(frames), o).ok());
  EXPECT_FALSE(SpeechBatchIterator::Create(frames, {1, 2}, {}).ok());
  EXPECT_FALSE(SpeechBatchIterator::Create({10, 0}, {1, 1}, {}).ok());
}

TEST(SpeechBatches, MakesPaddedNormalisedBatches) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = test::MakeCorpus(dir, 6);
  auto features = SpeechFeatures::Open(manifest, {}, {.cache_dir = cache.path()});
  ASSERT_TRUE(features.ok()) << features.status().ToString();
  const SpeechFeatures& f = **features;
  CharVocabulary vocab = CharVocabulary::Build(f.utterances());
  auto targets = EncodeTargets(manifest, f.utterances(), vocab);
  ASSERT_TRUE(targets.ok());

  SpeechBatch batch;
  const std::vector<int64_t> rows = {4, 1, 5};
  MakeSpeechBatch(f, targets->targets, rows, {}, 1, &batch);
  ASSERT_EQ(batch.batch, 3);
  EXPECT_EQ(batch.max_frames, f.frames(5));
  EXPECT_EQ(batch.mels, 80);
  ASSERT_EQ(batch.features.size(), size_t(3 * batch.max_frames * 80));
  int64_t frames = 0;
  for (int64_t r = 0; r < 3; ++r) {
    const int64_t i = rows[size_t(r)];
    const int64_t t = f.frames(i);
    EXPECT_EQ(batch.frames[size_t(r)], t);
    frames += t;
    std::vector<float> want(f.features(i), f.features(i) + t * 80);
    UtteranceCmvn(want.data(), t, 80);
    const float* got = batch.features.data() + r * batch.max_frames * 80;
    EXPECT_EQ(std::vector<float>(got, got + t * 80), want) << r;
    for (int64_t k = t * 80; k < batch.max_frames * 80; ++k) ASSERT_EQ(got[k], 0.0f);
    const auto& y = targets->targets[size_t(i)];
    EXPECT_EQ(batch.target_lengths[size_t(r)], int32_t(y.size()));
    for (int64_t u = 0; u < batch.max_target; ++u) {
      EXPECT_EQ(batch.targets[size_t(r * batch.max_target + u)],
                u < int64_t(y.size()) ? y[size_t(u)] : 0);
    }
  }
  EXPECT_EQ(batch.num_frames, frames);
  EXPECT_EQ(
      vocab.Decode(std::span<const int32_t>(batch.targets.data(), size_t(batch.target_lengths[0]))),
      "sentence number 4");

  // SpecAugment: seeded by (seed, epoch, utterance), so the same rows mask the same way in
  // any batch, and differently in another epoch.
  SpeechBatchOptions augment;
  augment.spec_augment = true;
  augment.seed = 5;
  SpeechBatch a, b, c;
  MakeSpeechBatch(f, targets->targets, {4}, augment, 3, &a);
  MakeSpeechBatch(f, targets->targets, {1, 4}, augment, 3, &b);
  MakeSpeechBatch(f, targets->targets, {4}, augment, 4, &c);
  const int64_t t4 = f.frames(4);
  EXPECT_EQ(std::vector<float>(a.features.begin(), a.features.begin() + t4 * 80),
            std::vector<float>(b.features.begin() + b.max_frames * 80,
                               b.features.begin() + b.max_frames * 80 + t4 * 80));
  EXPECT_NE(a.features, c.features);
  int zeros = 0;
  for (float v : a.features) zeros += v == 0.0f;
  EXPECT_GT(zeros, 0);
}

}  // namespace
}  // namespace sf::speech
