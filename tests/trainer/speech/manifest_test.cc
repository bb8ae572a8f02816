// Speech manifests (trainer/speech/manifest.h): columns in any order, optional columns, paths
// resolved against the manifest; each malformed input an error naming the file and the line.
#include "trainer/speech/manifest.h"

#include <gtest/gtest.h>

#include "tests/support/testing.h"

namespace sf::speech {
namespace {

TEST(Manifest, ReadsColumnsInAnyOrderAndResolvesRelativePaths) {
  sf::testing::TempDir dir;
  const std::string path = dir.WriteFile("corpus/train.tsv",
                                         "\xEF\xBB\xBFtext\tspeaker\taudio\tduration\tid\r\n"
                                         "Hello, world!\tf1\twav/a.wav\t1.25\tutt-a\r\n"
                                         "\n"
                                         "  two words  \tm2\t/abs/b.flac\t3\tutt-b\r\n");
  auto m = ReadManifest(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 2u);
  const Utterance& a = (*m)[0];
  EXPECT_EQ(a.id, "utt-a");
  EXPECT_EQ(a.audio, dir.path() + "/corpus/wav/a.wav");
  EXPECT_DOUBLE_EQ(a.duration, 1.25);
  EXPECT_EQ(a.text, "Hello, world!");
  EXPECT_EQ(a.speaker, "f1");
  EXPECT_EQ(a.line, 2);
  const Utterance& b = (*m)[1];
  EXPECT_EQ(b.audio, "/abs/b.flac");
  EXPECT_EQ(b.text, "two words");
  EXPECT_EQ(b.line, 4);
}

TEST(Manifest, IdDefaultsToTheLine) {
  sf::testing::TempDir dir;
  const std::string path =
      dir.WriteFile("m.tsv", "audio\tduration\ttext\na.wav\t1\thi\nb.wav\t2\tho\n");
  auto m = ReadManifest(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)[0].id, "line 2");
  EXPECT_EQ((*m)[1].id, "line 3");
  EXPECT_EQ((*m)[1].speaker, "");
}

// Reads `content` as a manifest and expects an error whose message is exactly `message` with
// FILE replaced by the manifest's path.
void ExpectError(const std::string& content, const std::string& message) {
  sf::testing::TempDir dir;
  const std::string path = dir.WriteFile("bad.tsv", content);
  auto m = ReadManifest(path);
  ASSERT_FALSE(m.ok()) << content;
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  std::string want = message;
  want.replace(want.find("FILE"), 4, path);
  EXPECT_EQ(m.status().message(), want);
}

TEST(Manifest, UnknownColumnIsAnErrorListingTheKnownOnes) {
  ExpectError("audio\tduration\ttranscript\na.wav\t1\thi\n",
              "FILE:1: unknown column 'transcript' in the header (known: audio, duration, text, "
              "id, speaker)");
}

TEST(Manifest, DuplicateOrMissingColumnsAreErrors) {
  ExpectError("audio\tduration\ttext\taudio\n",
              "FILE:1: column 'audio' appears twice in the header");
  ExpectError("audio\ttext\na.wav\thi\n",
              "FILE:1: the header has no column 'duration' (required: audio, duration, text; "
              "optional: id, speaker)");
}

TEST(Manifest, RowWithTheWrongNumberOfFieldsNamesItsLine) {
  ExpectError("id\taudio\tduration\ttext\tspeaker\nu1\ta.wav\t1\thi\ts\nu2\tb.wav\t1\tho\n",
              "FILE:3: 4 fields, the header has 5");
  ExpectError("audio\tduration\ttext\na.wav\t1\thi\tthere\n", "FILE:2: 4 fields, the header has 3");
}

TEST(Manifest, EmptyTranscriptNamesItsLine) {
  ExpectError("audio\tduration\ttext\na.wav\t1\thi\nb.wav\t1\t   \n",
              "FILE:3: column text: empty transcript");
}

TEST(Manifest, BadDurationNamesItsLine) {
  ExpectError("audio\tduration\ttext\na.wav\tabc\thi\n",
              "FILE:2: column duration: 'abc' is not a positive number of seconds");
  ExpectError("audio\tduration\ttext\na.wav\t1\thi\nb.wav\t-2\tho\n",
              "FILE:3: column duration: '-2' is not a positive number of seconds");
  ExpectError("audio\tduration\ttext\na.wav\t0\thi\n",
              "FILE:2: column duration: '0' is not a positive number of seconds");
  ExpectError("audio\tduration\ttext\na.wav\tnan\thi\n",
              "FILE:2: column duration: 'nan' is not a positive number of seconds");
  ExpectError("audio\tduration\ttext\na.wav\t1.5s\thi\n",
              "FILE:2: column duration: '1.5s' is not a positive number of seconds");
}

TEST(Manifest, OtherErrorsNameFileAndLine) {
  ExpectError("audio\tduration\ttext\n\t1\thi\n", "FILE:2: column audio: empty path");
  ExpectError("id\taudio\tduration\ttext\nx\ta.wav\t1\thi\nx\tb.wav\t1\tho\n",
              "FILE:3: column id: 'x' is already the id of line 2");
  ExpectError("audio\tduration\ttext\na.wav\t1\th\xff\n", "FILE:2: invalid UTF-8 (or a NUL byte)");
  ExpectError("audio\tduration\ttext\n", "FILE: no utterances (only a header)");
  ExpectError("", "FILE: empty manifest (no header line)");
}

TEST(Manifest, MissingManifestIsNotFound) {
  auto m = ReadManifest("/nonexistent/train.tsv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("/nonexistent/train.tsv"), std::string::npos);
}

}  // namespace
}  // namespace sf::speech
