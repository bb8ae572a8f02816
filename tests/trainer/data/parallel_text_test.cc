#include "trainer/data/parallel_text.h"

#include <gtest/gtest.h>

#include "tests/support/testing.h"
#include "trainer/data/sha256.h"

namespace sf::data {
namespace {

using ::sf::testing::TempDir;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(FindInvalidUtf8, AcceptsValidAndFindsTheFirstBadByte) {
  EXPECT_EQ(FindInvalidUtf8("Grüße, 日本, 😀"), -1);
  EXPECT_EQ(FindInvalidUtf8("ab\xff"), 2);
  EXPECT_EQ(FindInvalidUtf8("a\xc3"), 1);             // truncated sequence
  EXPECT_EQ(FindInvalidUtf8("\xc0\xaf"), 0);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("x\xed\xa0\x80"), 1);     // UTF-16 surrogate
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0);  // above U+10FFFF
}

TEST(ReadParallelText, ReadsLinesWithoutTerminators) {
  TempDir dir;
  auto src = dir.WriteFile("a.de", "eins\r\nzwei\n\ndrei");
  auto tgt = dir.WriteFile("a.en", "one\ntwo\n\nthree\n");
  auto t = ReadParallelText(src, tgt);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->src, (std::vector<std::string>{"eins", "zwei", "", "drei"}));
  EXPECT_EQ(t->tgt, (std::vector<std::string>{"one", "two", "", "three"}));
}

TEST(ReadParallelText, MissingFileIsNotFoundNamingTheFile) {
  TempDir dir;
  auto tgt = dir.WriteFile("a.en", "one\n");
  auto t = ReadParallelText(dir.path() + "/a.de", tgt);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(t.status().message(), dir.path() + "/a.de: does not exist"))
      << t.status().message();
}

TEST(ReadParallelText, EmptyFileIsAnError) {
  TempDir dir;
  auto src = dir.WriteFile("a.de", "");
  auto tgt = dir.WriteFile("a.en", "one\n");
  auto t = ReadParallelText(src, tgt);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(t.status().message(), src + ": is empty")) << t.status().message();
}

TEST(ReadParallelText, LineCountMismatchNamesBothFilesAndCounts) {
  TempDir dir;
  auto src = dir.WriteFile("a.de", "eins\nzwei\ndrei\n");
  auto tgt = dir.WriteFile("a.en", "one\ntwo\n");
  auto t = ReadParallelText(src, tgt);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "line counts differ: " + src + " has 3 lines, " + tgt + " has 2");
}

TEST(ReadParallelText, InvalidUtf8NamesFileAndLine) {
  TempDir dir;
  auto src = dir.WriteFile("a.de", "eins\nzwei\n");
  auto tgt = dir.WriteFile("a.en", "one\ntw\xc3\x28o\n");
  auto t = ReadParallelText(src, tgt);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            "file " + tgt + ": line 2: invalid UTF-8 (byte 0xc3 at column 3)");
}

TEST(JunkLines, BlankAndMarkerOnlyLines) {
  EXPECT_TRUE(IsBlankLine(""));
  EXPECT_TRUE(IsBlankLine(" \t "));
  EXPECT_FALSE(IsBlankLine(" a "));
  EXPECT_TRUE(IsMarkerOnlyLine("@@"));
  EXPECT_TRUE(IsMarkerOnlyLine(" @@ @@ "));
  EXPECT_FALSE(IsMarkerOnlyLine(""));
  EXPECT_FALSE(IsMarkerOnlyLine("Haus@@ boot"));
  EXPECT_FALSE(IsMarkerOnlyLine("@"));
}

TEST(Sha256, MatchesKnownDigests) {
  Sha256 empty;
  EXPECT_EQ(empty.HexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.Update("abc");
  EXPECT_EQ(abc.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 longer;  // two blocks, fed in uneven pieces
  std::string text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  longer.Update(text.substr(0, 7));
  longer.Update(text.substr(7));
  EXPECT_EQ(longer.HexDigest(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, HashesTheSharedTrainFile) {
  // The digest published in the data's LICENSE-or-SOURCE.txt (of the raw bytes, no prefix).
  Sha256 h;
  auto lines = ReadTextLines(sf::testing::DataCopy("multi30k-de-en-tiny") + "/train.de");
  ASSERT_TRUE(lines.ok());
  for (const auto& l : *lines) {
    h.Update(l);
    h.Update("\n");
  }
  EXPECT_EQ(h.HexDigest(), "17e36053806e5e5e13842b9542f0125ea975ea9863f8bf73aef65d5b9f1ac46d");
}

}  // namespace
}  // namespace sf::data
