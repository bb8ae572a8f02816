#include "trainer/run/train_step.h"

#include <chrono>

#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf {
namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

TrainStep::TrainStep(TrainableModel<float>* model, std::unique_ptr<Optimizer> optimizer,
                     LossScaler scaler, double clip_norm)
    : model_(model), seq2seq_(dynamic_cast<Seq2SeqModel<float>*>(model)), optimizer_(std::move(optimizer)),
      scaler_(std::move(scaler)),
      clip_norm_(clip_norm), params_(model->Parameters()) {
  Backend<float>& backend = model_->context().backend();
  on_device_ = !backend.host_accessible();
  if (on_device_) optimizer_->PlaceOn(&backend);
  (void)optimizer_->Prepare(params_);
}

void TrainStep::set_grad_reducer(dist::GradReducer* reducer) {
  reducer_ = reducer;
  if (reducer_) {
    model_->set_grads_final_hook([reducer](int64_t offset) { reducer->GradsFinal(offset); });
  } else {
    model_->set_grads_final_hook(nullptr);
  }
}

Result<StepReport> TrainStep::Run(std::span<const Seq2SeqBatch> micro_batches, float lr) {
  if (!seq2seq_) return FailedPrecondition("TrainStep: token batches for a model that does not read them");
  return Run(
      micro_batches.size(), [&](size_t i) { return seq2seq_->Forward(micro_batches[i]); }, lr);
}

Result<StepReport> TrainStep::Run(size_t micro_batches, const MicroBatchForward& forward, float lr) {
  StepReport r;
  r.loss_scale = scaler_.scale();
  // The phase hook hears "" however the step ends.
  struct EndPhases {
    TrainStep* step;
    ~EndPhases() { step->Phase(""); }
  } end_phases{this};
  Phase("zero gradients");
  model_->ZeroGrads();
  Context<float>& ctx = model_->context();
  for (size_t i = 0; i < micro_batches; ++i) {
    Phase("forward");
    const double t0 = Now();
    auto stats = forward(i);
    if (!stats.ok()) return stats.status();
    Phase("backward");
    const double t1 = Now();
    // Only the last micro-batch's backward finishes gradients: reduce buckets from there on.
    if (reducer_ && i + 1 == micro_batches) reducer_->Arm();
    model_->Backward(r.loss_scale);
    r.forward_s += t1 - t0;
    r.backward_s += Now() - t1;
    r.loss += stats->loss;
    r.nll += stats->nll;
    r.tokens += stats->tokens;
    ++ctx.micro_batch;
  }
  Phase("optimizer");
  const double t2 = Now();
  ParamStore<float>& store = model_->params();
  if (reducer_) {
    // Wait for the buckets still in flight; sum the step's counts (exact in double).
    double scalars[3] = {r.loss, r.nll, static_cast<double>(r.tokens)};
    SF_RETURN_IF_ERROR(reducer_->Finish(scalars));
    r.loss = scalars[0];
    r.nll = scalars[1];
    r.tokens = static_cast<int64_t>(scalars[2]);
    r.sync = reducer_->last_step();
  }
  Backend<float>& be = model_->context().backend();
  if (grads_hook_) {
    if (on_device_) {
      std::vector<float> host(static_cast<size_t>(store.total_numel()));
      store.CopyGradsToHost(host.data());
      grads_hook_(std::span<float>(host));
      store.CopyGradsFromHost(host.data());
    } else {
      grads_hook_(std::span<float>(store.grads(), store.total_numel()));
    }
  }
  Phase("gradient scan");
  GradStats gs;
  if (on_device_) {
    // One pass on the device; its two results are the step's only other device->host copy.
    const VectorStats v = be.SumSquares(store.grads(), store.total_numel());
    gs.sum_squares = v.sum_squares;
    gs.non_finite = v.non_finite;
  } else {
    gs = ScanGrads(params_);
  }
  if (reducer_) {
    // The summed gradients are the same on every rank; agreeing on the flag anyway makes a
    // skipped step a collective decision whatever the reduction order did.
    int32_t flag = gs.non_finite ? 1 : 0;
    SF_RETURN_IF_ERROR(reducer_->communicator().Allreduce(&flag, 1, DType::kI32, dist::ReduceOp::kMax));
    gs.non_finite = flag != 0;
  }
  SF_ASSIGN_OR_RETURN(LossScaler::Action action, scaler_.Update(gs));
  if (action == LossScaler::Action::kSkip || r.tokens == 0) {
    r.skipped = true;
    model_->ZeroGrads();
    r.optimizer_s = Now() - t2;
    return r;
  }
  Phase("optimizer");
  const float unscale = 1.0f / (scaler_.scale_used_for_step() * static_cast<float>(r.tokens));
  const UnscaleClip c = UnscaleAndClipFactor(unscale, clip_norm_, gs);
  r.grad_norm = c.norm;
  if (on_device_) {
    // One launch: the gradients' unscale/clip factor, the update, and the compute-dtype mirror
    // of the weights the GEMMs read (element i of the flat values: the store's layout).
    StepFusion fusion;
    if (c.scale) fusion.grad_factor = c.factor;
    const DType mirror = store.mirror_dtype();
    if ((mirror == DType::kBF16 || mirror == DType::kF16) && !params_.empty() &&
        store.values() == params_.front().value) {
      fusion.mirror = store.mirror_at(0);
      fusion.mirror_dtype = mirror;
    }
    optimizer_->Step(params_, lr, fusion);
    if (fusion.mirror) store.MirrorRefreshed();
  } else {
    // One pass over the parameters: the gradients scaled, the update, and the compute-dtype
    // mirror of the weights the GEMMs read, chunk by chunk while each is in cache.
    StepFusion fusion;
    if (c.scale) fusion.grad_factor = c.factor;
    const DType mirror = store.mirror_dtype();
    if (mirror == DType::kBF16 || mirror == DType::kF16) {
      const float* base = store.values();
      fusion.on_updated = [&store, base, mirror](const float* v, size_t n) {
        StoreFloats(v, store.mirror_at(v - base), mirror, static_cast<int64_t>(n));
      };
    }
    optimizer_->Step(params_, lr, fusion);
    if (fusion.on_updated) store.MirrorRefreshed();
  }
  model_->WeightsUpdated();
  r.optimizer_s = Now() - t2;
  return r;
}

}  // namespace sf
