#include "task/line_splitter.h"

#include <gtest/gtest.h>

namespace sf::task {
namespace {

TEST(LineSplitterTest, SplitsAcrossChunksAndKeepsPartialLineUntilFlush) {
  LineSplitter splitter;
  std::vector<std::string> lines;
  splitter.Append("one\ntw", &lines);
  splitter.Append("o\r\nthr", &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  splitter.Append("ee", &lines);
  EXPECT_EQ(lines.size(), 2u);
  splitter.Flush(&lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  splitter.Flush(&lines);
  EXPECT_EQ(lines.size(), 3u);
}

TEST(LineSplitterTest, EmptyLinesAreLines) {
  LineSplitter splitter;
  std::vector<std::string> lines;
  splitter.Append("\n\nx\n", &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"", "", "x"}));
}

TEST(LineSplitterTest, LongLinesAreCutAt16KiB) {
  LineSplitter splitter;
  std::vector<std::string> lines;
  std::string long_line(40000, 'x');
  splitter.Append(long_line.substr(0, 20000), &lines);  // bounded even before the newline
  EXPECT_EQ(lines.size(), 1u);
  splitter.Append(long_line.substr(20000) + "\n", &lines);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].size(), 16384u);
  EXPECT_EQ(lines[1].size(), 16384u);
  EXPECT_EQ(lines[2].size(), 40000u - 2 * 16384u);
}

TEST(LineSplitterTest, CutsNeverSplitAUtf8Character) {
  LineSplitter splitter(5);
  std::vector<std::string> lines;
  splitter.Append("abcd\xC3\xA9xyz\n", &lines);  // "abcdé xyz": é would straddle byte 5
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "abcd");
  EXPECT_EQ(lines[1], "\xC3\xA9xyz");
}

TEST(LineSplitterTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(SanitizeUtf8("ok"), "ok");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(SanitizeUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated sequence
  EXPECT_EQ(SanitizeUtf8("\xE2\x82\xAC"), "\xE2\x82\xAC");          // the euro sign
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8(std::string_view("a\0b", 3)), "a\xEF\xBF\xBD" "b");  // NUL: PostgreSQL text has none
}

}  // namespace
}  // namespace sf::task
