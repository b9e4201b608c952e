#include "agentkv/report/internal/verdict_text.h"

#include <gtest/gtest.h>

#include <limits>

namespace agentkv::report::internal {
namespace {

TEST(VerdictTextTest, ChangesHaveOneDecimalBelowTenPercentAndNoNegativeZero) {
  EXPECT_EQ(PercentChangeText(-0.51), "-51%");
  EXPECT_EQ(PercentChangeText(-0.076), "-7.6%");
  EXPECT_EQ(PercentChangeText(0.002), "+0.2%");
  EXPECT_EQ(PercentChangeText(-0.0001), "+0.0%");
  EXPECT_EQ(PercentChangeText(0.0996), "+10%");
  EXPECT_EQ(PercentChangeText(std::numeric_limits<double>::infinity()), "unbounded");
  EXPECT_EQ(PercentChangeText(std::numeric_limits<double>::quiet_NaN()), "n/a");
}

TEST(VerdictTextTest, ListsJoinTheLastWithAnd) {
  EXPECT_EQ(ListedText({}), "");
  EXPECT_EQ(ListedText({"a"}), "a");
  EXPECT_EQ(ListedText({"a", "b"}), "a and b");
  EXPECT_EQ(ListedText({"a", "b", "c"}), "a, b and c");
}

TEST(VerdictTextTest, TheBoxEscapesItsLeadAndEachLineInOrder) {
  EXPECT_EQ(VerdictBoxHtml("lead", {}), "");
  const std::string html = VerdictBoxHtml("a < b", {{"turn on", "x & y"}, {"bound", "\"q\""}});
  EXPECT_EQ(html,
            "<section class=\"verdict\" id=\"verdict\">\n<h2>Verdict</h2>\n"
            "<p class=\"lead\">a &lt; b</p>\n<dl class=\"verdict\">\n"
            "<div><dt>turn on</dt><dd>x &amp; y</dd></div>\n"
            "<div><dt>bound</dt><dd>&quot;q&quot;</dd></div>\n</dl>\n</section>\n");
}

}  // namespace
}  // namespace agentkv::report::internal
