// The per-manifest feature cache (trainer/speech/feature_cache.h): computed once, then read;
// a corrupt cache file detected and recomputed; options and the manifest in the file name; an
// audio problem aborts the whole load naming the manifest's line.
#include "trainer/speech/feature_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/testing.h"
#include "tests/trainer/speech/speech_test_support.h"
#include "trainer/speech/audio.h"

namespace sf::speech {
namespace {

namespace fs = std::filesystem;

using test::MakeCorpus;

std::unique_ptr<SpeechFeatures> OpenOk(const std::string& manifest, const FrontEndOptions& o,
                                       const std::string& cache_dir, int threads = 0) {
  auto f = SpeechFeatures::Open(manifest, o, {.cache_dir = cache_dir, .threads = threads});
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(FeatureCache, ComputesOnceThenReadsTheCacheFile) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir);
  FrontEndOptions o;
  auto first = OpenOk(manifest, o, cache.path() + "/nested/dir");
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->from_cache());
  EXPECT_EQ(first->rejected_cache(), "");
  ASSERT_EQ(first->size(), 12);
  EXPECT_EQ(first->mels(), 80);
  EXPECT_TRUE(fs::exists(first->cache_file()));
  EXPECT_EQ(fs::path(first->cache_file()).parent_path(), fs::path(cache.path() + "/nested/dir"));
  EXPECT_EQ(fs::path(first->cache_file()).filename().string().rfind("speech-features-", 0), 0u);

  // Each utterance's features are the front end's on its audio.
  auto fe = LogMelFrontEnd::Create(o);
  ASSERT_TRUE(fe.ok());
  int64_t total = 0;
  for (int64_t i = 0; i < first->size(); ++i) {
    auto audio = ReadAudio(first->utterances()[size_t(i)].audio, 16000);
    ASSERT_TRUE(audio.ok());
    std::vector<float> want = (*fe)->Compute(*audio);
    ASSERT_EQ(first->frames(i), (*fe)->NumFrames(int64_t(audio->size())));
    ASSERT_EQ(std::vector<float>(first->features(i), first->features(i) + want.size()), want) << i;
    total += first->frames(i);
  }
  EXPECT_EQ(first->total_frames(), total);
  ASSERT_EQ(first->frame_counts().size(), 12u);
  EXPECT_EQ(first->frame_counts()[5], first->frames(5));
  EXPECT_EQ(first->utterances()[3].id, "u3");

  auto second = OpenOk(manifest, o, cache.path() + "/nested/dir");
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(second->cache_file(), first->cache_file());
  ASSERT_EQ(second->total_frames(), first->total_frames());
  for (int64_t i = 0; i < second->size(); ++i) {
    ASSERT_EQ(second->frames(i), first->frames(i));
    ASSERT_EQ(std::vector<float>(second->features(i), second->features(i) + second->frames(i) * 80),
              std::vector<float>(first->features(i), first->features(i) + first->frames(i) * 80));
  }
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(cache.path() + "/nested/dir"))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(FeatureCache, CorruptCacheFileIsDetectedAndRecomputed) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir);
  auto good = OpenOk(manifest, {}, cache.path());
  ASSERT_TRUE(good);
  const std::string file = good->cache_file();
  good.reset();
  const std::string original = ReadBytes(file);

  struct Case {
    std::string name, bytes, reason;
  };
  std::string flipped = original;
  flipped[flipped.size() / 2] ^= 0x10;
  std::string bad_magic = original;
  bad_magic[0] = 'X';
  std::string bad_count = original;
  bad_count[16] = 3;  // utterances 3
  const std::vector<Case> cases = {
      {"a flipped bit", flipped, "checksum mismatch"},
      {"truncation", original.substr(0, original.size() - 100), "truncated"},
      {"a cut header", original.substr(0, 30), "truncated"},
      {"another file", std::string(200, 'x'), "bad magic"},
      {"a wrong magic", bad_magic, "bad magic"},
      {"a wrong utterance count", bad_count, "3 utterances, the manifest has 12"},
  };
  for (const Case& c : cases) {
    WriteBytes(file, c.bytes);
    auto again = OpenOk(manifest, {}, cache.path());
    ASSERT_TRUE(again) << c.name;
    EXPECT_FALSE(again->from_cache()) << c.name;
    EXPECT_EQ(again->cache_file(), file);
    EXPECT_NE(again->rejected_cache().find(file), std::string::npos) << again->rejected_cache();
    EXPECT_NE(again->rejected_cache().find(c.reason), std::string::npos)
        << c.name << ": " << again->rejected_cache();
    EXPECT_EQ(ReadBytes(file), original) << c.name;  // recomputed identically
    auto reread = OpenOk(manifest, {}, cache.path());
    ASSERT_TRUE(reread);
    EXPECT_TRUE(reread->from_cache()) << c.name;
  }
}

