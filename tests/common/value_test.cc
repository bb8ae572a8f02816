#include "common/value.h"

#include <gtest/gtest.h>

namespace sf {
namespace {

TEST(ValueTest, JsonRoundTrip) {
  Value v(Value::Map{{"a", 1}, {"b", Value::List{1.5, "x", true, Value()}}, {"c", Value::Map{}}});
  std::string json = v.ToJson();
  EXPECT_EQ(json, R"({"a":1,"b":[1.5,"x",true,null],"c":{}})");
  auto back = Value::FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);
}

TEST(ValueTest, DoublesStayDoubles) {
  EXPECT_EQ(Value(1.0).ToJson(), "1.0");
  EXPECT_EQ(Value(0.1).ToJson(), "0.1");
  auto v = Value::FromJson("1.0");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->is_double());
}

TEST(ValueTest, StringEscapes) {
  Value v(std::string("q\"\\\n\x01 é"));
  auto back = Value::FromJson(v.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, v);
  auto u = Value::FromJson(R"("\u00e9\ud83d\ude00")");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->as_string(), "é\xF0\x9F\x98\x80");
}

TEST(ValueTest, BadJsonNamesTheOffset) {
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "1 2", "{\"a\":1,}"}) {
    auto r = Value::FromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("byte"), std::string::npos) << bad;
  }
  std::string deep(1000, '[');
  EXPECT_FALSE(Value::FromJson(deep).ok());
}

}  // namespace
}  // namespace sf

#include "common/sha256.h"

namespace sf {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 streamed;
  std::string million(1000000, 'a');
  for (size_t i = 0; i < million.size(); i += 999) streamed.Update(million.substr(i, 999));
  EXPECT_EQ(streamed.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace sf
