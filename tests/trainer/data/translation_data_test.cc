#include "trainer/data/translation_data.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "tests/support/testing.h"
#include "tests/trainer/data/tiny_data.h"

namespace sf::data {
namespace {

namespace fs = std::filesystem;
using ::sf::testing::TempDir;
using test::CorpusConfig;
using test::TinyDir;

std::vector<std::string> Lines(const std::string& path, size_t max = SIZE_MAX) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (out.size() < max && std::getline(in, line)) out.push_back(line);
  return out;
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
}

// Copies the tiny corpus (train limited to `train_lines`) into `dir`.
void CopyTiny(const std::string& dir, size_t train_lines = SIZE_MAX) {
  for (const char* split : {"train", "valid", "test"}) {
    for (const char* side : {"de", "en"}) {
      std::string name = std::string(split) + "." + side;
      size_t max = std::string(split) == "train" ? train_lines : SIZE_MAX;
      WriteLines(dir + "/" + name, Lines(TinyDir() + "/" + name, max));
    }
  }
}

TEST(TranslationData, TinyCorpusIsTokenizedAndBinarized) {
  const TranslationData& d = test::TinyData();
  EXPECT_EQ(d.train().counts().lines, 2000);
  EXPECT_EQ(d.train().size(), d.train().counts().kept);
  EXPECT_GT(d.train().size(), 1990);
  ASSERT_NE(d.valid(), nullptr);
  ASSERT_NE(d.test(), nullptr);
  EXPECT_EQ(d.valid()->counts().lines, 200);
  EXPECT_TRUE(d.shared_vocabulary());
  EXPECT_EQ(d.source_tokenizer().vocab_size(), 1000);
  // Pair 0 decodes back to line 1 of the raw files.
  auto raw_de = Lines(TinyDir() + "/train.de", 1);
  auto raw_en = Lines(TinyDir() + "/train.en", 1);
  auto src = d.train().src(0);
  auto tgt = d.train().tgt(0);
  EXPECT_EQ(d.train().line(0), 1);
  EXPECT_EQ(d.source_tokenizer().Decode({src.begin(), src.end()}), raw_de[0]);
  EXPECT_EQ(d.target_tokenizer().Decode({tgt.begin(), tgt.end()}), raw_en[0]);
  EXPECT_EQ(d.train().src_length(0), int64_t(src.size()) + 1);
}

TEST(TranslationData, SecondOpenReusesTheCache) {
  TempDir cache;
  DataOptions o;
  o.cache_dir = cache.path();
  auto first = TranslationData::Open(CorpusConfig(TinyDir(), false), o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE((*first)->reused());
  auto model_time = fs::last_write_time((*first)->cache_path() + "/spm.model");
  auto train_time = fs::last_write_time((*first)->cache_path() + "/train.src.bin");
  auto second = TranslationData::Open(CorpusConfig(TinyDir(), false), o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE((*second)->reused());
  EXPECT_EQ((*second)->cache_path(), (*first)->cache_path());
  EXPECT_EQ(fs::last_write_time((*second)->cache_path() + "/spm.model"), model_time);
  EXPECT_EQ(fs::last_write_time((*second)->cache_path() + "/train.src.bin"), train_time);
  EXPECT_EQ((*second)->train().size(), (*first)->train().size());
  EXPECT_EQ((*second)->train().counts().kept, (*first)->train().counts().kept);
  auto a = (*first)->train().tgt(7);
  auto b = (*second)->train().tgt(7);
  EXPECT_EQ(std::vector<int32_t>(a.begin(), a.end()), std::vector<int32_t>(b.begin(), b.end()));
  // Only the finished entry is left (no temporary directories).
  int entries = 0;
  for (const auto& e : fs::directory_iterator(cache.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename().string().rfind("data-", 0), 0u);
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
  }
  EXPECT_EQ(entries, 1);
}

TEST(TranslationData, ChangedInputRebuildsBesideTheData) {
  TempDir data;
  CopyTiny(data.path(), 400);
  auto config = CorpusConfig(data.path(), false);
  auto first = TranslationData::Open(config);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE((*first)->reused());
  EXPECT_EQ((*first)->cache_path().rfind(data.path() + "/.steadfast-cache/data-", 0), 0u)
      << (*first)->cache_path();
  EXPECT_TRUE(TranslationData::Open(config).value()->reused());

  auto en = Lines(data.path() + "/train.en");
  en[4] = "A completely different sentence about a red bicycle.";
  WriteLines(data.path() + "/train.en", en);
  auto changed = TranslationData::Open(config);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_FALSE((*changed)->reused());
  EXPECT_NE((*changed)->cache_path(), (*first)->cache_path());
  EXPECT_NE((*changed)->content_hash(), (*first)->content_hash());

  // A different tokenizer setting is a different entry too.
  config.tokenizer.vocab_size = 900;
  auto other = TranslationData::Open(config);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)->reused());
}

TEST(TranslationData, ReadOnlyDataDirFallsBackToTheUserCache) {
  // A read-only copy of the corpus (0555, as the shared data folder usually is): the cache
  // must not go beside it, even for root, but to $XDG_CACHE_HOME.
  TempDir data, xdg;
  const std::string readonly = sf::testing::ReadOnlyDataCopy("multi30k-de-en-tiny", data);
  const char* old = std::getenv("XDG_CACHE_HOME");
  std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", xdg.path().c_str(), 1);
  auto config = CorpusConfig(readonly, false);
  auto d = TranslationData::Open(config);
  if (old)
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_CACHE_HOME");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->cache_path().rfind(xdg.path() + "/steadfast/data-", 0), 0u) << (*d)->cache_path();
  EXPECT_FALSE(fs::exists(readonly + "/.steadfast-cache"));
}

TEST(TranslationData, SkipsAndCountsEmptyJunkAndOverlongPairs) {
  TempDir data;
  CopyTiny(data.path(), 300);
  auto de = Lines(data.path() + "/train.de");
  auto en = Lines(data.path() + "/train.en");
  // Line numbers below are 1-based positions after the edits.
  de[9] = "";      // line 10: empty source
  en[19] = "   ";  // line 20: blank target
  de[29] = "@@";   // line 30: the Multi30k junk
  std::string longline;
  for (int i = 0; i < 80; ++i) longline += "Hund Katze ";
  de[39] = longline;  // line 40: too long for 64 positions
  WriteLines(data.path() + "/train.de", de);
  WriteLines(data.path() + "/train.en", en);
  auto config = CorpusConfig(data.path(), false);
  config.max_source_positions = 64;
  config.max_target_positions = 64;
  DataOptions o;
  o.cache_dir = data.path() + "/cache";
  auto d = TranslationData::Open(config, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const SplitCounts& c = (*d)->train().counts();
  EXPECT_EQ(c.lines, 300);
  EXPECT_EQ(c.empty, 2);
  EXPECT_EQ(c.junk, 1);
  EXPECT_EQ(c.too_long, 1);
  EXPECT_EQ(c.kept, 296);
  const ParallelDataset& train = (*d)->train();
  ASSERT_EQ(train.size(), 296);
  for (int64_t i = 0; i < train.size(); ++i) {
    EXPECT_NE(train.line(i), 10);
    EXPECT_NE(train.line(i), 20);
    EXPECT_NE(train.line(i), 30);
    EXPECT_NE(train.line(i), 40);
    EXPECT_LE(train.src_length(i), 64);
    EXPECT_LE(train.tgt_length(i), 64);
  }
  EXPECT_EQ(train.line(9), 11);
}

TEST(TranslationData, Multi30kAtAtJunkLinesAreSkipped) {
  // The two "@@" pairs of the full Multi30k copy (train.de lines 16510 and 16664), appended to
  // a slice of the tiny corpus.
  std::string full = sf::testing::DataCopy("multi30k-de-en");
  auto full_de = Lines(full + "/train.de", 16664);
  auto full_en = Lines(full + "/train.en", 16664);
  ASSERT_EQ(full_de.size(), 16664u);
  ASSERT_EQ(full_de[16509], "@@");
  ASSERT_EQ(full_de[16663], "@@");
  TempDir data;
  CopyTiny(data.path(), 300);
  auto de = Lines(data.path() + "/train.de");
  auto en = Lines(data.path() + "/train.en");
  for (size_t i : {16509u, 16510u, 16663u}) {
    de.push_back(full_de[i]);
    en.push_back(full_en[i]);
  }
  WriteLines(data.path() + "/train.de", de);
  WriteLines(data.path() + "/train.en", en);
  DataOptions o;
  o.cache_dir = data.path() + "/cache";
  auto d = TranslationData::Open(CorpusConfig(data.path(), false), o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->train().counts().lines, 303);
  EXPECT_EQ((*d)->train().counts().junk, 2);
  EXPECT_EQ((*d)->train().counts().kept, 301);
  EXPECT_EQ((*d)->train().line(300), 302);  // the real sentence between the two junk lines
}

TEST(TranslationData, BadDataErrorsNameFileAndLine) {
  TempDir data;
  CopyTiny(data.path(), 50);
  DataOptions o;
  o.cache_dir = data.path() + "/cache";
  auto config = CorpusConfig(data.path());

  auto missing = config;
  missing.valid->tgt = data.path() + "/nope.en";
  auto r = TranslationData::Open(missing, o);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(data.path() + "/nope.en"), std::string::npos);

  auto empty = config;
  empty.test->src = data.path() + "/empty.de";
  WriteLines(empty.test->src, {});
  r = TranslationData::Open(empty, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(data.path() + "/empty.de: is empty"), std::string::npos)
      << r.status().message();

  auto en = Lines(data.path() + "/train.en");
  en.pop_back();
  WriteLines(data.path() + "/short.en", en);
  auto mismatch = config;
  mismatch.train.tgt = data.path() + "/short.en";
  r = TranslationData::Open(mismatch, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "line counts differ: " + config.train.src + " has 50 lines, " +
                                      data.path() + "/short.en has 49");

  auto de = Lines(data.path() + "/train.de");
  de[2] += "\xff";
  WriteLines(data.path() + "/bad.de", de);
  auto bad = config;
  bad.train.src = data.path() + "/bad.de";
  r = TranslationData::Open(bad, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("file " + data.path() + "/bad.de: line 3: invalid UTF-8"),
            std::string::npos)
      << r.status().message();

  // None of the failures left a cache entry (or a temporary) behind.
  EXPECT_TRUE(!fs::exists(o.cache_dir) || fs::is_empty(o.cache_dir));
}

}  // namespace
}  // namespace sf::data
