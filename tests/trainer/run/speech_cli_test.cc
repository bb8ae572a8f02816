// Speech recognition through `sf-trainer` as a user runs it (issue 27): a small corpus
// synthesised by deploy/make-speech-corpus.sh (espeak-ng + sox) into a temporary directory, an
// experiment with `data: {train: {manifest: ...}}` and arch speech_transformer_ctc_small made
// tiny, real processes.
//
//  - `train` validates by loss, WER and CER (each validation followed by its sample of
//    transcripts beside their references), checkpoints, and scores the test manifest at the
//    end (test.hyp: one transcript per utterance, in manifest order).
//  - Bit-exact resume with dropout, SpecAugment, bf16 and two micro-batches per step: a stop at
//    step 4 and --resume give the straight run's weights, optimizer state and every step's loss.
//  - `transcribe` of the test manifest with the final checkpoint prints test.hyp's transcripts.
//  - The experiment with an attention decoder (joint CTC/attention): its test pass is joint beam
//    search, which `transcribe --beam` reproduces; `--ctc-only` decodes by the CTC head.
//  - A missing audio file stops the run with the manifest's file and line (no utterance is
//    skipped); text data with a speech arch, and a speech metric for a text arch, are refused
//    by path.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/subprocess.h"
#include "tests/support/testing.h"
#include "tests/trainer/run/trainer_cli.h"
#include "trainer/eval/error_rate.h"
#include "trainer/run/checkpoint.h"

namespace sf {
namespace {
namespace fs = std::filesystem;

std::string Config(const std::string& train_manifest = "corpus/train.tsv") {
  return R"(name: tiny-speech
data:
  train: {manifest: )" +
         train_manifest + R"(}
  valid: {manifest: corpus/valid.tsv}
  test: {manifest: corpus/test.tsv}
  features: {mels: 40}
  spec_augment: {freq_masks: 1, freq_width: 8, time_masks: 1, time_width: 20, time_ratio: 0.2}
hyperparameters:
  arch: speech_transformer_ctc_small
  conv_channels: 8
  d_model: 48
  heads: 4
  encoder_layers: 2
  ffn_dim: 96
  dropout: 0.1
  lr: 0.002
  lr_schedule: {type: inverse_sqrt, warmup: 4}
  optimizer: {type: adamw, betas: [0.9, 0.98]}
  max_frames: 1500
  clip_norm: 5.0
precision: bf16
optimizations: {aggregation_frequency: 2}
scheduling_unit: 1
searcher: {name: single, metric: wer, max_length: {batches: 8}}
min_validation_period: {batches: 4}
)";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

class SpeechCli : public testing::TrainedRunSuite<SpeechCli> {
 public:
  static constexpr const char* kConfigFile = "speech.yaml";
  static std::string SuiteConfig() { return Config(); }

  // The corpus (12 training, 3 valid, 3 test utterances) beside Multi30k-tiny (for the
  // refusals), then the straight run.
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::CopyTinyCorpus(dir_->path());
    int status = 0;
    straight_output_ = testing::RunShellCommand("bash " + testing::SourceDir() + "/deploy/make-speech-corpus.sh " +
                                                    Path("corpus") + " --sentences 12 --valid 3 --test 3 --seed 7",
                                                &status);
    if (status != 0) return;
    dir_->WriteFile(kConfigFile, SuiteConfig());
    auto r = Run({"train", kConfigFile, "--output", "straight"});
    straight_ok_ = r.exit_code == 0;
    straight_output_ = r.output;
  }
};

TEST_F(SpeechCli, TrainsValidatesByErrorRatesAndTranscribesTheTestSet) {
  const auto wer = Metric("straight", "validation", "wer"), cer = Metric("straight", "validation", "cer");
  ASSERT_EQ(wer.size(), 2u) << "steps 4 and 8";
  ASSERT_EQ(cer.size(), 2u);
  for (const auto& [step, w] : wer) {
    EXPECT_GE(w, 0.0) << step;
    EXPECT_GT(cer.at(step), 0.0) << "a tiny model after " << step << " steps makes errors";
  }
  EXPECT_EQ(Metric("straight", "validation", "validation_loss").size(), 2u);
  // Each validation is followed by its transcripts record: the valid split's utterances (3, fewer
  // than the sample of 5) in manifest order, reference beside hypothesis, scored as WER scores.
  std::vector<int64_t> transcript_steps;
  for (const std::string& line : Lines(testing::ReadWholeFile(Path("straight/metrics.jsonl")))) {
    auto v = Value::FromJson(line);
    ASSERT_TRUE(v.ok()) << line;
    if (v->Find("kind")->as_string() != "validation_transcripts") continue;
    transcript_steps.push_back(v->Find("step")->as_int());
    const Value* list = v->Find("utterances");
    ASSERT_TRUE(list && list->is_list()) << line;
    ASSERT_EQ(list->as_list().size(), 3u) << line;
    for (size_t i = 0; i < 3; ++i) {
      const Value& u = list->as_list()[i];
      char id[32];
      std::snprintf(id, sizeof id, "valid-%06zu", i + 1);
      EXPECT_EQ(u.Find("id")->as_string(), id) << line;
      EXPECT_FALSE(u.Find("reference")->as_string().empty()) << line;
      const eval::ErrorCounts e =
          eval::WordErrors(u.Find("hypothesis")->as_string(), u.Find("reference")->as_string());
      EXPECT_EQ(u.Find("word_errors")->as_int(), e.edits()) << line;
      EXPECT_EQ(u.Find("words")->as_int(), e.reference_length) << line;
    }
  }
  EXPECT_EQ(transcript_steps, (std::vector<int64_t>{4, 8}));
  // The test record and the transcripts, one per test utterance.
  EXPECT_EQ(Metric("straight", "test", "wer").size(), 1u);
  EXPECT_EQ(Metric("straight", "test", "cer").size(), 1u);
  EXPECT_EQ(Lines(testing::ReadWholeFile(Path("straight/test.hyp"))).size(), 3u);
  EXPECT_NE(straight_output_.find("test set"), std::string::npos) << straight_output_;
  EXPECT_NE(straight_output_.find("WER"), std::string::npos) << straight_output_;
  // The checkpoint carries the vocabulary and the architecture.
  auto ck = ReadCheckpoint(fs::canonical(Path("straight/latest")).string());
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->model_metadata.at("arch"), "speech_transformer_ctc");
  ASSERT_NE(ck->state.Find("char_vocabulary"), nullptr);
  EXPECT_EQ(ck->state.Find("char_vocabulary")->as_string().rfind("<blank>\n<space>\n", 0), 0u);
}

