// Speech experiments in the config (issue 27): audio manifests as data (`{manifest: FILE}`), the
// front end (`data.features`) and SpecAugment (`data.spec_augment`), the
// speech_transformer_ctc family's presets and hyperparameters, and the wer/cer metrics. Each
// refusal asserts its path and message, so a rule that stops firing fails the test.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_schema.h"
#include "tests/support/config_cases.h"

namespace sf::config {
namespace {

using sf::testing::With;

const char kSpeechData[] =
    "  train: {manifest: corpus/train.tsv}\n"
    "  valid: {manifest: corpus/valid.tsv}\n"
    "  test: {manifest: corpus/test.tsv}\n";

// The base document with a speech arch, `data` as the section's body and a searcher by `metric`.
std::string SpeechDoc(const std::string& data = kSpeechData, const std::string& hyperparameters =
                                                                 "  arch: speech_transformer_ctc_small\n",
                      const std::string& metric = "wer") {
  return With({{"data", "data:\n" + data},
               {"hyperparameters", "hyperparameters:\n" + hyperparameters},
               {"searcher", "searcher: {name: single, metric: " + metric + ", max_length: {batches: 10}}"}});
}

std::string Errors(const ParseResult& r) { return r.ErrorText(); }

TEST(SpeechConfigTest, ManifestsFeaturesAndSpecAugmentAreRead) {
  ParseResult r = ParseExperimentConfig(SpeechDoc(
      std::string(kSpeechData) +
      "  features: {sample_rate: 8000, mels: 40, window_ms: 20, hop_ms: 12.5, utterance_cmvn: false}\n"
      "  spec_augment: {freq_masks: 1, freq_width: 10, time_masks: 3, time_width: 30, time_ratio: 0.1}\n"));
  ASSERT_TRUE(r.ok()) << Errors(r);
  const ExperimentConfig& c = *r.config;
  EXPECT_TRUE(c.has_data());
  EXPECT_TRUE(c.data.speech_data());
  EXPECT_EQ(c.data.train.manifest, "corpus/train.tsv");
  EXPECT_TRUE(c.data.train.src.empty());
  EXPECT_TRUE(c.data.train.tgt.empty());
  EXPECT_FALSE(c.data.train.monolingual());
  ASSERT_TRUE(c.data.test);
  EXPECT_EQ(c.data.test->manifest, "corpus/test.tsv");
  EXPECT_EQ(c.data.speech.sample_rate, 8000);
  EXPECT_EQ(c.data.speech.mels, 40);
  EXPECT_DOUBLE_EQ(c.data.speech.window_ms, 20);
  EXPECT_DOUBLE_EQ(c.data.speech.hop_ms, 12.5);
  EXPECT_FALSE(c.data.speech.utterance_cmvn);
  ASSERT_TRUE(c.data.speech.spec_augment);
  EXPECT_EQ(c.data.speech.spec_augment->freq_masks, 1);
  EXPECT_EQ(c.data.speech.spec_augment->freq_width, 10);
  EXPECT_EQ(c.data.speech.spec_augment->time_masks, 3);
  EXPECT_EQ(c.data.speech.spec_augment->time_width, 30);
  EXPECT_DOUBLE_EQ(c.data.speech.spec_augment->time_ratio, 0.1);
  EXPECT_TRUE(c.searcher.smaller_is_better) << "wer: lower is better";
  // The data files by the keys the document gives them.
  EXPECT_EQ(DataFiles(c.data), (std::vector<std::pair<std::string, std::string>>{
                                   {"data.train.manifest", "corpus/train.tsv"},
                                   {"data.valid.manifest", "corpus/valid.tsv"},
                                   {"data.test.manifest", "corpus/test.tsv"}}));
  // Relative manifests resolve against the YAML file's directory.
  ExperimentConfig resolved = c;
  ResolvePaths(resolved, "/exp");
  EXPECT_EQ(resolved.data.train.manifest, "/exp/corpus/train.tsv");
  EXPECT_EQ(resolved.data.valid->manifest, "/exp/corpus/valid.tsv");
}

TEST(SpeechConfigTest, SpecAugmentIsOffByDefaultAndABoolTurnsOnItsDefaults) {
  ParseResult r = ParseExperimentConfig(SpeechDoc());
  ASSERT_TRUE(r.ok()) << Errors(r);
  EXPECT_FALSE(r.config->data.speech.spec_augment);
  EXPECT_EQ(r.config->data.speech.mels, 80);
  EXPECT_EQ(r.config->data.speech.sample_rate, 16000);
  r = ParseExperimentConfig(SpeechDoc(std::string(kSpeechData) + "  spec_augment: true\n"));
  ASSERT_TRUE(r.ok()) << Errors(r);
  ASSERT_TRUE(r.config->data.speech.spec_augment);
  EXPECT_EQ(r.config->data.speech.spec_augment->freq_width, 27);
  EXPECT_EQ(r.config->data.speech.spec_augment->time_width, 100);
  r = ParseExperimentConfig(SpeechDoc(std::string(kSpeechData) + "  spec_augment: false\n"));
  ASSERT_TRUE(r.ok()) << Errors(r);
  EXPECT_FALSE(r.config->data.speech.spec_augment);
}

TEST(SpeechConfigTest, BadSpeechDataIsRefusedAtItsPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  train: {manifest: a.tsv, text: a.txt}\n",
       "data.train: give either manifest (audio with transcripts, for a speech model) or text data, not manifest "
       "with text"},
      {"  train: {manifest: a.tsv}\n  valid: {src: v.de, tgt: v.en}\n",
       "data.valid: data.train is speech (manifest); data.valid must be too"},
      {"  train: {manifest: a.tsv}\n  valid: {}\n", "data.valid.manifest: required field is missing"},
      {"  train: {manifest: a.tsv}\n  tokenizer: {vocab_size: 100}\n",
       "data.tokenizer: applies to text data; data.train is speech (manifest:), whose targets are the transcripts' "
       "characters"},
      {"  train: {manifest: a.tsv}\n  features: {mels: 0}\n", "data.features.mels: 0 must be >= 1"},
      {"  train: {manifest: a.tsv}\n  features: {hop: 10}\n", ""},
      {"  train: {manifest: a.tsv}\n  spec_augment: {time_ratio: 1.5}\n", "data.spec_augment.time_ratio: 1.5 must be <= 1"},
      {"  train: {manifest: a.tsv}\n  spec_augment: often\n", ""},
  };
  for (const auto& [data, message] : cases) {
    ParseResult r = ParseExperimentConfig(SpeechDoc(data));
    ASSERT_FALSE(r.ok()) << data;
    if (!message.empty()) {
      EXPECT_EQ(r.errors[0].ToString(), message) << data << "\n" << Errors(r);
    }
    EXPECT_GT(r.errors[0].line, 0) << "located: " << data;
  }
  // The front end and SpecAugment do not apply to text.
  ParseResult r = ParseExperimentConfig(SpeechDoc("  train: {src: t.de, tgt: t.en}\n  spec_augment: true\n",
                                                  "  arch: transformer_tiny\n", "validation_loss"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(),
            "data.spec_augment: applies to speech data (splits given as manifest:); data.train is parallel (src and tgt)");
}

TEST(SpeechConfigTest, SpeechDataAndSpeechArchsGoTogether) {
  ParseResult r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: transformer_tiny\n", "validation_loss"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(),
            "data.train: speech data (manifest:) trains a speech model; arch transformer_tiny reads text");
  r = ParseExperimentConfig(
      SpeechDoc("  train: {src: t.de, tgt: t.en}\n", "  arch: speech_transformer_ctc_small\n", "validation_loss"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(),
            "data.train: arch speech_transformer_ctc_small recognises speech and needs speech data ({manifest: FILE})");
  // No arch is a transformer: a manifest without one is refused too.
  r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  lr: 0.001\n", "validation_loss"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].path, "data.train");
}

TEST(SpeechConfigTest, ErrorRatesAreASpeechModelsMetricsAndOnlyIts) {
  for (const char* metric : {"wer", "cer", "validation_loss"}) {
    ParseResult r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc\n", metric));
    EXPECT_TRUE(r.ok()) << metric << "\n" << Errors(r);
  }
  ParseResult r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n", "bleu"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(),
            "searcher.metric: bleu scores text models; arch speech_transformer_ctc_small recognises speech (use wer, cer "
            "or validation_loss)");
  r = ParseExperimentConfig(
      SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n", "validation_perplexity"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].path, "searcher.metric");
  r = ParseExperimentConfig(SpeechDoc("  train: {src: t.de, tgt: t.en}\n", "  arch: transformer_tiny\n", "cer"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(), "searcher.metric: cer scores transcripts; arch transformer_tiny is not a speech model");
  // smaller_is_better: true is the only direction that agrees with an error rate.
  r = ParseExperimentConfig(With({{"data", std::string("data:\n") + kSpeechData},
                                  {"hyperparameters", "hyperparameters:\n  arch: speech_transformer_ctc_small\n"},
                                  {"searcher", "searcher: {name: single, metric: wer, smaller_is_better: false, "
                                               "max_length: {batches: 10}}"}}));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].path, "searcher.smaller_is_better");
}

