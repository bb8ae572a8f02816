#include "trainer/run/train_step.h"

#include <chrono>

namespace sf {
namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

TrainStep::TrainStep(Transformer<float>* model, std::unique_ptr<Optimizer> optimizer,
                     LossScaler scaler, double clip_norm)
    : model_(model), optimizer_(std::move(optimizer)), scaler_(std::move(scaler)),
      clip_norm_(clip_norm), params_(model->Parameters()) {
  (void)optimizer_->Prepare(params_);
}

Result<StepReport> TrainStep::Run(std::span<const Seq2SeqBatch> micro_batches, float lr) {
  StepReport r;
  r.loss_scale = scaler_.scale();
  model_->ZeroGrads();
  Context<float>& ctx = model_->context();
  for (const Seq2SeqBatch& mb : micro_batches) {
    const double t0 = Now();
    auto stats = model_->Forward(mb);
    if (!stats.ok()) return stats.status();
    const double t1 = Now();
    model_->Backward(r.loss_scale);
    r.forward_s += t1 - t0;
    r.backward_s += Now() - t1;
    r.loss += stats->loss;
    r.nll += stats->nll;
    r.tokens += stats->tokens;
    ++ctx.micro_batch;
  }
  const double t2 = Now();
  // The one point per step where gradients leave the process (allreduce goes here).
  if (allreduce_) {
    ParamStore<float>& store = model_->params();
    SF_RETURN_IF_ERROR(allreduce_(std::span<float>(store.grads(), store.total_numel()), &r.tokens));
  }
  const GradStats gs = ScanGrads(params_);
  SF_ASSIGN_OR_RETURN(LossScaler::Action action, scaler_.Update(gs));
  if (action == LossScaler::Action::kSkip || r.tokens == 0) {
    r.skipped = true;
    model_->ZeroGrads();
    r.optimizer_s = Now() - t2;
    return r;
  }
  const float unscale = 1.0f / (scaler_.scale_used_for_step() * static_cast<float>(r.tokens));
  r.grad_norm = UnscaleAndClipGrads(params_, unscale, clip_norm_, gs);
  optimizer_->Step(params_, lr);
  model_->WeightsUpdated();
  r.optimizer_s = Now() - t2;
  return r;
}

}  // namespace sf
