// The speech pieces learning together: a tiny corpus synthesised by deploy/make-speech-corpus.sh
// (espeak-ng + sox), its manifest read and features computed and cached (feature_cache.h), the
// character targets (char_vocab.h), a CMVN-normalised batch (speech_batches.h), the recogniser
// (speech_ctc.h) trained with AdamW through TrainStep: the CTC loss falls by two thirds and greedy decoding of
// the trained model reads the training utterances back at a character error rate under 10 %
// (error_rate.h). A model that could not learn — a wrong gradient, misaligned targets, features
// that do not carry the speech — fails it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/testing.h"
#include "trainer/eval/error_rate.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/speech_ctc.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/train_step.h"
#include "trainer/speech/char_vocab.h"
#include "trainer/speech/ctc_decoder.h"
#include "trainer/speech/feature_cache.h"
#include "trainer/speech/speech_batches.h"

namespace sf::speech {
namespace {

TEST(SpeechLearning, ATinyCorpusIsLearnedAndReadBack) {
  testing::TempDir dir;
  int status = 0;
  const std::string out = testing::RunShellCommand("bash " + testing::SourceDir() + "/deploy/make-speech-corpus.sh " +
                                                       dir.path() + "/corpus --sentences 6 --valid 1 --test 1 --seed 5",
                                                   &status);
  ASSERT_EQ(status, 0) << out;
  FeatureCacheOptions cache;
  cache.cache_dir = dir.path() + "/cache";
  auto features = SpeechFeatures::Open(dir.path() + "/corpus/train.tsv", FrontEndOptions{}, cache);
  ASSERT_TRUE(features.ok()) << features.status().message();
  const SpeechFeatures& f = **features;
  ASSERT_EQ(f.size(), 6);
  const CharVocabulary vocab = CharVocabulary::Build(f.utterances());
  auto targets = EncodeTargets(f.manifest(), f.utterances(), vocab);
  ASSERT_TRUE(targets.ok()) << targets.status().message();
  std::vector<int64_t> all;
  for (int64_t i = 0; i < f.size(); ++i) all.push_back(i);
  speech::SpeechBatch batch;
  MakeSpeechBatch(f, targets->targets, all, SpeechBatchOptions{}, 1, &batch);

  SpeechCtcConfig c;
  c.mels = f.mels();
  c.conv_channels = 16;
  c.d_model = 96;
  c.heads = 4;
  c.layers = 2;
  c.ffn_dim = 192;
  c.vocab = vocab.size();
  c.dropout = 0.0f;
  CpuBackend cpu;
  SpeechCtcModel<float> model(c, &cpu, DType::kF32);
  model.InitParameters(1);
  model.context().training = true;
  OptimizerOptions o;
  o.type = "adamw";
  o.beta2 = 0.98;
  TrainStep step(&model, std::move(MakeOptimizer(o)).value(), std::move(LossScaler::Make({})).value(), 0.0);
  const SpeechBatchView view{batch.features.data(), batch.frames.data(), batch.targets.data(),
                             batch.target_lengths.data(), batch.batch, batch.max_frames, batch.max_target};
  double first = 0, last = 0;
  for (int s = 0; s < 150; ++s) {
    const float lr = 2e-3f * std::min(1.0f, static_cast<float>(s + 1) / 20.0f);
    auto r = step.Run(
        1,
        [&](size_t) -> Result<CrossEntropyStats> {
          SF_ASSIGN_OR_RETURN(CtcStats stats, model.Forward(view));
          EXPECT_EQ(stats.infeasible, 0) << "every transcript fits its frames";
          return CrossEntropyStats{stats.loss, stats.loss, stats.target_tokens};
        },
        lr);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (s == 0) first = r->loss / static_cast<double>(r->tokens);
    last = r->loss / static_cast<double>(r->tokens);
  }
  std::printf("CTC loss per label: %.3f -> %.3f\n", first, last);
  EXPECT_LT(last, first / 3);
  // Greedy decoding of the trained model on the training batch reads the transcripts back.
  model.context().training = false;
  ASSERT_TRUE(model.Forward(view).ok());
  const int64_t T = model.frames(), V = c.vocab;
  std::vector<float> lp(batch.batch * T * V);
  cpu.CopyToHost(lp.data(), model.logits(), lp.size() * sizeof(float));
  LogSoftmaxRows(lp.data(), lp.data(), batch.batch * T, V);
  std::vector<std::string> hyps, refs;
  for (int64_t b = 0; b < batch.batch; ++b) {
    const CtcHypothesis h = CtcGreedy(lp.data() + b * T * V, model.lengths()[b], V, c.blank);
    hyps.push_back(vocab.Decode(h.labels));
    refs.push_back(f.utterances()[batch.indices[b]].text);
    std::printf("ref: %s\nhyp: %s\n", refs.back().c_str(), hyps.back().c_str());
  }
  auto cer = eval::CorpusCharErrors(hyps, refs);
  ASSERT_TRUE(cer.ok());
  std::printf("%s\n", cer->ToString("CER").c_str());
  EXPECT_LT(cer->rate(), 0.10);
}

}  // namespace
}  // namespace sf::speech
