// Pieces every training entry point shares (standalone `sf-trainer train`, `translate`, and the
// cluster trial): the model (any family) from hyperparameters, and moving the model, optimizer
// and loss-scaler state into and out of a checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/core/dtype.h"
#include "trainer/models/model_spec.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/train_step.h"

namespace sf {

// A number from a hyperparameter map (or a nested member such as `optimizer`), `def` when the
// key is absent or not a number. Integers given as doubles are truncated.
int64_t HpInt(const Value& v, const std::string& key, int64_t def);
double HpNum(const Value& v, const std::string& key, double def);

// The feed-forward activation of a hyperparameter map (`activation`: relu, the default, or gelu);
// errors name the hyperparameter.
Result<Activation> ActivationFromHyperparameters(const Value& hparams);

// The model of a trial's hyperparameters (after config::WithDefaults: `arch` picks the family,
// ArchFamily) for the given vocabularies. Errors name the hyperparameter.
Result<ModelSpec> ModelSpecFromHyperparameters(const Value& hparams, int64_t src_vocab, int64_t tgt_vocab,
                                               int64_t max_positions);
// The model as stored in trainer_state.json ("model") and back; a value without "arch" (older
// checkpoints) is a Transformer.
Value ModelSpecToValue(const ModelSpec& spec);
Result<ModelSpec> ModelSpecFromValue(const Value& value);

// The model a checkpoint holds: its weights' __metadata__, or (checkpoints written before the
// weights carried it) trainer_state.json's "model". Errors name the key.
Result<ModelSpec> CheckpointModelSpec(const CheckpointContents& contents);

// The GEMM operand dtype of a precision.
DType ComputeDType(config::Precision precision);

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
