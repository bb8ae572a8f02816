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
