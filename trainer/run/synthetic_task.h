// A synthetic sequence-reversal task: source is a random token sequence, target its reverse.
//
// Used where no parallel text is configured or the data pipeline isn't built in: the engine
// tests (a tiny model must learn it) and the cluster trainer's stand-in data. Batches are a
// pure function of (seed, index), so a resumed run sees exactly the batches it would have.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/models/transformer.h"

namespace sf {

struct SyntheticBatch {
  std::vector<int32_t> src, tgt_in, tgt_out;
  int64_t batch = 0, src_len = 0, tgt_len = 0;
  int64_t target_tokens = 0;  // non-pad target tokens
  Seq2SeqBatch View() const { return {src.data(), tgt_in.data(), tgt_out.data(), batch, src_len, tgt_len}; }
};

class SyntheticReversalTask {
 public:
  // Tokens 4..vocab-1 (0..3 are fairseq's specials: bos, pad=1, eos=2, unk); lengths uniform in
  // [min_len, max_len]; `batch` sequences per micro-batch.
  SyntheticReversalTask(int64_t vocab, int64_t min_len, int64_t max_len, int64_t batch, uint64_t seed);

  int64_t vocab() const { return vocab_; }
  int64_t max_len() const { return max_len_; }
  // The index-th training batch (any index, any order).
  SyntheticBatch TrainBatch(int64_t index) const;
  // Fixed held-out batches (a different stream than training).
  SyntheticBatch ValidBatch(int64_t index) const;

 private:
  SyntheticBatch Make(uint64_t stream, int64_t index) const;
  int64_t vocab_, min_len_, max_len_, batch_;
  uint64_t seed_;
};

}  // namespace sf
