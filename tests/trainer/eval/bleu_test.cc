// Expected values come from an independent re-derivation of sacreBLEU 2.x's documented
// behaviour (its 13a regexes run by Python's `re`, closest reference length, exp smoothing),
// computed with `/usr/bin/python3 tests/trainer/eval/sacrebleu_reference.py` (no sacrebleu
// needed; it prints every expected line below).
#include "trainer/eval/bleu.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/support/testing.h"

namespace sf::eval {
namespace {

std::string Line(const std::vector<std::string>& hyps,
                 const std::vector<std::vector<std::string>>& refs, bool lowercase = false) {
  BleuOptions o;
  o.lowercase = lowercase;
  auto s = CorpusBleu(hyps, refs, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? s->ToString() : "";
}

TEST(Tokenize13a, SplitsPunctuationLikeMteval) {
  EXPECT_EQ(Tokenize13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(Tokenize13a("a/b (c) [d] {e} it's $5 #1 @x"),
            "a / b ( c ) [ d ] { e } it's $ 5 # 1 @ x");
}

TEST(Tokenize13a, ReplacesEntitiesAndSkipped) {
  EXPECT_EQ(Tokenize13a("&quot;Hi&quot; &amp; bye &lt;3 &gt;"), "\" Hi \" & bye < 3 >");
  EXPECT_EQ(Tokenize13a("line<skipped>one"), "lineone");
}

TEST(Tokenize13a, KeepsPeriodsAndCommasBetweenDigits) {
  EXPECT_EQ(Tokenize13a("3.5 and 1,000 but end. Also a,b"), "3.5 and 1,000 but end . Also a , b");
}

TEST(Tokenize13a, SplitsDashOnlyAfterADigit) {
  EXPECT_EQ(Tokenize13a("2-3 well-known x-ray 10-"), "2 - 3 well-known x-ray 10 -");
}

TEST(Tokenize13a, LeavesUnicodePunctuationAndCollapsesUnicodeSpace) {
  EXPECT_EQ(Tokenize13a("„Zitat“ — ‚so‘ …"), "„Zitat“ — ‚so‘ …");
  EXPECT_EQ(Tokenize13a("tab\there\u00a0nbsp  spaces"), "tab here nbsp spaces");
}

TEST(LowercaseUtf8, LowersLatinGreekAndCyrillic) {
  EXPECT_EQ(LowercaseUtf8("ÄÖÜ ẞ Σ ДОМ Abc"), "äöü ß σ дом abc");
}

TEST(CorpusBleu, PerfectMatchIs100) {
  EXPECT_EQ(Line({"The cat sat on the mat.", "A dog runs in the park."},
                 {{"The cat sat on the mat.", "A dog runs in the park."}}),
            "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 14 "
            "ref_len = 14)");
}

TEST(CorpusBleu, EmptyHypothesisIsZero) {
  auto s = CorpusBleu({""}, {{"The cat sat on the mat."}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->score, 0.0);
  EXPECT_EQ(s->ToString(),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 7)");
}

TEST(CorpusBleu, LongerHypothesisHasNoBrevityPenalty) {
  auto s =
      CorpusBleu({"The small cat sat on the red mat today , yes ."}, {{"The cat sat on the mat."}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->bp, 1.0);
  EXPECT_NEAR(s->score, 24.384183193426086, 1e-9);
  EXPECT_EQ(s->ToString(),
            "BLEU = 24.38 58.3/27.3/20.0/11.1 (BP = 1.000 ratio = 1.714 hyp_len = 12 ref_len = 7)");
}

TEST(CorpusBleu, MultipleReferencesClipByBestAndUseClosestLength) {
  auto s = CorpusBleu({"The cat is on the mat.", "There is a dog in the park."},
                      {{"The cat sat on the mat.", "A dog is playing in the park."},
                       {"There is a cat on the mat.", "There is a dog in a park."}});
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->score, 69.9428045241416, 1e-9);
  EXPECT_EQ(s->ToString(),
            "BLEU = 69.94 100.0/84.6/63.6/44.4 (BP = 1.000 ratio = 1.000 hyp_len = 15 "
            "ref_len = 15)");
}

TEST(CorpusBleu, UnicodePunctuationStaysAttached) {
  auto s = CorpusBleu({"„Hallo“, sagte er – dann ging er…"},
                      {{"„Hallo“, sagte er – und dann ging er…"}});
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->score, 61.01950432112583, 1e-9);
  EXPECT_EQ(s->ToString(),
            "BLEU = 61.02 100.0/85.7/66.7/40.0 (BP = 0.882 ratio = 0.889 hyp_len = 8 ref_len = 9)");
}

TEST(CorpusBleu, LowercaseOption) {
  EXPECT_EQ(Line({"THE CAT SAT ON THE MAT . Ärger"}, {{"the cat sat on the mat . ärger"}}),
            "BLEU = 5.52 12.5/7.1/4.2/2.5 (BP = 1.000 ratio = 1.000 hyp_len = 8 ref_len = 8)");
  EXPECT_EQ(Line({"THE CAT SAT ON THE MAT . Ärger"}, {{"the cat sat on the mat . ärger"}}, true),
            "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 8 "
            "ref_len = 8)");
}

TEST(CorpusBleu, ExponentialSmoothingOfMissingOrders) {
  auto s = CorpusBleu({"a b c d", "e f"}, {{"a b x d", "e f g"}});
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->score, 34.00437369472039, 1e-9);
  EXPECT_EQ(s->ToString(),
            "BLEU = 34.00 83.3/50.0/25.0/25.0 (BP = 0.846 ratio = 0.857 hyp_len = 6 ref_len = 7)");
}

TEST(CorpusBleu, SmallCorpusWithEntitiesAndNumbers) {
  auto s = CorpusBleu(
      {"Two young men are playing frisbee in the park.",
       "A woman, wearing a red hat, is 3.5 meters away.", "Der Hund &quot;Rex&quot; bellt!"},
      {{"Two young guys play frisbee in a park.", "A woman in a red hat is 3.5 meters away.",
        "The dog \"Rex\" barks!"}});
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->score, 27.690061581375986, 1e-9);
  EXPECT_EQ(s->ToString(),
            "BLEU = 27.69 66.7/44.4/20.8/9.5 (BP = 1.000 ratio = 1.111 hyp_len = 30 ref_len = 27)");
}

TEST(CorpusBleu, RejectsMismatchedStreamsAndMissingReferences) {
  auto s = CorpusBleu({"a", "b"}, {{"a"}});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("reference stream 1 has 1 lines"), std::string::npos);
  auto e = CorpusBleu({"a"}, {{""}});
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("segment 1"), std::string::npos);
}

