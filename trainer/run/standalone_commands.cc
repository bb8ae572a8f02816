#include "trainer/run/standalone_commands.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "common/command_line.h"

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_schema.h"
#include "common/log.h"
#include "trainer/data/batching.h"
#include "trainer/data/translation_data.h"
#include "trainer/eval/bleu.h"
#include "trainer/decoding/translator.h"
#include "trainer/optim/from_config.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/models/weights_io.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/text_run.h"
#include "trainer/run/training_run.h"
#include "trainer/run/train_step.h"
#include "trainer/run/translation_model.h"
#include "trainer/run/validation_transcripts.h"

namespace sf {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted = true; }

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

std::string Duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  char buf[32];
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  }
  return buf;
}

using Options = TrainCommandOptions;

class Trainer {
 public:
  explicit Trainer(Options o) : o_(std::move(o)) {}
  int Run();

 private:
  Status Setup();
  Status Validate(int64_t step);
  Status Checkpoint(int64_t step, std::optional<double> metric, std::string* dir_out = nullptr);
  void Report(const Value& v);
  void Progress(bool force);

  Options o_;
  config::ExperimentConfig cfg_;
  std::unique_ptr<TrainingRun> run_;
  std::ofstream metrics_;
  int64_t total_steps_ = 0, val_period_ = 0, ckpt_period_ = 0;
  double best_metric_ = 0;
  bool have_best_ = false, smaller_better_ = true;
  std::string best_dir_;
  std::optional<double> last_metric_;
  Clock::time_point start_ = Clock::now();
  int64_t start_steps_ = 0;
  // progress window
  double win_loss_ = 0, win_nll_ = 0;
  int64_t win_tokens_ = 0, win_steps_ = 0;
  Clock::time_point win_start_ = Clock::now();
  float lr_ = 0;
  double last_train_loss_ = 0;  // of the last report window: the metric when there is no valid split
  Clock::time_point last_progress_ = Clock::now();
};

Status Trainer::Setup() {
  std::ifstream in(o_.config_path, std::ios::binary);
  if (!in) return NotFound("can't read the experiment config " + o_.config_path);
  std::ostringstream text;
  text << in.rdbuf();
  config::ParseResult parsed = config::LoadExperimentConfigFile(o_.config_path);
  if (!parsed.ok()) return InvalidArgument("invalid experiment config " + o_.config_path + ":\n" + parsed.ErrorText());
  cfg_ = *parsed.config;
  for (const auto& [name, hp] : cfg_.hyperparameters) {
    if (hp.is_space()) {
      return InvalidArgument("hyperparameters." + name +
                             " is a search space; `sf-trainer train` trains one model, so give it a constant (run "
                             "searches with `sf experiment create`)");
    }
  }
  Value constants = config::ConstantHyperparameters(cfg_.hyperparameters);
  auto hp_errors = config::ValidateTrialHyperparameters(constants);
  if (!hp_errors.empty()) {
    std::string all;
    for (const auto& e : hp_errors) all += (all.empty() ? "" : "\n") + e.ToString();
    return InvalidArgument(all);
  }
  if (o_.threads > 0) omp_set_num_threads(o_.threads);
  if (o_.output_dir.empty()) o_.output_dir = "runs/" + cfg_.name;
  std::error_code ec;
  fs::create_directories(o_.output_dir + "/checkpoints", ec);
  if (ec) return Internal("can't create " + o_.output_dir + ": " + ec.message());

  log::Info("trainer", {{"event", "data"}, {"train", config::DataFiles(cfg_.data).front().second}});
  TrainingRunOptions ro;
  SF_ASSIGN_OR_RETURN(ro.device, ParseDevice(o_.device));
  SF_ASSIGN_OR_RETURN(run_, MakeTrainingRun(cfg_, text.str(), config::WithDefaults(constants), ro));
  total_steps_ = run_->StepsFor(cfg_.searcher.max_length);
  val_period_ = cfg_.min_validation_period ? run_->StepsFor(*cfg_.min_validation_period) : 0;
  ckpt_period_ = cfg_.min_checkpoint_period ? run_->StepsFor(*cfg_.min_checkpoint_period) : 0;
  smaller_better_ = cfg_.searcher.smaller_is_better;

  if (!o_.resume.empty()) {
    SF_ASSIGN_OR_RETURN(CheckpointContents ck, ReadCheckpoint(o_.resume));
    SF_RETURN_IF_ERROR(run_->Restore(o_.resume, ck));
    if (const Value* b = ck.state.Find("best_metric"); b && b->is_number()) {
      best_metric_ = b->as_double();
      have_best_ = true;
    }
  }
  if (fs::is_symlink(o_.output_dir + "/best", ec)) {
    best_dir_ = fs::read_symlink(o_.output_dir + "/best", ec).filename().string();
  }
  metrics_.open(o_.output_dir + "/metrics.jsonl", std::ios::app);
  start_steps_ = run_->steps();
  return Status::Ok();
}

