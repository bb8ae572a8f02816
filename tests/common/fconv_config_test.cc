// The fconv family (fairseq's convolutional seq2seq, ConvS2S: fconv, fconv_iwslt_de_en and our
// fconv_small) in the config: its presets and completed defaults, which hyperparameters apply to
// it and which of its own apply to no other family, its cross-field rule (a tied output
// projection needs equal decoder widths; the lstm's decoder_layers <= encoder_layers does not
// apply), and the metric and data of a family that translates. Each test asserts the error's
// path and message, so a rule that stops firing fails it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_schema.h"
#include "tests/support/config_cases.h"
#include "tests/support/testing.h"

namespace sf::config {
namespace {

using sf::testing::With;

// The base document (parallel Multi30k-style data) with these hyperparameters (the section's
// body, indented), searched with `searcher` ("single" or "grid") for `metric`, and with `data`
// as the data section's body when given.
std::string FConvDoc(const std::string& hyperparameters, const std::string& searcher = "single",
                     const std::string& metric = "bleu", const std::string& data = "") {
  std::vector<std::pair<std::string, std::string>> changes = {
      {"hyperparameters", "hyperparameters:\n" + hyperparameters},
      {"searcher",
       "searcher: {name: " + searcher + ", metric: " + metric + ", max_length: {batches: 10}}"}};
  if (!data.empty()) changes.emplace_back("data", "data:\n" + data);
  return With(changes);
}

// The value of `name` in a completed set; null when absent, so a missing key fails an EXPECT.
Value Get(const Value& hparams, const char* name) {
  const Value* v = hparams.Find(name);
  return v ? *v : Value();
}

std::vector<std::string> ErrorPaths(const ParseResult& r) {
  std::vector<std::string> paths;
  for (const auto& e : r.errors) paths.push_back(e.path);
  return paths;
}

// Every hyperparameter of the Transformer's layers and of the LSTM's cells: none applies to an
// fconv.
const std::vector<std::string>& NotForFConv() {
  static const std::vector<std::string> names = {"d_model",
                                                 "heads",
                                                 "ffn_dim",
                                                 "attention_dropout",
                                                 "activation_dropout",
                                                 "activation",
                                                 "normalize_before",
                                                 "share_embeddings",
                                                 "encoder_hidden_size",
                                                 "encoder_bidirectional",
                                                 "encoder_dropout_in",
                                                 "encoder_dropout_out",
                                                 "decoder_hidden_size",
                                                 "decoder_dropout_in",
                                                 "decoder_dropout_out",
                                                 "residual_from_layer"};
  return names;
}

// ---- presets and defaults

TEST(FConvConfigTest, PresetsAreFairseqsFConvArchitecturesAndOurSmallOne) {
  const auto& presets = ArchPresets();
  ASSERT_TRUE(presets.count("fconv"));
  ASSERT_TRUE(presets.count("fconv_iwslt_de_en"));
  ASSERT_TRUE(presets.count("fconv_small"));
  // fairseq's fconv base_architecture: "[(512, 3)] * 20" on both sides, an untied output
  // projection from 256 wide.
  EXPECT_EQ(presets.at("fconv"), (Value::Map{{"encoder_embed_dim", 512},
                                             {"decoder_embed_dim", 512},
                                             {"decoder_out_embed_dim", 256},
                                             {"encoder_layers", 20},
                                             {"decoder_layers", 20},
                                             {"conv_channels", 512},
                                             {"kernel_size", 3},
                                             {"share_decoder_input_output_embed", false}}));
  // fairseq's fconv_iwslt_de_en: "[(256, 3)] * 4" and "[(256, 3)] * 3".
  EXPECT_EQ(presets.at("fconv_iwslt_de_en"),
            (Value::Map{{"encoder_embed_dim", 256},
                        {"decoder_embed_dim", 256},
                        {"decoder_out_embed_dim", 256},
                        {"encoder_layers", 4},
                        {"decoder_layers", 3},
                        {"conv_channels", 256},
                        {"kernel_size", 3},
                        {"share_decoder_input_output_embed", false}}));
  EXPECT_EQ(presets.at("fconv_small"), (Value::Map{{"encoder_embed_dim", 256},
                                                   {"decoder_embed_dim", 256},
                                                   {"decoder_out_embed_dim", 256},
                                                   {"encoder_layers", 4},
                                                   {"decoder_layers", 3},
                                                   {"conv_channels", 256},
                                                   {"kernel_size", 3},
                                                   {"share_decoder_input_output_embed", true},
                                                   {"dropout", 0.2}}));
  for (const char* arch : {"fconv", "fconv_iwslt_de_en", "fconv_small"}) {
    EXPECT_EQ(ArchFamily(arch), "fconv") << arch;
    EXPECT_FALSE(IsLanguageModelFamily(ArchFamily(arch))) << arch << " translates";
  }
  EXPECT_EQ(ArchFamily("fconv_wmt_en_de"), "") << "not one of ours";
}

TEST(FConvConfigTest, DefaultsCompleteAnFConvWithItsFamilysHyperparametersOnly) {
  struct Expected {
    const char* arch;
    int64_t embed, out_embed, encoder_layers, decoder_layers, channels;
    bool tied;
    double dropout;
  };
  for (const Expected& e : {Expected{"fconv", 512, 256, 20, 20, 512, false, 0.1},
                            Expected{"fconv_iwslt_de_en", 256, 256, 4, 3, 256, false, 0.1},
                            Expected{"fconv_small", 256, 256, 4, 3, 256, true, 0.2}}) {
    const Value full = WithDefaults(Value(Value::Map{{"arch", e.arch}}));
    EXPECT_EQ(Get(full, "arch"), Value(e.arch));
    EXPECT_EQ(Get(full, "encoder_embed_dim"), Value(e.embed)) << e.arch;
    EXPECT_EQ(Get(full, "decoder_embed_dim"), Value(e.embed)) << e.arch;
    EXPECT_EQ(Get(full, "decoder_out_embed_dim"), Value(e.out_embed)) << e.arch;
    EXPECT_EQ(Get(full, "encoder_layers"), Value(e.encoder_layers)) << e.arch;
    EXPECT_EQ(Get(full, "decoder_layers"), Value(e.decoder_layers)) << e.arch;
    EXPECT_EQ(Get(full, "conv_channels"), Value(e.channels)) << e.arch;
    EXPECT_EQ(Get(full, "kernel_size"), Value(int64_t{3})) << e.arch;
    EXPECT_EQ(Get(full, "share_decoder_input_output_embed"), Value(e.tied)) << e.arch;
    EXPECT_EQ(Get(full, "dropout"), Value(e.dropout)) << e.arch;
    // The training and translation knobs every family that translates has.
    EXPECT_EQ(Get(full, "label_smoothing"), Value(0.1)) << e.arch;
    EXPECT_EQ(Get(full, "lr"), Value(5e-4)) << e.arch;
    EXPECT_EQ(Get(full, "max_tokens"), Value(int64_t{4096})) << e.arch;
    EXPECT_EQ(Get(full, "beam_size"), Value(int64_t{4})) << e.arch;
    EXPECT_EQ(Get(full, "lenpen"), Value(1.0)) << e.arch;
    EXPECT_EQ(Get(full, "max_len_a"), Value(1.2)) << e.arch;
    EXPECT_EQ(Get(full, "max_len_b"), Value(int64_t{10})) << e.arch;
    ASSERT_NE(full.Find("optimizer"), nullptr) << e.arch;
    EXPECT_EQ(full.Find("optimizer")->Find("type")->as_string(), "adamw");
    ASSERT_NE(full.Find("lr_schedule"), nullptr) << e.arch;
    EXPECT_EQ(full.Find("lr_schedule")->Find("type")->as_string(), "inverse_sqrt");
    for (const std::string& name : NotForFConv()) {
      EXPECT_EQ(full.Find(name), nullptr) << e.arch << ": " << name << " does not apply";
    }
  }
  // Given values win over the preset; kernel_size keeps its default of 3.
  const Value full = WithDefaults(Value(Value::Map{
      {"arch", "fconv_small"}, {"conv_channels", 128}, {"encoder_layers", 2}, {"dropout", 0.3}}));
  EXPECT_EQ(Get(full, "conv_channels"), Value(int64_t{128}));
  EXPECT_EQ(Get(full, "encoder_layers"), Value(int64_t{2}));
  EXPECT_EQ(Get(full, "decoder_layers"), Value(int64_t{3}));
  EXPECT_EQ(Get(full, "dropout"), Value(0.3));
  EXPECT_EQ(Get(full, "kernel_size"), Value(int64_t{3}));
  // No fconv knob completes another family's trial.
  for (const char* arch : {"transformer_tiny", "lstm_small", "transformer_lm_small"}) {
    const Value other = WithDefaults(Value(Value::Map{{"arch", arch}}));
    EXPECT_EQ(other.Find("conv_channels"), nullptr) << arch;
    EXPECT_EQ(other.Find("kernel_size"), nullptr) << arch;
  }
}

TEST(FConvConfigTest, FConvSmallExperimentValidatesWithItsFamilysHyperparameters) {
  ParseResult r = ParseExperimentConfig(
      FConvDoc("  arch: fconv_small\n  encoder_embed_dim: 128\n  decoder_embed_dim: 128\n"
               "  decoder_out_embed_dim: 128\n  encoder_layers: 6\n  decoder_layers: 5\n"
               "  conv_channels: 192\n  kernel_size: 5\n  dropout: 0.25\n"
               "  share_decoder_input_output_embed: true\n  label_smoothing: 0.1\n"
               "  lr: 0.25\n  optimizer: {type: sgd, momentum: 0.99, nesterov: true}\n"
               "  lr_schedule: {type: constant}\n  clip_norm: 0.1\n  max_tokens: 2048\n"
               "  beam_size: 5\n  lenpen: 1.2\n  max_len_a: 1.5\n  max_len_b: 5\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  const Value constants = ConstantHyperparameters(r.config->hyperparameters);
  EXPECT_TRUE(ValidateTrialHyperparameters(constants).empty());
  const Value full = WithDefaults(constants);
  EXPECT_EQ(Get(full, "conv_channels"), Value(int64_t{192}));
  EXPECT_EQ(Get(full, "kernel_size"), Value(int64_t{5}));
  // Each preset, as is.
  for (const char* arch : {"fconv", "fconv_iwslt_de_en", "fconv_small"}) {
    r = ParseExperimentConfig(FConvDoc(std::string("  arch: ") + arch + "\n"));
    EXPECT_TRUE(r.ok()) << arch << "\n" << r.ErrorText();
    EXPECT_TRUE(ValidateTrialHyperparameters(Value(Value::Map{{"arch", arch}})).empty()) << arch;
  }
}

TEST(FConvConfigTest, ConvolutionSizesAreCheckedAgainstTheirRanges) {
  ParseResult r = ParseExperimentConfig(FConvDoc("  arch: fconv_small\n  conv_channels: 0\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "hyperparameters.conv_channels");
  EXPECT_NE(r.errors[0].message.find("must be >= 1"), std::string::npos) << r.ErrorText();
  r = ParseExperimentConfig(FConvDoc("  arch: fconv_small\n  kernel_size: 65\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "hyperparameters.kernel_size");
  EXPECT_NE(r.errors[0].message.find("must be <= 64"), std::string::npos) << r.ErrorText();
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "fconv"}, {"conv_channels", int64_t{70000}}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.conv_channels");
  EXPECT_NE(errors[0].message.find("must be <= 65536"), std::string::npos) << errors[0].ToString();
}

// ---- which hyperparameters apply

TEST(FConvConfigTest, TransformerAndLstmHyperparametersForAnFConvAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"heads: 4", "it applies to the transformer, transformer_lm and speech_transformer_ctc families"},
      {"d_model: 256", "it applies to the transformer, transformer_lm and speech_transformer_ctc families"},
      {"encoder_hidden_size: 256", "it applies to the lstm family"},
      {"residual_from_layer: 2", "it applies to the lstm family"},
  };
  for (const auto& [line, families] : cases) {
    const std::string name = line.substr(0, line.find(':'));
    ParseResult r = ParseExperimentConfig(FConvDoc("  arch: fconv_small\n  " + line + "\n"));
    ASSERT_EQ(r.errors.size(), 1u) << line << "\n" << r.ErrorText();
    EXPECT_EQ(r.errors[0].ToString(),
              "hyperparameters." + name +
                  ": does not apply to arch fconv_small (an fconv model); " + families)
        << line;
    EXPECT_GT(r.errors[0].line, 0) << "located at the hyperparameter";
  }
  // Every other Transformer and LSTM knob, by its path.
  const std::vector<std::pair<std::string, std::string>> others = {
      {"ffn_dim", "1024"},
      {"attention_dropout", "0.1"},
      {"activation_dropout", "0.1"},
      {"activation", "gelu"},
      {"normalize_before", "true"},
      {"share_embeddings", "true"},
      {"encoder_bidirectional", "true"},
      {"encoder_dropout_in", "0.1"},
      {"encoder_dropout_out", "0.1"},
      {"decoder_hidden_size", "256"},
      {"decoder_dropout_in", "0.1"},
      {"decoder_dropout_out", "0.1"},
  };
  for (const auto& [name, value] : others) {
    ParseResult r =
        ParseExperimentConfig(FConvDoc("  arch: fconv\n  " + name + ": " + value + "\n"));
    EXPECT_EQ(ErrorPaths(r), (std::vector<std::string>{"hyperparameters." + name}))
        << r.ErrorText();
    if (r.errors.size() != 1) continue;
    EXPECT_NE(r.errors[0].message.find("does not apply to arch fconv (an fconv model)"),
              std::string::npos)
        << r.ErrorText();
  }
  // A trial's hyperparameters say the same.
  auto errors =
      ValidateTrialHyperparameters(Value(Value::Map{{"arch", "fconv_small"}, {"heads", 4}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.heads: does not apply to arch fconv_small (an fconv model); it "
            "applies to the transformer, transformer_lm and speech_transformer_ctc families");
  errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "fconv_iwslt_de_en"}, {"encoder_dropout_in", 0.1}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.encoder_dropout_in: does not apply to arch fconv_iwslt_de_en (an "
            "fconv model); it applies to the lstm family");
}

TEST(FConvConfigTest, ConvolutionHyperparametersForAnotherFamilyAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> archs = {
      {"transformer_tiny", "a transformer model"},
      {"lstm_small", "an lstm model"},
      {"transformer_lm_small", "a transformer_lm model"}};
  for (const auto& [arch, model] : archs) {
    for (const char* line : {"conv_channels: 256", "kernel_size: 3"}) {
      const std::string name = std::string(line).substr(0, std::string(line).find(':'));
      ParseResult r = ParseExperimentConfig(
          FConvDoc("  arch: " + arch + "\n  " + line + "\n", "single", "validation_loss"));
      ASSERT_EQ(r.errors.size(), 1u) << arch << ": " << line << "\n" << r.ErrorText();
      EXPECT_EQ(r.errors[0].ToString(), "hyperparameters." + name + ": does not apply to arch " +
                                            arch + " (" + model +
                                            "); it applies to the " +
                                            (name == "kernel_size" ? "fconv family" : "fconv and speech_transformer_ctc families"));
      auto errors =
          ValidateTrialHyperparameters(Value(Value::Map{{"arch", arch}, {name, int64_t{3}}}));
      ASSERT_EQ(errors.size(), 1u) << arch << ": " << name;
      EXPECT_EQ(errors[0].path, "hyperparameters." + name);
    }
  }
  // Without arch the model is a transformer.
  ParseResult r = ParseExperimentConfig(FConvDoc("  kernel_size: 5\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.kernel_size: does not apply to arch transformer (a transformer "
            "model); it applies to the fconv family");
  // The widths the fconv shares with the lstm, as a transformer's refusal words them.
  for (const char* name : {"encoder_embed_dim", "decoder_embed_dim", "decoder_out_embed_dim"}) {
    r = ParseExperimentConfig(
        FConvDoc("  arch: transformer_tiny\n  " + std::string(name) + ": 256\n"));
    ASSERT_EQ(r.errors.size(), 1u) << name << "\n" << r.ErrorText();
    EXPECT_EQ(r.errors[0].ToString(),
              "hyperparameters." + std::string(name) +
                  ": does not apply to arch transformer_tiny (a transformer model); it applies "
                  "to the lstm and fconv families");
  }
}

TEST(FConvConfigTest, GridOverFourFamiliesRefusesConvChannelsAtTheFirstArchItDoesNotApplyTo) {
  ParseResult r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [transformer_tiny, lstm_small, fconv_small, "
               "transformer_lm_small]}\n  conv_channels: 256\n",
               "grid", "validation_loss"));
  EXPECT_EQ(ErrorPaths(r), (std::vector<std::string>{"hyperparameters.conv_channels"}))
      << r.ErrorText();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.conv_channels: does not apply to arch transformer_tiny (a "
            "transformer model); it applies to the fconv and speech_transformer_ctc families");
  // The first arch of the list that it does not apply to, whatever the order.
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [fconv_small, transformer_lm_small, lstm_small, "
               "transformer_tiny]}\n  conv_channels: 256\n",
               "grid", "validation_loss"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.conv_channels: does not apply to arch transformer_lm_small (a "
            "transformer_lm model); it applies to the fconv and speech_transformer_ctc families");
  // d_model over the same four: refused at the first without Transformer layers, once.
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [transformer_tiny, fconv_small, lstm_small, "
               "transformer_lm_small]}\n  d_model: 256\n",
               "grid", "validation_loss"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.d_model: does not apply to arch fconv_small (an fconv model); it "
            "applies to the transformer, transformer_lm and speech_transformer_ctc families");
  // A grid of fconv archs only may set them, and the knobs every family shares pass with all
  // four.
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [fconv_small, fconv_iwslt_de_en, fconv]}\n"
               "  conv_channels: {type: categorical, vals: [128, 256]}\n  kernel_size: 5\n",
               "grid"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [transformer_tiny, lstm_small, fconv_small, "
               "transformer_lm_small]}\n  decoder_layers: 1\n  dropout: 0.3\n  lr: 0.001\n"
               "  share_decoder_input_output_embed: true\n  beam_size: 5\n",
               "grid", "validation_loss"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
}

// ---- cross-field rules

TEST(FConvConfigTest, FConvTiedOutputNeedsEqualDecoderWidths) {
  // fconv_small ties the output projection to the decoder's embedding (256 wide).
  ParseResult r =
      ParseExperimentConfig(FConvDoc("  arch: fconv_small\n  decoder_out_embed_dim: 512\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.decoder_out_embed_dim: decoder_out_embed_dim 512 differs from "
            "decoder_embed_dim 256, but share_decoder_input_output_embed is true (the decoder's "
            "embedding is then its output projection)");
  EXPECT_GT(r.errors[0].line, 0) << "located at the width given";
  // fconv: 512 wide embeddings, 256 before the output; tying it is refused at the tie.
  r = ParseExperimentConfig(FConvDoc("  arch: fconv\n  share_decoder_input_output_embed: true\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(
      r.errors[0].ToString(),
      "hyperparameters.share_decoder_input_output_embed: true needs decoder_out_embed_dim 256 "
      "to equal decoder_embed_dim 512 (the decoder's embedding is then its output projection)");
  // In a grid, only the tied arch's widths count, and the note names it.
  r =
      ParseExperimentConfig(FConvDoc("  arch: {type: categorical, vals: [fconv, fconv_small]}\n"
                                     "  decoder_embed_dim: 512\n",
                                     "grid"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "hyperparameters.decoder_embed_dim");
  EXPECT_NE(r.errors[0].message.find("decoder_out_embed_dim 256 differs from decoder_embed_dim "
                                     "512, but share_decoder_input_output_embed is true"),
            std::string::npos)
      << r.ErrorText();
  EXPECT_NE(r.errors[0].message.find("(arch fconv_small)"), std::string::npos) << r.ErrorText();
  // Tied with equal widths, or untied with any: fine.
  EXPECT_TRUE(
      ParseExperimentConfig(FConvDoc("  arch: fconv\n  share_decoder_input_output_embed: true\n"
                                     "  decoder_out_embed_dim: 512\n"))
          .ok());
  EXPECT_TRUE(ParseExperimentConfig(FConvDoc("  arch: fconv_small\n  decoder_embed_dim: 384\n"
                                             "  decoder_out_embed_dim: 384\n"))
                  .ok());
  EXPECT_TRUE(ParseExperimentConfig(
                  FConvDoc("  arch: fconv_small\n  share_decoder_input_output_embed: false\n"
                           "  decoder_out_embed_dim: 128\n"))
                  .ok());
  // The trial check, on the values WithDefaults completes.
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "fconv_small"}, {"decoder_out_embed_dim", int64_t{128}}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.share_decoder_input_output_embed: true needs decoder_out_embed_dim "
            "128 to equal decoder_embed_dim 256 (the decoder's embedding is then its output "
            "projection)");
  errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "fconv"}, {"share_decoder_input_output_embed", true}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "hyperparameters.share_decoder_input_output_embed");
  EXPECT_TRUE(
      ValidateTrialHyperparameters(Value(Value::Map{{"arch", "fconv"},
                                                    {"share_decoder_input_output_embed", true},
                                                    {"decoder_out_embed_dim", int64_t{512}}}))
          .empty());
}

TEST(FConvConfigTest, FConvDecoderMayHaveMoreLayersThanItsEncoder) {
  // The lstm's rule (each decoder layer starts from an encoder layer's state) is not the
  // fconv's: its sides' convolutions are independent.
  ParseResult r = ParseExperimentConfig(
      FConvDoc("  arch: fconv_small\n  encoder_layers: 1\n  decoder_layers: 3\n"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_TRUE(ValidateTrialHyperparameters(Value(Value::Map{{"arch", "fconv_iwslt_de_en"},
                                                            {"encoder_layers", int64_t{2}},
                                                            {"decoder_layers", int64_t{6}}}))
                  .empty());
  // In a grid with an lstm, the same values are refused for the lstm alone.
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [fconv_small, lstm_small]}\n"
               "  encoder_layers: 1\n  decoder_layers: 3\n",
               "grid"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.decoder_layers: 3 is more than encoder_layers 1 (each decoder layer "
            "starts from the final state of the encoder layer of its index) (arch lstm_small)");
}

// ---- the searcher's metric and the data

TEST(FConvConfigTest, BleuIsAcceptedForAnFConv) {
  ParseResult r = ParseExperimentConfig(FConvDoc("  arch: fconv_small\n"));
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config->searcher.metric, "bleu");
  EXPECT_FALSE(r.config->searcher.smaller_is_better) << "bleu: higher is better";
  r = ParseExperimentConfig(FConvDoc(
      "  arch: {type: categorical, vals: [fconv, fconv_iwslt_de_en, fconv_small]}\n", "grid"));
  EXPECT_TRUE(r.ok()) << r.ErrorText();
  // With a language model in the grid, bleu is refused for it, not for the fconv.
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [fconv_small, transformer_lm_small]}\n", "grid"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "searcher.metric: bleu scores translations; arch transformer_lm_small is a language "
            "model (use validation_perplexity or validation_loss)");
}

TEST(FConvConfigTest, TextDataWithAnFConvIsRefused) {
  const std::string text_data =
      "  train: {text: train.en}\n"
      "  valid: {text: valid.en}\n";
  ParseResult r = ParseExperimentConfig(
      FConvDoc("  arch: fconv_small\n", "single", "validation_loss", text_data));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].ToString(),
            "data.train: one-sided text (text:) trains a language model; arch fconv_small "
            "translates and needs src and tgt");
  EXPECT_GT(r.errors[0].line, 0) << "located at data.train";
  // Any value of a categorical arch that translates.
  r = ParseExperimentConfig(
      FConvDoc("  arch: {type: categorical, vals: [transformer_lm_small, fconv]}\n", "grid",
               "validation_loss", text_data));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "data.train");
  EXPECT_NE(r.errors[0].message.find("arch fconv translates"), std::string::npos) << r.ErrorText();
}

TEST(FConvConfigTest, UnknownFConvArchSuggestsTheNearestOne) {
  ParseResult r = ParseExperimentConfig(FConvDoc("  arch: fconv_smal\n  conv_channels: 128\n"));
  ASSERT_EQ(r.errors.size(), 1u) << r.ErrorText();
  EXPECT_EQ(r.errors[0].path, "hyperparameters.arch");
  EXPECT_NE(r.errors[0].message.find("fconv, fconv_iwslt_de_en, fconv_small, speech_transformer_ctc, "
                                     "speech_transformer_ctc_small, speech_transformer_ctc_base (did you mean "
                                     "\"fconv_small\"?)"),
            std::string::npos)
      << r.ErrorText();
}

}  // namespace
}  // namespace sf::config