TEST_F(SpeechCli, ResumeIsBitExact) { ExpectResumeIsBitExact(4, 8); }

// `sf-trainer transcribe ARGS` in the suite's directory: stdout (the transcripts) returned,
// stderr (logs and the score line) into *err.
std::string Transcribe(const std::string& dir, const std::string& args, int* status, std::string* err) {
  const std::string out = testing::RunShellCommand("(cd " + dir + " && " + testing::TrainerBinary() +
                                                       " transcribe --threads 1 " + args + " 2> transcribe.err)",
                                                   status);
  *err = testing::ReadWholeFile(dir + "/transcribe.err");
  return out;
}

TEST_F(SpeechCli, TranscribePrintsTheRunsTestTranscripts) {
  const std::string checkpoint = fs::canonical(Path("straight/latest")).string();
  int status = -1;
  std::string err;
  const std::string out = Transcribe(Path(""), "--checkpoint " + checkpoint + " --manifest corpus/test.tsv", &status, &err);
  ASSERT_EQ(status, 0) << out << err;
  // Greedy decoding, as the run's test pass: the same transcripts, in manifest order.
  EXPECT_EQ(out, testing::ReadWholeFile(Path("straight/test.hyp"))) << err;
  EXPECT_EQ(Lines(out).size(), 3u);
  EXPECT_NE(err.find("corpus/test.tsv (3 utterances, greedy): WER"), std::string::npos) << err;
  // Prefix beam search answers every utterance too.
  const std::string beam =
      Transcribe(Path(""), "--checkpoint " + checkpoint + " --manifest corpus/test.tsv --beam 4 --quiet", &status, &err);
  ASSERT_EQ(status, 0) << beam << err;
  EXPECT_EQ(Lines(beam).size(), 3u) << beam;
  EXPECT_EQ(err.find("WER"), std::string::npos) << "--quiet: no score line\n" << err;
}

