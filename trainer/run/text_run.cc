#include "trainer/run/text_run.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "common/log.h"
#include "trainer/run/model_setup.h"

namespace sf {
namespace {

// One text file's lines (UTF-8 checked; errors name the file and line).
Result<std::vector<std::string>> ReadLines(const std::string& path) {
  SF_ASSIGN_OR_RETURN(auto files, eval::ReadReferenceFiles({path}));
  return std::move(files.front());
}

}  // namespace

BeamOptions BeamFromHyperparameters(const config::TrialHyperparameters& hp) {
  BeamOptions b;
  b.beam = static_cast<int>(hp.beam_size);
  if (hp.text) b.lenpen = static_cast<float>(hp.text->lenpen);
  if (hp.output_length) {
    b.max_len_a = static_cast<float>(hp.output_length->max_len_a);
    b.max_len_b = hp.output_length->max_len_b;
  }
  b.max_tokens = 2048;
  return b;
}

Result<std::vector<std::string>> TranslateLines(Generator& generator, const data::SentencePieceModel& src_tok,
                                                const data::SentencePieceModel& tgt_tok,
                                                const std::vector<std::string>& lines, const BeamOptions& beam,
                                                int64_t max_source_tokens) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(lines.size());
  for (const auto& l : lines) {
    auto ids = src_tok.Encode(l);
    if (static_cast<int64_t>(ids.size()) > max_source_tokens) ids.resize(static_cast<size_t>(max_source_tokens));
    sources.push_back(std::move(ids));
  }
  SF_ASSIGN_OR_RETURN(std::vector<Hypothesis> hyps, generator.Translate(sources, beam));
  std::vector<std::string> out;
  out.reserve(hyps.size());
  for (const auto& h : hyps) out.push_back(tgt_tok.Decode(h.tokens));
  return out;
}

Result<std::unique_ptr<TextRun>> TextRun::Create(const config::ExperimentConfig& cfg, std::string config_yaml,
                                                 Value hparams, const TextRunOptions& options) {
  std::unique_ptr<TextRun> r(new TextRun());
  r->cfg_ = cfg;
  r->config_yaml_ = std::move(config_yaml);
  r->hparams_ = std::move(hparams);
  r->options_ = options;
  SF_ASSIGN_OR_RETURN(r->hp_, config::DecodeTrialHyperparameters(r->hparams_));
  if (!r->hp_.text) {
    return InvalidArgument("hyperparameters.arch: " + r->hp_.arch + " (a " + r->hp_.family + " model) does not train on text");
  }
  r->seed_ = r->hp_.optimization.seed;

  SF_ASSIGN_OR_RETURN(r->data_, data::TranslationData::Open(cfg.data, options.data));
  const auto& train = r->data_->train();
  const auto& counts = train.counts();
  log::Info("trainer", {{"event", "data_ready"}, {"cache", r->data_->cache_path()},
                        {"reused", r->data_->reused() ? "true" : "false"}, {"pairs", std::to_string(counts.lines)},
                        {"kept", std::to_string(counts.kept)}, {"skipped_empty", std::to_string(counts.empty)},
                        {"skipped_junk", std::to_string(counts.junk)},
                        {"skipped_too_long", std::to_string(counts.too_long)},
                        {"vocab", std::to_string(r->data_->source_tokenizer().vocab_size())}});

  const int64_t max_pos = std::max(cfg.data.max_source_positions, cfg.data.max_target_positions) + 2;
  SF_ASSIGN_OR_RETURN(r->spec_,
                      ModelSpecFromHyperparameters(r->hp_, r->data_->source_tokenizer().vocab_size(),
                                                   r->data_->target_tokenizer().vocab_size(), max_pos));
  // The config reader refuses these too (common/config); a run checks what its model needs.
  if (r->spec_.language_model() && r->bleu_metric()) {
    return InvalidArgument("searcher.metric: bleu scores translations; a " + r->spec_.family() +
                           " model is a language model (use validation_perplexity or validation_loss)");
  }
  if (!r->spec_.language_model() && r->data_->monolingual()) {
    return InvalidArgument("data.train: one-sided text (text:) trains a language model; a " + r->spec_.family() +
                           " model translates and needs src and tgt");
  }
  SF_ASSIGN_OR_RETURN(r->backend_, MakeTrainingBackend(options.device));
  log::Info("trainer", {{"event", "device"}, {"device", options.device.description},
                        {"backend", r->backend_->description()}});
  r->model_ = MakeModel(r->spec_, r->backend_.get(), ComputeDType(cfg.precision));
  r->model_->InitParameters(r->seed_);
  r->dropout_seed_ = r->seed_;
  r->model_->context().seed = RankDropoutSeed(r->seed_, options.rank);

  data::BatchingOptions bo;
  bo.max_tokens = r->hp_.text->max_tokens;
  bo.seed = r->seed_;
  bo.rank = options.rank;
  bo.world_size = options.world_size;
  SF_ASSIGN_OR_RETURN(data::BatchIterator it, data::BatchIterator::Create(&train, bo));
  r->iter_ = std::make_unique<data::BatchIterator>(std::move(it));
  r->aggregation_ = std::max<int64_t>(1, cfg.optimizations.aggregation_frequency);
  r->steps_per_epoch_ = std::max<int64_t>(1, r->iter_->batches_per_epoch() / r->aggregation_);
  r->micro_.resize(static_cast<size_t>(r->aggregation_));
  r->views_.resize(static_cast<size_t>(r->aggregation_));

  SF_ASSIGN_OR_RETURN(RunStepParts parts, MakeRunStepParts(*r->model_, cfg, r->hp_.optimization, options,
                                                           r->StepsFor(cfg.searcher.max_length), r->aggregation_));
  r->step_ = std::move(parts.step);
  r->schedule_ = std::move(parts.schedule);
  r->reducer_ = std::move(parts.reducer);
  return r;
}

