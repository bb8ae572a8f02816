// Token-budget batching with length bucketing, per-epoch seeded shuffling, rank sharding and
// a resumable reading position.
//
// How an epoch's batches are made (fairseq's `ordered_indices` + `batch_by_size`):
//  1. Order the pairs: a permutation seeded by (seed, epoch) (training) or the file order
//     (valid/test), then a stable sort by (target length, source length). Ties — pairs of equal
//     lengths — stay in the random order, so batch contents change from epoch to epoch while
//     padding stays small.
//  2. Cut the ordered list into *global* batches greedily. Each global batch is split across
//     the world_size ranks sentence by sentence (sentence j of the batch goes to rank
//     j % world_size), so a global batch may hold up to world_size * floor(max_tokens / L)
//     sentences, L being its longest max(src_len, tgt_len) including EOS. Each rank's share
//     therefore holds at most floor(max_tokens / L) sentences and its padded size
//     rows * max(Ts, Tt) never exceeds max_tokens. Every global batch has at least
//     world_size sentences (the last batch borrows from the one before when short), so every
//     rank gets a non-empty batch at every step and all ranks take the same number of steps.
//  3. Shuffle the order of the global batches with (seed, epoch) (training only).
// Pairs longer than max_tokens on their own can't be batched: they are skipped and counted
// (skipped_over_max_tokens(), logged once).
//
// Every rank builds the same global plan from the same inputs, so no communication is needed.
// Over one epoch the ranks' shards are disjoint and together cover every kept pair exactly
// once.
//
// Position: (epoch, batch) — the 1-based epoch and the index of the next batch of it (after an
// epoch's last batch the position is (epoch + 1, 0)). Saving
// position() and later calling SetPosition() with it resumes exactly (the plan of an epoch is
// a pure function of seed, epoch and the data).
//
// The plan and the position's arithmetic are batch_plan.h's, shared with the speech batches.
// Not thread-safe; one iterator per rank (per consumer thread).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "trainer/data/batch_plan.h"
#include "trainer/data/translation_data.h"

namespace sf::data {

// A padded micro-batch for one rank, in the engine's layout (row-major, rows right-padded
// with kPadId):
//   src      [B, Ts]  source tokens then EOS
//   tgt_in   [B, Tt]  EOS then target tokens (fairseq's shifted decoder input)
//   tgt_out  [B, Tt]  target tokens then EOS (what the decoder predicts)
// The Batch owns its buffers.
struct Batch {
  std::vector<int32_t> src, tgt_in, tgt_out;
  int64_t batch = 0, src_len = 0, tgt_len = 0;
  int64_t num_source_tokens = 0;  // non-pad entries of src (EOS included)
  int64_t num_target_tokens = 0;  // non-pad entries of tgt_out (EOS included): the loss's
                                  // normaliser
  std::vector<int64_t> indices;   // pair index in the dataset of each row
  int64_t epoch = 0;              // where this batch came from
  int64_t batch_index = 0;
};

// The engine's Seq2SeqBatch (trainer/models/transformer.h) without depending on the engine:
// any struct with fields src, tgt_in, tgt_out (const int32_t*) and batch, src_len, tgt_len.
// `b` must outlive the result.
//   Seq2SeqBatch sb = data::AsEngineBatch<Seq2SeqBatch>(batch);
template <typename EngineBatch>
EngineBatch AsEngineBatch(const Batch& b) {
  EngineBatch e{};
  e.src = b.src.data();
  e.tgt_in = b.tgt_in.data();
  e.tgt_out = b.tgt_out.data();
  e.batch = b.batch;
  e.src_len = b.src_len;
  e.tgt_len = b.tgt_len;
  return e;
}

// Fills `out` with the padded tensors for the given pairs.
void MakeBatch(const ParallelDataset& data, const std::vector<int64_t>& indices, Batch* out);

struct BatchingOptions {
  int64_t max_tokens = 4096;  // per rank per micro-batch: rows * max(Ts, Tt)
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool shuffle = true;  // false for valid/test: fixed order, same every epoch
};

class BatchIterator {
 public:
  // `data` must outlive the iterator. Errors: max_tokens < 1, rank outside [0, world_size),
  // or fewer batchable pairs than ranks.
  static Result<BatchIterator> Create(const ParallelDataset* data, const BatchingOptions& options);

  // Steps per epoch; the same for every rank and every epoch.
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t skipped_over_max_tokens() const { return skipped_; }

  // The next batch of this rank; at the end of an epoch continues with the next epoch.
  void Next(Batch* out);
  // The epoch's batch for this rank at `index`, without moving.
  void BatchAt(int64_t epoch, int64_t index, Batch* out);

  DataPosition position() const { return position_; }
  // kOutOfRange when epoch < 1 or batch is not in [0, batches_per_epoch()] (the end of an
  // epoch is stored as the start of the next).
  Status SetPosition(DataPosition position);

  // This rank's rows of every batch of `epoch`, in order (pair indices). For tests and tools.
  std::vector<std::vector<int64_t>> EpochPlan(int64_t epoch);

 private:
  BatchIterator(const ParallelDataset* data, const BatchingOptions& options);
  void PlanEpoch(int64_t epoch);  // fills global_ for `epoch` when not already there

  const ParallelDataset* data_;
  BatchingOptions options_;
  std::vector<int64_t> batchable_;  // pairs that fit max_tokens
  int64_t skipped_ = 0;
  int64_t batches_per_epoch_ = 0;
  int64_t planned_epoch_ = 0;
  std::vector<std::vector<int64_t>> global_;  // global batches of planned_epoch_
  DataPosition position_;
};

}  // namespace sf::data
