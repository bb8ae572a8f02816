// Reading audio (trainer/speech/audio.h): WAV and FLAC of the same samples give the same
// samples and features; several channels are averaged; errors name the file and the problem.
#include "trainer/speech/audio.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "tests/support/testing.h"
#include "tests/trainer/speech/speech_test_support.h"
#include "trainer/speech/features.h"

namespace sf::speech {
namespace {

TEST(ReadAudio, WavAndFlacOfTheSameSamplesGiveTheSameFeatures) {
  sf::testing::TempDir dir;
  const std::vector<float> x = test::SyntheticSignal(1.3, 16000, 5);
  test::WriteAudio(dir.path() + "/a.wav", x, 16000, test::kWav16);
  test::WriteAudio(dir.path() + "/a.flac", x, 16000, test::kFlac16);
  auto wav = ReadAudio(dir.path() + "/a.wav", 16000);
  auto flac = ReadAudio(dir.path() + "/a.flac", 16000);
  ASSERT_TRUE(wav.ok()) << wav.status().ToString();
  ASSERT_TRUE(flac.ok()) << flac.status().ToString();
  EXPECT_EQ(*wav, x);  // 16-bit samples round-trip exactly
  EXPECT_EQ(*flac, x);
  auto fe = LogMelFrontEnd::Create({});
  ASSERT_TRUE(fe.ok());
  EXPECT_EQ((*fe)->Compute(*wav), (*fe)->Compute(*flac));
}

TEST(ReadAudio, AveragesChannelsToMono) {
  sf::testing::TempDir dir;
  const std::vector<float> left = test::SyntheticSignal(0.4, 16000, 1);
  const std::vector<float> right = test::SyntheticSignal(0.4, 16000, 2);
  std::vector<float> interleaved;
  for (size_t i = 0; i < left.size(); ++i) {
    interleaved.push_back(left[i]);
    interleaved.push_back(right[i]);
  }
  const std::string path = dir.path() + "/stereo.wav";
  test::WriteAudio(path, interleaved, 16000, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 2);
  auto mono = ReadAudio(path, 16000);
  ASSERT_TRUE(mono.ok()) << mono.status().ToString();
  ASSERT_EQ(mono->size(), left.size());
  for (size_t i = 0; i < left.size(); ++i) ASSERT_EQ((*mono)[i], (left[i] + right[i]) / 2.0f) << i;
}

TEST(ReadAudio, MissingFileIsNotFoundNamingIt) {
  auto r = ReadAudio("/nonexistent/dir/a.wav", 16000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/a.wav"), std::string::npos)
      << r.status().message();
}

TEST(ReadAudio, CorruptFileIsAnErrorWithLibsndfilesReason) {
  sf::testing::TempDir dir;
  std::string junk(4096, '\0');
  std::mt19937 rng(1);
  for (auto& c : junk) c = char(rng());
  const std::string path = dir.WriteFile("x.wav", junk);
  auto r = ReadAudio(path, 16000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(path + ": can't read audio: "), std::string::npos)
      << r.status().message();
  // A WAV header cut off after a few bytes.
  const std::string cut = dir.path() + "/cut.wav";
  test::WriteAudio(cut, test::SyntheticSignal(0.2, 16000, 1), 16000, test::kWav16);
  std::string bytes;
  {
    std::ifstream in(cut, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  dir.WriteFile("cut.wav", bytes.substr(0, 20));
  auto c = ReadAudio(cut, 16000);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(cut), std::string::npos) << c.status().message();
  std::printf("%s\n%s\n", r.status().message().c_str(), c.status().message().c_str());
}

TEST(ReadAudio, OtherSampleRateIsAnErrorNamingBothRates) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/eight.wav";
  test::WriteAudio(path, test::SyntheticSignal(0.3, 8000, 1), 8000, test::kWav16);
  auto r = ReadAudio(path, 16000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path + ": 8000 Hz, the data's sample_rate is 16000");
}

TEST(ReadAudio, FileWithoutSamplesIsAnError) {
  sf::testing::TempDir dir;
  const std::string path = dir.path() + "/empty.wav";
  test::WriteAudio(path, {}, 16000, test::kWav16);
  auto r = ReadAudio(path, 16000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no samples"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace sf::speech
