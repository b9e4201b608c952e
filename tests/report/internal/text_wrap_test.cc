// Tests of word wrapping: lines stay within the width under their prefixes, words are kept
// whole, and a word wider than the room stands alone.
#include "agentkv/report/internal/text_wrap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv::report::internal {
namespace {

using ::testing::ElementsAre;

TEST(WrapTextTest, BreaksAtSpacesWithinTheWidthUnderItsPrefixes) {
  EXPECT_THAT(WrapText("one two three four five", 12, "- ", "  "),
              ElementsAre("- one two", "  three four", "  five"));
  for (const std::string& line : WrapText("a bb ccc dddd eeeee ffffff", 9, "", "")) {
    EXPECT_LE(line.size(), 9u) << line;
  }
}

TEST(WrapTextTest, KeepsALongWordWholeAndCollapsesSpaces) {
  EXPECT_THAT(WrapText("a  verylongword  b", 6, "", ""), ElementsAre("a", "verylongword", "b"));
  EXPECT_THAT(WrapText("", 10, "name  ", "      "), ElementsAre("name"));
}

TEST(LabelledLinesTest, PadsLabelsToTheLongestAndWrapsTextUnderItself) {
  const std::vector<std::string> lines = LabelledLines(
      "arms:", {{"a", "one two three"}, {"longer", "x"}}, /*width=*/18, /*min_text=*/6);
  EXPECT_THAT(lines, ElementsAre("arms:", "  a       one two", "          three", "  longer  x"));
  EXPECT_EQ(WidestLine(lines), 17u);
  EXPECT_EQ(WidestLine({}), 0u);
  // However narrow the width, the text keeps `min_text` columns beside the labels.
  for (const std::string& line : LabelledLines("t", {{"abc", "aaaa bbbb cccc"}}, 1, 9)) {
    EXPECT_LE(line.size(), 7u + 9u) << line;
  }
  EXPECT_THAT(LabelledLines("t", {{"abc", "aaaa bbbb cccc"}}, 1, 9),
              ElementsAre("t", "  abc  aaaa bbbb", "       cccc"));
}

}  // namespace
}  // namespace agentkv::report::internal
