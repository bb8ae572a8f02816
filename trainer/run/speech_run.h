// One training run of a speech recogniser (a TrainingRun, training_run.h): audio manifests with
// transcripts (docs/speech.md) and the `speech_transformer_ctc` model (models/speech_ctc.h).
//
// Create:
//  - reads each split's manifest and its log-mel features through the feature cache
//    (speech/feature_cache.h; the cache directory is data::WritableCacheRoot's for the train
//    manifest), so a second run, or a resumed one, reads no audio;
//  - builds the character vocabulary from the training transcripts (speech/char_vocab.h) and
//    encodes every split's targets with it (a transcript that normalises to nothing is an error
//    naming MANIFEST:LINE; no utterance is ever skipped);
//  - makes the model from the hyperparameters (SpeechCtcConfigFromHyperparameters), the
//    optimizer, schedule and loss scaler as a text run does, and the frame-budget batch
//    iterator (hyperparameter max_frames; data parallel: rank shards of global batches).
// Step: aggregation_frequency micro-batches, each normalised per utterance (data.features.
//   utterance_cmvn) and masked by SpecAugment (data.spec_augment, seeded by run seed, epoch and
//   utterance, so a resumed run sees the same masks); losses and counts are per label.
// Validate: the loss per label (validation_loss: CTC, or with a decoder the joint loss) and
//   greedy decoding's corpus WER and CER in percent (wer, cer; error_rate.h's normalisation;
//   with a decoder greedy joint CTC/attention decoding); data parallel: batches sharded by rank
//   and the sums reduced. The searcher's metric is one of them. Rank 0's validation also carries
//   the first utterances' references and hypotheses (validation_transcripts.h; data parallel,
//   gathered from the ranks that decoded them).
// TestSplit: transcripts of the test manifest in manifest order, wer and cer: greedy for a CTC
//   model, joint CTC/attention beam search of width beam_size with a decoder.
// Snapshot/Restore: as a text run, plus the vocabulary (trainer_state.json "char_vocabulary";
//   a checkpoint of another vocabulary is refused).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "common/value.h"
#include "trainer/eval/error_rate.h"
#include "trainer/models/speech_ctc.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/run/training_run.h"
#include "trainer/speech/char_vocab.h"
#include "trainer/speech/feature_cache.h"
#include "trainer/speech/speech_batches.h"

namespace sf {

// The model of a trial's typed hyperparameters (config::DecodeTrialHyperparameters, a speech
// arch) for `mels` features and `vocab` symbols (blank included). Errors name the hyperparameter.
Result<SpeechCtcConfig> SpeechCtcConfigFromHyperparameters(const config::TrialHyperparameters& hparams, int64_t mels,
                                                           int64_t vocab);

// kInvalidArgument naming MANIFEST:LINE and the utterance when one is too short for the
// model's subsampling (< 7 frames: 85 ms with 25 ms windows every 10 ms) or too long for its max_positions.
Status CheckUtterancesFit(const speech::SpeechFeatures& features, const SpeechCtcConfig& model);

// The front end of `data.features`.
speech::FrontEndOptions FrontEndFromConfig(const config::SpeechDataConfig& c);

// A split decoded by a model: its hypotheses and scores.
struct SplitTranscripts {
  std::vector<std::string> hypotheses;  // manifest order (empty when not kept)
  // The first TranscribeOptions::sample utterances' hypotheses (manifest order), kept even when
  // the others are not; sharded, only those this rank decoded (sample_decoded[i]).
  std::vector<std::string> sample;
  std::vector<bool> sample_decoded;
  eval::ErrorCounts words, chars;       // against the manifest's transcripts
  double loss = 0;                      // CTC loss summed over the utterances (infinite ones as 0)
  int64_t labels = 0;                   // target labels
  int64_t infeasible = 0;               // utterances whose transcript cannot fit their frames
};

struct TranscribeOptions {
  int64_t max_frames = 10000;  // frame budget per batch
  // A CTC model: 1 greedy, more a CTC prefix beam search of this width. A model with a decoder:
  // joint CTC/attention beam search of this width (speech_joint_search.h; 1: greedy joint).
  int beam = 1;
  float ctc_weight = -1;   // joint search's CTC weight; < 0: the model's (its training ctc_weight)
  bool ctc_only = false;   // decode a model with a decoder by its CTC head alone
  bool utterance_cmvn = true;
  bool keep_hypotheses = true;
  // How many of the first utterances' hypotheses to keep in SplitTranscripts::sample.
  int64_t sample = 0;
  // Data parallel scoring: this rank decodes batches rank, rank + world, ... (hypotheses are
  // then this rank's only).
  int rank = 0, world_size = 1;
};

// Decodes every utterance of `features` with `model` (dropout off); `targets` are the
// utterances' encoded transcripts (for the loss), `vocabulary` the model's.
Result<SplitTranscripts> TranscribeSplit(SpeechCtcModel<float>& model, const speech::SpeechFeatures& features,
                                         const speech::EncodedTargets& targets,
                                         const speech::CharVocabulary& vocabulary, const TranscribeOptions& options);

class SpeechRun final : public TrainingRun {
 public:
  static Result<std::unique_ptr<SpeechRun>> Create(const config::ExperimentConfig& cfg, std::string config_yaml,
                                                   Value hparams, const TrainingRunOptions& options = {});

  Status Restore(const std::string& dir, const CheckpointContents& contents) override;
  Result<RunStep> Step() override;
  Result<RunValidation> Validate(double fallback_loss = 0) override;
  CheckpointContents Snapshot(const Value::Map& extra) const override;
  Result<RunTest> TestSplit() override;

  int64_t steps() const override { return steps_; }
  int64_t skipped_steps() const override { return skipped_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  data::DataPosition position() const override { return iter_->position(); }
  int64_t parameter_count() override;
  const char* token_unit() const override { return "labels"; }

  SpeechCtcModel<float>& model() { return *model_; }
  const speech::CharVocabulary& vocabulary() const { return *vocab_; }

 private:
  SpeechRun() = default;
  TranscribeOptions EvalOptions(bool keep_hypotheses, bool sharded) const;

  config::ExperimentConfig cfg_;
  std::string config_yaml_;
  Value hparams_ = Value(Value::Map{});  // as given (stored in checkpoints)
  config::TrialHyperparameters hp_;      // decoded (config::DecodeTrialHyperparameters)
  TrainingRunOptions options_;
  std::unique_ptr<speech::SpeechFeatures> train_, valid_, test_;
  std::unique_ptr<speech::CharVocabulary> vocab_;
  speech::EncodedTargets train_targets_, valid_targets_, test_targets_;
  speech::SpeechBatchOptions batch_options_;
  std::unique_ptr<Backend<float>> backend_;
  std::unique_ptr<SpeechCtcModel<float>> model_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<dist::GradReducer> reducer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<speech::SpeechBatchIterator> iter_;
  std::vector<speech::SpeechBatch> micro_;
  int64_t aggregation_ = 1, steps_per_epoch_ = 1;
  int64_t steps_ = 0, skipped_ = 0, infeasible_ = 0;
  uint64_t seed_ = 1;
  uint64_t dropout_seed_ = 1;
};

}  // namespace sf
