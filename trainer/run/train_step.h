// TrainStep: one optimizer step over N micro-batches (aggregation frequency N) of any
// TrainableModel (trainable_model.h); the micro-batches' forward is the caller's callback (a
// Seq2SeqModel's token batches have a Run overload of their own).
//
//   for each micro-batch: forward, backward of (loss_scale * summed loss)  -> grads accumulate
//   data parallel (a GradReducer is set): during the LAST micro-batch's backward, gradient
//     buckets are summed across ranks as they become final; then loss, nll and the target
//     token count are summed too (once per step, never on the first N-1 micro-batches)
//   stats = ScanGrads; LossScaler::Update   (skip the step on inf/NaN: grads zeroed, no LR step;
//                                            ranks agree on the overflow flag)
//   grads *= 1 / (loss_scale * total non-pad target tokens), clipped to clip_norm (one pass)
//   optimizer.Step(lr); model.WeightsUpdated()
//
// On a device backend (a GPU: Backend::host_accessible() false) every pass above runs there:
// the optimizer keeps its state on the device (Optimizer::PlaceOn), the overflow check and norm
// are one Backend::SumSquares and unscale+clip one Backend::Scale. Per step, the host reads back
// only the loss sums (one per micro-batch) and the gradient's sum of squares.
//
// So N micro-batches of B sequences give the same update as one batch of N*B (fairseq
// semantics: the loss is a sum over target tokens — a speech model's labels — normalised once
// per step by their count), and W
// ranks on shards of a global batch give the update of one rank on the whole global batch.
// Not thread-safe; owns nothing but its optimizer and loss scaler.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "common/status.h"
#include "trainer/distributed/grad_reducer.h"
#include "trainer/models/seq2seq_model.h"
#include "trainer/optim/grad_stats.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/optimizer.h"

namespace sf {

struct StepReport {
  double loss = 0;      // label-smoothed loss summed over the step's target tokens
  double nll = 0;       // plain NLL, summed
  int64_t tokens = 0;   // non-pad target tokens of all micro-batches
  bool skipped = false;  // inf/NaN gradients: no update
  float grad_norm = 0;   // of the normalised gradient, before clipping
  float loss_scale = 1;  // the scale this step's loss was multiplied by
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  dist::SyncStats sync;  // data parallel: what the gradient allreduce cost (zeros otherwise)
};

class TrainStep {
 public:
  TrainStep(TrainableModel<float>* model, std::unique_ptr<Optimizer> optimizer, LossScaler scaler,
            double clip_norm);

  // Data parallel: sum gradients and the step's counts across ranks through `reducer` (must
  // outlive the step; nullptr: a single process). Installs the model's grads-final hook.
  void set_grad_reducer(dist::GradReducer* reducer);
  // Called once per step with the (synchronised) gradients before they are checked; tests
  // inject overflows here.
  void set_grads_hook(std::function<void(std::span<float>)> hook) { grads_hook_ = std::move(hook); }
  // Called with the name of the part of the step that starts ("zero gradients", "forward",
  // "backward", "optimizer"; "" when the step ends): a profiler attributes time to it.
  void set_phase_hook(std::function<void(const char*)> hook) { phase_hook_ = std::move(hook); }
  Optimizer& optimizer() { return *optimizer_; }
  const LossScaler& loss_scaler() const { return scaler_; }

  // The forward of micro-batch i (0 <= i < N, in order): its summed loss, plain NLL and target
  // count, the model's state left for Backward.
  using MicroBatchForward = std::function<Result<CrossEntropyStats>(size_t i)>;

  // Errors: a micro-batch the model rejects, the loss scale falling below its minimum, or a
  // failed or timed-out collective.
  Result<StepReport> Run(size_t micro_batches, const MicroBatchForward& forward, float lr);
  // A Seq2SeqModel's token micro-batches (kFailedPrecondition for another kind of model).
  Result<StepReport> Run(std::span<const Seq2SeqBatch> micro_batches, float lr);

 private:
  TrainableModel<float>* model_;
  Seq2SeqModel<float>* seq2seq_;  // model_ when it reads token batches, else null
  std::unique_ptr<Optimizer> optimizer_;
  LossScaler scaler_;
  double clip_norm_;
  std::vector<ParamRef> params_;
  dist::GradReducer* reducer_ = nullptr;
  bool on_device_ = false;
  std::function<void(std::span<float>)> grads_hook_;
  std::function<void(const char*)> phase_hook_;
  void Phase(const char* name) {
    if (phase_hook_) phase_hook_(name);
  }
};

}  // namespace sf
