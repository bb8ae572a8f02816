// TrainStep: one optimizer step over N micro-batches (aggregation frequency N).
//
//   for each micro-batch: forward, backward of (loss_scale * summed loss)  -> grads accumulate
//   AllreduceHook(grads, tokens)            (once per step; identity in a single process)
//   stats = ScanGrads; LossScaler::Update   (skip the step on inf/NaN: grads zeroed, no LR step)
//   grads *= 1 / (loss_scale * total non-pad target tokens), clipped to clip_norm (one pass)
//   optimizer.Step(lr); model.WeightsUpdated()
//
// So N micro-batches of B sequences give the same update as one batch of N*B (fairseq
// semantics: the loss is a sum over tokens, normalised once per step by the token count).
// Not thread-safe; owns nothing but its optimizer and loss scaler.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "common/status.h"
#include "trainer/models/transformer.h"
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
};

class TrainStep {
 public:
  // Sums gradients across ranks in place and the token count; called once per step. The
  // default (single process) does nothing.
  using AllreduceHook = std::function<Status(std::span<float> grads, int64_t* tokens)>;

  TrainStep(Transformer<float>* model, std::unique_ptr<Optimizer> optimizer, LossScaler scaler,
            double clip_norm);

  void set_allreduce_hook(AllreduceHook hook) { allreduce_ = std::move(hook); }
  Optimizer& optimizer() { return *optimizer_; }
  const LossScaler& loss_scaler() const { return scaler_; }

  // Errors: a micro-batch the model rejects, the loss scale falling below its minimum, or the
  // allreduce hook failing.
  Result<StepReport> Run(std::span<const Seq2SeqBatch> micro_batches, float lr);

 private:
  Transformer<float>* model_;
  std::unique_ptr<Optimizer> optimizer_;
  LossScaler scaler_;
  double clip_norm_;
  std::vector<ParamRef> params_;
  AllreduceHook allreduce_;
};

}  // namespace sf
