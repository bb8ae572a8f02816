// Shared by the speech data tests: synthetic audio written with libsndfile, and small corpora
// (a manifest beside its audio files) in temporary directories.
#pragma once

#include <gtest/gtest.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/support/testing.h"

namespace sf::speech::test {

// A 16-bit-representable test signal: a linear chirp from 100 Hz to 6 kHz, tones at 440, 1250
// and 3150 Hz, and uniform noise from `seed`, peak below 0.9. Quantised to 16 bits so WAV,
// FLAC and Python's `wave` module all hold exactly these samples.
inline std::vector<float> SyntheticSignal(double seconds, int sample_rate, uint32_t seed) {
  const int64_t n = int64_t(std::llround(seconds * sample_rate));
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(-1.0, 1.0);
  const double pi = 3.14159265358979323846;
  const double f0 = 100, f1 = std::min(6000.0, sample_rate * 0.45);
  for (int64_t i = 0; i < n; ++i) {
    const double t = double(i) / sample_rate;
    const double chirp = std::sin(2 * pi * (f0 * t + 0.5 * (f1 - f0) / seconds * t * t));
    const double tones = 0.5 * std::sin(2 * pi * 440 * t) +
                         0.3 * std::sin(2 * pi * 1250 * t + 0.7) +
                         0.2 * std::sin(2 * pi * 3150 * t + 1.9);
    const double v = 0.35 * chirp + 0.35 * tones + 0.05 * noise(rng);
    x[size_t(i)] = float(std::round(v * 32768.0) / 32768.0);
  }
  return x;
}

// Writes interleaved `samples` (frames × channels) with libsndfile; `format` e.g.
// SF_FORMAT_WAV | SF_FORMAT_PCM_16 or SF_FORMAT_FLAC | SF_FORMAT_PCM_16.
inline void WriteAudio(const std::string& path, const std::vector<float>& samples, int sample_rate,
                       int format, int channels = 1) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = format;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(f, nullptr) << path << ": " << sf_strerror(nullptr);
  const sf_count_t frames = sf_count_t(samples.size()) / channels;
  if ((format & SF_FORMAT_SUBMASK) == SF_FORMAT_PCM_16) {
    // Exact: libsndfile reads 16-bit PCM as k / 32768 but would write float as round(x · 32767);
    // write the integers themselves instead.
    sf_command(f, SFC_SET_NORM_FLOAT, nullptr, SF_FALSE);
    std::vector<float> ints(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      ints[i] = float(std::clamp(std::round(double(samples[i]) * 32768.0), -32768.0, 32767.0));
    }
    EXPECT_EQ(sf_writef_float(f, ints.data(), frames), frames);
  } else {
    EXPECT_EQ(sf_writef_float(f, samples.data(), frames), frames);
  }
  sf_close(f);
}

inline constexpr int kWav16 = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
inline constexpr int kFlac16 = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;

// A corpus of `n` utterances (0.3 s to 0.3 + 0.1·(n−1) s, WAV and FLAC alternating, ids u0..,
// transcripts "sentence number i", speakers spk0..2) under dir/corpus, and its manifest
// dir/corpus/train.tsv (relative audio paths); returns the manifest's path.
inline std::string MakeCorpus(const sf::testing::TempDir& dir, int n = 12) {
  std::filesystem::create_directories(dir.path() + "/corpus/audio");
  std::string manifest = "id\taudio\tduration\ttext\tspeaker\n";
  for (int i = 0; i < n; ++i) {
    const double seconds = 0.3 + 0.1 * i;
    const std::string name = "audio/u" + std::to_string(i) + (i % 2 ? ".flac" : ".wav");
    WriteAudio(dir.path() + "/corpus/" + name, SyntheticSignal(seconds, 16000, uint32_t(i)), 16000,
               i % 2 ? kFlac16 : kWav16);
    manifest += "u" + std::to_string(i) + "\t" + name + "\t" + std::to_string(seconds) +
                "\tsentence number " + std::to_string(i) + "\tspk" + std::to_string(i % 3) + "\n";
  }
  return dir.WriteFile("corpus/train.tsv", manifest);
}

}  // namespace sf::speech::test
