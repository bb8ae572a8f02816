// The schema's values are what the trainer uses, for every knob of every arch: each arch's
// completed hyperparameters (config::WithDefaults: the preset, then the schema's defaults) go
// through the typed decoder into the trainer's own structures (the model config, the optimizer,
// the LR schedule, the beam), and reading those back gives every completed value. A knob the
// trainer drops on the way (leaving a config struct's own default) fails here, naming the arch
// and the knob; so does a knob the trainer has no reading of.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/config/hyperparameter_schema.h"
#include "common/config/trial_hyperparameters.h"
#include "trainer/models/fconv.h"
#include "trainer/optim/from_config.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/speech_run.h"
#include "trainer/run/text_run.h"

namespace sf {
namespace {

// Every value of the completed map, groups flattened ("optimizer.eps").
Value::Map Flatten(const Value::Map& completed) {
  Value::Map out;
  for (const auto& [k, v] : completed) {
    if (v.is_map()) {
      for (const auto& [m, x] : v.as_map()) out[k + "." + m] = x;
    } else {
      out[k] = v;
    }
  }
  return out;
}

// What the trainer's structures hold, under the hyperparameters' names.
Result<Value::Map> TrainerValues(const config::TrialHyperparameters& hp) {
  Value::Map v;
  if (hp.speech) {
    SF_ASSIGN_OR_RETURN(SpeechCtcConfig c, SpeechCtcConfigFromHyperparameters(hp, 80, 32));
    v = {{"conv_channels", c.conv_channels}, {"d_model", c.d_model}, {"heads", c.heads},
         {"encoder_layers", c.layers}, {"ffn_dim", c.ffn_dim}, {"dropout", static_cast<double>(c.dropout)},
         {"attention_dropout", static_cast<double>(c.attention_dropout)},
         {"activation_dropout", static_cast<double>(c.activation_dropout)},
         {"activation", ActivationName(c.activation)}, {"normalize_before", c.normalize_before},
         {"ctc_weight", static_cast<double>(c.ctc_weight)}, {"max_frames", hp.speech->max_frames}};
    if (c.decoder_layers > 0) v["decoder_layers"] = c.decoder_layers;
  } else {
    SF_ASSIGN_OR_RETURN(ModelSpec spec, ModelSpecFromHyperparameters(hp, 100, 100, 1024));
    v = spec.ToValue().as_map();
    if (spec.family() == "fconv") {
      // The layer lists ("256x3,...") as fairseq's count, channels and width.
      const FConvConfig& c = spec.config<FConvConfig>();
      v["encoder_layers"] = static_cast<int64_t>(c.encoder_convs.size());
      v["decoder_layers"] = static_cast<int64_t>(c.decoder_convs.size());
      v["conv_channels"] = c.encoder_convs.front().channels;
      v["kernel_size"] = c.encoder_convs.front().kernel;
      for (const auto& convs : {c.encoder_convs, c.decoder_convs}) {
        for (const ConvSpec& layer : convs) {
          if (layer.channels != c.encoder_convs.front().channels || layer.kernel != c.encoder_convs.front().kernel) {
            return Internal("fconv layers differ");
          }
        }
      }
    }
    if (spec.family() == "lstm") {
      // fairseq's lstm uses `dropout` only as the four rates' default (checked through them).
      v["dropout"] = hp.dropout;
    }
    v["max_tokens"] = hp.text->max_tokens;
  }
  const BeamOptions beam = BeamFromHyperparameters(hp);
  v["beam_size"] = static_cast<int64_t>(beam.beam);
  if (hp.text) v["lenpen"] = static_cast<double>(beam.lenpen);
  if (hp.output_length) {
    v["max_len_a"] = static_cast<double>(beam.max_len_a);
    v["max_len_b"] = beam.max_len_b;
  }
  const OptimizerOptions o = OptimizerOptionsFromHyperparameters(hp.optimization.optimizer);
  v["optimizer.type"] = o.type;
  v["optimizer.betas"] = Value(Value::List{o.beta1, o.beta2});
  v["optimizer.eps"] = o.eps;
  v["optimizer.weight_decay"] = o.weight_decay;
  v["optimizer.momentum"] = o.momentum;
  v["optimizer.nesterov"] = o.nesterov;
  v["optimizer.rho_threshold"] = o.radam_rho_threshold;
  v["optimizer.decoupled_weight_decay"] = o.decoupled_weight_decay;
  const LrScheduleOptions s =
      LrScheduleOptionsFromHyperparameters(hp.optimization.lr, hp.optimization.lr_schedule, 777);
  v["lr"] = s.lr;
  v["lr_schedule.type"] = s.type;
  v["lr_schedule.warmup"] = s.warmup_steps;
  v["lr_schedule.warmup_init_lr"] = s.warmup_init_lr;
  v["lr_schedule.min_lr"] = s.min_lr;
  v["lr_schedule.gamma"] = s.gamma;
  if (hp.optimization.lr_schedule.total_steps) v["lr_schedule.total_steps"] = s.total_steps;
  // Read by the runs straight from the decoded struct (TextRun, SpeechRun, MakeRunStepParts).
  v["seed"] = static_cast<int64_t>(hp.optimization.seed);
  v["clip_norm"] = hp.optimization.clip_norm;
  v["arch"] = hp.arch;
  return v;
}

bool Same(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    return std::abs(a.as_double() - b.as_double()) <= 1e-6 * std::max(1.0, std::abs(a.as_double()));
  }
  if (a.is_list() && b.is_list() && a.as_list().size() == b.as_list().size()) {
    for (size_t i = 0; i < a.as_list().size(); ++i) {
      if (!Same(a.as_list()[i], b.as_list()[i])) return false;
    }
    return true;
  }
  return a == b;
}

void ExpectTrainerUses(const Value::Map& hparams, const std::string& what) {
  const Value::Map completed = Flatten(config::WithDefaults(Value(hparams)).as_map());
  auto hp = config::DecodeTrialHyperparameters(Value(hparams));
  ASSERT_TRUE(hp.ok()) << what << ": " << hp.status().ToString();
  auto trainer = TrainerValues(*hp);
  ASSERT_TRUE(trainer.ok()) << what << ": " << trainer.status().ToString();
  for (const auto& [name, value] : completed) {
    auto it = trainer->find(name);
    if (it == trainer->end()) {
      ADD_FAILURE() << what << ": the trainer has no reading of " << name;
      continue;
    }
    EXPECT_TRUE(Same(value, it->second)) << what << ": " << name << " is " << value.ToDisplay()
                                         << " in the schema, " << it->second.ToDisplay() << " in the trainer";
  }
}

TEST(HyperparameterUse, EveryArchTrainsWithTheSchemasValues) {
  for (const std::string& arch : config::FindHyperparameterSpec("arch")->options) {
    ExpectTrainerUses({{"arch", arch}}, arch);
  }
}

// Values other than the defaults reach the trainer too (a knob copied from the wrong field, or
// not at all, shows here even where its default happens to equal the config struct's).
TEST(HyperparameterUse, GivenValuesReachTheTrainer) {
  ExpectTrainerUses({{"arch", "transformer_tiny"}, {"d_model", int64_t{96}}, {"heads", int64_t{3}},
                     {"ffn_dim", int64_t{200}}, {"encoder_layers", int64_t{2}}, {"decoder_layers", int64_t{5}},
                     {"dropout", 0.15}, {"attention_dropout", 0.05}, {"activation_dropout", 0.07},
                     {"activation", "gelu"}, {"normalize_before", true}, {"share_embeddings", true},
                     {"label_smoothing", 0.2},
                     {"max_tokens", int64_t{1234}}, {"beam_size", int64_t{7}}, {"lenpen", 0.6},
                     {"max_len_a", 1.5}, {"max_len_b", int64_t{3}}, {"seed", int64_t{99}}, {"clip_norm", 0.5},
                     {"lr", 2e-3},
                     {"optimizer", Value(Value::Map{{"type", "radam"}, {"betas", Value(Value::List{0.8, 0.9})},
                                                    {"eps", 1e-6}, {"weight_decay", 0.01},
                                                    {"rho_threshold", 4.0}, {"decoupled_weight_decay", true}})},
                     {"lr_schedule", Value(Value::Map{{"type", "cosine"}, {"warmup", int64_t{10}},
                                                      {"warmup_init_lr", 1e-7}, {"total_steps", int64_t{500}},
                                                      {"min_lr", 1e-5}})}},
                    "a transformer with every knob given");
  ExpectTrainerUses({{"arch", "lstm_small"}, {"encoder_embed_dim", int64_t{40}}, {"encoder_hidden_size", int64_t{48}},
                     {"encoder_layers", int64_t{3}}, {"encoder_bidirectional", true},
                     {"encoder_bidirectional_layers", int64_t{1}}, {"encoder_dropout_in", 0.01},
                     {"encoder_dropout_out", 0.02}, {"decoder_embed_dim", int64_t{56}},
                     {"decoder_hidden_size", int64_t{64}}, {"decoder_out_embed_dim", int64_t{56}},
                     {"decoder_layers", int64_t{2}}, {"decoder_dropout_in", 0.03}, {"decoder_dropout_out", 0.04},
                     {"residual_from_layer", int64_t{3}},
                     {"optimizer", Value(Value::Map{{"type", "sgd"}, {"momentum", 0.5}, {"nesterov", true}})},
                     {"lr_schedule", Value(Value::Map{{"type", "exponential"}, {"gamma", 0.99}})}},
                    "an lstm with every knob given");
  ExpectTrainerUses({{"arch", "fconv_small"}, {"conv_channels", int64_t{32}}, {"kernel_size", int64_t{5}},
                     {"encoder_layers", int64_t{2}}, {"decoder_layers", int64_t{3}},
                     {"encoder_embed_dim", int64_t{24}}, {"decoder_embed_dim", int64_t{24}},
                     {"decoder_out_embed_dim", int64_t{24}}, {"dropout", 0.3}},
                    "an fconv with every knob given");
  ExpectTrainerUses({{"arch", "transformer_lm_small"}, {"decoder_layers", int64_t{2}}, {"d_model", int64_t{64}},
                     {"heads", int64_t{2}}, {"share_decoder_input_output_embed", false}},
                    "a language model with its knobs given");
  ExpectTrainerUses({{"arch", "speech_transformer_ctc_small"}, {"conv_channels", int64_t{16}},
                     {"encoder_layers", int64_t{2}}, {"decoder_layers", int64_t{1}}, {"ctc_weight", 0.5},
                     {"max_frames", int64_t{3000}}, {"normalize_before", false}},
                    "a speech recogniser with its knobs given");
}

}  // namespace
}  // namespace sf