// Joint CTC/attention: the same experiment with a one-layer attention decoder trains, validates
// by greedy joint decoding, scores the test set by joint beam search of width beam_size (which
// `transcribe --beam` reproduces), and decodes by its CTC head alone on request. Flags a CTC
// model cannot use are refused.
TEST_F(SpeechCli, AJointCtcAttentionModelTrainsAndTranscribes) {
  std::string joint = Config();
  joint.replace(joint.find("  conv_channels: 8\n"), std::string("  conv_channels: 8\n").size(),
                "  conv_channels: 8\n  decoder_layers: 1\n  ctc_weight: 0.4\n  beam_size: 3\n");
  dir_->WriteFile("joint.yaml", joint);
  auto r = Run({"train", "joint.yaml", "--output", "joint"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Metric("joint", "validation", "wer").size(), 2u);
  EXPECT_EQ(Metric("joint", "test", "wer").size(), 1u);
  EXPECT_NE(r.output.find("(3 utterances, joint CTC/attention beam 3, ctc_weight 0.40): WER"), std::string::npos)
      << r.output;
  const std::string checkpoint = fs::canonical(Path("joint/latest")).string();
  auto ck = ReadCheckpoint(checkpoint);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->model_metadata.at("decoder_layers"), "1");
  EXPECT_EQ(ck->model_metadata.at("ctc_weight"), "0.400000");
  int status = -1;
  std::string err;
  const std::string out =
      Transcribe(Path(""), "--checkpoint " + checkpoint + " --manifest corpus/test.tsv --beam 3", &status, &err);
  ASSERT_EQ(status, 0) << out << err;
  EXPECT_EQ(out, testing::ReadWholeFile(Path("joint/test.hyp"))) << err;
  EXPECT_NE(err.find("(3 utterances, joint CTC/attention, beam 3, ctc_weight 0.40): WER"), std::string::npos) << err;
  const std::string ctc = Transcribe(Path(""), "--checkpoint " + checkpoint + " --manifest corpus/test.tsv --ctc-only",
                                     &status, &err);
  ASSERT_EQ(status, 0) << ctc << err;
  EXPECT_EQ(Lines(ctc).size(), 3u);
  EXPECT_NE(err.find("(3 utterances, CTC head only, greedy): WER"), std::string::npos) << err;
  // A CTC model has no decoder to weigh.
  const std::string plain = fs::canonical(Path("straight/latest")).string();
  Transcribe(Path(""), "--checkpoint " + plain + " --manifest corpus/test.tsv --ctc-weight 0.5", &status, &err);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(err.find("--ctc-weight: checkpoint " + plain + " holds a CTC model without a decoder"), std::string::npos)
      << err;
  // ctc_weight below 1 without a decoder is refused before training.
  std::string no_decoder = Config();
  no_decoder.replace(no_decoder.find("  conv_channels: 8\n"), std::string("  conv_channels: 8\n").size(),
                     "  conv_channels: 8\n  ctc_weight: 0.5\n");
  dir_->WriteFile("no-decoder.yaml", no_decoder);
  r = Run({"train", "no-decoder.yaml", "--output", "no-decoder"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("hyperparameters.ctc_weight: below 1 weighs an attention decoder's loss"), std::string::npos)
      << r.output;
}

TEST_F(SpeechCli, AMissingAudioFileStopsTheRunNamingItsLine) {
  // Line 3 of the manifest (the second utterance) points at a file that is not there.
  std::vector<std::string> lines = Lines(testing::ReadWholeFile(Path("corpus/train.tsv")));
  ASSERT_GE(lines.size(), 3u);
  const size_t tab = lines[2].find('\t');
  const size_t tab2 = lines[2].find('\t', tab + 1);
  lines[2] = lines[2].substr(0, tab + 1) + "missing.wav" + lines[2].substr(tab2);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  dir_->WriteFile("corpus/broken.tsv", text);
  dir_->WriteFile("broken.yaml", Config("corpus/broken.tsv"));
  auto r = Run({"train", "broken.yaml", "--output", "broken"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("broken.tsv:3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missing.wav"), std::string::npos) << r.output;
}

TEST_F(SpeechCli, AnUtteranceTooShortForTheModelStopsTheRunBeforeItStarts) {
  // 50 ms of audio: 3 frames (25 ms windows every 10 ms), fewer than the 7 the two stride-2
  // convolutions need.
  int status = -1;
  const std::string out = testing::RunShellCommand(
      "sox -n -r 16000 -b 16 -c 1 " + Path("corpus/short.wav") + " trim 0.0 0.05", &status);
  ASSERT_EQ(status, 0) << out;
  std::string text = testing::ReadWholeFile(Path("corpus/train.tsv"));
  text += "short-1\tshort.wav\t0.05\ta word\tnobody\n";
  dir_->WriteFile("corpus/short.tsv", text);
  dir_->WriteFile("short.yaml", Config("corpus/short.tsv"));
  auto r = Run({"train", "short.yaml", "--output", "short"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("short.tsv:14: utterance short-1 has 3 feature frames; the model's subsampling needs at least 7"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(Path("short/metrics.jsonl")) &&
               !testing::ReadWholeFile(Path("short/metrics.jsonl")).empty())
      << "no step ran";
}

TEST_F(SpeechCli, SpeechAndTextAreNotMixedUp) {
  // A speech arch on text data.
  std::string text = Config();
  text.replace(text.find("  train: {manifest: corpus/train.tsv}\n  valid: {manifest: corpus/valid.tsv}\n  test: "
                         "{manifest: corpus/test.tsv}\n  features: {mels: 40}\n"),
               std::string("  train: {manifest: corpus/train.tsv}\n  valid: {manifest: corpus/valid.tsv}\n  test: "
                           "{manifest: corpus/test.tsv}\n  features: {mels: 40}\n")
                   .size(),
               "  train: {src: data/train.de, tgt: data/train.en}\n");
  text.replace(text.find("  spec_augment:"), text.find("hyperparameters:") - text.find("  spec_augment:"), "");
  dir_->WriteFile("text.yaml", text);
  auto r = Run({"train", "text.yaml", "--output", "text"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.train: arch speech_transformer_ctc_small recognises speech and needs speech data"),
            std::string::npos)
      << r.output;
  // A translation checkpoint is not transcribed... nor is WER a translation model's metric.
  std::string lstm = Config();
  lstm.replace(lstm.find("arch: speech_transformer_ctc_small"), std::string("arch: speech_transformer_ctc_small").size(),
               "arch: lstm_small");
  dir_->WriteFile("lstm.yaml", lstm);
  r = Run({"train", "lstm.yaml", "--output", "lstm"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("searcher.metric: wer scores transcripts; arch lstm_small is not a speech model"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace sf
