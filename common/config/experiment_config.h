// The experiment configuration: the YAML a user submits, parsed into typed structs.
//
// One parser and validator, shared by the CLI (validates before submitting), the master
// (validates again on CreateExperiment) and the trainer (reads its trial's config). Every
// problem is reported as a ConfigError naming the field path, the offending value and the
// reason ("searcher.max_trials: -3 must be >= 1"); all problems in a document are reported
// together, in document order. Unknown keys are errors, with a "did you mean" for near misses.
//
// An experiment either trains one of the native trainer's built-in models (no `entrypoint`:
// `data` is required and hyperparameters are checked against hyperparameter_schema.h) or runs
// the user's own code through the Core API (`entrypoint` given, docs/core-api.md: `data` is
// optional, hyperparameters and the searcher's metric are free-form names).
//
// docs/config.md documents every field, its type, default and range; keep the two in step.
//
// Functions here are pure (no I/O except LoadExperimentConfigFile) and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/value.h"

namespace sf::config {

// One problem in a document. `path` is dotted ("searcher.max_trials",
// "hyperparameters.optimizer.betas[1]"); "<document>" for problems with the whole document
// (syntax errors, empty file, size). line/column are 1-based; 0 when unknown.
struct ConfigError {
  std::string path;
  std::string message;
  int line = 0;
  int column = 0;

  // "path: message"
  std::string ToString() const;
  // "source:line:column: path: message" (location parts omitted when unknown).
  std::string ToStringWithLocation(std::string_view source) const;
};

// A training length: exactly one of batches or epochs.
struct Length {
  enum class Unit { kBatches, kEpochs };
  Unit unit = Unit::kBatches;
  int64_t value = 0;
  std::string ToString() const;  // "{batches: 500}"
};

// One split of the data: parallel text (`{src: FILE, tgt: FILE}`, a sentence and its translation
// on the same line of each) or, for a language model, one side's text (`{text: FILE}`). The
// latter is held with the text as the target side, `tgt`, and `src` empty: the side a model's
// decoder predicts is always `tgt`. Paths are absolute once ResolvePaths has run (an empty `src`
// stays empty).
//
// A speech split (`{manifest: FILE}`, docs/speech.md) holds the manifest in `manifest`, with
// `src` and `tgt` empty. All splits of a document are of one kind (data_config.h).
struct ParallelFiles {
  std::string src;
  std::string tgt;
  std::string manifest;

  // Whether this split is one side's text (`{text: FILE}`, in `tgt`). Meaningful only for a split
  // the document gave: ExperimentConfig::has_data.
  bool monolingual() const { return src.empty() && manifest.empty(); }
  // Whether this split is audio with transcripts (`{manifest: FILE}`).
  bool speech() const { return !manifest.empty(); }
};

struct TokenizerConfig {
  std::string type = "sentencepiece";
  int64_t vocab_size = 8000;
  std::string model_type = "bpe";      // bpe | unigram | char | word
  bool shared = true;                  // one vocabulary for source and target
  std::optional<std::string> model;    // an existing SentencePiece model; trained when absent
  double character_coverage = 1.0;
};

// SpecAugment (Park et al. 2019) on training batches: `data.spec_augment` (speech data only).
// The fields are trainer/speech/features.h's SpecAugmentOptions.
struct SpecAugmentConfig {
  int64_t freq_masks = 2, freq_width = 27, time_masks = 2, time_width = 100;
  double time_ratio = 1.0;
};

// The speech front end (`data.features`) and augmentation, for speech data (manifests): what
// trainer/speech/features.h computes from each utterance's audio.
struct SpeechDataConfig {
  int64_t sample_rate = 16000;  // Hz; audio at another rate is an error, never resampled
  int64_t mels = 80;
  double window_ms = 25, hop_ms = 10;
  bool utterance_cmvn = true;                      // normalise each utterance's features
  std::optional<SpecAugmentConfig> spec_augment;  // off when absent
};

// The `data` section. Every split given is of one kind: all parallel, all monolingual, or all
// speech (ParseExperimentConfig refuses a mix).
struct DataConfig {
  ParallelFiles train;
  std::optional<ParallelFiles> valid;
  std::optional<ParallelFiles> test;
  TokenizerConfig tokenizer;  // text data
  int64_t max_source_positions = 256;
  int64_t max_target_positions = 256;
  SpeechDataConfig speech;  // speech data: `features`, `spec_augment`

