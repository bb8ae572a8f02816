// A speech run's validation transcripts (trainer/run/validation_transcripts.h): texts are cut at
// a character boundary within the bound and made valid UTF-8 without NUL; the group's values have
// the declared shape; and data parallel, each rank's decoded part of the sample reaches every
// rank through the one allreduce (ranks as threads over an in-process communicator).
#include "trainer/run/validation_transcripts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <mutex>
#include <thread>

namespace sf {
namespace {

TEST(TranscriptText, CutsAtACharacterBoundaryWithinTheBound) {
  EXPECT_EQ(TranscriptText("a man rides a horse", 500), "a man rides a horse");
  EXPECT_EQ(TranscriptText("abcdef", 4), "abcd");
  // "é" is two bytes: a cut that would split it stops before it.
  EXPECT_EQ(TranscriptText("caf\xc3\xa9s", 4), "caf");
  EXPECT_EQ(TranscriptText("caf\xc3\xa9s", 5), "caf\xc3\xa9");
  const std::string long_text(2000, 'x');
  EXPECT_EQ(TranscriptText(long_text).size(), kTranscriptMaxBytes);
}

TEST(TranscriptText, MakesValidTextWithoutNul) {
  EXPECT_EQ(TranscriptText(std::string("a\0b", 3), 10), "ab");
  EXPECT_EQ(TranscriptText("a\xff"
                           "b",
                           10),
            "a\xef\xbf\xbd"
            "b");
}

TEST(ValidationTranscriptsValue, HasTheDeclaredShape) {
  Value v = ValidationTranscriptsValue(
      {{"utt-1", "A man.", "a men", 1, 2}, {"utt-2", "Dogs run", "", 2, 2}});
  ASSERT_TRUE(v.is_map());
  const Value* list = v.Find("utterances");
  ASSERT_TRUE(list && list->is_list());
  ASSERT_EQ(list->as_list().size(), 2u);
  const Value& first = list->as_list()[0];
  EXPECT_EQ(first.Find("id")->as_string(), "utt-1");
  EXPECT_EQ(first.Find("reference")->as_string(), "A man.");
  EXPECT_EQ(first.Find("hypothesis")->as_string(), "a men");
  EXPECT_EQ(first.Find("word_errors")->as_int(), 1);
  EXPECT_EQ(first.Find("words")->as_int(), 2);
  EXPECT_EQ(list->as_list()[1].Find("hypothesis")->as_string(), "");
  EXPECT_EQ(
      v.ToJson(),
      R"({"utterances":[{"hypothesis":"a men","id":"utt-1","reference":"A man.","word_errors":1,"words":2},)"
      R"({"hypothesis":"","id":"utt-2","reference":"Dogs run","word_errors":2,"words":2}]})");
}

// W ranks as threads: Allreduce (kI32, kMax or kSum) meets at a barrier and every rank reduces
// every rank's buffer. Only what GatherSampleHypotheses uses is real.
class ThreadWorld {
 public:
  explicit ThreadWorld(int world)
      : world_(world), buffers_(static_cast<size_t>(world)), meet_(world) {}

  class Rank final : public dist::Communicator {
   public:
    Rank(ThreadWorld* w, int rank) : w_(w), rank_(rank) {}
    int rank() const override { return rank_; }
    int world_size() const override { return w_->world_; }
    std::string backend_name() const override { return "threads"; }
    std::unique_ptr<dist::Work> AllreduceAsync(void* data, int64_t count, DType dtype,
                                               dist::ReduceOp op, DType) override {
      EXPECT_EQ(dtype, DType::kI32);
      auto* p = static_cast<int32_t*>(data);
      w_->buffers_[static_cast<size_t>(rank_)].assign(p, p + count);
      w_->meet_.arrive_and_wait();
      for (int64_t i = 0; i < count; ++i) {
        int32_t r = w_->buffers_[0][static_cast<size_t>(i)];
        for (int k = 1; k < w_->world_; ++k) {
          const int32_t x = w_->buffers_[static_cast<size_t>(k)][static_cast<size_t>(i)];
          r = op == dist::ReduceOp::kMax ? std::max(r, x) : r + x;
        }
        p[i] = r;
      }
      w_->meet_.arrive_and_wait();  // nobody overwrites its buffer while another still reads it
      return std::make_unique<Done>();
    }
    Status Broadcast(void*, int64_t, int) override { return Internal("not used here"); }
    Status Barrier() override { return Internal("not used here"); }
    bool broken() const override { return false; }
    std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(0); }
    dist::AllreduceStats stats() const override { return {}; }

   private:
    struct Done final : dist::Work {
      Status Wait() override { return Status::Ok(); }
      double busy_seconds() const override { return 0; }
    };
    ThreadWorld* w_;
    int rank_;
  };

 private:
  int world_;
  std::vector<std::vector<int32_t>> buffers_;
  std::barrier<> meet_;
};

TEST(GatherSampleHypotheses, EveryRankGetsEachUtteranceFromTheRankThatDecodedIt) {
  // Utterances 0..4 over 2 ranks as sharded batches would split them; utterance 3's hypothesis is
  // empty (a model early in training) and must stay empty, not vanish or take another's text.
  const std::vector<std::string> want = {"a man rides a horse", "zwei hunde", "", "caf\xc3\xa9",
                                         std::string(500, 'q')};
  const std::vector<int> decoder = {1, 0, 1, 0, 1};
  ThreadWorld world(2);
  std::vector<std::vector<std::string>> got(2);
  std::vector<Status> status(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ThreadWorld::Rank comm(&world, r);
      std::vector<bool> decoded(want.size());
      std::vector<std::string> hyps(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        decoded[i] = decoder[i] == r;
        if (decoded[i]) hyps[i] = want[i];
      }
      status[static_cast<size_t>(r)] = GatherSampleHypotheses(comm, decoded, &hyps);
      got[static_cast<size_t>(r)] = hyps;
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].ToString();
    EXPECT_EQ(got[static_cast<size_t>(r)], want) << "rank " << r;
  }
}

}  // namespace
}  // namespace sf
