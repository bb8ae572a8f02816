#include "trainer/run/speech_run.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/log.h"
#include "trainer/decoding/speech_joint_search.h"
#include "trainer/families/family_codec.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/validation_transcripts.h"
#include "trainer/speech/ctc_decoder.h"

namespace sf {
namespace {

SpeechBatchView AsView(const speech::SpeechBatch& b) {
  return {b.features.data(), b.frames.data(), b.targets.data(), b.target_lengths.data(),
          b.batch,           b.max_frames,    b.max_target};
}

// The features of one split's manifest, and its encoded targets.
Status OpenSplit(const std::string& manifest, const std::string& what, const speech::FrontEndOptions& front_end,
                 const speech::FeatureCacheOptions& cache, const speech::CharVocabulary* vocabulary,
                 std::unique_ptr<speech::SpeechFeatures>* features, speech::EncodedTargets* targets) {
  auto opened = speech::SpeechFeatures::Open(manifest, front_end, cache);
  if (!opened.ok()) return opened.status().WithContext("data." + what + ".manifest");
  *features = std::move(opened).value();
  const speech::SpeechFeatures& f = **features;
  log::Info("trainer", {{"event", "speech_data"}, {"split", what}, {"manifest", manifest},
                        {"utterances", std::to_string(f.size())}, {"frames", std::to_string(f.total_frames())},
                        {"cache", f.cache_file()}, {"reused", f.from_cache() ? "true" : "false"},
                        {"seconds", std::to_string(f.seconds())}});
  if (vocabulary) {
    SF_ASSIGN_OR_RETURN(*targets, speech::EncodeTargets(manifest, f.utterances(), *vocabulary));
  }
  return Status::Ok();
}

}  // namespace

Status CheckUtterancesFit(const speech::SpeechFeatures& f, const SpeechCtcConfig& model) {
  for (int64_t i = 0; i < f.size(); ++i) {
    const int64_t frames = f.frames(i), kept = SpeechCtcConfig::Subsampled(frames);
    if (kept >= 1 && kept <= model.max_positions) continue;
    const speech::Utterance& u = f.utterances()[static_cast<size_t>(i)];
    return InvalidArgument(f.manifest() + ":" + std::to_string(u.line) + ": utterance " + u.id + " has " +
                           std::to_string(frames) + " feature frames; the model's subsampling needs " +
                           (kept < 1 ? "at least 7"
                                     : "at most " + std::to_string(model.max_positions * 4 + 3) +
                                           " (max_positions " + std::to_string(model.max_positions) + " after it)"));
  }
  return Status::Ok();
}

Result<SpeechCtcConfig> SpeechCtcConfigFromHyperparameters(const config::TrialHyperparameters& hp, int64_t mels,
                                                           int64_t vocab) {
  if (!hp.speech) {
    return InvalidArgument("hyperparameters.arch: " + hp.arch + " (a " + hp.family + " model) does not recognise speech");
  }
  const config::SpeechCtcHp& s = *hp.speech;
  SpeechCtcConfig c;
  c.mels = mels;
  c.vocab = vocab;
  c.conv_channels = s.conv_channels;
  SF_RETURN_IF_ERROR(family_codec::SetAttention(hp, c));  // its encoder's Transformer layers
  c.layers = s.encoder_layers;
  c.decoder_layers = s.decoder_layers;
  c.ctc_weight = static_cast<float>(s.ctc_weight);
  SF_RETURN_IF_ERROR(c.Validate().WithContext("hyperparameters"));
  return c;
}

speech::FrontEndOptions FrontEndFromConfig(const config::SpeechDataConfig& c) {
  speech::FrontEndOptions fe;
  fe.sample_rate = static_cast<int>(c.sample_rate);
  fe.mels = static_cast<int>(c.mels);
  fe.window_ms = c.window_ms;
  fe.hop_ms = c.hop_ms;
  return fe;
}

Result<SplitTranscripts> TranscribeSplit(SpeechCtcModel<float>& model, const speech::SpeechFeatures& features,
                                         const speech::EncodedTargets& targets,
                                         const speech::CharVocabulary& vocabulary, const TranscribeOptions& o) {
  EvalScope<float> eval(model.context());
  std::vector<int64_t> target_lengths;
  target_lengths.reserve(targets.targets.size());
  for (const auto& t : targets.targets) target_lengths.push_back(static_cast<int64_t>(t.size()));
  speech::SpeechBatchingOptions bo;
  bo.max_frames = o.max_frames;
  bo.shuffle = false;
  SF_ASSIGN_OR_RETURN(speech::SpeechBatchIterator it,
                      speech::SpeechBatchIterator::Create(features.frame_counts(), target_lengths, bo));
  speech::SpeechBatchOptions batch_options;
  batch_options.utterance_cmvn = o.utterance_cmvn;
  SplitTranscripts out;
  if (o.keep_hypotheses) out.hypotheses.resize(static_cast<size_t>(features.size()));
  const int64_t sample = std::clamp<int64_t>(o.sample, 0, features.size());
  out.sample.resize(static_cast<size_t>(sample));
  out.sample_decoded.assign(static_cast<size_t>(sample), false);
  const SpeechCtcConfig& mc = model.config();
  const int64_t V = mc.vocab;
  // A model with a decoder: joint CTC/attention search, unless its CTC head alone is asked for.
  const bool joint = mc.has_decoder() && !o.ctc_only;
  JointSearchOptions joint_options;
  joint_options.beam = o.beam;
  joint_options.ctc_weight = o.ctc_weight < 0 ? mc.ctc_weight : o.ctc_weight;
  Backend<float>& backend = model.context().backend();
  speech::SpeechBatch batch;
  std::vector<float> log_probs;
  for (int64_t i = o.rank; i < it.batches_per_epoch(); i += std::max(1, o.world_size)) {
    speech::MakeSpeechBatch(features, targets.targets, it.BatchAt(1, i), batch_options, 1, &batch);
    auto stats = model.Forward(AsView(batch));
    if (!stats.ok()) return stats.status();
    out.loss += stats->loss;
    out.labels += stats->target_tokens;
    out.infeasible += stats->infeasible;
    const int64_t T = model.frames();
    log_probs.resize(static_cast<size_t>(batch.batch * T * V));
    backend.Synchronize();
    backend.CopyToHost(log_probs.data(), model.logits(), log_probs.size() * sizeof(float));
    speech::LogSoftmaxRows(log_probs.data(), log_probs.data(), batch.batch * T, V);
    std::vector<std::string> hyps(static_cast<size_t>(batch.batch));
    if (joint) {
      SF_ASSIGN_OR_RETURN(std::vector<JointHypothesis> best, JointBeamSearch(model, log_probs.data(), joint_options));
      for (int64_t b = 0; b < batch.batch; ++b) hyps[b] = vocabulary.Decode(best[b].labels);
    }
#pragma omp parallel for schedule(dynamic) if (o.beam > 1 && !joint)
    for (int64_t b = 0; b < (joint ? 0 : batch.batch); ++b) {
      const float* lp = log_probs.data() + b * T * V;
      const int64_t frames = model.lengths()[static_cast<size_t>(b)];
      speech::CtcHypothesis h;
      if (o.beam > 1) {
        speech::CtcBeamOptions beam;
        beam.beam = o.beam;
        std::vector<speech::CtcHypothesis> best = speech::CtcPrefixBeamSearch(lp, frames, V, mc.blank, beam);
        if (!best.empty()) h = std::move(best.front());
      } else {
        h = speech::CtcGreedy(lp, frames, V, mc.blank);
      }
      hyps[static_cast<size_t>(b)] = vocabulary.Decode(h.labels);
    }
    for (int64_t b = 0; b < batch.batch; ++b) {
      const int64_t u = batch.indices[static_cast<size_t>(b)];
      const std::string& ref = features.utterances()[static_cast<size_t>(u)].text;
      out.words += eval::WordErrors(hyps[static_cast<size_t>(b)], ref);
      out.chars += eval::CharErrors(hyps[static_cast<size_t>(b)], ref);
      if (u < sample) {
        out.sample[static_cast<size_t>(u)] = hyps[static_cast<size_t>(b)];
        out.sample_decoded[static_cast<size_t>(u)] = true;
      }
      if (o.keep_hypotheses) out.hypotheses[static_cast<size_t>(u)] = std::move(hyps[static_cast<size_t>(b)]);
    }
  }
  return out;
}

Result<std::unique_ptr<SpeechRun>> SpeechRun::Create(const config::ExperimentConfig& cfg, std::string config_yaml,
                                                     Value hparams, const TrainingRunOptions& options) {
  std::unique_ptr<SpeechRun> r(new SpeechRun());
  r->cfg_ = cfg;
  r->config_yaml_ = std::move(config_yaml);
  r->hparams_ = std::move(hparams);
  r->options_ = options;
  SF_ASSIGN_OR_RETURN(r->hp_, config::DecodeTrialHyperparameters(r->hparams_));
  r->seed_ = r->hp_.optimization.seed;

  const config::SpeechDataConfig& sd = cfg.data.speech;
  const speech::FrontEndOptions front_end = FrontEndFromConfig(sd);
  speech::FeatureCacheOptions cache;
  SF_ASSIGN_OR_RETURN(cache.cache_dir, data::WritableCacheRoot(cfg.data.train.manifest, options.data));
  SF_RETURN_IF_ERROR(OpenSplit(cfg.data.train.manifest, "train", front_end, cache, nullptr, &r->train_, nullptr));
  r->vocab_ = std::make_unique<speech::CharVocabulary>(speech::CharVocabulary::Build(r->train_->utterances()));
  SF_ASSIGN_OR_RETURN(r->train_targets_,
                      speech::EncodeTargets(cfg.data.train.manifest, r->train_->utterances(), *r->vocab_));
  if (cfg.data.valid) {
    SF_RETURN_IF_ERROR(OpenSplit(cfg.data.valid->manifest, "valid", front_end, cache, r->vocab_.get(), &r->valid_,
                                 &r->valid_targets_));
  }
  if (cfg.data.test) {
    SF_RETURN_IF_ERROR(OpenSplit(cfg.data.test->manifest, "test", front_end, cache, r->vocab_.get(), &r->test_,
                                 &r->test_targets_));
  }
  log::Info("trainer", {{"event", "vocabulary"}, {"symbols", std::to_string(r->vocab_->size())}});

  SF_ASSIGN_OR_RETURN(SpeechCtcConfig mc,
                      SpeechCtcConfigFromHyperparameters(r->hp_, r->train_->mels(), r->vocab_->size()));
  SF_ASSIGN_OR_RETURN(r->backend_, MakeTrainingBackend(options.device));
  log::Info("trainer", {{"event", "device"}, {"device", options.device.description},
                        {"backend", r->backend_->description()}});
  // Every utterance must fit the model before any step runs: a run never fails on one midway.
  for (const speech::SpeechFeatures* f : {r->train_.get(), r->valid_.get(), r->test_.get()}) {
    if (f) SF_RETURN_IF_ERROR(CheckUtterancesFit(*f, mc));
  }
  r->model_ = std::make_unique<SpeechCtcModel<float>>(mc, r->backend_.get(), ComputeDType(cfg.precision));
  r->model_->InitParameters(r->seed_);
  r->dropout_seed_ = r->seed_;
  r->model_->context().seed = RankDropoutSeed(r->seed_, options.rank);
  r->model_->context().training = true;

  r->batch_options_.utterance_cmvn = sd.utterance_cmvn;
  r->batch_options_.seed = r->seed_;
  if (sd.spec_augment) {
    const config::SpecAugmentConfig& s = *sd.spec_augment;
    r->batch_options_.spec_augment = true;
    r->batch_options_.spec.freq_masks = static_cast<int>(s.freq_masks);
    r->batch_options_.spec.freq_width = static_cast<int>(s.freq_width);
    r->batch_options_.spec.time_masks = static_cast<int>(s.time_masks);
    r->batch_options_.spec.time_width = static_cast<int>(s.time_width);
    r->batch_options_.spec.time_ratio = s.time_ratio;
  }
  speech::SpeechBatchingOptions bo;
  bo.max_frames = r->hp_.speech->max_frames;
  bo.seed = r->seed_;
  bo.rank = options.rank;
  bo.world_size = options.world_size;
  std::vector<int64_t> target_lengths;
  for (const auto& t : r->train_targets_.targets) target_lengths.push_back(static_cast<int64_t>(t.size()));
  auto it = speech::SpeechBatchIterator::Create(r->train_->frame_counts(), target_lengths, bo);
  if (!it.ok()) return it.status().WithContext("data.train");
  r->iter_ = std::make_unique<speech::SpeechBatchIterator>(std::move(it).value());
  if (r->iter_->oversize() > 0) {
    log::Warn("trainer", {{"event", "oversize_utterances"}, {"count", std::to_string(r->iter_->oversize())},
                          {"max_frames", std::to_string(bo.max_frames)},
                          {"note", "each trains alone in its batch; raise max_frames to batch them"}});
  }
  r->aggregation_ = std::max<int64_t>(1, cfg.optimizations.aggregation_frequency);
  r->steps_per_epoch_ = std::max<int64_t>(1, r->iter_->batches_per_epoch() / r->aggregation_);
  r->micro_.resize(static_cast<size_t>(r->aggregation_));

  SF_ASSIGN_OR_RETURN(RunStepParts parts, MakeRunStepParts(*r->model_, cfg, r->hp_.optimization, options,
                                                           r->StepsFor(cfg.searcher.max_length), r->aggregation_));
  r->step_ = std::move(parts.step);
  r->schedule_ = std::move(parts.schedule);
  r->reducer_ = std::move(parts.reducer);
  return r;
}

Status SpeechRun::Restore(const std::string& dir, const CheckpointContents& ck) {
  if (Status fits = CheckMetadataFits(ck.model_metadata, *model_); !fits.ok()) {
    return InvalidArgument("checkpoint " + dir + " holds a different model than this experiment configures (" +
                           fits.message() + ")");
  }
  const Value* saved = ck.state.Find("char_vocabulary");
  if (!saved || !saved->is_string()) {
    return InvalidArgument("checkpoint " + dir + " has no character vocabulary (trainer_state.json char_vocabulary)");
  }
  auto vocab = speech::CharVocabulary::FromText(saved->as_string(), dir + "/trainer_state.json char_vocabulary");
  if (!vocab.ok()) return vocab.status();
  if (!(*vocab == *vocab_)) {
    return InvalidArgument("checkpoint " + dir + " was trained with a different character vocabulary (" +
                           std::to_string(vocab->size()) + " symbols) than this experiment's transcripts give (" +
                           std::to_string(vocab_->size()) + ")");
  }
  const data::DataPosition pos = CheckpointDataPosition(ck.state);
  {
    speech::SpeechBatchIterator probe = *iter_;
    Status st = probe.SetPosition(pos);
    if (!st.ok()) return st.WithContext("checkpoint " + dir + ": data position");
  }
  SF_RETURN_IF_ERROR(RestoreTraining(ck, dir, *model_, *step_));
  SF_RETURN_IF_ERROR(iter_->SetPosition(pos));
  const RunCounters counters = RestoreRunCounters(ck.state, seed_, options_.rank, *model_);
  steps_ = counters.steps;
  skipped_ = counters.skipped;
  dropout_seed_ = counters.dropout_seed;
  log::Info("trainer", {{"event", "resumed"}, {"checkpoint", dir}, {"steps", std::to_string(steps_)},
                        {"epoch", std::to_string(pos.epoch)}});
  return Status::Ok();
}

Result<RunStep> SpeechRun::Step() {
  for (int64_t i = 0; i < aggregation_; ++i) {
    int64_t epoch = 1;
    std::vector<int64_t> rows = iter_->Next(&epoch);
    speech::MakeSpeechBatch(*train_, train_targets_.targets, rows, batch_options_, epoch, &micro_[i]);
  }
  RunStep out;
  out.lr = static_cast<float>(schedule_->LearningRate(steps_));
  int64_t infeasible = 0;
  auto r = step_->Run(
      static_cast<size_t>(aggregation_),
      [&](size_t i) -> Result<CrossEntropyStats> {
        SF_ASSIGN_OR_RETURN(CtcStats s, model_->Forward(AsView(micro_[i])));
        infeasible += s.infeasible;
        return CrossEntropyStats{s.loss, s.loss, s.target_tokens};
      },
      out.lr);
  if (!r.ok()) return r.status().WithContext("step " + std::to_string(steps_ + 1));
  if (infeasible > 0 && infeasible_ == 0) {
    log::Warn("trainer", {{"event", "infeasible_transcripts"}, {"step", std::to_string(steps_ + 1)},
                          {"utterances", std::to_string(infeasible)},
                          {"note", "a transcript longer than its subsampled frames adds no loss (zero_infinity)"}});
  }
  infeasible_ += infeasible;
  out.report = *r;
  if (r->skipped) {
    ++skipped_;
  } else {
    ++steps_;
  }
  return out;
}

TranscribeOptions SpeechRun::EvalOptions(bool keep_hypotheses, bool sharded) const {
  TranscribeOptions o;
  o.max_frames = hp_.speech->max_frames;
  o.utterance_cmvn = cfg_.data.speech.utterance_cmvn;
  o.keep_hypotheses = keep_hypotheses;
  if (sharded && options_.comm) {
    o.rank = options_.rank;
    o.world_size = options_.world_size;
  }
  return o;
}

Result<RunValidation> SpeechRun::Validate(double fallback_loss) {
  RunValidation v;
  if (!valid_) {
    v.values = {{"validation_loss", fallback_loss}};
    v.metric = fallback_loss;
    return v;
  }
  TranscribeOptions o = EvalOptions(false, true);
  o.sample = kTranscriptSampleSize;
  SF_ASSIGN_OR_RETURN(SplitTranscripts t,
                      TranscribeSplit(*model_, *valid_, valid_targets_, *vocab_, o));
  // The sample's word errors, each counted by the rank that decoded it (before the cut).
  const size_t sample = t.sample.size();
  std::vector<int64_t> sample_edits(sample, 0), sample_words(sample, 0);
  for (size_t i = 0; i < sample; ++i) {
    if (t.sample_decoded[i]) {
      const eval::ErrorCounts e = eval::WordErrors(t.sample[i], valid_->utterances()[i].text);
      sample_edits[i] = e.edits();
      sample_words[i] = e.reference_length;
    }
    t.sample[i] = TranscriptText(t.sample[i]);
  }
  if (options_.comm && options_.world_size > 1) {
    SF_RETURN_IF_ERROR(GatherSampleHypotheses(*options_.comm, t.sample_decoded, &t.sample));
    std::vector<double> sums = {t.loss,
                                static_cast<double>(t.labels),
                                static_cast<double>(t.words.substitutions),
                                static_cast<double>(t.words.deletions),
                                static_cast<double>(t.words.insertions),
                                static_cast<double>(t.words.reference_length),
                                static_cast<double>(t.chars.substitutions),
                                static_cast<double>(t.chars.deletions),
                                static_cast<double>(t.chars.insertions),
                                static_cast<double>(t.chars.reference_length)};
    for (size_t i = 0; i < sample; ++i) {
      sums.push_back(static_cast<double>(sample_edits[i]));
      sums.push_back(static_cast<double>(sample_words[i]));
    }
    SF_RETURN_IF_ERROR(
        options_.comm->Allreduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kF64)
            .WithContext("validation"));
    t.loss = sums[0];
    t.labels = static_cast<int64_t>(sums[1]);
    t.words = {static_cast<int64_t>(sums[2]), static_cast<int64_t>(sums[3]), static_cast<int64_t>(sums[4]),
               static_cast<int64_t>(sums[5])};
    t.chars = {static_cast<int64_t>(sums[6]), static_cast<int64_t>(sums[7]), static_cast<int64_t>(sums[8]),
               static_cast<int64_t>(sums[9])};
    // Only the decoding rank counted each utterance: the sums are its counts.
    for (size_t i = 0; i < sample; ++i) {
      sample_edits[i] = static_cast<int64_t>(sums[10 + 2 * i]);
      sample_words[i] = static_cast<int64_t>(sums[11 + 2 * i]);
    }
  }
  const double loss = t.loss / static_cast<double>(std::max<int64_t>(1, t.labels));
  const double wer = 100.0 * t.words.rate(), cer = 100.0 * t.chars.rate();
  v.values = {{"validation_loss", loss}, {"wer", wer}, {"cer", cer}};
  const std::string& metric = cfg_.searcher.metric;
  v.metric = metric == "wer" ? wer : metric == "cer" ? cer : loss;
  if (options_.rank == 0) {
    for (size_t i = 0; i < sample; ++i) {
      const speech::Utterance& u = valid_->utterances()[i];
      v.transcripts.push_back(
          {u.id, TranscriptText(u.text), t.sample[i], sample_edits[i], sample_words[i]});
    }
  }
  return v;
}