  bool speech_data() const { return train.speech(); }
};

// A hyperparameter: a constant, a search space, or a nested group of hyperparameters.
// A map whose `type` is one of const/int/double/log/categorical is a space; any other map is a
// nested group (e.g. `optimizer: {type: radam, betas: [0.9, 0.98]}`), whose members may
// themselves be spaces. A group's `type` member, when given, is a kConst member like any other.
// Native experiments know a fixed set of names and groups; with an entrypoint any name is
// accepted and any map without a space `type` is a group (hyperparameter_reader.h).
struct Hyperparameter {
  enum class Kind { kConst, kInt, kDouble, kLog, kCategorical, kNested };
  Kind kind = Kind::kConst;
  Value value;                      // kConst
  double minval = 0, maxval = 0;    // kInt, kDouble, kLog (kLog: exponents of `base`)
  double base = 10;                 // kLog
  std::optional<int64_t> count;     // kInt, kDouble, kLog: grid points
  std::vector<Value> vals;          // kCategorical
  std::map<std::string, Hyperparameter> members;  // kNested

  bool is_space() const;  // true when this or a nested member is not a constant
};
using Hyperparameters = std::map<std::string, Hyperparameter>;

enum class Precision { kFp32, kBf16, kFp16 };
const char* PrecisionName(Precision p);

struct LossScalingConfig {
  enum class Type { kNone, kStatic, kDynamic };
  Type type = Type::kNone;
  double scale = 1.0;                       // static
  double init_scale = 128.0;                // dynamic
  std::optional<int64_t> growth_interval;   // dynamic; default 2^14 / (world size × aggregation)
  double scale_factor = 2.0;                // dynamic
  double min_scale = 1e-4;                  // dynamic
};

struct OptimizationsConfig {
  int64_t aggregation_frequency = 1;
  Precision allreduce_dtype = Precision::kFp32;
  int64_t bucket_size_mb = 25;
};

struct ResourcesConfig {
  int64_t slots_per_trial = 1;
  std::string resource_pool = "default";
  int64_t priority = 42;  // 1..99, lower runs first (Determined's priority scheduler)
  std::optional<int64_t> max_slots;  // across all the experiment's running trials
  double weight = 1.0;  // its share of a fair-share pool, relative to the others' (> 0)
};

// Requests to a Slurm resource pool (docs/slurm.md): ignored by agent pools.
struct SlurmConfig {
  std::string time;                      // sbatch --time ("90" minutes, "1:30:00", "2-00:00:00")
  std::string account, qos;              // override the pool's
  std::vector<std::string> sbatch_args;  // added to sbatch's arguments
};

struct SearcherConfig {
  enum class Name { kSingle, kGrid, kRandom, kAdaptiveAsha };
  enum class AshaMode { kAggressive, kStandard, kConservative };
  Name name = Name::kSingle;
  std::string metric;
  bool smaller_is_better = true;
  Length max_length;
  int64_t max_trials = 1;              // random, adaptive_asha (grid: the product's size)
  int64_t max_concurrent_trials = 16;  // 0 = no limit
  int64_t seed = 0;                    // random, adaptive_asha
  AshaMode mode = AshaMode::kStandard; // adaptive_asha
  double divisor = 4.0;                // adaptive_asha
  int64_t max_rungs = 5;               // adaptive_asha
  std::vector<int64_t> bracket_rungs;  // adaptive_asha; empty = derived from mode
};
const char* SearcherName(SearcherConfig::Name n);

struct CheckpointStorageConfig {
  std::string type = "shared_fs";  // or "s3" (docs/object-storage.md)
  // shared_fs: a directory every agent and the master reach at the same path.
  std::string host_path = "/var/lib/steadfast/checkpoints";
  std::optional<std::string> storage_path;  // sub-directory under host_path
  // s3: checkpoints as objects under s3://<bucket>/<prefix>/. Keys left empty come from the
  // environment of whoever reads or writes (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
  std::string bucket, prefix, endpoint_url, region, access_key, secret_key;
  bool is_s3() const { return type == "s3"; }
  int64_t save_experiment_best = 0;
  int64_t save_trial_best = 1;
  int64_t save_trial_latest = 1;
};

struct ExperimentConfig {
  std::string name;
  std::string description;
  // The command each trial runs instead of the native trainer (the Core API, docs/core-api.md);
  // empty for a native experiment. The string form (`entrypoint: python3 train.py --epochs 3`)
  // is one element, a shell command line, with entrypoint_is_shell set; the list form
  // (`entrypoint: [python3, train.py]`) is the program and its arguments, run without a shell.
  // Each element is non-empty, without NUL, and at most 4096 bytes.
  std::vector<std::string> entrypoint;
  bool entrypoint_is_shell = false;
  // The directory whose files each trial of an entrypoint experiment gets as its working
  // directory. Given only with an entrypoint. As written until ResolvePaths, which makes it
  // absolute against the YAML file's directory and, when absent, sets it to that directory.
  std::optional<std::string> context_directory;
  // Required without an entrypoint. With one it may be absent: then it holds the defaults and
  // empty paths (has_data() is false).
  DataConfig data;
  Hyperparameters hyperparameters;
  Precision precision = Precision::kFp32;
  LossScalingConfig loss_scaling;
  OptimizationsConfig optimizations;
  ResourcesConfig resources;
  SlurmConfig slurm;
  SearcherConfig searcher;
  std::optional<Length> min_validation_period;
  std::optional<Length> min_checkpoint_period;
  std::optional<CheckpointStorageConfig> checkpoint_storage;  // the master's default when absent
  int64_t max_restarts = 5;
  int64_t scheduling_unit = 100;  // batches between training-metric reports
  // `reproducibility: {experiment_seed: N}` (Determined's key): what each trial's seed is
  // derived from (TrialSeed). Absent: the experiment's id.
  std::optional<int64_t> experiment_seed;

