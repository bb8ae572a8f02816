// WER and CER (trainer/eval/error_rate.h): the normalisation, edit counts worked out by hand,
// corpus sums, and the error for mismatched lengths.
#include "trainer/eval/error_rate.h"

#include <gtest/gtest.h>

namespace sf::eval {
namespace {

TEST(NormalizeTranscript, LowercasesAndTurnsPunctuationIntoSpaces) {
  EXPECT_EQ(NormalizeTranscript("  A man in a T-shirt, smiling.  "), "a man in a t shirt smiling");
  EXPECT_EQ(NormalizeTranscript("Don't STOP!!"), "don't stop");
  EXPECT_EQ(NormalizeTranscript("Two\tdogs\n3 cats"), "two dogs 3 cats");
  EXPECT_EQ(NormalizeTranscript("Ça   marche"), "Ça marche");  // non-ASCII kept as is
  EXPECT_EQ(NormalizeTranscript("...,;"), "");
}

TEST(WordErrors, CountsSubstitutionsDeletionsAndInsertions) {
  // "sat" -> "sit" (S), "the" before "mat" dropped (D).
  ErrorCounts e = WordErrors("the cat sit on mat", "The cat sat on the mat.");
  EXPECT_EQ(e.substitutions, 1);
  EXPECT_EQ(e.deletions, 1);
  EXPECT_EQ(e.insertions, 0);
  EXPECT_EQ(e.reference_length, 6);
  EXPECT_NEAR(e.rate(), 2.0 / 6.0, 1e-12);
  EXPECT_EQ(e.ToString("WER"), "WER 33.33 (S 1 D 1 I 0 / N 6)");
  // Two inserted words, nothing else.
  e = WordErrors("a big red dog runs", "a dog runs");
  EXPECT_EQ(e.insertions, 2);
  EXPECT_EQ(e.edits(), 2);
  // More insertions than reference words: above 100 %.
  e = WordErrors("one two three four", "one");
  EXPECT_NEAR(e.rate(), 3.0, 1e-12);
  // Identical after normalisation.
  EXPECT_EQ(WordErrors("A dog's toy.", "a dog's toy").edits(), 0);
  // Empty sides.
  e = WordErrors("", "two words");
  EXPECT_EQ(e.deletions, 2);
  e = WordErrors("two words", "");
  EXPECT_EQ(e.insertions, 2);
  EXPECT_EQ(e.reference_length, 0);
  EXPECT_EQ(WordErrors("", "").edits(), 0);
}

TEST(CharErrors, CountCodePointsWithSpaces) {
  // "kitten" -> "sitting": the classic 3 (2 substitutions, 1 insertion).
  ErrorCounts e = CharErrors("sitting", "kitten");
  EXPECT_EQ(e.substitutions, 2);
  EXPECT_EQ(e.insertions, 1);
  EXPECT_EQ(e.reference_length, 6);
  // The space between words is a character: "a b" vs "ab" is one deletion of 3.
  e = CharErrors("ab", "a b");
  EXPECT_EQ(e.deletions, 1);
  EXPECT_EQ(e.reference_length, 3);
  // A two-byte code point is one character.
  e = CharErrors("Çb", "cb");
  EXPECT_EQ(e.substitutions, 1);
  EXPECT_EQ(e.reference_length, 2);
}

TEST(CorpusErrors, SumCountsBeforeDividing) {
  // 1 edit of 2 words and 0 of 8: 10 %, not the 25 % a mean of the per-sentence rates gives.
  auto wer = CorpusWordErrors({"a cat", "one two three four five six seven eight"},
                              {"a dog", "one two three four five six seven eight"});
  ASSERT_TRUE(wer.ok());
  EXPECT_EQ(wer->edits(), 1);
  EXPECT_EQ(wer->reference_length, 10);
  EXPECT_NEAR(wer->rate(), 0.1, 1e-12);
  auto cer = CorpusCharErrors({"a cat"}, {"a dog"});
  ASSERT_TRUE(cer.ok());
  EXPECT_EQ(cer->substitutions, 3);
  auto bad = CorpusWordErrors({"x"}, {"x", "y"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "1 hypotheses for 2 references");
}

}  // namespace
}  // namespace sf::eval