void Trainer::Report(const Value& v) {
  metrics_ << v.ToJson() << "\n";
  metrics_.flush();
}

void Trainer::Progress(bool force) {
  if (o_.quiet) return;
  const bool tty = ::isatty(2);
  if (!force && Seconds(last_progress_) < (tty ? 0.5 : 30.0)) return;
  last_progress_ = Clock::now();
  const double elapsed = Seconds(start_);
  const int64_t steps = run_->steps();
  const double rate = static_cast<double>(steps - start_steps_) / std::max(1e-9, elapsed);
  const double eta = rate > 0 ? static_cast<double>(total_steps_ - steps) / rate : -1;
  const double tok_s = win_tokens_ / std::max(1e-9, Seconds(win_start_));
  const double loss = win_tokens_ ? win_loss_ / win_tokens_ : 0;
  const int width = 24;
  const int filled = total_steps_ > 0 ? static_cast<int>(width * std::min<double>(1.0, double(steps) / double(total_steps_))) : 0;
  char line[256];
  std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld epoch %lld loss %.3f lr %.2e %.0f %s/s elapsed %s eta %s",
                std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                static_cast<long long>(steps), static_cast<long long>(total_steps_),
                static_cast<long long>(run_->epoch()), loss, lr_, tok_s, run_->token_unit(),
                Duration(elapsed).c_str(), Duration(eta).c_str());
  std::fprintf(stderr, tty ? "\r%s\033[K" : "%s\n", line);
  std::fflush(stderr);
}

Status Trainer::Validate(int64_t step) {
  auto t0 = Clock::now();
  SF_ASSIGN_OR_RETURN(RunValidation v, run_->Validate(last_train_loss_));
  Value::Map report = v.values;
  report["kind"] = "validation";
  report["step"] = step;
  report["epoch"] = run_->epoch();
  report["elapsed_s"] = Seconds(start_);
  report["validation_s"] = Seconds(t0);
  last_metric_ = v.metric;
  Report(Value(report));
  if (!v.transcripts.empty()) {
    Value transcripts = ValidationTranscriptsValue(v.transcripts);
    transcripts.as_map()["kind"] = kValidationTranscriptsGroup;
    transcripts.as_map()["step"] = step;
    Report(transcripts);
  }
  if (!o_.quiet) {
    std::string line = "validation at step " + std::to_string(step);
    char buf[64];
    for (const char* k : {"validation_loss", "validation_perplexity", "bleu", "wer", "cer"}) {
      auto it = v.values.find(k);
      if (it == v.values.end()) continue;
      std::snprintf(buf, sizeof buf, " %s %.4g", k, it->second.as_double());
      line += buf;
    }
    std::snprintf(buf, sizeof buf, " (%.1f s)", Seconds(t0));
    std::fprintf(stderr, "%s%s%s\n", ::isatty(2) ? "\n" : "", line.c_str(), buf);
  }
  return Status::Ok();
}

Status Trainer::Checkpoint(int64_t step, std::optional<double> metric, std::string* dir_out) {
  const bool better = metric && (!have_best_ || (smaller_better_ ? *metric < best_metric_ : *metric > best_metric_));
  if (better) {
    best_metric_ = *metric;
    have_best_ = true;
  }
  Value::Map extra;
  if (metric) extra["validation_metric"] = *metric;
  if (have_best_) extra["best_metric"] = best_metric_;
  CheckpointContents c = run_->Snapshot(extra);
  const std::string parent = o_.output_dir + "/checkpoints";
  SF_ASSIGN_OR_RETURN(WrittenCheckpoint w, WriteCheckpoint(parent, c));
  // latest -> this one; best -> the best so far; everything else goes.
  auto relink = [&](const std::string& name, const std::string& target) {
    std::error_code ec;
    const std::string link = o_.output_dir + "/" + name, tmp = link + ".tmp";
    fs::remove(tmp, ec);
    fs::create_directory_symlink("checkpoints/" + target, tmp, ec);
    if (!ec) fs::rename(tmp, link, ec);
  };
  std::error_code ec;
  relink("latest", w.uuid);
  if (better) {
    relink("best", w.uuid);
    best_dir_ = w.uuid;
  }
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename();
    if (name == w.uuid || name == best_dir_ || name.rfind(".tmp", 0) == 0) continue;
    fs::remove_all(entry.path(), ec);
  }
  Report(Value(Value::Map{{"kind", "checkpoint"}, {"step", step}, {"uuid", w.uuid}, {"size", w.size}}));
  log::Info("trainer", {{"event", "checkpoint"}, {"dir", w.dir}, {"steps", std::to_string(step)}});
  if (dir_out) *dir_out = w.dir;
  return Status::Ok();
}