TEST(BleuSignature, DescribesTheDefaults) {
  EXPECT_EQ(BleuSignature({}, 1), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.2");
  BleuOptions lc;
  lc.lowercase = true;
  EXPECT_EQ(BleuSignature(lc, 2), "nrefs:2|case:lc|eff:no|tok:13a|smooth:exp|version:2.4.2");
}

TEST(RunBleuCommand, ScoresStdinAgainstReferenceFiles) {
  sf::testing::TempDir dir;
  std::string ref1 =
      dir.WriteFile("ref1.en", "The cat sat on the mat.\nA dog is playing in the park.\n");
  std::string ref2 =
      dir.WriteFile("ref2.en", "There is a cat on the mat.\r\nThere is a dog in a park.\r\n");
  std::istringstream hyps("The cat is on the mat.\nThere is a dog in the park.\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunBleuCommand({"--ref", ref1, "--ref", ref2}, hyps, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "BLEU = 69.94 100.0/84.6/63.6/44.4 (BP = 1.000 ratio = 1.000 hyp_len = 15 "
            "ref_len = 15)\n");

  std::istringstream again("The cat is on the mat.\nThere is a dog in the park.\n");
  std::ostringstream json;
  EXPECT_EQ(RunBleuCommand({"--ref", ref1, "--ref", ref2, "-f", "json"}, again, json, err), 0);
  EXPECT_NE(json.str().find("\"score\": 69.94,"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"signature\": \"nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|"),
            std::string::npos);
  EXPECT_NE(json.str().find("\"verbose_score\": \"100.0/84.6/63.6/44.4 (BP = 1.000"),
            std::string::npos)
      << json.str();
}

TEST(RunBleuCommand, ReportsBadInputAndUsage) {
  sf::testing::TempDir dir;
  std::string ref = dir.WriteFile("ref.en", "one line\n");
  std::ostringstream out, err;
  std::istringstream two("a\nb\n");
  EXPECT_EQ(RunBleuCommand({"--ref", ref}, two, out, err), 1);
  EXPECT_NE(err.str().find("reference stream 1 has 1 lines"), std::string::npos) << err.str();
  std::istringstream bad("caf\xc3\n");
  EXPECT_EQ(RunBleuCommand({"--ref", ref}, bad, out, err), 1);
  EXPECT_NE(err.str().find("hypotheses: line 1: invalid UTF-8"), std::string::npos);
  std::istringstream any("x\n");
  EXPECT_EQ(RunBleuCommand({"--ref", dir.path() + "/missing.en"}, any, out, err), 1);
  EXPECT_NE(err.str().find("missing.en"), std::string::npos);
  EXPECT_EQ(RunBleuCommand({}, any, out, err), 2);
  EXPECT_EQ(RunBleuCommand({"--ref", ref, "--bogus"}, any, out, err), 2);
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace sf::eval
