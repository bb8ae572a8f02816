// The log-mel front end (trainer/speech/features.h) against an independent numpy computation
// (logmel_reference.py) on a synthetic signal, raw and after CMVN, with the default and with
// non-default options; frame counts at the edges; option checks; thread safety; CMVN's
// statistics; SpecAugment's determinism and bounds.
#include "trainer/speech/features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "tests/support/testing.h"
#include "tests/trainer/speech/speech_test_support.h"
#include "trainer/core/safetensors.h"
#include "trainer/speech/audio.h"

namespace sf::speech {
namespace {

std::string Format(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Writes the signal as a 16-bit WAV, computes its features through ReadAudio and the front end,
// and has logmel_reference.py recompute them.
void CompareWithNumpy(const FrontEndOptions& o, uint32_t seed) {
  sf::testing::TempDir dir;
  const std::string wav = dir.path() + "/signal.wav";
  test::WriteAudio(wav, test::SyntheticSignal(1.3, o.sample_rate, seed), o.sample_rate,
                   test::kWav16);
  auto samples = ReadAudio(wav, o.sample_rate);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  auto fe = LogMelFrontEnd::Create(o);
  ASSERT_TRUE(fe.ok()) << fe.status().ToString();
  std::vector<float> logmel = (*fe)->Compute(*samples);
  const int64_t frames = (*fe)->NumFrames(int64_t(samples->size()));
  ASSERT_GT(frames, 100);
  ASSERT_EQ(logmel.size(), size_t(frames * o.mels));
  std::vector<float> cmvn = logmel;
  UtteranceCmvn(cmvn.data(), frames, o.mels);
  std::vector<float> fb = (*fe)->DenseFilterbank();
  const int64_t bins = o.fft_size() / 2 + 1;

  std::vector<safetensors::TensorView> views = {
      safetensors::F32View("ours.logmel", {frames, o.mels}, logmel),
      safetensors::F32View("ours.cmvn", {frames, o.mels}, cmvn),
      safetensors::F32View("ours.filterbank", {o.mels, bins}, fb)};
  std::map<std::string, std::string> meta = {{"wav", wav},
                                             {"sample_rate", std::to_string(o.sample_rate)},
                                             {"window_ms", Format(o.window_ms)},
                                             {"hop_ms", Format(o.hop_ms)},
                                             {"n_fft", std::to_string(o.n_fft)},
                                             {"mels", std::to_string(o.mels)},
                                             {"f_min", Format(o.f_min)},
                                             {"f_max", Format(o.f_max)},
                                             {"log_floor", Format(double(o.log_floor))}};
  const std::string path = dir.path() + "/case.safetensors";
  ASSERT_TRUE(safetensors::WriteFile(path, views, meta).ok());
  int status = 0;
  const std::string out =
      sf::testing::RunShellCommand("/usr/bin/python3 " + sf::testing::SourceDir() +
                                       "/tests/trainer/speech/logmel_reference.py " + path,
                                   &status);
  std::printf("%s", out.c_str());
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("worst:"), std::string::npos) << out;
  EXPECT_NE(out.find("cmvn: rel"), std::string::npos) << out;
}

TEST(FrontEnd, MatchesAnIndependentNumpyComputationWithTheDefaults) {
  FrontEndOptions o;  // 16 kHz, 25 ms / 10 ms, n_fft 512, 80 mels
  CompareWithNumpy(o, 7);
}

TEST(FrontEnd, MatchesAnIndependentNumpyComputationWithOtherOptions) {
  FrontEndOptions o;
  o.sample_rate = 8000;
  o.window_ms = 32;
  o.hop_ms = 12.5;
  o.n_fft = 300;  // not a power of two, longer than the 256-sample window
  o.mels = 40;
  o.f_min = 60;
  o.f_max = 3800;
  o.log_floor = 1e-3f;
  CompareWithNumpy(o, 11);
}

TEST(FrontEnd, CountsFramesWithoutPadding) {
  FrontEndOptions o;  // window 400, hop 160
  EXPECT_EQ(o.window_samples(), 400);
  EXPECT_EQ(o.hop_samples(), 160);
  EXPECT_EQ(o.fft_size(), 512);
  EXPECT_EQ(NumFrames(0, o), 0);
  EXPECT_EQ(NumFrames(399, o), 0);
  EXPECT_EQ(NumFrames(400, o), 1);
  EXPECT_EQ(NumFrames(559, o), 1);
  EXPECT_EQ(NumFrames(560, o), 2);
  EXPECT_EQ(NumFrames(16000, o), 98);  // 1 s: 1 + (16000 − 400) / 160
  auto fe = LogMelFrontEnd::Create(o);
  ASSERT_TRUE(fe.ok());
  EXPECT_TRUE((*fe)->Compute(std::vector<float>(399, 0.1f)).empty());
  // Silence is the log floor everywhere.
  std::vector<float> silent = (*fe)->Compute(std::vector<float>(400, 0.0f));
  ASSERT_EQ(silent.size(), 80u);
  for (float v : silent) EXPECT_FLOAT_EQ(v, std::log(1e-6f));
}

TEST(FrontEnd, RejectsBadOptionsNamingTheField) {
  auto expect = [](FrontEndOptions o, const std::string& field) {
    Status s = ValidateFrontEndOptions(o);
    EXPECT_FALSE(s.ok()) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
    EXPECT_FALSE(LogMelFrontEnd::Create(o).ok());
  };
  FrontEndOptions o;
  EXPECT_TRUE(ValidateFrontEndOptions(o).ok());
  o.sample_rate = 0;
  expect(o, "sample_rate");
  o = {};
  o.window_ms = 0.01;
  expect(o, "window_ms");
  o = {};
  o.hop_ms = 0;
  expect(o, "hop_ms");
  o = {};
  o.n_fft = 256;  // shorter than 400
  expect(o, "n_fft");
  o = {};
  o.mels = 0;
  expect(o, "mels");
  o = {};
  o.f_max = 9000;
  expect(o, "f_max");
  o = {};
  o.f_min = 8000;
  expect(o, "f_min");
  o = {};
  o.log_floor = 0;
  expect(o, "log_floor");
}

TEST(FrontEnd, ComputesTheSameFromManyThreads) {
  FrontEndOptions o;
  auto fe = LogMelFrontEnd::Create(o);
  ASSERT_TRUE(fe.ok());
  std::vector<std::vector<float>> signals, serial;
  for (uint32_t s = 0; s < 6; ++s) {
    signals.push_back(test::SyntheticSignal(0.5 + 0.1 * s, 16000, s));
    serial.push_back((*fe)->Compute(signals.back()));
  }
  std::vector<std::vector<float>> parallel(signals.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < signals.size(); ++i) {
    threads.emplace_back([&, i] {
      // A second front end of another size plans concurrently.
      FrontEndOptions other;
      other.n_fft = 1024 + 512 * int(i);
      auto fe2 = LogMelFrontEnd::Create(other);
      ASSERT_TRUE(fe2.ok());
      for (int repeat = 0; repeat < 3; ++repeat) parallel[i] = (*fe)->Compute(signals[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < signals.size(); ++i) EXPECT_EQ(parallel[i], serial[i]) << i;
}

TEST(Cmvn, GivesEachBinZeroMeanAndUnitVariance) {
  const int64_t frames = 57, mels = 5;
  std::vector<float> x(size_t(frames * mels));
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0, 1);
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t j = 0; j < mels; ++j)
      x[size_t(t * mels + j)] = 3.0f * float(j) - 7 + (0.5f + float(j)) * n(rng);
  }
  for (int64_t t = 0; t < frames; ++t) x[size_t(t * mels + 4)] = 2.5f;  // a constant bin
  UtteranceCmvn(x.data(), frames, mels);
  for (int64_t j = 0; j < mels; ++j) {
    double mean = 0, sq = 0;
    for (int64_t t = 0; t < frames; ++t) mean += x[size_t(t * mels + j)];
    mean /= frames;
    for (int64_t t = 0; t < frames; ++t) sq += std::pow(x[size_t(t * mels + j)] - mean, 2);
    EXPECT_NEAR(mean, 0, 1e-5) << j;
    EXPECT_NEAR(sq / frames, j == 4 ? 0 : 1, 1e-4) << j;
  }
  UtteranceCmvn(nullptr, 0, mels);  // no frames: nothing to do
}

// The masked cells of a copy of `ones` (1 everywhere) after SpecAugment.
std::vector<float> Masked(int64_t frames, int64_t mels, const SpecAugmentOptions& o,
                          uint64_t seed) {
  std::vector<float> x(size_t(frames * mels), 1.0f);
  SpecAugment(x.data(), frames, mels, o, seed);
  return x;
}

TEST(SpecAugment, IsDeterministicPerSeed) {
  SpecAugmentOptions o;
  EXPECT_EQ(Masked(300, 80, o, 42), Masked(300, 80, o, 42));
  int differing = 0;
  for (uint64_t s = 1; s <= 10; ++s) differing += Masked(300, 80, o, s) != Masked(300, 80, o, 42);
  EXPECT_GE(differing, 9);
  EXPECT_NE(SpecAugmentSeed(1, 1, 5), SpecAugmentSeed(1, 2, 5));
  EXPECT_NE(SpecAugmentSeed(1, 1, 5), SpecAugmentSeed(1, 1, 6));
  EXPECT_NE(SpecAugmentSeed(1, 1, 5), SpecAugmentSeed(2, 1, 5));
  EXPECT_EQ(SpecAugmentSeed(1, 1, 5), SpecAugmentSeed(1, 1, 5));
}

TEST(SpecAugment, MasksWholeBandsAndSpansWithinTheirBounds) {
  SpecAugmentOptions o;
  o.freq_masks = 1;
  o.freq_width = 10;
  o.time_masks = 1;
  o.time_width = 40;
  o.time_ratio = 0.2;  // at most floor(0.2 · 150) = 30 frames
  const int64_t frames = 150, mels = 80;
  int64_t max_band = 0, max_span = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::vector<float> x = Masked(frames, mels, o, seed);
    // A bin masked in every frame is in the frequency mask; a frame masked in every bin is in
    // the time mask. Every zero is one or the other.
    std::vector<bool> band(size_t(mels), true), span(size_t(frames), true);
    for (int64_t t = 0; t < frames; ++t) {
      for (int64_t j = 0; j < mels; ++j) {
        const bool zero = x[size_t(t * mels + j)] == 0;
        if (!zero) band[size_t(j)] = false, span[size_t(t)] = false;
      }
    }
    int64_t b = std::count(band.begin(), band.end(), true),
            s = std::count(span.begin(), span.end(), true);
    for (int64_t t = 0; t < frames; ++t) {
      for (int64_t j = 0; j < mels; ++j) {
        if (x[size_t(t * mels + j)] == 0)
          ASSERT_TRUE(band[size_t(j)] || span[size_t(t)]);
        else
          ASSERT_EQ(x[size_t(t * mels + j)], 1.0f);
      }
    }
    if (s == frames) b = 0;  // (cannot happen here: at most 30 of 150 frames)
    max_band = std::max(max_band, b);
    max_span = std::max(max_span, s);
    ASSERT_LE(b, 10) << seed;
    ASSERT_LE(s, 30) << seed;
  }
  EXPECT_EQ(max_band, 10);  // the widths reach their bounds over 300 draws
  EXPECT_EQ(max_span, 30);
}

TEST(SpecAugment, MasksNothingWithZeroCountsOrWidths) {
  SpecAugmentOptions none;
  none.freq_masks = 0;
  none.time_masks = 0;
  std::vector<float> ones(size_t(120 * 80), 1.0f);
  EXPECT_EQ(Masked(120, 80, none, 9), ones);
  SpecAugmentOptions narrow;
  narrow.freq_width = 0;
  narrow.time_width = 0;
  EXPECT_EQ(Masked(120, 80, narrow, 9), ones);
  SpecAugmentOptions bad;
  bad.time_ratio = 1.5;
  Status s = ValidateSpecAugmentOptions(bad);
  EXPECT_NE(s.message().find("time_ratio"), std::string::npos) << s.message();
  bad = {};
  bad.freq_masks = -1;
  EXPECT_NE(ValidateSpecAugmentOptions(bad).message().find("freq_masks"), std::string::npos);
  EXPECT_TRUE(ValidateSpecAugmentOptions({}).ok());
  // A frequency width wider than the bins masks at most all of them.
  SpecAugmentOptions wide;
  wide.freq_width = 500;
  wide.time_masks = 0;
  std::vector<float> x = Masked(10, 8, wide, 3);
  EXPECT_EQ(x.size(), size_t(80));
}

}  // namespace
}  // namespace sf::speech