  // Whether trials run user code (an entrypoint) rather than the native trainer.
  bool has_entrypoint() const { return !entrypoint.empty(); }
  // Whether the document gave `data` (data.train's `tgt`, its `text` or its `manifest` is
  // required and non-empty when it does).
  bool has_data() const { return !data.train.tgt.empty() || !data.train.manifest.empty(); }
};

// The outcome of parsing: a config when there are no errors.
struct ParseResult {
  std::optional<ExperimentConfig> config;
  std::vector<ConfigError> errors;
  bool ok() const { return errors.empty() && config.has_value(); }
  // All errors, one per line, each "path: message".
  std::string ErrorText() const;
};

// Documents larger than this are refused before parsing.
inline constexpr size_t kMaxConfigBytes = 4u << 20;

// Parses and validates YAML text. Never throws; every problem is in `errors`.
ParseResult ParseExperimentConfig(std::string_view yaml_text);

// Reads `path` and parses it; a file that can't be read is an error at "<document>".
// Relative data/tokenizer/checkpoint paths and the context directory are resolved against the
// file's directory (ResolvePaths).
ParseResult LoadExperimentConfigFile(const std::string& path);

// The config as API readers see it: checkpoint_storage.secret_key replaced by "********" (the
// document re-emitted, so comments go, only when it has one); every other document unchanged.
// The master keeps and uses the real text (trials need the key).
inline constexpr char kRedacted[] = "********";
std::string RedactConfigSecrets(const std::string& config_yaml);

// Makes every relative path in the config (data files, tokenizer model, checkpoint host_path,
// context_directory) absolute against `base_dir`; with an entrypoint and no context_directory,
// sets context_directory to `base_dir`. Directories come out normalised, without a trailing '/'.
void ResolvePaths(ExperimentConfig& config, const std::string& base_dir);

// The data files of `data`, each with the key the document gives it under, in document order:
// "data.train.src" and "data.train.tgt" for a parallel split, "data.train.text" (the file in
// `tgt`) for a monolingual one, "data.train.manifest" for a speech one; then valid and test when given. For checking and rewriting the
// paths a user wrote (the CLI, the master) without knowing the split's kind. Call it on a config
// with data (has_data).
std::vector<std::pair<std::string, std::string>> DataFiles(const DataConfig& data);

// Sets `key` (a dotted path like "searcher.max_trials" or "hyperparameters.lr") to `value`
// (parsed as YAML: "4", "0.1", "[0.9, 0.98]", "{type: log, ...}") in the YAML text and returns
// the new text; the result still has to be parsed and validated. Errors name the key.
Result<std::string> ApplyOverride(std::string_view yaml_text, std::string_view key_equals_value);

// The hyperparameters every trial gets when each space is replaced by a concrete value:
// checks a sampled set against the native model's rules (types, ranges, a hyperparameter that
// does not apply to the arch's family, and on the values WithDefaults completes: heads dividing
// d_model for a transformer or a transformer_lm; decoder_layers <= encoder_layers for an lstm; a
// tied output projection's widths for an lstm or an fconv). Paths in errors are "hyperparameters.<name>". For native
// experiments only: the trainer calls it; an entrypoint's hyperparameters are the user code's to
// check.
std::vector<ConfigError> ValidateTrialHyperparameters(const Value& hparams);

// The hyperparameters with every constant resolved (spaces left out; a group as a map of its
// constant members): for display and for the `single` searcher. Native and free-form alike.
Value ConstantHyperparameters(const Hyperparameters& hps);

// Number of grid points of a space (count, or every integer of an int range; for a group the
// product of its members', saturating at INT64_MAX); 0 when the space can't be enumerated
// (double/log without count, an int range of more than 1000 values without count).
int64_t GridPointCount(const Hyperparameter& hp);

}  // namespace sf::config
