// What the training loop, checkpoints, data parallelism, the bench and the search need of a
// sequence-to-sequence model, whatever its architecture family (Transformer, LSTM, fconv, the
// language model): one interface, so every entry point (sf-trainer train / translate / bench,
// cluster trials, sf-serve) runs any family the same way. Model construction from a
// configuration is model_spec.h's; the beam search over a model is generator.h's.
//
// A TrainableModel (trainable_model.h: parameters, initialisation, backward, the grads-final
// hook, and their contract) that reads token batches: Forward(batch) computes the
// label-smoothed cross-entropy summed over non-pad targets.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "trainer/kernels/backend.h"
#include "trainer/models/trainable_model.h"

namespace sf {

// One micro-batch, in host memory (Forward stages it into the backend's memory). Rows are
// right-padded with pad_id; tgt_in is the target shifted right (starting with BOS / EOS as
// fairseq does), tgt_out the tokens to predict.
struct Seq2SeqBatch {
  const int32_t* src = nullptr;      // [B, Ts]
  const int32_t* tgt_in = nullptr;   // [B, Tt]
  const int32_t* tgt_out = nullptr;  // [B, Tt]
  int64_t batch = 0, src_len = 0, tgt_len = 0;
};

// The sizes the data, the search and the checkpoints need of any model.
struct ModelShape {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int32_t pad_id = 1;
  int64_t max_positions = 1024;  // longest sequence (EOS included) the model takes, + 1
};

template <typename T>
class Seq2SeqModel : public TrainableModel<T> {
 public:
  virtual ModelShape shape() const = 0;
  // FLOPs of one training step (forward + backward) for a batch of this shape; for GFLOP/s.
  virtual double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const = 0;

  // The loss summed over the batch's non-pad targets. Errors: tokens out of range, sequences
  // the model cannot take; nothing is left half-done for Backward.
  virtual Result<CrossEntropyStats> Forward(const Seq2SeqBatch& batch) = 0;
};

}  // namespace sf