int64_t SpeechRun::parameter_count() { return ParameterCount(*model_); }

CheckpointContents SpeechRun::Snapshot(const Value::Map& extra) const {
  CheckpointContents c;
  SnapshotTraining(*model_, *step_, &c);
  Value::Map state = RunCountersState({steps_, skipped_, dropout_seed_}, *model_, iter_->position());
  state["data_cache"] = std::filesystem::path(train_->cache_file()).filename().string();
  state["precision"] = config::PrecisionName(cfg_.precision);
  state["char_vocabulary"] = vocab_->ToText();
  state["hparams"] = hparams_;
  for (const auto& [k, v] : extra) state[k] = v;
  c.state = Value(state);
  c.config_yaml = config_yaml_;
  return c;
}

Result<RunTest> SpeechRun::TestSplit() {
  if (!test_) return NotFound("the experiment's data has no test split");
  TranscribeOptions o = EvalOptions(true, false);
  const bool joint = model_->config().has_decoder();
  if (joint) o.beam = static_cast<int>(hp_.beam_size);
  SF_ASSIGN_OR_RETURN(SplitTranscripts t, TranscribeSplit(*model_, *test_, test_targets_, *vocab_, o));
  RunTest out;
  out.values = {{"wer", 100.0 * t.words.rate()},
                {"cer", 100.0 * t.chars.rate()},
                {"test_loss", t.loss / static_cast<double>(std::max<int64_t>(1, t.labels))},
                {"utterances", test_->size()}};
  char how[96];
  std::snprintf(how, sizeof(how), "joint CTC/attention beam %d, ctc_weight %.2f", o.beam,
                static_cast<double>(model_->config().ctc_weight));
  out.summary = "test set " + cfg_.data.test->manifest + " (" + std::to_string(test_->size()) + " utterances, " +
                (joint ? std::string(how) : std::string("greedy")) + "): " + t.words.ToString("WER") + ", " +
                t.chars.ToString("CER");
  out.hypotheses = std::move(t.hypotheses);
  return out;
}

}  // namespace sf
