// Pieces every training entry point shares (standalone `sf-trainer train`, `translate`, and the
// cluster trial): the model (any family) from hyperparameters, and moving the model, optimizer
// and loss-scaler state into and out of a checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/experiment_config.h"
#include "common/config/trial_hyperparameters.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/core/dtype.h"
#include "trainer/models/model_spec.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/train_step.h"

namespace sf {

// The model of a trial's typed hyperparameters (config::DecodeTrialHyperparameters: `arch` picks
// the family, whose registry entry builds the config) for the given vocabularies;
// kInvalidArgument for a family that is no sequence-to-sequence model (speech:
// SpeechCtcConfigFromHyperparameters). Errors name the hyperparameter.
Result<ModelSpec> ModelSpecFromHyperparameters(const config::TrialHyperparameters& hparams, int64_t src_vocab,
                                               int64_t tgt_vocab, int64_t max_positions);

// The model a checkpoint holds: its weights' __metadata__, or (checkpoints written before the
// weights carried it) trainer_state.json's "model". Errors name the key.
Result<ModelSpec> CheckpointModelSpec(const CheckpointContents& contents);

// The GEMM operand dtype of a precision.
DType ComputeDType(config::Precision precision);

// How many parameters the model has: the sum of its parameters' elements, which is what a
// checkpoint's model.safetensors holds (ParamStore::total_numel() also counts the padding that
// aligns each parameter). What `sf-trainer bench` prints and cluster mode reports as `parameters`.
int64_t ParameterCount(TrainableModel<float>& model);

// fp32 master weights (with shapes) into contents->model; optimizer and loss-scaler state into
// contents->optimizer (scaler buffers prefixed "loss_scaler.").
void SnapshotTraining(TrainableModel<float>& model, TrainStep& step, CheckpointContents* contents);

// Copies the checkpoint's weights into the model (every parameter must be present with its
// shape; nothing changes otherwise) and calls WeightsUpdated().
Status LoadModelWeights(const CheckpointContents& contents, const std::string& where,
                        TrainableModel<float>& model);
// LoadModelWeights, then the optimizer and loss-scaler state.
Status RestoreTraining(const CheckpointContents& contents, const std::string& where,
                       TrainableModel<float>& model, TrainStep& step);

}  // namespace sf
