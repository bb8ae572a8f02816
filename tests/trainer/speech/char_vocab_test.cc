// Character targets (trainer/speech/char_vocab.h): blank 0 and the fixed base symbols, extra
// characters in first-seen order, the WER normalisation applied, round trips through ids and
// the saved file, unknown characters skipped and counted.
#include "trainer/speech/char_vocab.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/testing.h"
#include "trainer/eval/error_rate.h"

namespace sf::speech {
namespace {

TEST(CharVocabulary, BlankIsZeroThenTheBaseSymbols) {
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{});
  EXPECT_EQ(CharVocabulary::kBlank, 0);
  EXPECT_EQ(v.size(), 39);
  EXPECT_EQ(v.symbol(0), "<blank>");
  EXPECT_EQ(v.symbol(1), " ");
  EXPECT_EQ(v.symbol(2), "'");
  EXPECT_EQ(v.symbol(3), "a");
  EXPECT_EQ(v.symbol(28), "z");
  EXPECT_EQ(v.symbol(29), "0");
  EXPECT_EQ(v.symbol(38), "9");
  EXPECT_EQ(v.id(U'a'), 3);
  EXPECT_EQ(v.id(U'é'), -1);
}

TEST(CharVocabulary, AppliesTheWerNormalisation) {
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{"x"});
  const std::string text = "  A man's T-shirt,  \"RED\"!  ";
  std::vector<int32_t> ids = v.Encode(text);
  EXPECT_EQ(v.Decode(ids), "a man's t shirt red");
  EXPECT_EQ(v.Decode(ids), eval::NormalizeTranscript(text));
  for (int32_t i : ids) EXPECT_NE(i, CharVocabulary::kBlank);
}

TEST(CharVocabulary, AddsOtherCharactersInFirstSeenOrder) {
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{"Señor cañón", "Zoë über ñ"});
  ASSERT_EQ(v.size(), 39 + 4);
  EXPECT_EQ(v.symbol(39), "ñ");
  EXPECT_EQ(v.symbol(40), "ó");
  EXPECT_EQ(v.symbol(41), "ë");
  EXPECT_EQ(v.symbol(42), "ü");
  int64_t unknown = 0;
  EXPECT_EQ(v.Decode(v.Encode("Zoë, über!", &unknown)), "zoë über");
  EXPECT_EQ(unknown, 0);
  // The same transcripts give the same vocabulary.
  CharVocabulary w = CharVocabulary::Build(std::vector<std::string>{"Señor cañón", "Zoë über ñ"});
  for (int32_t i = 0; i < v.size(); ++i) EXPECT_EQ(v.symbol(i), w.symbol(i));
}

TEST(CharVocabulary, SkipsAndCountsUnknownCharacters) {
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{"plain text"});
  int64_t unknown = 0;
  EXPECT_EQ(v.Decode(v.Encode("café crème", &unknown)), "caf crme");
  EXPECT_EQ(unknown, 2);
}

TEST(CharVocabulary, DecodeDropsBlanksAndOutOfRangeIds) {
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{});
  std::vector<int32_t> ids = {0, 10, 0, 7, 1, 3, 999, -4, 0};
  EXPECT_EQ(v.Decode(ids), "he a");
}

TEST(CharVocabulary, SavesAndLoadsOneSymbolPerLine) {
  sf::testing::TempDir dir;
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{"Zoë's 42 ñandús"});
  const std::string path = dir.path() + "/chars.txt";
  ASSERT_TRUE(v.Save(path).ok());
  std::ifstream in(path);
  std::string first, second, third;
  std::getline(in, first);
  std::getline(in, second);
  std::getline(in, third);
  EXPECT_EQ(first, "<blank>");
  EXPECT_EQ(second, "<space>");
  EXPECT_EQ(third, "'");
  auto loaded = CharVocabulary::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->size(), v.size());
  for (int32_t i = 0; i < v.size(); ++i) EXPECT_EQ(loaded->symbol(i), v.symbol(i)) << i;
  EXPECT_EQ(loaded->Encode("Zoë's ñandú"), v.Encode("Zoë's ñandú"));
}

TEST(CharVocabulary, LoadErrorsNameFileAndLine) {
  sf::testing::TempDir dir;
  auto expect = [&](const std::string& content, const std::string& message) {
    const std::string path = dir.WriteFile("v.txt", content);
    auto r = CharVocabulary::Load(path);
    ASSERT_FALSE(r.ok()) << content;
    EXPECT_EQ(r.status().message(), path + message);
  };
  expect("a\n", ":1: the first symbol must be <blank>");
  expect("<blank>\n \n", ":2: the second symbol must be <space>");
  expect("<blank>\n<space>\nab\n", ":3: 'ab' is not one character");
  expect("<blank>\n<space>\na\nb\na\n", ":5: 'a' appears twice");
  expect("<blank>\n", ": not a character vocabulary (fewer than 2 lines)");
  EXPECT_EQ(CharVocabulary::Load(dir.path() + "/none.txt").status().code(), StatusCode::kNotFound);
}

TEST(EncodeTargets, EncodesASplitAndRejectsTranscriptsWithoutCharacters) {
  std::vector<Utterance> utterances(3);
  utterances[0].text = "Hello there";
  utterances[0].line = 2;
  utterances[1].text = "Ça va";
  utterances[1].line = 3;
  utterances[2].text = "fine";
  utterances[2].line = 4;
  CharVocabulary v = CharVocabulary::Build(std::vector<std::string>{"hello there", "fine"});
  auto t = EncodeTargets("/d/valid.tsv", utterances, v);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->targets.size(), 3u);
  EXPECT_EQ(v.Decode(t->targets[0]), "hello there");
  EXPECT_EQ(v.Decode(t->targets[1]), "a va");
  EXPECT_EQ(t->unknown_characters, 1);
  EXPECT_EQ(t->utterances_with_unknown, 1);
  utterances[2].text = "?!";
  auto bad = EncodeTargets("/d/valid.tsv", utterances, v);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind(
                "/d/valid.tsv:4: column text: '?!' is empty after normalisation", 0),
            0u)
      << bad.status().message();
}

}  // namespace
}  // namespace sf::speech
