#include "trainer/run/synthetic_task.h"

#include <algorithm>
#include <random>

namespace sf {

SyntheticReversalTask::SyntheticReversalTask(int64_t vocab, int64_t min_len, int64_t max_len, int64_t batch,
                                             uint64_t seed)
    : vocab_(vocab), min_len_(min_len), max_len_(max_len), batch_(batch), seed_(seed) {}

SyntheticBatch SyntheticReversalTask::Make(uint64_t stream, int64_t index) const {
  // One generator per (seed, stream, index): batches don't depend on what came before.
  std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32), static_cast<uint32_t>(stream),
                    static_cast<uint32_t>(index), static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32)};
  std::mt19937 rng(seq);
  std::uniform_int_distribution<int64_t> len(min_len_, max_len_);
  std::uniform_int_distribution<int32_t> tok(4, static_cast<int32_t>(vocab_ - 1));
  std::vector<std::vector<int32_t>> seqs(batch_);
  int64_t longest = 0;
  for (auto& s : seqs) {
    s.resize(len(rng));
    for (auto& t : s) t = tok(rng);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
  }
  SyntheticBatch b;
  b.batch = batch_;
  b.src_len = longest + 1;  // + EOS
  b.tgt_len = longest + 1;
  b.src.assign(b.batch * b.src_len, 1);
  b.tgt_in.assign(b.batch * b.tgt_len, 1);
  b.tgt_out.assign(b.batch * b.tgt_len, 1);
  for (int64_t i = 0; i < batch_; ++i) {
    const auto& s = seqs[i];
    int64_t n = static_cast<int64_t>(s.size());
    for (int64_t t = 0; t < n; ++t) b.src[i * b.src_len + t] = s[t];
    b.src[i * b.src_len + n] = 2;
    // target = reverse(source) + EOS; decoder input = EOS + reverse(source) (fairseq's shift)
    b.tgt_in[i * b.tgt_len] = 2;
    for (int64_t t = 0; t < n; ++t) {
      b.tgt_out[i * b.tgt_len + t] = s[n - 1 - t];
      b.tgt_in[i * b.tgt_len + t + 1] = s[n - 1 - t];
    }
    b.tgt_out[i * b.tgt_len + n] = 2;
    b.target_tokens += n + 1;
  }
  return b;
}

SyntheticBatch SyntheticReversalTask::TrainBatch(int64_t index) const { return Make(1, index); }
SyntheticBatch SyntheticReversalTask::ValidBatch(int64_t index) const { return Make(2, index); }

}  // namespace sf
