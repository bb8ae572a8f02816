#include "trainer/data/batching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/trainer/data/tiny_data.h"

namespace sf::data {
namespace {

using test::TinyData;

BatchIterator MakeIterator(const ParallelDataset& data, int64_t max_tokens, uint64_t seed,
                           int rank = 0, int world = 1, bool shuffle = true) {
  BatchingOptions o;
  o.max_tokens = max_tokens;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world;
  o.shuffle = shuffle;
  auto it = BatchIterator::Create(&data, o);
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  return std::move(it).value();
}

// Checks the padded layout of one batch against the dataset.
void ExpectWellFormed(const ParallelDataset& data, const Batch& b, int64_t max_tokens) {
  ASSERT_GT(b.batch, 0);
  EXPECT_LE(b.batch * std::max(b.src_len, b.tgt_len), max_tokens);
  ASSERT_EQ(b.src.size(), size_t(b.batch * b.src_len));
  ASSERT_EQ(b.tgt_in.size(), size_t(b.batch * b.tgt_len));
  ASSERT_EQ(b.tgt_out.size(), size_t(b.batch * b.tgt_len));
  int64_t target_tokens = 0;
  for (int64_t r = 0; r < b.batch; ++r) {
    auto s = data.src(b.indices[r]);
    auto t = data.tgt(b.indices[r]);
    for (int64_t j = 0; j < b.src_len; ++j) {
      int32_t want = j < int64_t(s.size()) ? s[j] : j == int64_t(s.size()) ? kEosId : kPadId;
      ASSERT_EQ(b.src[r * b.src_len + j], want) << "src row " << r << " col " << j;
    }
    for (int64_t j = 0; j < b.tgt_len; ++j) {
      int32_t in = j == 0 ? kEosId : j <= int64_t(t.size()) ? t[j - 1] : kPadId;
      int32_t out = j < int64_t(t.size()) ? t[j] : j == int64_t(t.size()) ? kEosId : kPadId;
      ASSERT_EQ(b.tgt_in[r * b.tgt_len + j], in) << "tgt_in row " << r << " col " << j;
      ASSERT_EQ(b.tgt_out[r * b.tgt_len + j], out) << "tgt_out row " << r << " col " << j;
    }
    target_tokens += int64_t(t.size()) + 1;
  }
  EXPECT_EQ(b.num_target_tokens, target_tokens);
}

TEST(BatchIterator, EveryPairOncePerEpochWithinTheTokenBudget) {
  const ParallelDataset& train = TinyData().train();
  const int64_t max_tokens = 1024;
  BatchIterator it = MakeIterator(train, max_tokens, 7);
  EXPECT_EQ(it.skipped_over_max_tokens(), 0);
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {
    std::vector<int64_t> seen;
    int64_t padded = 0, real = 0;
    for (int64_t i = 0; i < it.batches_per_epoch(); ++i) {
      EXPECT_EQ(it.position(), (DataPosition{epoch, i}));
      Batch b;
      it.Next(&b);
      EXPECT_EQ(b.epoch, epoch);
      ExpectWellFormed(train, b, max_tokens);
      seen.insert(seen.end(), b.indices.begin(), b.indices.end());
      padded += b.batch * b.tgt_len;
      real += b.num_target_tokens;
    }
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(int64_t(seen.size()), train.size()) << "epoch " << epoch;
    for (int64_t i = 0; i < train.size(); ++i) ASSERT_EQ(seen[size_t(i)], i);
    // Length bucketing keeps target padding small.
    EXPECT_LT(double(padded - real) / double(padded), 0.05) << "epoch " << epoch;
  }
}

TEST(BatchIterator, TwoRanksGetDisjointShardsCoveringTheEpoch) {
  const ParallelDataset& train = TinyData().train();
  const int64_t max_tokens = 600;
  BatchIterator r0 = MakeIterator(train, max_tokens, 11, 0, 2);
  BatchIterator r1 = MakeIterator(train, max_tokens, 11, 1, 2);
  ASSERT_EQ(r0.batches_per_epoch(), r1.batches_per_epoch());
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {
    std::set<int64_t> a, b;
    for (int64_t i = 0; i < r0.batches_per_epoch(); ++i) {
      Batch x, y;
      r0.Next(&x);
      r1.Next(&y);
      ExpectWellFormed(train, x, max_tokens);
      ExpectWellFormed(train, y, max_tokens);
      a.insert(x.indices.begin(), x.indices.end());
      b.insert(y.indices.begin(), y.indices.end());
    }
    for (int64_t i : a) EXPECT_EQ(b.count(i), 0u) << "pair " << i << " on both ranks";
    EXPECT_EQ(int64_t(a.size() + b.size()), train.size());
  }
}

TEST(BatchIterator, ShardsStayNonEmptyWithManyRanks) {
  const ParallelDataset& train = TinyData().train();
  for (int world : {3, 8}) {
    std::vector<BatchIterator> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back(MakeIterator(train, 700, 5, r, world));
    int64_t covered = 0;
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(ranks[size_t(r)].batches_per_epoch(), ranks[0].batches_per_epoch());
      for (const auto& rows : ranks[size_t(r)].EpochPlan(1)) {
        EXPECT_FALSE(rows.empty()) << "world " << world << " rank " << r;
        covered += int64_t(rows.size());
      }
    }
    EXPECT_EQ(covered, train.size());
  }
}

TEST(BatchIterator, EpochsShuffleDeterministicallyBySeed) {
  const ParallelDataset& train = TinyData().train();
  BatchIterator a = MakeIterator(train, 1024, 3);
  BatchIterator b = MakeIterator(train, 1024, 3);
  BatchIterator c = MakeIterator(train, 1024, 4);
  auto a1 = a.EpochPlan(1), a2 = a.EpochPlan(2);
  EXPECT_NE(a1, a2);
  EXPECT_EQ(b.EpochPlan(1), a1);
  EXPECT_EQ(b.EpochPlan(2), a2);
  EXPECT_NE(c.EpochPlan(1), a1);
  EXPECT_EQ(a.batches_per_epoch(), int64_t(a2.size()));
}

TEST(BatchIterator, SavedPositionResumesExactly) {
  const ParallelDataset& train = TinyData().train();
  BatchIterator straight = MakeIterator(train, 800, 21);
  const int64_t per_epoch = straight.batches_per_epoch();
  const int64_t stop = per_epoch - 3;  // resume a few batches before an epoch boundary
  std::vector<Batch> expected;
  DataPosition saved;
  for (int64_t i = 0; i < per_epoch + 5; ++i) {
    if (i == stop) saved = straight.position();
    Batch b;
    straight.Next(&b);
    if (i >= stop) expected.push_back(std::move(b));
  }
  EXPECT_EQ(saved, (DataPosition{1, stop}));
  BatchIterator resumed = MakeIterator(train, 800, 21);
  ASSERT_TRUE(resumed.SetPosition(saved).ok());
  for (size_t i = 0; i < expected.size(); ++i) {
    Batch b;
    resumed.Next(&b);
    EXPECT_EQ(b.indices, expected[i].indices) << "batch " << i;
    EXPECT_EQ(b.src, expected[i].src) << "batch " << i;
    EXPECT_EQ(b.tgt_in, expected[i].tgt_in) << "batch " << i;
  }
  EXPECT_EQ(resumed.position(), straight.position());
  EXPECT_EQ(resumed.position(), (DataPosition{2, 5}));
  EXPECT_EQ(resumed.SetPosition({0, 0}).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(resumed.SetPosition({1, per_epoch + 1}).code(), StatusCode::kOutOfRange);
}

TEST(BatchIterator, ValidationOrderIsFixed) {
  const ParallelDataset* valid = TinyData().valid();
  ASSERT_NE(valid, nullptr);
  BatchIterator it = MakeIterator(*valid, 1024, 99, 0, 1, /*shuffle=*/false);
  BatchIterator other_seed = MakeIterator(*valid, 1024, 5, 0, 1, false);
  EXPECT_EQ(it.EpochPlan(1), it.EpochPlan(2));
  EXPECT_EQ(it.EpochPlan(1), other_seed.EpochPlan(1));
  std::vector<int64_t> seen;
  for (const auto& rows : it.EpochPlan(1)) seen.insert(seen.end(), rows.begin(), rows.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(int64_t(seen.size()), valid->size());
}

TEST(BatchIterator, PairsOverTheBudgetAreSkippedAndCounted) {
  const ParallelDataset& train = TinyData().train();
  const int64_t max_tokens = 20;
  int64_t too_long = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    too_long += std::max(train.src_length(i), train.tgt_length(i)) > max_tokens;
  }
  ASSERT_GT(too_long, 0);
  BatchIterator it = MakeIterator(train, max_tokens, 1);
  EXPECT_EQ(it.skipped_over_max_tokens(), too_long);
  int64_t covered = 0;
  for (int64_t i = 0; i < it.batches_per_epoch(); ++i) {
    Batch b;
    it.Next(&b);
    ExpectWellFormed(train, b, max_tokens);
    covered += b.batch;
  }
  EXPECT_EQ(covered, train.size() - too_long);
}

TEST(BatchIterator, RejectsBadOptions) {
  const ParallelDataset& train = TinyData().train();
  BatchingOptions o;
  o.max_tokens = 0;
  EXPECT_EQ(BatchIterator::Create(&train, o).status().code(), StatusCode::kInvalidArgument);
  o.max_tokens = 1000;
  o.rank = 2;
  o.world_size = 2;
  EXPECT_EQ(BatchIterator::Create(&train, o).status().code(), StatusCode::kInvalidArgument);
}

// Same fields as the engine's Seq2SeqBatch (trainer/models/transformer.h).
struct EngineLikeBatch {
  const int32_t* src = nullptr;
  const int32_t* tgt_in = nullptr;
  const int32_t* tgt_out = nullptr;
  int64_t batch = 0, src_len = 0, tgt_len = 0;
};

TEST(Batch, ViewsAsTheEngineBatch) {
  BatchIterator it = MakeIterator(TinyData().train(), 512, 2);
  Batch b;
  it.Next(&b);
  auto e = AsEngineBatch<EngineLikeBatch>(b);
  EXPECT_EQ(e.src, b.src.data());
  EXPECT_EQ(e.tgt_in, b.tgt_in.data());
  EXPECT_EQ(e.tgt_out, b.tgt_out.data());
  EXPECT_EQ(e.batch, b.batch);
  EXPECT_EQ(e.src_len, b.src_len);
  EXPECT_EQ(e.tgt_len, b.tgt_len);
}

}  // namespace
}  // namespace sf::data
