// The Multi30k-tiny corpus opened once per test binary (tokenizer trained into a temporary
// cache), shared by the data tests so SentencePiece trains once.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/support/testing.h"
#include "trainer/data/translation_data.h"

namespace sf::data::test {

inline std::string TinyDir() { return sf::testing::DataCopy("multi30k-de-en-tiny"); }

// data: section for a directory holding train/valid/test .de/.en files.
inline config::DataConfig CorpusConfig(const std::string& dir, bool with_eval_splits = true) {
  config::DataConfig c;
  c.train = {dir + "/train.de", dir + "/train.en", ""};
  if (with_eval_splits) {
    c.valid = config::ParallelFiles{dir + "/valid.de", dir + "/valid.en", ""};
    c.test = config::ParallelFiles{dir + "/test.de", dir + "/test.en", ""};
  }
  c.tokenizer.vocab_size = 1000;
  c.tokenizer.model_type = "bpe";
  c.tokenizer.shared = true;
  return c;
}

// The shared tiny corpus, built into a cache directory removed at exit.
inline const TranslationData& TinyData() {
  static sf::testing::TempDir cache;
  static std::unique_ptr<TranslationData> data = [] {
    DataOptions o;
    o.cache_dir = cache.path();
    auto d = TranslationData::Open(CorpusConfig(TinyDir()), o);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(d).value() : nullptr;
  }();
  if (!data) ADD_FAILURE() << "tiny corpus unavailable";
  return *data;
}

}  // namespace sf::data::test