int Trainer::Run() {
  Status st = Setup();
  if (!st.ok()) {
    std::fprintf(stderr, "sf-trainer train: %s\n", st.message().c_str());
    // Bad input (config, data, checkpoint) is the user's to fix: exit 2, like a usage error.
    const StatusCode c = st.code();
    return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound || c == StatusCode::kDataLoss ||
                   c == StatusCode::kFailedPrecondition
               ? 2
               : 1;
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  log::Info("trainer", {{"event", "train"}, {"steps", std::to_string(total_steps_)},
                        {"steps_per_epoch", std::to_string(run_->steps_per_epoch())},
                        {"parameters", std::to_string(run_->parameter_count())},
                        {"precision", config::PrecisionName(cfg_.precision)},
                        {"threads", std::to_string(omp_get_max_threads())}, {"output", o_.output_dir}});
  int64_t last_val = run_->steps(), last_ckpt = run_->steps();
  const int64_t window = std::max<int64_t>(1, cfg_.scheduling_unit);
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "\nsf-trainer train: %s\n", s.message().c_str());
    return 1;
  };
  while (run_->steps() < total_steps_) {
    auto r = run_->Step();
    if (!r.ok()) return fail(r.status());
    const StepReport& rep = r->report;
    const int64_t steps = run_->steps();
    lr_ = r->lr;
    win_loss_ += rep.loss;
    win_nll_ += rep.nll;
    win_tokens_ += rep.tokens;
    ++win_steps_;
    if (!rep.skipped && (steps % window == 0 || steps == total_steps_)) {
      Report(Value(Value::Map{{"kind", "training"},
                              {"step", steps},
                              {"epoch", run_->epoch()},
                              {"loss", win_loss_ / static_cast<double>(std::max<int64_t>(1, win_tokens_))},
                              {"nll_loss", win_nll_ / static_cast<double>(std::max<int64_t>(1, win_tokens_))},
                              {"lr", static_cast<double>(lr_)},
                              {"loss_scale", static_cast<double>(rep.loss_scale)},
                              {"grad_norm", static_cast<double>(rep.grad_norm)},
                              {"skipped_steps", run_->skipped_steps()},
                              {"tokens_per_second", static_cast<double>(win_tokens_) / std::max(1e-9, Seconds(win_start_))},
                              {"elapsed_s", Seconds(start_)}}));
      Progress(true);
      last_train_loss_ = win_loss_ / static_cast<double>(std::max<int64_t>(1, win_tokens_));
      win_loss_ = win_nll_ = 0;
      win_tokens_ = win_steps_ = 0;
      win_start_ = Clock::now();
    } else {
      Progress(false);
    }
    const bool stop_now = g_interrupted || (o_.stop_after >= 0 && steps >= o_.stop_after);
    std::optional<double> metric;
    // A validation due at this step runs before the checkpoint, also when --stop-after-steps
    // stops here (the checkpoint then carries its metric, and the resumed run does not repeat
    // it); only an interruption (Ctrl-C) skips it, to stop at once.
    if (val_period_ > 0 && steps - last_val >= val_period_ && steps < total_steps_ && !g_interrupted) {
      st = Validate(steps);
      if (!st.ok()) return fail(st);
      metric = last_metric_;
      last_val = steps;
    }
    if (stop_now || (ckpt_period_ > 0 && steps - last_ckpt >= ckpt_period_ && steps < total_steps_)) {
      std::string dir;
      st = Checkpoint(steps, metric, &dir);
      if (!st.ok()) return fail(st);
      last_ckpt = steps;
      if (stop_now) {
        std::fprintf(stderr, "\n%s at step %lld; checkpoint %s\nresume with: sf-trainer train %s --output %s --resume %s\n",
                     g_interrupted ? "interrupted" : "stopped", static_cast<long long>(steps), dir.c_str(),
                     o_.config_path.c_str(), o_.output_dir.c_str(), dir.c_str());
        return 0;
      }
    }
  }
  // The end: validate, checkpoint, and score the test set.
  st = Validate(run_->steps());
  if (!st.ok()) return fail(st);
  std::string final_dir;
  st = Checkpoint(run_->steps(), last_metric_, &final_dir);
  if (!st.ok()) return fail(st);
  if (!o_.quiet) std::fprintf(stderr, "\ntrained %lld steps in %s; checkpoint %s\n", static_cast<long long>(run_->steps()),
                              Duration(Seconds(start_)).c_str(), final_dir.c_str());
  if (o_.test && cfg_.data.test) {
    auto t0 = Clock::now();
    auto test = run_->TestSplit();
    if (!test.ok()) return fail(test.status());
    if (!test->hypotheses.empty()) {
      std::ofstream out(o_.output_dir + "/test.hyp");
      for (const auto& h : test->hypotheses) out << h << "\n";
    }
    Value::Map report = test->values;
    report["kind"] = "test";
    report["step"] = run_->steps();
    report["elapsed_s"] = Seconds(start_);
    report["test_s"] = Seconds(t0);
    Report(Value(report));
    std::printf("%s\n", test->summary.c_str());
  }
  return 0;
}

}  // namespace

