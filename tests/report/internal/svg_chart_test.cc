// Tests of the SVG drawing primitives: the text-width estimate and fitting (never past the
// room, never inside a UTF-8 character), label spreading, nice ranges and ticks, and tick labels
// kept inside the canvas.
#include "agentkv/report/internal/svg_chart.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace agentkv::report::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(TextWidthTest, AddsDejaVuSansAdvancesScaledByTheFontSize) {
  EXPECT_DOUBLE_EQ(TextWidth("", 12), 0);
  // Digits are 0.636 em, 'i' 0.278 em, 'm' 0.974 em.
  EXPECT_NEAR(TextWidth("00", 10), 12.72, 1e-9);
  EXPECT_NEAR(TextWidth("im", 10), 12.52, 1e-9);
  EXPECT_NEAR(TextWidth("00", 20), 2 * TextWidth("00", 10), 1e-9);
  EXPECT_NEAR(TextWidth("00", 10, /*bold=*/true), 1.1 * 12.72, 1e-9);
  // A two-byte character counts once, as 1 em.
  EXPECT_NEAR(TextWidth("\u00fc", 10), 10, 1e-9);
  EXPECT_GT(TextWidth("+stall-offload+host-tier", 11), TextWidth("+host-tier", 11));
}

TEST(FitTextTest, KeepsWhatFitsAndCutsTheRestWithAnEllipsis) {
  EXPECT_EQ(FitText("baseline", 11, 200), "baseline");
  const std::string cut = FitText("+stall-offload+host-tier", 11, 60);
  EXPECT_THAT(cut, ::testing::EndsWith("\u2026"));
  EXPECT_TRUE(std::string("+stall-offload+host-tier").starts_with(cut.substr(0, cut.size() - 3)));
  EXPECT_LE(TextWidth(cut, 11), 60);
  // One more character would not have fitted.
  const std::string longer = std::string("+stall-offload+host-tier").substr(0, cut.size() - 2);
  EXPECT_GT(TextWidth(longer + "\u2026", 11), 60);
  EXPECT_EQ(FitText("anything", 11, 5), "") << "not even the ellipsis fits";
}

TEST(FitTextTest, NeverCutsInsideAUtf8Character) {
  const std::string name = "\u00e4\u00f6\u00fc\u00e4\u00f6\u00fc\u00e4\u00f6\u00fc";
  for (double room = 10; room < 100; room += 1.5) {
    const std::string cut = FitText(name, 10, room);
    EXPECT_LE(TextWidth(cut, 10), room);
    // Every kept character is whole: an even number of bytes before the 3-byte ellipsis.
    if (!cut.empty() && cut != name) {
      EXPECT_EQ((cut.size() - 3) % 2, 0u) << room;
    }
  }
}

TEST(SpreadLabelsTest, KeepsAMinimumGapInsideTheRangeAndTheInputOrder) {
  // Already apart: unchanged.
  EXPECT_THAT(SpreadLabels({10, 40, 25}, 12, 0, 100), ElementsAre(10, 40, 25));
  // Three at one point: pushed down one gap apart, in input order.
  EXPECT_THAT(SpreadLabels({50, 50, 50}, 12, 0, 100), ElementsAre(50, 62, 74));
  // Pushed past the bottom: pulled back up from it.
  EXPECT_THAT(SpreadLabels({95, 96, 97}, 10, 0, 100), ElementsAre(80, 90, 100));
  // Out of range or not finite: clamped into it.
  const std::vector<double> placed =
      SpreadLabels({-5, std::numeric_limits<double>::quiet_NaN(), 200}, 10, 0, 100);
  EXPECT_THAT(placed, ElementsAre(0, 10, 100));
  EXPECT_TRUE(SpreadLabels({}, 10, 0, 100).empty());
}

TEST(NiceScaleTest, CoversTheRangeAndZeroWithRoundEnds) {
  const Scale up = NiceScale(0, 43.6);
  EXPECT_DOUBLE_EQ(up.lo, 0);
  EXPECT_DOUBLE_EQ(up.hi, 50);
  const Scale both = NiceScale(-12.3, 2.1);
  EXPECT_DOUBLE_EQ(both.lo, -14) << "a multiple of the step, 2";
  EXPECT_DOUBLE_EQ(both.hi, 4);
  const Scale positive = NiceScale(3, 7);
  EXPECT_DOUBLE_EQ(positive.lo, 0) << "bars start at zero";
  const Scale empty = NiceScale(0, std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(empty.lo, 0);
  EXPECT_DOUBLE_EQ(empty.hi, 1);
  EXPECT_THAT(Ticks(NiceScale(0, 1), 2), ElementsAre(0, 0.5, 1));
}

TEST(ScaleTest, MapsLinearlyAndLogarithmicallyWithoutNaN) {
  const Scale linear{.lo = 0, .hi = 10, .px_lo = 100, .px_hi = 200};
  EXPECT_DOUBLE_EQ(linear.Map(5), 150);
  EXPECT_DOUBLE_EQ(linear.Map(std::numeric_limits<double>::quiet_NaN()), 100);
  const Scale log{.lo = 1, .hi = 100, .log = true, .px_lo = 0, .px_hi = 200};
  EXPECT_DOUBLE_EQ(log.Map(10), 100);
  EXPECT_DOUBLE_EQ(log.Map(0), 0) << "at or below lo maps to lo";
  EXPECT_THAT(Ticks(log), ElementsAre(1, 10, 100));
}

TEST(SvgCanvasTest, KeepsTickLabelsInsideTheCanvas) {
  SvgCanvas canvas(300, 150, "t");
  const PlotArea area{.left = 36, .top = 20, .right = 299, .bottom = 120};
  const Scale x{.lo = 0, .hi = 1000, .px_lo = area.left, .px_hi = area.right};
  canvas.XTicks(x, area, 4, false);
  const std::string svg = canvas.Finish();
  // "1000" at x = 299 would cross the right edge centred: it is flush with the edge instead.
  EXPECT_THAT(svg, HasSubstr("x=\"299.0\" y=\"135.0\" font-size=\"10.5\" fill=\"#444444\" "
                             "text-anchor=\"end\">1000</text>"));
  EXPECT_THAT(svg, HasSubstr("text-anchor=\"middle\">600</text>"));
}

TEST(SvgCanvasTest, EscapesTextAndWritesNoNonFiniteCoordinate) {
  SvgCanvas canvas(100, 50, "a<b");
  canvas.Text(std::numeric_limits<double>::infinity(), 5, "x & y", "");
  canvas.Rect(1, 1, -1, 5, "", "drawn as nothing");
  canvas.Polyline({{0, 0}}, "");
  const std::string svg = canvas.Finish();
  EXPECT_THAT(svg, HasSubstr("<title>a&lt;b</title>"));
  EXPECT_THAT(svg, HasSubstr("<text x=\"0.0\" y=\"5.0\" >x &amp; y</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("drawn as nothing")));
  EXPECT_THAT(svg, Not(HasSubstr("polyline")));
  EXPECT_THAT(svg, ::testing::EndsWith("</svg>\n"));
}

}  // namespace
}  // namespace agentkv::report::internal
