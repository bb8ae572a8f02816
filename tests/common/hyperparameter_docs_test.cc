// docs/config.md's hyperparameter reference is the schema's: the generated block in the doc
// equals what HyperparameterReferenceMarkdown() makes now. After changing the schema, run this
// test with SF_UPDATE_DOCS=1 to rewrite the block, and review the diff.
#include "common/config/hyperparameter_docs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/support/testing.h"

namespace sf::config {
namespace {

TEST(HyperparameterDocs, TheReferenceInDocsIsGeneratedFromTheSchema) {
  const std::string path = sf::testing::SourceDir() + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing";
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string doc = buffer.str();
  const std::string begin = kHyperparameterDocsBegin, end = kHyperparameterDocsEnd;
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << path << " has no line " << begin;
  ASSERT_NE(e, std::string::npos) << path << " has no line " << end;
  ASSERT_LT(b, e);
  const size_t body = b + begin.size() + 1;  // after the marker's newline
  const std::string generated = "\n" + HyperparameterReferenceMarkdown() + "\n";
  const std::string current = doc.substr(body, e - body);
  if (current != generated && std::getenv("SF_UPDATE_DOCS") != nullptr) {
    doc.replace(body, e - body, generated);
    std::ofstream(path) << doc;
    GTEST_SKIP() << "rewrote the generated block of " << path;
  }
  EXPECT_EQ(current, generated) << "docs/config.md's hyperparameter reference is out of date: run "
                                   "SF_UPDATE_DOCS=1 build/tests/common/common_hyperparameter_docs_test";
}

// The generator names every hyperparameter and member, and every arch of every family.
TEST(HyperparameterDocs, TheReferenceNamesEveryKnobAndArch) {
  const std::string md = HyperparameterReferenceMarkdown();
  for (const char* name : {"`d_model`", "`optimizer.betas`", "`lr_schedule.total_steps`", "`ctc_weight`",
                           "`residual_from_layer`", "`fconv_iwslt_de_en`", "`speech_transformer_ctc_small`",
                           "`transformer_lm_small`", "`lstm_gnmt4`"}) {
    EXPECT_NE(md.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace sf::config
