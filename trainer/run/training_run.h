// A training run of any task: what `sf-trainer train` (standalone) and `sf-trainer cluster` (a
// trial under a master) drive, whatever the data. Two runs implement it:
//   TextRun    (text_run.h)    parallel text or one side's text: translation and language models
//   SpeechRun  (speech_run.h)  audio manifests with transcripts: speech recognition (CTC)
// MakeTrainingRun picks one by the experiment's data (DataConfig::speech_data).
//
// A run owns its data, model, optimizer step and LR schedule; it runs one optimizer step at a
// time, validates (the task's metrics, the searcher's among them), snapshots and restores
// everything a bit-exact resume needs, and scores the test split. The callers own the loop,
// reporting, signals and where checkpoints go.
//
// Data parallel (options.comm with world_size > 1): every rank creates the same run, trains on
// its shard of each global batch, and must call Validate and Test together (sharded, summed).
//
// Not thread-safe: one caller drives a run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/trial_hyperparameters.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/data/batch_plan.h"
#include "trainer/data/translation_data.h"
#include "trainer/distributed/communicator.h"
#include "trainer/distributed/grad_reducer.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/run/train_step.h"
#include "trainer/run/validation_transcripts.h"

namespace sf {

struct TrainingRunOptions {
  int rank = 0, world_size = 1;
  // Where the model trains (device_select.h): the CPU, or a GPU with every buffer of the step
  // device-resident. Cluster trials take it from their slots, `sf-trainer train` from --device.
  DeviceChoice device;
  // Where data caches live (tokenized text, speech features): TranslationData's rules.
  data::DataOptions data;
  // Data parallel (world_size > 1): the ranks' communicator (must outlive the run). Gradients
  // are summed in buckets during backward (optimizations.bucket_size_mb, allreduce_dtype).
  dist::Communicator* comm = nullptr;
};

// One optimizer step: its report (losses summed over the step's target tokens — a speech
// model's labels) and the learning rate it used.
struct RunStep {
  StepReport report;
  float lr = 0;
};

struct RunValidation {
  Value::Map values;  // validation_loss, and the task's: validation_perplexity, bleu, wer, cer
  double metric = 0;  // the searcher's metric among them
  // Speech, rank 0: the first validation utterances' references and hypotheses, which the
  // callers report as the metric group kValidationTranscriptsGroup (validation_transcripts.h)
  // at the same step; empty for other runs and ranks.
  std::vector<TranscriptSample> transcripts;
};

// The test split, scored.
struct RunTest {
  // What metrics.jsonl and the cluster record (without "kind"/"step"): bleu and beam;
  // test_loss, test_perplexity and tokens; wer and cer.
  Value::Map values;
  // One output per test example in order (translations, transcripts); empty for a language
  // model. `sf-trainer train` writes them to test.hyp.
  std::vector<std::string> hypotheses;
  // For people, one or more lines: "test set FILE, beam 4: BLEU = ...".
  std::string summary;
};

class TrainingRun {
 public:
  virtual ~TrainingRun() = default;

  // Continues from a checkpoint: weights, optimizer and loss-scaler state, step, data position,
  // dropout RNG position. Refuses (kInvalidArgument) a checkpoint of another model or
  // vocabulary and (kDataLoss) a corrupt one; nothing changes on error.
  virtual Status Restore(const std::string& dir, const CheckpointContents& contents) = 0;
  // One optimizer step: aggregation_frequency micro-batches from the data.
  virtual Result<RunStep> Step() = 0;
  // The validation split's metrics (no dropout). Without a valid split, the metric is
  // `fallback_loss` (the training loss of the last report window).
  virtual Result<RunValidation> Validate(double fallback_loss = 0) = 0;
  // Everything a resume needs; `extra` goes into trainer_state.json beside the run's own keys.
  virtual CheckpointContents Snapshot(const Value::Map& extra) const = 0;
  // Scores the test split; kNotFound when the data has none.
  virtual Result<RunTest> TestSplit() = 0;

  virtual int64_t steps() const = 0;
  virtual int64_t skipped_steps() const = 0;
  virtual int64_t steps_per_epoch() const = 0;
  // Where the next batch comes from.
  virtual data::DataPosition position() const = 0;
  // The model's parameter count (ParameterCount in model_setup.h): what a checkpoint's weights hold.
  virtual int64_t parameter_count() = 0;
  // What a training window's "tokens" count, for progress lines: "tok" or "labels".
  virtual const char* token_unit() const { return "tok"; }

  // The epoch (1-based) of the last batch trained on: 6 right after the sixth epoch's last batch.
  int64_t epoch() const {
    const data::DataPosition p = position();
    return p.batch == 0 && p.epoch > 1 ? p.epoch - 1 : p.epoch;
  }
  int64_t StepsFor(const config::Length& length) const {
    return length.unit == config::Length::Unit::kEpochs ? length.value * steps_per_epoch() : length.value;
  }
};

// What every run builds around its model the same way (the pieces below are shared by TextRun
// and SpeechRun, so both train, checkpoint and resume alike).

// The optimizer step (optimizer, loss scaler, clip_norm from the hyperparameters and config),
// the LR schedule over `total_steps`, and, data parallel, the weights broadcast from rank 0 and
// the gradient reducer installed in the step. Errors name the hyperparameter.
struct RunStepParts {
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<dist::GradReducer> reducer;
};
Result<RunStepParts> MakeRunStepParts(TrainableModel<float>& model, const config::ExperimentConfig& cfg,
                                      const config::OptimizationHp& hparams, const TrainingRunOptions& options, int64_t total_steps,
                                      int64_t aggregation);

// The counters a run checkpoints besides the model and optimizer: steps, skipped steps and the
// dropout seed (each rank draws from RankDropoutSeed of it; the model's micro-batch counter
// goes with it).
struct RunCounters {
  int64_t steps = 0, skipped = 0;
  uint64_t dropout_seed = 1;
};
// trainer_state.json's keys for them and for the data position.
Value::Map RunCountersState(const RunCounters& counters, TrainableModel<float>& model, data::DataPosition position);
// Back from a checkpoint's state (`seed`: the run's, for checkpoints without a dropout seed),
// setting the model's dropout seed for `rank` and its micro-batch counter.
RunCounters RestoreRunCounters(const Value& state, uint64_t seed, int rank, TrainableModel<float>& model);
// The data position a checkpoint's state records.
data::DataPosition CheckpointDataPosition(const Value& state);

// The run for `cfg`'s data: a SpeechRun for speech data (manifests), else a TextRun. `cfg` has
// absolute data paths; `hparams` are the constants with defaults applied (config::WithDefaults).
// Errors: kInvalidArgument/kNotFound naming the field or file.
Result<std::unique_ptr<TrainingRun>> MakeTrainingRun(const config::ExperimentConfig& cfg, std::string config_yaml,
                                                     Value hparams, const TrainingRunOptions& options);

// The dropout seed of `rank` in a run whose seed is `seed`: rank 0 keeps it (a 1-rank run is
// unchanged), other ranks get distinct, reproducible streams.
uint64_t RankDropoutSeed(uint64_t seed, int rank);

}  // namespace sf
