#include "trainer/run/model_setup.h"

#include <algorithm>
#include <utility>

#include "common/config/hyperparameter_schema.h"
#include "trainer/models/weights_io.h"

namespace sf {

Result<ModelSpec> ModelSpecFromHyperparameters(const config::TrialHyperparameters& hp, int64_t src_vocab,
                                               int64_t tgt_vocab, int64_t max_positions) {
  const ModelFamily* family = FindModelFamily(hp.family);
  if (family == nullptr) {
    return InvalidArgument("hyperparameters.arch: " + hp.arch + " (a " + hp.family +
                           " model) is no sequence-to-sequence family (" + ModelFamilyList() + ")");
  }
  SF_ASSIGN_OR_RETURN(std::unique_ptr<FamilyConfig> config, family->from_hyperparameters(hp));
  ModelSpec spec(family->name, std::move(config));
  spec.set_shape(ModelShape{src_vocab, tgt_vocab, 1, max_positions});
  SF_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

Result<ModelSpec> CheckpointModelSpec(const CheckpointContents& ck) {
  if (!ck.model_metadata.empty()) return ModelSpecFromMetadata(ck.model_metadata);
  const Value* mv = ck.state.Find("model");
  return ModelSpecFromValue(mv ? *mv : Value());
}

DType ComputeDType(config::Precision precision) {
  switch (precision) {
    case config::Precision::kBf16: return DType::kBF16;
    case config::Precision::kFp16: return DType::kF16;
    default: return DType::kF32;
  }
}

int64_t ParameterCount(TrainableModel<float>& model) {
  int64_t count = 0;
  for (const ParamInfo& info : model.params().params()) count += info.numel;
  return count;
}

void SnapshotTraining(TrainableModel<float>& model, TrainStep& step, CheckpointContents* c) {
  auto& store = model.params();
  c->model.clear();
  c->model_metadata = model.Metadata();
  store.PullValues();  // a device model's values, copied to the host view
  for (const auto& info : store.params()) {
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    const float* v = store.host_value(store.Find(info.name));
    NamedBuffer b = NamedBuffer::F32(info.name, std::span<const float>(v, static_cast<size_t>(numel)));
    b.shape = info.shape;
    c->model.push_back(std::move(b));
  }
  c->optimizer = step.optimizer().State();
  for (NamedBuffer b : step.loss_scaler().State()) {
    b.name = "loss_scaler." + b.name;
    c->optimizer.push_back(std::move(b));
  }
}

Status LoadModelWeights(const CheckpointContents& ck, const std::string& where, TrainableModel<float>& model) {
  Status fits = CheckMetadataFits(ck.model_metadata, model);
  if (!fits.ok()) return InvalidArgument("checkpoint " + where + " does not fit this model: " + fits.message());
  auto& store = model.params();
  for (const auto& info : store.params()) {
    const NamedBuffer* b = FindBuffer(ck.model, info.name);
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    if (!b) return InvalidArgument("checkpoint " + where + " does not fit this model: no parameter " + info.name);
    if (b->AsF32().size() != static_cast<size_t>(numel)) {
      return InvalidArgument("checkpoint " + where + " does not fit this model: parameter " + info.name + " has " +
                             std::to_string(b->AsF32().size()) + " values, the model wants " + std::to_string(numel));
    }
  }
  for (const auto& info : store.params()) {
    auto values = FindBuffer(ck.model, info.name)->AsF32();
    std::copy(values.begin(), values.end(), store.host_value(store.Find(info.name)));
  }
  store.PushValues();
  model.WeightsUpdated();
  return Status::Ok();
}

Status RestoreTraining(const CheckpointContents& ck, const std::string& where, TrainableModel<float>& model,
                       TrainStep& step) {
  SF_RETURN_IF_ERROR(LoadModelWeights(ck, where, model));
  std::vector<NamedBuffer> opt_state, scaler_state;
  for (const auto& b : ck.optimizer) {
    (b.name.rfind("loss_scaler.", 0) == 0 ? scaler_state : opt_state).push_back(b);
  }
  for (auto& b : scaler_state) b.name = b.name.substr(12);
  std::vector<ParamRef> params = model.Parameters();
  Status st = step.optimizer().LoadState(opt_state, params);
  if (st.ok()) st = const_cast<LossScaler&>(step.loss_scaler()).LoadState(scaler_state);
  if (!st.ok()) return st.WithContext("checkpoint " + where + ": optimizer state");
  return Status::Ok();
}

}  // namespace sf
