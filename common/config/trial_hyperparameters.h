// A native trial's hyperparameters, typed: what the trainer reads instead of a Value map.
//
// The schema (hyperparameter_schema.h) declares every hyperparameter once: name, type, range,
// default, families. DecodeTrialHyperparameters completes a concrete map with it (WithDefaults:
// the arch preset, then the schema's defaults) and reads every knob of the arch's family into
// the structs below. Nothing here has a default of its own: a knob the completed map lacks is an
// error naming it (the schema gives it no default and the preset no value), so the defaults a
// trial trains with are the schema's and nobody else's (tests/trainer/run/hyperparameter_use_test.cc
// checks the trainer uses every one as decoded; docs/config.md's reference table is generated
// from the schema, tests/common/hyperparameter_docs_test.cc).
//
// Which groups are set follows the schema's families: `attention` for the families with
// Transformer layers, `text` for those that read text, `output_length` for those with a source
// sentence, and exactly one of the family structs. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/value.h"

namespace sf::config {

// hyperparameters.lr_schedule. Members that do not apply to `type` hold their schema default.
struct LrScheduleHp {
  std::string type;  // constant | inverse_sqrt | linear | cosine | exponential
  int64_t warmup = 0;
  double warmup_init_lr = 0;
  std::optional<int64_t> total_steps;  // absent: searcher.max_length (the trainer's choice)
  double min_lr = 0;
  double gamma = 0;
};

// hyperparameters.optimizer. Members that do not apply to `type` hold their schema default.
struct OptimizerHp {
  std::string type;  // adamw | radam | sgd
  double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double momentum = 0;
  bool nesterov = false;
  double rho_threshold = 0;
  bool decoupled_weight_decay = false;
};

// Every family: the optimisation.
struct OptimizationHp {
  double lr = 0;
  LrScheduleHp lr_schedule;
  OptimizerHp optimizer;
  double clip_norm = 0;
  uint64_t seed = 0;
};

// The Transformer layers' knobs (transformer, transformer_lm, speech_transformer_ctc).
struct AttentionHp {
  int64_t d_model = 0, heads = 0, ffn_dim = 0;
  double attention_dropout = 0, activation_dropout = 0;
  std::string activation;  // relu | gelu
  bool normalize_before = false;
};

// The families that read text (transformer, lstm, transformer_lm, fconv).
struct TextHp {
  int64_t max_tokens = 0;
  double label_smoothing = 0;
  double lenpen = 0;
  bool share_decoder_input_output_embed = false;
};

// The families with a source sentence (transformer, lstm, fconv): output length a·source + b.
struct OutputLengthHp {
  double max_len_a = 0;
  int64_t max_len_b = 0;
};

struct TransformerHp {
  int64_t encoder_layers = 0, decoder_layers = 0;
  bool share_embeddings = false;
};

struct TransformerLmHp {
  int64_t decoder_layers = 0;
};

// fairseq's lstm arguments.
struct LstmHp {
  int64_t encoder_embed_dim = 0, encoder_hidden_size = 0, encoder_layers = 0;
  bool encoder_bidirectional = false;
  int64_t encoder_bidirectional_layers = 0;
  double encoder_dropout_in = 0, encoder_dropout_out = 0;
  int64_t decoder_embed_dim = 0, decoder_hidden_size = 0, decoder_out_embed_dim = 0, decoder_layers = 0;
  double decoder_dropout_in = 0, decoder_dropout_out = 0;
  int64_t residual_from_layer = 0;
};

// fairseq's fconv arguments: encoder_layers / decoder_layers convolutions of conv_channels
// channels, kernel_size wide.
struct FConvHp {
  int64_t encoder_embed_dim = 0, decoder_embed_dim = 0, decoder_out_embed_dim = 0;
  int64_t encoder_layers = 0, decoder_layers = 0, conv_channels = 0, kernel_size = 0;
};

// The speech recogniser (docs/speech.md).
struct SpeechCtcHp {
  int64_t conv_channels = 0, encoder_layers = 0;
  int64_t decoder_layers = 0;  // 0: CTC only (the hyperparameter absent)
  double ctc_weight = 0;
  int64_t max_frames = 0;
};

struct TrialHyperparameters {
  std::string arch, family;  // family: ArchFamily(arch)
  OptimizationHp optimization;
  double dropout = 0;
  int64_t beam_size = 0;
  std::optional<AttentionHp> attention;
  std::optional<TextHp> text;
  std::optional<OutputLengthHp> output_length;
  // Exactly one, by family.
  std::optional<TransformerHp> transformer;
  std::optional<TransformerLmHp> transformer_lm;
  std::optional<LstmHp> lstm;
  std::optional<FConvHp> fconv;
  std::optional<SpeechCtcHp> speech;
};

// A concrete hyperparameter map (a trial's, or one stored in a checkpoint) completed with
// WithDefaults and read into the structs. Errors name the hyperparameter
// ("hyperparameters.d_model: expected an integer, got \"x\""; "hyperparameters.arch: 'foo' is
// not a known architecture").
Result<TrialHyperparameters> DecodeTrialHyperparameters(const Value& hparams);

}  // namespace sf::config