TEST(SpeechConfigTest, PresetsAndHyperparametersOfTheSpeechFamily) {
  EXPECT_TRUE(IsSpeechFamily(ArchFamily("speech_transformer_ctc_small")));
  EXPECT_FALSE(IsSpeechFamily(ArchFamily("transformer_tiny")));
  const Value small = WithDefaults(Value(Value::Map{{"arch", "speech_transformer_ctc_small"}}));
  EXPECT_EQ(small.Find("conv_channels")->as_int(), 64);
  EXPECT_EQ(small.Find("d_model")->as_int(), 256);
  EXPECT_EQ(small.Find("encoder_layers")->as_int(), 6);
  EXPECT_EQ(small.Find("ffn_dim")->as_int(), 1024);
  EXPECT_TRUE(small.Find("normalize_before")->as_bool());
  EXPECT_EQ(small.Find("max_frames")->as_int(), 10000);
  // A speech trial gets none of the text families' knobs.
  for (const char* absent : {"max_tokens", "label_smoothing", "decoder_layers", "share_decoder_input_output_embed",
                             "lenpen", "max_len_a", "kernel_size"}) {
    EXPECT_EQ(small.Find(absent), nullptr) << absent;
  }
  const Value base = WithDefaults(Value(Value::Map{{"arch", "speech_transformer_ctc"}}));
  EXPECT_EQ(base.Find("encoder_layers")->as_int(), 12);
  EXPECT_EQ(base.Find("conv_channels")->as_int(), 256);
  EXPECT_EQ(WithDefaults(Value(Value::Map{{"arch", "speech_transformer_ctc_base"}})), [&] {
    Value::Map m = base.as_map();
    m["arch"] = "speech_transformer_ctc_base";
    return Value(m);
  }());
  // The speech knobs given, and a text knob refused by name.
  ParseResult r = ParseExperimentConfig(SpeechDoc(
      kSpeechData,
      "  arch: speech_transformer_ctc_small\n  conv_channels: 32\n  d_model: 128\n  heads: 2\n  encoder_layers: 3\n"
      "  ffn_dim: 256\n  max_frames: 4000\n  activation: gelu\n  normalize_before: false\n"));
  EXPECT_TRUE(r.ok()) << Errors(r);
  r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n  max_tokens: 4096\n"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.max_tokens: does not apply to arch speech_transformer_ctc_small (a speech_transformer_ctc "
            "model); it applies to the transformer, lstm, transformer_lm and fconv families");
  r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n  heads: 3\n"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(), "hyperparameters.heads: 3 heads do not divide d_model 256");
  auto errors = ValidateTrialHyperparameters(
      Value(Value::Map{{"arch", "transformer_tiny"}, {"max_frames", int64_t{4000}}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "hyperparameters.max_frames: does not apply to arch transformer_tiny (a transformer model); it applies to "
            "the speech_transformer_ctc family");
  // Joint CTC/attention: an attention decoder and the CTC weight; a weight below 1 without a
  // decoder is refused, and ctc_weight is the speech family's only.
  r = ParseExperimentConfig(
      SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n  decoder_layers: 3\n  ctc_weight: 0.3\n"));
  EXPECT_TRUE(r.ok()) << Errors(r);
  r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n  ctc_weight: 0.3\n"));
  ASSERT_EQ(r.errors.size(), 1u) << Errors(r);
  EXPECT_EQ(r.errors[0].ToString(),
            "hyperparameters.ctc_weight: below 1 weighs an attention decoder's loss, and this model has none: set "
            "decoder_layers");
  r = ParseExperimentConfig(SpeechDoc(kSpeechData, "  arch: speech_transformer_ctc_small\n  ctc_weight: 1\n"));
  EXPECT_TRUE(r.ok()) << Errors(r);
  errors = ValidateTrialHyperparameters(Value(Value::Map{{"arch", "transformer_tiny"}, {"ctc_weight", 0.3}}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].ToString().find("hyperparameters.ctc_weight: does not apply to arch transformer_tiny"),
            std::string::npos);
}

}  // namespace
}  // namespace sf::config
