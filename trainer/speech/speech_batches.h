// Duration-bucketed speech batches by a frame budget, with per-epoch seeded shuffling, rank
// sharding and a resumable reading position: the speech counterpart of trainer/data/batching.h,
// with the same conventions.
//
// How an epoch's batches are made (fairseq's ordered_indices + batch_by_size, by frames):
//  1. Order the utterances: a permutation seeded by (seed, epoch) (training) or manifest order
//     (valid/test), then a stable sort by (frames, target length). Ties stay in the random
//     order, so batch contents change from epoch to epoch while padding stays small.
//  2. Cut the ordered list into *global* batches greedily. A global batch is split across the
//     world_size ranks utterance by utterance (utterance j of the batch goes to rank
//     j % world_size), so it holds up to world_size · max(1, floor(max_frames / L)) utterances,
//     L being its longest utterance's frames. Each rank's share therefore holds at most
//     floor(max_frames / L) utterances and its padded size rows · L never exceeds max_frames —
//     except an utterance longer than max_frames on its own: it is kept (a trial never skips
//     data) and makes a share of one row (counted: oversize()). Every global batch has at least
//     world_size utterances (the last borrows from the one before when short), so every rank
//     gets a non-empty batch at every step and all ranks take the same number of steps.
//  3. Shuffle the order of the global batches with (seed, epoch) (training only).
// The budget counts feature frames only (the model's input); targets are far shorter.
//
// Every rank builds the same plan from the same inputs: no communication. Over one epoch the
// ranks' shards are disjoint and together cover every utterance exactly once.
//
// Position: (epoch, batch), as data::DataPosition — the 1-based epoch and the index of the next
// batch of it. The plan of an epoch is a pure function of (seed, epoch, lengths), so saving
// position() and calling SetPosition() later resumes exactly.
//
// MakeSpeechBatch assembles the padded tensors of one share: features copied from the cache,
// normalised per utterance (UtteranceCmvn), optionally masked (SpecAugment, seeded per
// utterance and epoch with SpecAugmentSeed), and the character targets.
//
// Not thread-safe; one iterator per rank (per consumer thread). MakeSpeechBatch is a pure
// function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "trainer/data/batching.h"
#include "trainer/speech/feature_cache.h"
#include "trainer/speech/features.h"

namespace sf::speech {

struct SpeechBatchingOptions {
  int64_t max_frames = 20000;  // per rank per micro-batch: rows · longest frames
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool shuffle = true;  // false for valid/test: manifest order sorted by length, same every epoch
};

using data::DataPosition;

class SpeechBatchIterator {
 public:
  // frames[i] ≥ 1 and target_lengths[i] ≥ 0 for each utterance (equal sizes). Errors
  // (kInvalidArgument): max_frames < 1, rank outside [0, world_size), sizes that differ, a
  // non-positive frame count, or fewer utterances than ranks.
  static Result<SpeechBatchIterator> Create(std::vector<int64_t> frames,
                                            std::vector<int64_t> target_lengths,
                                            const SpeechBatchingOptions& options);

  // Steps per epoch; the same for every rank and every epoch.
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Utterances longer than max_frames (each alone in its rank's share).
  int64_t oversize() const { return oversize_; }

  // This rank's utterance indices of the next batch; at the end of an epoch continues with the
  // next epoch. `epoch` and `index` (optional) get where the batch came from.
  std::vector<int64_t> Next(int64_t* epoch = nullptr, int64_t* index = nullptr);
  // This rank's utterances of the epoch's batch `index` in [0, batches_per_epoch()), without
  // moving.
  std::vector<int64_t> BatchAt(int64_t epoch, int64_t index);
  // This rank's rows of every batch of `epoch`, in order. For tests and tools.
  std::vector<std::vector<int64_t>> EpochPlan(int64_t epoch);

  DataPosition position() const { return position_; }
  // kOutOfRange when epoch < 1 or batch is not in [0, batches_per_epoch()].
  Status SetPosition(DataPosition position);

 private:
  SpeechBatchIterator() = default;
  void PlanEpoch(int64_t epoch);
  std::vector<int64_t> Share(const std::vector<int64_t>& global) const;

  std::vector<int64_t> frames_, target_lengths_;
  SpeechBatchingOptions options_;
  int64_t oversize_ = 0;
  int64_t batches_per_epoch_ = 0;
  int64_t planned_epoch_ = 0;
  std::vector<std::vector<int64_t>> global_;
  DataPosition position_;
};

// A padded micro-batch in the layout the speech model reads (row-major):
//   features        [batch, max_frames, mels]  rows t ≥ frames[b] are 0
//   frames          [batch]                    valid frames of each row
//   targets         [batch, max_target]        labels (char_vocab.h ids, never blank),
//                                              right-padded with 0 (the blank id)
//   target_lengths  [batch]
// The SpeechBatch owns its buffers; reusing one object across steps reuses its memory.
struct SpeechBatch {
  std::vector<float> features;
  std::vector<int32_t> frames, targets, target_lengths;
  int64_t batch = 0, max_frames = 0, mels = 0, max_target = 0;
  int64_t num_frames = 0;         // Σ frames
  int64_t num_target_tokens = 0;  // Σ target_lengths
  std::vector<int64_t> indices;   // utterance index of each row
  int64_t epoch = 0;
};

struct SpeechBatchOptions {
  bool utterance_cmvn = true;  // normalise each utterance (features.h) before masking
  bool spec_augment = false;   // training only
  SpecAugmentOptions spec;
  uint64_t seed = 0;  // SpecAugment's run seed (SpecAugmentSeed(seed, epoch, index))
};

// Fills `out` with utterances `indices` of `features` and their `targets` (targets[i] is
// utterance i's label sequence). `epoch` seeds SpecAugment.
void MakeSpeechBatch(const SpeechFeatures& features,
                     const std::vector<std::vector<int32_t>>& targets,
                     const std::vector<int64_t>& indices, const SpeechBatchOptions& options,
                     int64_t epoch, SpeechBatch* out);

}  // namespace sf::speech
