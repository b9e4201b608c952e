// Tests of the report's charts: the KV usage panels share their axes and break where the fleet
// was idle, the session-time panels put an unchanged arm on 0 % and a uniformly faster one on
// its change, latency bars carry their values and lengths in proportion, arm names are
// written in full where they fit, and every arm has one colour of its own in every chart.
#include "agentkv/report/internal/replay_charts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report::internal {
namespace {

using sim::ArmResult;
using sim::ReplayResult;
using ::testing::HasSubstr;

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Every match of `pattern`'s first group in `text`.
std::vector<std::string> All(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

// The y coordinates of the points of the first polyline stroked in `color`.
std::set<std::string> PolylineYs(const std::string& svg, const std::string& color) {
  const std::vector<std::string> points =
      All(svg, "<polyline fill=\"none\" (?:data-arm=\"[0-9]+\" )?stroke=\"" + color +
                   "\"[^>]* points=\"([^\"]*)\"");
  std::set<std::string> ys;
  if (points.empty()) return ys;
  for (const std::string& y : All(points[0], ",([-0-9.]+)")) ys.insert(y);
  return ys;
}

ArmResult Arm(const std::string& name) {
  ArmResult arm;
  arm.arm = name;
  return arm;
}

// Samples every 2 s over [from_s, to_s), using `used` of 1000 tokens and 200 more cached.
void AddUsage(ArmResult& arm, int from_s, int to_s, int64_t used) {
  for (int t = from_s; t < to_s; t += 2) {
    arm.kv_usage.push_back({TimeNs::Seconds(t), used, 200, 1000, 0});
  }
}

TEST(KvUsagePanelsTest, OnePanelPerArmOnSharedAxesWithGapsWhereIdle) {
  ReplayResult result;
  result.arms = {Arm("busy-then-idle"), Arm("steady")};
  AddUsage(result.arms[0], 0, 600, 500);
  AddUsage(result.arms[0], 3000, 3600, 700);  // Idle from 10 to 50 minutes.
  AddUsage(result.arms[1], 0, 1200, 300);
  const std::string html = KvUsagePanels(result);
  ASSERT_EQ(Count(html, "<svg "), 2u);
  const size_t second = html.find("<svg ", html.find("<svg ") + 1);
  const std::string first_panel = html.substr(0, second);
  const std::string second_panel = html.substr(second);
  // The same x (minutes, to 60) and y ticks in both panels.
  const std::string tick = "font-size=\"10.5\" fill=\"#444444\" text-anchor=\"[a-z]+\">([^<]+)<";
  EXPECT_EQ(All(first_panel, tick), All(second_panel, tick));
  EXPECT_THAT(All(first_panel, tick), ::testing::Contains("60"));
  EXPECT_THAT(All(first_panel, tick), ::testing::Contains("100%"));
  // Two runs of samples: two areas per series (used, used + cached); one run: one per series.
  EXPECT_EQ(Count(first_panel, "<polygon "), 4u);
  EXPECT_EQ(Count(second_panel, "<polygon "), 2u);
  EXPECT_THAT(first_panel, HasSubstr("KV usage over time: busy-then-idle"));
}

TEST(SessionTimeShiftPanelsTest, UnchangedArmOnZeroAndAUniformSpeedupOnItsChange) {
  ReplayResult result;
  result.arms = {Arm("baseline"), Arm("same"), Arm("faster")};
  for (int i = 1; i <= 40; ++i) {
    result.arms[0].session_times_s.push_back(60.0 * i);
    result.arms[1].session_times_s.push_back(60.0 * i);
    result.arms[2].session_times_s.push_back(0.9 * 60.0 * i);
  }
  const std::string html = SessionTimeShiftPanels(result);
  // One panel per arm but the baseline, on one shared scale.
  EXPECT_EQ(Count(html, "<svg "), 2u);
  const size_t second = html.find("<svg ", html.find("<svg ") + 1);
  const std::string same = html.substr(0, second);
  const std::string faster = html.substr(second);
  EXPECT_THAT(same, HasSubstr(">same</text>"));
  EXPECT_THAT(faster, HasSubstr(">faster</text>"));
  // The y of a gridline is its label's y less 3.5.
  auto gridline_y = [](const std::string& svg, const std::string& label) {
    const std::vector<std::string> ys =
        All(svg, "<text x=\"[0-9.]+\" y=\"([0-9.]+)\" [^>]*text-anchor=\"end\">" + label + "<");
    EXPECT_EQ(ys.size(), 1u) << label;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.1f", std::stod(ys.at(0)) - 3.5);
    return std::string(buffer);
  };
  EXPECT_EQ(gridline_y(same, "0%"), gridline_y(faster, "0%")) << "one shared scale";
  EXPECT_EQ(PolylineYs(same, "#f28e2b"), std::set<std::string>{gridline_y(same, "0%")});
  EXPECT_EQ(PolylineYs(faster, "#e15759"), std::set<std::string>{gridline_y(faster, "-10%")});
  // The baseline is each panel's 0 % line, in the baseline's colour.
  EXPECT_THAT(faster, HasSubstr("data-arm=\"0\" stroke=\"#4e79a7\""));
}

TEST(SessionTimeShiftPanelsTest, WithoutSessionsSaysSo) {
  ReplayResult result;
  result.arms = {Arm("baseline")};
  EXPECT_THAT(SessionTimeShiftPanels(result), HasSubstr("<p>Only the baseline ran.</p>"));
  result.arms.push_back(Arm("other"));
  EXPECT_THAT(SessionTimeShiftPanels(result), HasSubstr("<p>No completed sessions.</p>"));
  EXPECT_THAT(SessionTimeShiftPanels(ReplayResult{}), HasSubstr("<p>No arms.</p>"));
}

TEST(ArmColorTest, TwentyArmsGetTwentyDistinctColours) {
  std::set<std::string> colours;
  for (size_t arm = 0; arm < 20; ++arm) colours.insert(ArmColor(arm));
  EXPECT_EQ(colours.size(), 20u);
  EXPECT_STREQ(ArmColor(20), ArmColor(0)) << "the palette repeats past twenty";
}

TEST(ArmColorTest, EveryChartMarksEachArmInItsOneColour) {
  ReplayResult result;
  result.arms = {Arm("baseline"), Arm("b"), Arm("c")};
  for (ArmResult& arm : result.arms) {
    arm.token_hit_ratio_device = 0.5;
    arm.session_times_s = {10, 20, 30};
    AddUsage(arm, 0, 10, 500);
  }
  const std::string charts[] = {PercentileChart(result, "TTFT", &ArmResult::ttft, "TTFT (s)"),
                                HitRatioChart(result), RecomputeChart(result),
                                KvUsagePanels(result), SessionTimeShiftPanels(result)};
  for (const std::string& chart : charts) {
    for (size_t arm = 0; arm < result.arms.size(); ++arm) {
      // Every mark of the arm is in its colour, and the chart has one.
      const std::string tag = "data-arm=\"" + std::to_string(arm) + "\"";
      const std::vector<std::string> colours =
          All(chart, tag + " (?:fill|stroke)=\"(#[0-9a-f]{6})\"");
      if (arm == 0 && chart == charts[4]) {
        EXPECT_FALSE(colours.empty()) << "the baseline's 0 % line";
      } else {
        EXPECT_FALSE(colours.empty()) << chart.substr(0, 200);
      }
      for (const std::string& colour : colours) EXPECT_EQ(colour, ArmColor(arm));
    }
  }
}

TEST(PercentileChartTest, EveryArmCarriesItsSecondsAndLengthsAreInProportion) {
  ReplayResult result;
  result.arms = {Arm("baseline"), Arm("+stall-offload+host-tier")};
  result.arms[0].ttft = {100, 2.0, 0.081, 3.0, 17.24, 41.13, 70};
  result.arms[1].ttft = {100, 0.2, 0.068, 0.3, 0.51, 3.05, 36};
  const std::string svg = PercentileChart(result, "TTFT", &ArmResult::ttft, "TTFT (s)");
  // One label per arm, p50 / p95 / p99 (three labels on bars 8 px apart would overlap).
  EXPECT_THAT(svg, HasSubstr(">0.081 / 17.2 / 41.1<"));
  EXPECT_THAT(svg, HasSubstr(">0.068 / 0.510 / 3.05<"));
  const std::vector<std::string> widths =
      All(svg, "<rect x=\"[0-9.]+\" y=\"[0-9.]+\" width=\"([0-9.]+)\"[^>]*><title>baseline: p");
  ASSERT_EQ(widths.size(), 3u);
  EXPECT_NEAR(std::stod(widths[2]) / std::stod(widths[1]), 41.13 / 17.24, 0.02);
  // The long name is written in full left of its bars.
  EXPECT_THAT(svg, HasSubstr("text-anchor=\"end\">+stall-offload+host-tier</text>"));
}

TEST(BarChartsTest, HitRatioShowsTheIdealAndRecomputeStacksItsParts) {
  ReplayResult result;
  result.arms = {Arm("baseline"), Arm("infinite-cache")};
  result.arms[0].token_hit_ratio_device = 0.6;
  result.arms[1].token_hit_ratio_device = 0.9;
  result.arms[0].cold_tokens = 1000;
  result.arms[0].evicted_recompute_tokens = 3000;
  const std::string hits = HitRatioChart(result);
  EXPECT_THAT(hits, HasSubstr(">ideal (infinite-cache)</text>"));
  EXPECT_THAT(hits, HasSubstr(">0.9</text>"));
  const std::string recompute = RecomputeChart(result);
  EXPECT_THAT(recompute, HasSubstr("<title>baseline: evicted recompute 3000</title>"));
  EXPECT_THAT(recompute, HasSubstr(">4000</text>")) << "the stack's total";
}

}  // namespace
}  // namespace agentkv::report::internal
