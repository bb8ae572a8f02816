// Standalone mode: training any family and translating, with no master:
//
//   sf-trainer train EXPERIMENT.yaml [--output DIR] [--resume CHECKPOINT] [--threads N]
//                    [--stop-after-steps N] [--no-test] [--quiet]
//   sf-trainer translate --checkpoint DIR [--beam N] [--lenpen X] [--max-len-a A]
//                        [--max-len-b B] [--max-tokens N] [--batch-sentences N] [--threads N] [--no-cache]
//
// `train` reads the experiment's data section (a TrainingRun, training_run.h: text through
// TranslationData's tokenizer and cached binarized text, or speech manifests through the
// feature cache — docs/speech.md), builds the model and optimizer from its hyperparameters and trains for
// searcher.max_length, printing progress (step, epoch, loss, tokens/s, ETA) on stderr. It
// validates every min_validation_period (loss, perplexity, and BLEU on the valid set with beam
// search when searcher.metric is bleu), checkpoints every min_checkpoint_period and at the end
// under DIR/checkpoints/<uuid> (DIR/latest and DIR/best are symlinks; older ones are removed),
// appends every report to DIR/metrics.jsonl (a speech run's validations each followed by a
// "validation_transcripts" record: validation_transcripts.h), and when the data has a test set scores it at the
// end: a translation model's beam-search translations by sacreBLEU-compatible BLEU, a language
// model's perplexity, a speech model's greedy transcripts by WER and CER (translations and
// transcripts in DIR/test.hyp). SIGINT/SIGTERM finish the current step, write a checkpoint and exit 0.
// --resume continues a checkpoint bit for bit (same thread count). --stop-after-steps N
// checkpoints and exits after step N, as an interruption would.
//
// `translate` reads sentences from stdin (one per line) and writes one translation per line.
//
// Exit status: 0 success, 1 run-time error, 2 bad usage or bad configuration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace sf {

struct TrainCommandOptions {
  std::string config_path;  // EXPERIMENT.yaml
  std::string output_dir;   // default runs/<experiment name>
  std::string resume;       // checkpoint directory
  int threads = 0;          // 0: OpenMP's default
  std::string device = "cpu";  // cpu | cuda | cuda:N | auto
  int64_t stop_after = -1;  // --stop-after-steps; -1: run to searcher.max_length
  bool test = true;         // --no-test clears it
  bool quiet = false;
};

struct TranslateCommandOptions {
  std::string checkpoint;
  std::optional<int> beam;             // unset: the checkpoint's hyperparameters decide
  std::optional<float> lenpen, max_len_a;
  std::optional<int64_t> max_len_b;
  int64_t batch_sentences = 64, max_tokens = 2048;
  int threads = 0;
  std::string device;  // --device: "" / "cpu", "cuda", "cuda:N", "auto"
  bool cache = true;  // --no-cache clears it
};

// Register each command's flags and positionals on its CLI11 subcommand, parsing into `o`
// (which must outlive the parse); run it once parsed. Run* return the exit status.
void AddTrainFlags(CLI::App& command, TrainCommandOptions* o);
int RunTrain(const TrainCommandOptions& o);
void AddTranslateFlags(CLI::App& command, TranslateCommandOptions* o);
int RunTranslate(const TranslateCommandOptions& o);

}  // namespace sf
