// The typed decoder of a trial's hyperparameters (common/config/trial_hyperparameters.h): every
// arch decodes into its family's structs with the preset's and the schema's values, given values
// win, and a wrong value is an error naming the hyperparameter.
#include "common/config/trial_hyperparameters.h"

#include <gtest/gtest.h>

#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

Result<TrialHyperparameters> Decode(Value::Map hp) { return DecodeTrialHyperparameters(Value(std::move(hp))); }

TEST(TrialHyperparameters, EveryArchDecodesIntoItsFamilysStructs) {
  for (const std::string& arch : FindHyperparameterSpec("arch")->options) {
    auto hp = Decode({{"arch", arch}});
    ASSERT_TRUE(hp.ok()) << arch << ": " << hp.status().ToString();
    const std::string family = ArchFamily(arch);
    EXPECT_EQ(hp->family, family);
    EXPECT_EQ(hp->arch, arch);
    const int families = hp->transformer.has_value() + hp->transformer_lm.has_value() + hp->lstm.has_value() +
                         hp->fconv.has_value() + hp->speech.has_value();
    EXPECT_EQ(families, 1) << arch;
    EXPECT_EQ(hp->attention.has_value(), AppliesTo(*FindHyperparameterSpec("d_model"), family)) << arch;
    EXPECT_EQ(hp->text.has_value(), AppliesTo(*FindHyperparameterSpec("max_tokens"), family)) << arch;
    EXPECT_EQ(hp->output_length.has_value(), AppliesTo(*FindHyperparameterSpec("max_len_a"), family)) << arch;
    // The schema's defaults, for every family alike.
    EXPECT_EQ(hp->optimization.lr, 5e-4) << arch;
    EXPECT_EQ(hp->optimization.lr_schedule.type, "inverse_sqrt");
    EXPECT_EQ(hp->optimization.lr_schedule.warmup, 4000);
    EXPECT_FALSE(hp->optimization.lr_schedule.total_steps.has_value());
    EXPECT_EQ(hp->optimization.optimizer.type, "adamw");
    EXPECT_EQ(hp->optimization.optimizer.beta2, 0.98);
    EXPECT_EQ(hp->optimization.seed, 1u);
    EXPECT_EQ(hp->beam_size, 4);
  }
}

TEST(TrialHyperparameters, PresetsThenDefaultsThenGivenValues) {
  auto big = Decode({{"arch", "transformer_big"}});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->attention->d_model, 1024);
  EXPECT_EQ(big->attention->heads, 16);
  EXPECT_EQ(big->transformer->encoder_layers, 6);
  EXPECT_EQ(big->dropout, 0.3);
  EXPECT_EQ(big->text->max_tokens, 4096);
  EXPECT_EQ(big->text->label_smoothing, 0.1);
  EXPECT_EQ(big->output_length->max_len_a, 1.2);
  EXPECT_EQ(big->output_length->max_len_b, 10);

  auto given = Decode({{"arch", "transformer_tiny"}, {"d_model", int64_t{128}}, {"dropout", 0.25},
                       {"optimizer", Value(Value::Map{{"type", "radam"}, {"eps", 1e-6}})},
                       {"lr_schedule", Value(Value::Map{{"type", "cosine"}, {"total_steps", int64_t{900}}})}});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->attention->d_model, 128);
  EXPECT_EQ(given->attention->heads, 4);  // the preset's
  EXPECT_EQ(given->dropout, 0.25);
  EXPECT_EQ(given->optimization.optimizer.type, "radam");
  EXPECT_EQ(given->optimization.optimizer.eps, 1e-6);
  EXPECT_EQ(given->optimization.optimizer.rho_threshold, 5.0);
  EXPECT_EQ(given->optimization.lr_schedule.total_steps, 900);
  EXPECT_EQ(given->optimization.lr_schedule.min_lr, 0.0);

  // No arch: the Transformer.
  auto none = Decode({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->family, "transformer");
  EXPECT_EQ(none->attention->d_model, 512);
}

TEST(TrialHyperparameters, DerivedDefaults) {
  // fairseq's lstm: the four dropout rates follow `dropout` unless given.
  auto lstm = Decode({{"arch", "lstm_small"}, {"encoder_dropout_out", 0.05}});
  ASSERT_TRUE(lstm.ok());
  EXPECT_EQ(lstm->dropout, 0.2);
  EXPECT_EQ(lstm->lstm->encoder_dropout_in, 0.2);
  EXPECT_EQ(lstm->lstm->encoder_dropout_out, 0.05);
  EXPECT_EQ(lstm->lstm->decoder_dropout_out, 0.2);
  EXPECT_TRUE(lstm->lstm->encoder_bidirectional);
  // The speech recogniser: CTC only without a decoder; 0.3 with one.
  auto ctc = Decode({{"arch", "speech_transformer_ctc_small"}});
  ASSERT_TRUE(ctc.ok());
  EXPECT_EQ(ctc->speech->decoder_layers, 0);
  EXPECT_EQ(ctc->speech->ctc_weight, 1.0);
  EXPECT_EQ(ctc->speech->max_frames, 10000);
  EXPECT_TRUE(ctc->attention->normalize_before);
  auto joint = Decode({{"arch", "speech_transformer_ctc_small"}, {"decoder_layers", int64_t{2}}});
  ASSERT_TRUE(joint.ok());
  EXPECT_EQ(joint->speech->decoder_layers, 2);
  EXPECT_EQ(joint->speech->ctc_weight, 0.3);
  // fconv: the convolutions' count, width and channels.
  auto fconv = Decode({{"arch", "fconv_iwslt_de_en"}});
  ASSERT_TRUE(fconv.ok());
  EXPECT_EQ(fconv->fconv->encoder_layers, 4);
  EXPECT_EQ(fconv->fconv->decoder_layers, 3);
  EXPECT_EQ(fconv->fconv->conv_channels, 256);
  EXPECT_EQ(fconv->fconv->kernel_size, 3);
}

TEST(TrialHyperparameters, WrongValuesNameTheHyperparameter) {
  auto bad_int = Decode({{"d_model", "wide"}});
  ASSERT_FALSE(bad_int.ok());
  EXPECT_EQ(bad_int.status().message(), "hyperparameters.d_model: expected an integer, got \"wide\"");
  auto bad_enum = Decode({{"activation", "tanh"}});
  ASSERT_FALSE(bad_enum.ok());
  EXPECT_EQ(bad_enum.status().message(), "hyperparameters.activation: \"tanh\" is not one of relu, gelu");
  auto bad_member = Decode({{"lr_schedule", Value(Value::Map{{"type", "linear"}, {"warmup", 1.5}})}});
  ASSERT_FALSE(bad_member.ok());
  EXPECT_EQ(bad_member.status().message(), "hyperparameters.lr_schedule.warmup: expected an integer, got 1.5");
  auto bad_arch = Decode({{"arch", "gpt"}});
  ASSERT_FALSE(bad_arch.ok());
  EXPECT_EQ(bad_arch.status().message(), "hyperparameters.arch: 'gpt' is not a known architecture");
  auto not_a_map = DecodeTrialHyperparameters(Value(int64_t{3}));
  ASSERT_FALSE(not_a_map.ok());
  EXPECT_EQ(not_a_map.status().message(), "hyperparameters: expected a map, got 3");
  // An integer given as a whole number is one.
  auto whole = Decode({{"d_model", 256.0}});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->attention->d_model, 256);
}

}  // namespace
}  // namespace sf::config