void AddTrainFlags(CLI::App& cmd, TrainCommandOptions* o) {
  cmd.add_option("EXPERIMENT", o->config_path, "experiment YAML (data, hyperparameters, searcher)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd.add_option("--output", o->output_dir, "run directory: checkpoints, metrics.jsonl, test.hyp (default: runs/<name>)");
  cmd.add_option("--resume", o->resume, "continue from this checkpoint directory, bit for bit");
  cmd.add_option("--threads", o->threads, "OpenMP threads (0: OpenMP's default)")->check(cmdline::AtLeast(0));
  cmd.add_option("--device", o->device, "cpu, cuda (the first visible GPU), cuda:N or auto");
  cmd.add_option("--stop-after-steps", o->stop_after, "checkpoint and exit after this step, as an interruption would")
      ->check(cmdline::AtLeast(0))
      ->default_str("off");
  cmd.add_flag_callback("--no-test", [o] { o->test = false; }, "skip translating the test set at the end");
  cmd.add_flag("--quiet", o->quiet, "no progress lines");
}

int RunTrain(const TrainCommandOptions& options) {
  Trainer t(options);
  return t.Run();
}

void AddTranslateFlags(CLI::App& cmd, TranslateCommandOptions* o) {
  cmd.add_option("--checkpoint", o->checkpoint, "checkpoint directory (from sf-trainer train or a trial)")->required();
  cmd.add_option("--beam", o->beam, "beam size (default: the checkpoint's beam_size)")->check(cmdline::AtLeast(1));
  cmd.add_option("--lenpen", o->lenpen, "length penalty (default: the checkpoint's)");
  cmd.add_option("--max-len-a", o->max_len_a, "output length limit a*source+b: a");
  cmd.add_option("--max-len-b", o->max_len_b, "output length limit a*source+b: b");
  cmd.add_option("--max-tokens", o->max_tokens, "source tokens per batch")->check(cmdline::AtLeast(1));
  cmd.add_option("--batch-sentences", o->batch_sentences, "sentences per batch")->check(cmdline::AtLeast(1));
  cmd.add_option("--threads", o->threads, "OpenMP threads (0: OpenMP's default)")->check(cmdline::AtLeast(0));
  cmd.add_option("--device", o->device, "cpu, cuda (the first visible GPU), cuda:N or auto: where the search runs");
  cmd.add_flag_callback("--no-cache", [o] { o->cache = false; },
                        "recompute the decoder over the whole prefix (no incremental state; CPU search only)");
}

int RunTranslate(const TranslateCommandOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  auto loaded = TranslationModel::Load({options.checkpoint, options.device, options.cache});
  if (!loaded.ok()) {
    std::fprintf(stderr, "sf-trainer translate: %s\n", loaded.status().message().c_str());
    return 2;
  }
  TranslationModel& model = **loaded;
  BeamOptions beam = model.default_beam();
  if (options.beam) beam.beam = *options.beam;
  if (options.lenpen) beam.lenpen = *options.lenpen;
  if (options.max_len_a) beam.max_len_a = *options.max_len_a;
  if (options.max_len_b) beam.max_len_b = *options.max_len_b;
  beam.max_sentences = options.batch_sentences;
  beam.max_tokens = options.max_tokens;
  if (beam.beam < 1) {
    std::fprintf(stderr, "sf-trainer translate: --beam must be >= 1\n");
    return 2;
  }
  // Read everything, translate in batches of sentences sorted by length, print in input order.
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  auto hyps = TranslateLines(model.translator(), model.source_tokenizer(), model.target_tokenizer(), lines, beam,
                             model.max_source_tokens());
  if (!hyps.ok()) {
    std::fprintf(stderr, "sf-trainer translate: %s\n", hyps.status().message().c_str());
    return 1;
  }
  for (const auto& h : *hyps) std::fputs((h + "\n").c_str(), stdout);
  return 0;
}

}  // namespace sf
