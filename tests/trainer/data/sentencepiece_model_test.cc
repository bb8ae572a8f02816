#include "trainer/data/sentencepiece_model.h"

#include <gtest/gtest.h>

#include "tests/support/testing.h"

namespace sf::data {
namespace {

std::string TinyDir() { return sf::testing::DataCopy("multi30k-de-en-tiny"); }

SentencePieceTrainOptions TinyOptions(const std::string& out, const std::string& type = "bpe") {
  SentencePieceTrainOptions o;
  o.input_files = {TinyDir() + "/train.de", TinyDir() + "/train.en"};
  o.vocab_size = 1000;
  o.model_type = type;
  o.output_model_path = out;
  return o;
}

TEST(SentencePieceModel, TrainsWithFairseqSpecialIds) {
  sf::testing::TempDir dir;
  ASSERT_TRUE(SentencePieceModel::Train(TinyOptions(dir.path() + "/m.model")).ok());
  auto m = SentencePieceModel::Load(dir.path() + "/m.model");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->vocab_size(), 1000);
  EXPECT_EQ((*m)->IdToPiece(kBosId), "<s>");
  EXPECT_EQ((*m)->IdToPiece(kPadId), "<pad>");
  EXPECT_EQ((*m)->IdToPiece(kEosId), "</s>");
  EXPECT_EQ((*m)->IdToPiece(kUnkId), "<unk>");
}

TEST(SentencePieceModel, EncodeDecodeRoundTripsAndDropsSpecials) {
  sf::testing::TempDir dir;
  ASSERT_TRUE(SentencePieceModel::Train(TinyOptions(dir.path() + "/m.model")).ok());
  auto m = SentencePieceModel::Load(dir.path() + "/m.model");
  ASSERT_TRUE(m.ok());
  const std::string text = "Ein Mann fährt mit dem Fahrrad über die Straße.";
  std::vector<int32_t> ids = (*m)->Encode(text);
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) {
    EXPECT_GE(id, 3);
    EXPECT_LT(id, (*m)->vocab_size());
  }
  EXPECT_EQ((*m)->Decode(ids), text);
  std::vector<int32_t> with_specials = {kBosId};
  with_specials.insert(with_specials.end(), ids.begin(), ids.end());
  with_specials.push_back(kEosId);
  with_specials.push_back(kPadId);
  with_specials.push_back(ids[0]);  // after EOS: ignored
  EXPECT_EQ((*m)->Decode(with_specials), text);
  EXPECT_TRUE((*m)->Encode("").empty());
}

TEST(SentencePieceModel, TrainingIsDeterministic) {
  sf::testing::TempDir dir;
  for (const char* type : {"bpe", "unigram"}) {
    ASSERT_TRUE(SentencePieceModel::Train(TinyOptions(dir.path() + "/a.model", type)).ok());
    ASSERT_TRUE(SentencePieceModel::Train(TinyOptions(dir.path() + "/b.model", type)).ok());
    auto a = SentencePieceModel::Load(dir.path() + "/a.model");
    auto b = SentencePieceModel::Load(dir.path() + "/b.model");
    ASSERT_TRUE(a.ok() && b.ok());
    // (The bytes embed the trainer's temporary paths; the vocabulary and scores are what count.)
    ASSERT_EQ((*a)->vocab_size(), (*b)->vocab_size()) << type;
    for (int32_t id = 0; id < (*a)->vocab_size(); ++id) {
      ASSERT_EQ((*a)->IdToPiece(id), (*b)->IdToPiece(id)) << type << " id " << id;
    }
    const std::string text = "Eine Gruppe von Menschen steht vor einem Iglu.";
    EXPECT_EQ((*a)->Encode(text), (*b)->Encode(text)) << type;
  }
}

TEST(SentencePieceModel, SerializedBytesLoadTheSameModel) {
  sf::testing::TempDir dir;
  ASSERT_TRUE(SentencePieceModel::Train(TinyOptions(dir.path() + "/m.model")).ok());
  auto m = SentencePieceModel::Load(dir.path() + "/m.model");
  ASSERT_TRUE(m.ok());
  auto copy = SentencePieceModel::FromSerialized((*m)->serialized());
  ASSERT_TRUE(copy.ok());
  const std::string text = "Zwei Hunde spielen im Schnee.";
  EXPECT_EQ((*copy)->Encode(text), (*m)->Encode(text));
}

TEST(SentencePieceModel, ErrorsNameTheCause) {
  sf::testing::TempDir dir;
  auto missing = SentencePieceModel::Load(dir.path() + "/nope.model");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.model"), std::string::npos);
  std::string junk = dir.WriteFile("junk.model", "this is not a model");
  EXPECT_EQ(SentencePieceModel::Load(junk).status().code(), StatusCode::kInvalidArgument);
  auto bad_type = TinyOptions(dir.path() + "/x.model", "wordpiece");
  Status st = SentencePieceModel::Train(bad_type);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("wordpiece"), std::string::npos);
}

}  // namespace
}  // namespace sf::data
