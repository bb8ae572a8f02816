// One training run on parallel text or one side's text (a TrainingRun, training_run.h: what
// `sf-trainer train` and `sf-trainer cluster` drive). It owns the data (TranslationData and
// the batch iterator), the model, the optimizer step and the LR schedule; it runs one optimizer
// step at a time, validates (loss, perplexity, and BLEU by beam search), snapshots and restores
// everything a bit-exact resume needs, and translates the test set. The callers own the loop,
// reporting, signals, and where checkpoints go.
//
// Not thread-safe: one caller drives a run.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/trial_hyperparameters.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/data/batching.h"
#include "trainer/data/translation_data.h"
#include "trainer/distributed/grad_reducer.h"
#include "trainer/eval/bleu.h"
#include "trainer/decoding/generator.h"
#include "trainer/models/model_spec.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/run/train_step.h"
#include "trainer/run/training_run.h"

namespace sf {

// The run's options, step and validation are every run's (training_run.h).
using TextRunOptions = TrainingRunOptions;
using TextStep = RunStep;
using TextValidation = RunValidation;

// The loss and perplexity of a split under the model (dropout off), per non-pad target token.
struct SplitScore {
  double loss = 0;        // label-smoothed, as trained
  double perplexity = 0;  // exp of the mean negative log-likelihood
  int64_t tokens = 0;
};

// The test split: a translation model's beam-search translations and their BLEU; a language
// model's loss and perplexity (`score`; no hypotheses).
struct TextTest {
  std::vector<std::string> hypotheses;  // detokenized, in test-set order
  eval::BleuScore bleu;
  BeamOptions beam;
  std::optional<SplitScore> score;  // language models
};

// Beam settings from a trial's hyperparameters (beam_size; a text family's lenpen; a family with
// a source: max_len_a, max_len_b).
BeamOptions BeamFromHyperparameters(const config::TrialHyperparameters& hparams);

// Tokenizes, translates and detokenizes lines (sources longer than max_source_tokens are cut).
Result<std::vector<std::string>> TranslateLines(Generator& generator, const data::SentencePieceModel& src,
                                                const data::SentencePieceModel& tgt,
                                                const std::vector<std::string>& lines, const BeamOptions& beam,
                                                int64_t max_source_tokens);

class TextRun final : public TrainingRun {
 public:
  // `cfg` has absolute data paths; every hyperparameter must be a constant (`hparams` are the
  // constants with defaults applied). Prepares the data (building the cache when needed) and a
  // freshly initialised model. Errors: kInvalidArgument/kNotFound naming the field or file.
  static Result<std::unique_ptr<TextRun>> Create(const config::ExperimentConfig& cfg, std::string config_yaml,
                                                 Value hparams, const TextRunOptions& options = {});

  // Continues from a checkpoint: weights, optimizer and loss-scaler state, step, data position,
  // dropout RNG position. Data parallel: every rank restores the same (rank 0's) checkpoint. Refuses (kInvalidArgument) a checkpoint of another model or tokenizer
  // and (kDataLoss) a corrupt one; nothing changes on error.
  Status Restore(const std::string& dir, const CheckpointContents& contents) override;

  // One optimizer step: aggregation_frequency micro-batches from the data.
  Result<TextStep> Step() override;

  // Loss and perplexity on the validation set (no dropout), plus (translation models) BLEU of beam-search
  // translations when the searcher's metric is bleu. Data parallel: every rank must call it;
  // each takes every world_size-th batch and sentence and the sums are reduced. Without a valid split, the metric is the
  // training loss of the last step window given by `fallback_loss`.
  Result<TextValidation> Validate(double fallback_loss = 0) override;

  // Everything a resume needs; `extra` goes into trainer_state.json beside the run's own keys.
  CheckpointContents Snapshot(const Value::Map& extra) const override;

  // Translates the test split with the run's beam settings and scores it by BLEU; a language
  // model's test split is scored by perplexity instead. kNotFound when the data has no test
  // split. Data parallel (language model): every rank must call it.
  Result<TextTest> Test();
  // Test() as every run reports it: BLEU and the translations, or a language model's perplexity.
  Result<RunTest> TestSplit() override;

  int64_t steps() const override { return steps_; }
  int64_t skipped_steps() const override { return skipped_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  data::DataPosition position() const override { return iter_->position(); }
  int64_t parameter_count() override;
  const data::TranslationData& data() const { return *data_; }
  Seq2SeqModel<float>& model() { return *model_; }
  const ModelSpec& model_spec() const { return spec_; }
  const config::ExperimentConfig& config() const { return cfg_; }
  const Value& hparams() const { return hparams_; }
  bool bleu_metric() const { return cfg_.searcher.metric == "bleu"; }

 private:
  TextRun() = default;
  // Loss and perplexity of `split`; data parallel: sharded by batch and summed. `what` names
  // the pass in errors.
  Result<SplitScore> Score(const data::ParallelDataset& split, const char* what);

  config::ExperimentConfig cfg_;
  std::string config_yaml_;
  Value hparams_ = Value(Value::Map{});  // as given (stored in checkpoints)
  config::TrialHyperparameters hp_;      // decoded (config::DecodeTrialHyperparameters)
  TextRunOptions options_;
  std::unique_ptr<data::TranslationData> data_;
  std::unique_ptr<Backend<float>> backend_;
  ModelSpec spec_;
  std::unique_ptr<Seq2SeqModel<float>> model_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<dist::GradReducer> reducer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<data::BatchIterator> iter_;
  std::vector<data::Batch> micro_;
  std::vector<Seq2SeqBatch> views_;
  int64_t aggregation_ = 1, steps_per_epoch_ = 1;
  int64_t steps_ = 0, skipped_ = 0;
  uint64_t seed_ = 1;
  uint64_t dropout_seed_ = 1;  // the run's (rank 0's); each rank draws from its own stream
};

}  // namespace sf