Status TextRun::Restore(const std::string& dir, const CheckpointContents& ck) {
  // The checkpoint's model (its weights' metadata; older ones: trainer_state.json's "model")
  // must be the one this experiment configures.
  std::map<std::string, std::string> saved = ck.model_metadata;
  if (saved.empty()) {
    if (const Value* m = ck.state.Find("model")) {
      SF_ASSIGN_OR_RETURN(ModelSpec old, ModelSpecFromValue(*m));
      saved = old.metadata();
    }
  }
  if (Status fits = CheckMetadataFits(saved, *model_); !fits.ok()) {
    return InvalidArgument("checkpoint " + dir + " holds a different model than this experiment configures (" +
                           fits.message() + ")");
  }
  if (!ck.sentencepiece_model.empty() && ck.sentencepiece_model != data_->source_tokenizer().serialized()) {
    return InvalidArgument("checkpoint " + dir + " was trained with a different tokenizer than this experiment's data gives");
  }
  const data::DataPosition pos = CheckpointDataPosition(ck.state);
  // Check the data position before touching anything.
  {
    data::BatchIterator probe = *iter_;
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

Result<TextStep> TextRun::Step() {
  for (int64_t i = 0; i < aggregation_; ++i) {
    iter_->Next(&micro_[i]);
    views_[i] = data::AsEngineBatch<Seq2SeqBatch>(micro_[i]);
  }
  TextStep out;
  out.lr = static_cast<float>(schedule_->LearningRate(steps_));
  auto r = step_->Run(views_, out.lr);
  if (!r.ok()) return r.status().WithContext("step " + std::to_string(steps_ + 1));
  out.report = *r;
  if (r->skipped) {
    ++skipped_;
  } else {
    ++steps_;
  }
  return out;
}

Result<SplitScore> TextRun::Score(const data::ParallelDataset& split, const char* what) {
  EvalScope<float> eval(model_->context());
  data::BatchingOptions bo;
  bo.max_tokens = hp_.text->max_tokens;
  bo.shuffle = false;
  SF_ASSIGN_OR_RETURN(data::BatchIterator it, data::BatchIterator::Create(&split, bo));
  const int world = options_.comm ? options_.world_size : 1, rank = options_.comm ? options_.rank : 0;
  double loss = 0, nll = 0;
  int64_t tokens = 0;
  data::Batch b;
  for (int64_t i = rank; i < it.batches_per_epoch(); i += world) {
    it.BatchAt(1, i, &b);
    auto stats = model_->Forward(data::AsEngineBatch<Seq2SeqBatch>(b));
    if (!stats.ok()) return stats.status().WithContext(what);
    loss += stats->loss;
    nll += stats->nll;
    tokens += stats->tokens;
  }
  if (world > 1) {
    double sums[3] = {loss, nll, static_cast<double>(tokens)};
    SF_RETURN_IF_ERROR(options_.comm->Allreduce(sums, 3, DType::kF64).WithContext(what));
    loss = sums[0];
    nll = sums[1];
    tokens = static_cast<int64_t>(sums[2]);
  }
  SplitScore score;
  score.tokens = tokens;
  score.loss = loss / static_cast<double>(std::max<int64_t>(1, tokens));
  score.perplexity = std::exp(nll / static_cast<double>(std::max<int64_t>(1, tokens)));
  return score;
}

Result<TextValidation> TextRun::Validate(double fallback_loss) {
  TextValidation v;
  const auto* valid = data_->valid();
  if (!valid) {
    v.values = {{"validation_loss", fallback_loss}};
    v.metric = fallback_loss;
    return v;
  }
  SF_ASSIGN_OR_RETURN(SplitScore score, Score(*valid, "validation"));
  const int world = options_.comm ? options_.world_size : 1, rank = options_.comm ? options_.rank : 0;
  v.values = {{"validation_loss", score.loss}, {"validation_perplexity", score.perplexity}};
  v.metric = cfg_.searcher.metric == "validation_perplexity" ? score.perplexity : score.loss;
  if (bleu_metric()) {
    SF_ASSIGN_OR_RETURN(std::vector<std::string> all_src, ReadLines(cfg_.data.valid->src));
    SF_ASSIGN_OR_RETURN(auto all_refs, eval::ReadReferenceFiles({cfg_.data.valid->tgt}));
    // This rank's sentences (every world-th); corpus BLEU from the statistics summed over ranks.
    std::vector<std::string> src;
    std::vector<std::vector<std::string>> refs(1);
    for (size_t i = static_cast<size_t>(rank); i < all_src.size(); i += static_cast<size_t>(world)) {
      src.push_back(all_src[i]);
      refs[0].push_back(all_refs[0][i]);
    }
    std::unique_ptr<Generator> generator = MakeGenerator(model_.get());
    SF_ASSIGN_OR_RETURN(std::vector<std::string> hyps,
                        TranslateLines(*generator, data_->source_tokenizer(), data_->target_tokenizer(), src,
                                       BeamFromHyperparameters(hp_), cfg_.data.max_source_positions - 1));
    SF_ASSIGN_OR_RETURN(eval::BleuStats stats, eval::CorpusStats(hyps, refs));
    if (world > 1) {
      // [sys_len, ref_len, correct..., total...], exact in double.
      std::vector<double> sums{static_cast<double>(stats.sys_len), static_cast<double>(stats.ref_len)};
      sums.insert(sums.end(), stats.correct.begin(), stats.correct.end());
      sums.insert(sums.end(), stats.total.begin(), stats.total.end());
      SF_RETURN_IF_ERROR(options_.comm->Allreduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kF64)
                             .WithContext("validation BLEU"));
      const size_t orders = stats.correct.size();
      stats.sys_len = static_cast<int64_t>(sums[0]);
      stats.ref_len = static_cast<int64_t>(sums[1]);
      for (size_t k = 0; k < orders; ++k) {
        stats.correct[k] = static_cast<int64_t>(sums[2 + k]);
        stats.total[k] = static_cast<int64_t>(sums[2 + orders + k]);
      }
    }
    const eval::BleuScore bleu = eval::ComputeBleu(stats);
    v.values["bleu"] = bleu.score;
    v.metric = bleu.score;
  }
  return v;
}

int64_t TextRun::parameter_count() { return ParameterCount(*model_); }

CheckpointContents TextRun::Snapshot(const Value::Map& extra) const {
  CheckpointContents c;
  SnapshotTraining(*model_, *step_, &c);
  Value::Map state = RunCountersState({steps_, skipped_, dropout_seed_}, *model_, iter_->position());
  state["data_hash"] = data_->content_hash();
  state["precision"] = config::PrecisionName(cfg_.precision);
  state["model"] = spec_.ToValue();
  state["hparams"] = hparams_;
  for (const auto& [k, v] : extra) state[k] = v;
  c.state = Value(state);
  c.config_yaml = config_yaml_;
  c.sentencepiece_model = data_->source_tokenizer().serialized();
  if (!data_->shared_vocabulary()) c.sentencepiece_target_model = data_->target_tokenizer().serialized();
  return c;
}

Result<TextTest> TextRun::Test() {
  if (!cfg_.data.test) return NotFound("the experiment's data has no test split");
  TextTest t;
  if (spec_.language_model()) {
    SF_ASSIGN_OR_RETURN(t.score, Score(*data_->test(), "test"));
    return t;
  }
  SF_ASSIGN_OR_RETURN(std::vector<std::string> src, ReadLines(cfg_.data.test->src));
  SF_ASSIGN_OR_RETURN(auto refs, eval::ReadReferenceFiles({cfg_.data.test->tgt}));
  t.beam = BeamFromHyperparameters(hp_);
  std::unique_ptr<Generator> generator = MakeGenerator(model_.get());
  SF_ASSIGN_OR_RETURN(t.hypotheses, TranslateLines(*generator, data_->source_tokenizer(), data_->target_tokenizer(),
                                                   src, t.beam, cfg_.data.max_source_positions - 1));
  SF_ASSIGN_OR_RETURN(t.bleu, eval::CorpusBleu(t.hypotheses, refs));
  return t;
}

Result<RunTest> TextRun::TestSplit() {
  SF_ASSIGN_OR_RETURN(TextTest t, Test());
  RunTest out;
  char line[512];
  if (t.score) {  // a language model: perplexity
    out.values = {{"test_loss", t.score->loss}, {"test_perplexity", t.score->perplexity}, {"tokens", t.score->tokens}};
    std::snprintf(line, sizeof line, "test set %s: perplexity %.2f (loss %.4f over %lld tokens)",
                  cfg_.data.test->tgt.c_str(), t.score->perplexity, t.score->loss,
                  static_cast<long long>(t.score->tokens));
    out.summary = line;
    return out;
  }
  out.values = {{"bleu", t.bleu.score}, {"beam", t.beam.beam}};
  out.summary = "test set " + cfg_.data.test->src + ", beam " + std::to_string(t.beam.beam) + ": " +
                t.bleu.ToString() + "\nsignature: " + eval::BleuSignature({}, 1);
  out.hypotheses = std::move(t.hypotheses);
  return out;
}

}  // namespace sf