TEST(FeatureCache, FileNameFollowsOptionsManifestAndAudio) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir, 4);
  auto base = OpenOk(manifest, {}, cache.path());
  ASSERT_TRUE(base);
  FrontEndOptions forty;
  forty.mels = 40;
  auto other = OpenOk(manifest, forty, cache.path());
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->from_cache());
  EXPECT_NE(other->cache_file(), base->cache_file());
  EXPECT_EQ(other->mels(), 40);
  FrontEndOptions floor;
  floor.log_floor = 1e-5f;
  auto third = OpenOk(manifest, floor, cache.path());
  ASSERT_TRUE(third);
  EXPECT_NE(third->cache_file(), base->cache_file());
  // Both earlier files still serve their options.
  EXPECT_TRUE(OpenOk(manifest, {}, cache.path())->from_cache());
  EXPECT_TRUE(OpenOk(manifest, forty, cache.path())->from_cache());

  // A changed transcript changes the manifest's bytes, hence the name.
  std::string text = ReadBytes(manifest);
  text.replace(text.find("sentence number 2"), 17, "sentence number X");
  WriteBytes(manifest, text);
  auto edited = OpenOk(manifest, {}, cache.path());
  ASSERT_TRUE(edited);
  EXPECT_FALSE(edited->from_cache());
  EXPECT_NE(edited->cache_file(), base->cache_file());

  // An audio file rewritten in place (other samples, a later time) too.
  test::WriteAudio(dir.path() + "/corpus/audio/u1.flac", test::SyntheticSignal(0.4, 16000, 99),
                   16000, test::kFlac16);
  fs::last_write_time(
      dir.path() + "/corpus/audio/u1.flac",
      fs::last_write_time(dir.path() + "/corpus/audio/u1.flac") + std::chrono::seconds(5));
  auto rewritten = OpenOk(manifest, {}, cache.path());
  ASSERT_TRUE(rewritten);
  EXPECT_FALSE(rewritten->from_cache());
  EXPECT_NE(rewritten->cache_file(), edited->cache_file());
}

TEST(FeatureCache, ThreadCountDoesNotChangeTheFile) {
  sf::testing::TempDir dir, one, two;
  const std::string manifest = MakeCorpus(dir);
  auto a = OpenOk(manifest, {}, one.path(), 1);
  auto b = OpenOk(manifest, {}, two.path(), 2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(fs::path(a->cache_file()).filename(), fs::path(b->cache_file()).filename());
  EXPECT_EQ(ReadBytes(a->cache_file()), ReadBytes(b->cache_file()));
}

// Replaces the audio path of the manifest line `line` (1-based) with `audio`.
void SetAudio(const std::string& manifest, int line, const std::string& audio) {
  std::string text = ReadBytes(manifest), out;
  std::istringstream in(text);
  std::string row;
  for (int n = 1; std::getline(in, row); ++n) {
    if (n == line) {
      auto a = row.find('\t'), b = row.find('\t', a + 1);
      row = row.substr(0, a + 1) + audio + row.substr(b);
    }
    out += row + "\n";
  }
  WriteBytes(manifest, out);
}

void ExpectLoadError(const std::string& manifest, const std::string& cache_dir, StatusCode code,
                     const std::vector<std::string>& parts) {
  auto f = SpeechFeatures::Open(manifest, {}, {.cache_dir = cache_dir});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), code) << f.status().ToString();
  for (const std::string& p : parts)
    EXPECT_NE(f.status().message().find(p), std::string::npos) << f.status().message();
  std::printf("%s\n", f.status().message().c_str());
  for (const auto& e : fs::directory_iterator(cache_dir))
    ADD_FAILURE() << "left behind: " << e.path();
}

TEST(FeatureCache, MissingAudioAbortsTheLoadNamingTheManifestLine) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir, 6);
  SetAudio(manifest, 5, "audio/gone.wav");  // utterance u3
  ExpectLoadError(manifest, cache.path(), StatusCode::kNotFound,
                  {manifest + ":5: utterance u3: " + dir.path() +
                   "/corpus/audio/gone.wav: audio file does not exist"});
}

TEST(FeatureCache, CorruptAudioAbortsTheLoadNamingTheManifestLine) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir, 6);
  dir.WriteFile("corpus/audio/x.wav", std::string(3000, '\x5a'));
  SetAudio(manifest, 3, "audio/x.wav");
  ExpectLoadError(
      manifest, cache.path(), StatusCode::kInvalidArgument,
      {manifest + ":3: utterance u1: " + dir.path() + "/corpus/audio/x.wav: can't read audio: "});
}

TEST(FeatureCache, WrongSampleRateAbortsTheLoadNamingTheManifestLine) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir, 6);
  test::WriteAudio(dir.path() + "/corpus/audio/eight.wav", test::SyntheticSignal(0.5, 8000, 1),
                   8000, test::kWav16);
  SetAudio(manifest, 7, "audio/eight.wav");
  ExpectLoadError(
      manifest, cache.path(), StatusCode::kInvalidArgument,
      {manifest + ":7: utterance u5: ", "eight.wav: 8000 Hz, the data's sample_rate is 16000"});
}

TEST(FeatureCache, UtteranceShorterThanOneWindowIsAnError) {
  sf::testing::TempDir dir, cache;
  const std::string manifest = MakeCorpus(dir, 3);
  test::WriteAudio(dir.path() + "/corpus/audio/short.wav", test::SyntheticSignal(0.02, 16000, 1),
                   16000, test::kWav16);
  SetAudio(manifest, 2, "audio/short.wav");
  ExpectLoadError(manifest, cache.path(), StatusCode::kInvalidArgument,
                  {manifest + ":2: utterance u0: ",
                   "320 samples (0.02 s) is shorter than one window (400 samples)"});
}

TEST(FeatureCache, NeedsACacheDirectory) {
  sf::testing::TempDir dir;
  const std::string manifest = MakeCorpus(dir, 2);
  auto f = SpeechFeatures::Open(manifest, {}, {});
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("cache directory"), std::string::npos);
}

}  // namespace
}  // namespace sf::speech
