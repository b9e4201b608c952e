// The capacity verdict on hand-set brackets: an arm counts as better or worse only where its
// change stays beyond the seed floor across both bisection brackets on every seed; the best arm
// is named first with its gain, an arm within the noise is not named as a gain, and the bounds
// are never candidates.
#include "agentkv/report/capacity_verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace agentkv::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A search that met the SLO at `capacity` and missed it at `lowest_missed`.
sim::CapacitySearchResult Found(double capacity, double lowest_missed) {
  sim::CapacitySearchResult s;
  s.outcome = sim::CapacityOutcome::kFound;
  s.capacity = capacity;
  s.lowest_missed = lowest_missed;
  return s;
}

sim::CapacitySearchResult AtMax(double max_rate) {
  sim::CapacitySearchResult s;
  s.outcome = sim::CapacityOutcome::kAtLeastMax;
  s.capacity = max_rate;
  return s;
}

// One search per seed for each arm, in order; seeds 1, 2, ...
sim::CapacityResult Result(
    const std::vector<std::pair<std::string, std::vector<sim::CapacitySearchResult>>>& arms) {
  sim::CapacityResult r;
  r.workload = "hand-set brackets";
  r.options.max_rate = 1000;
  for (size_t s = 0; s < arms.front().second.size(); ++s) r.seeds.push_back(s + 1);
  for (const auto& [name, searches] : arms) {
    r.arms.push_back(name);
    r.searches.push_back(searches);
  }
  return r;
}

// The text of the line labelled `label`, nullopt when there is none.
std::optional<std::string> Line(const std::vector<VerdictLine>& lines, const std::string& label) {
  for (const VerdictLine& line : lines) {
    if (line.label == label) return line.text;
  }
  return std::nullopt;
}

std::vector<std::string> Labels(const std::vector<VerdictLine>& lines) {
  std::vector<std::string> labels;
  for (const VerdictLine& line : lines) labels.push_back(line.label);
  return labels;
}

// One step of the standing table: the baseline's and the arm's brackets on one seed.
struct StandingCase {
  const char* what;
  sim::CapacitySearchResult baseline;
  sim::CapacitySearchResult arm;
  ArmStanding expected;
};

TEST(CapacityVerdictTest, StandingNeedsTheChangeBeyondTheFloorAcrossBothBrackets) {
  const std::vector<StandingCase> cases = {
      {"+20 %, brackets apart by 14 %", Found(100, 105), Found(120, 126), ArmStanding::kBetter},
      {"+8 % at the point, but 108 / 105 is only +2.9 %", Found(100, 105), Found(108, 113),
       ArmStanding::kWithinNoise},
      {"tight brackets, +4 %: inside the seed floor", Found(100, 100.1), Found(104, 104.1),
       ArmStanding::kWithinNoise},
      {"tight brackets, +6 %: beyond the seed floor", Found(100, 100.1), Found(106, 106.1),
       ArmStanding::kBetter},
      {"-50 %", Found(100, 105), Found(50, 52), ArmStanding::kWorse},
      {"both at max_rate: nothing to tell them apart", AtMax(1000), AtMax(1000),
       ArmStanding::kWithinNoise},
      {"at max_rate against a found capacity", Found(100, 105), AtMax(1000), ArmStanding::kBetter},
  };
  for (const StandingCase& c : cases) {
    const sim::CapacityResult r = Result({{"baseline", {c.baseline}}, {"agentkv", {c.arm}}});
    const CapacityVerdict verdict = DecideCapacityVerdict(r);
    ASSERT_EQ(verdict.arms.size(), 1U) << c.what;
    EXPECT_EQ(verdict.arms[0].vs_baseline.standing, c.expected) << c.what;
    EXPECT_EQ(verdict.ranked.size(), c.expected == ArmStanding::kBetter ? 1U : 0U) << c.what;
  }
}

TEST(CapacityVerdictTest, ArmBeyondTheNoiseIsNamedWithItsGain) {
  const sim::CapacityResult r =
      Result({{"baseline", {Found(100, 105)}}, {"agentkv", {Found(120, 126)}}});
  const std::vector<VerdictLine> lines = CapacityVerdictLines(r, DecideCapacityVerdict(r));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].label, "turn on");
  // +20 sessions/h/engine, +20 %, and at least 120 / 105 - 1 = +14 % on the brackets.
  EXPECT_EQ(lines[0].text,
            "agentkv (+20.0 sessions/h/engine, +20%; at least +14%) against baseline's 100 "
            "sessions/h/engine");
  EXPECT_EQ(Line(lines, "within noise"), std::nullopt);
}

TEST(CapacityVerdictTest, ArmWithinTheNoiseIsNotNamedAsAGain) {
  const sim::CapacityResult r =
      Result({{"baseline", {Found(100, 105)}}, {"agentkv", {Found(108, 113)}}});
  const std::vector<VerdictLine> lines = CapacityVerdictLines(r, DecideCapacityVerdict(r));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].label, "keep");
  EXPECT_THAT(lines[0].text, Not(HasSubstr("agentkv")));
  EXPECT_EQ(Line(lines, "turn on"), std::nullopt);
  EXPECT_EQ(Line(lines, "within noise"), "agentkv");
  // A wider floor moves a clear gain into the noise: the floor is what decides.
  const sim::CapacityResult clear =
      Result({{"baseline", {Found(100, 105)}}, {"agentkv", {Found(120, 126)}}});
  EXPECT_EQ(DecideCapacityVerdict(clear, 0.2).arms[0].vs_baseline.standing,
            ArmStanding::kWithinNoise);
}

TEST(CapacityVerdictTest, BestArmIsNamedFirstThenThoseAsGoodThenTheOthers) {
  const sim::CapacityResult r = Result({{"baseline", {Found(100, 105)}},
                                        {"small", {Found(120, 126)}},
                                        {"worse-arm", {Found(50, 52)}},
                                        {"big-twin", {Found(196, 205)}},
                                        {"big", {Found(200, 210)}},
                                        {"flat", {Found(101, 106)}}});
  const CapacityVerdict verdict = DecideCapacityVerdict(r);
  std::vector<std::string> ranked;
  for (const size_t k : verdict.ranked) ranked.push_back(r.arms[verdict.arms[k].arm]);
  EXPECT_THAT(ranked, ElementsAre("big", "big-twin", "small"));
  const std::vector<VerdictLine> lines = CapacityVerdictLines(r, verdict);
  EXPECT_THAT(Labels(lines),
              ElementsAre("turn on", "as good", "also better", "within noise", "worse", "noise"));
  EXPECT_THAT(lines[0].text, ::testing::StartsWith("big (+100 sessions/h/engine, +100%"));
  EXPECT_THAT(*Line(lines, "as good"), ::testing::StartsWith("big-twin (+96.0"));
  EXPECT_THAT(*Line(lines, "also better"), ::testing::StartsWith("small (+20.0"));
  EXPECT_EQ(Line(lines, "within noise"), "flat");
  EXPECT_THAT(*Line(lines, "worse"), HasSubstr("worse-arm (-50.0 sessions/h/engine, -50%)"));
}

TEST(CapacityVerdictTest, BoundsAreNeverCandidates) {
  const sim::CapacityResult r = Result({{"baseline", {Found(100, 105)}},
                                        {"infinite-cache", {AtMax(1000)}},
                                        {"agentkv", {Found(101, 106)}},
                                        {"oracle", {Found(400, 410)}}});
  const CapacityVerdict verdict = DecideCapacityVerdict(r);
  ASSERT_EQ(verdict.arms.size(), 1U);
  EXPECT_EQ(r.arms[verdict.arms[0].arm], "agentkv");
  EXPECT_TRUE(verdict.ranked.empty());
  ASSERT_EQ(verdict.bounds.size(), 2U);
  EXPECT_EQ(r.arms[verdict.bounds[0].arm], "infinite-cache");
  EXPECT_EQ(r.arms[verdict.bounds[1].arm], "oracle");
  const std::vector<VerdictLine> lines = CapacityVerdictLines(r, verdict);
  EXPECT_THAT(Labels(lines), ElementsAre("keep", "within noise", "bound", "bound", "noise"));
  EXPECT_THAT(lines[0].text, Not(HasSubstr("infinite-cache")));
  EXPECT_THAT(lines[0].text, Not(HasSubstr("oracle")));
  EXPECT_THAT(lines[2].text, HasSubstr(">= +900 sessions/h/engine, >= +900%"));
  EXPECT_THAT(lines[3].text, HasSubstr("+300 sessions/h/engine, +300%"));
}

TEST(CapacityVerdictTest, BestArmsShareOfEachBoundsGain) {
  const sim::CapacityResult r = Result({{"baseline", {Found(100, 105)}},
                                        {"agentkv", {Found(150, 157)}},
                                        {"infinite-cache", {AtMax(1000)}},
                                        {"oracle", {Found(200, 210)}}});
  const std::vector<VerdictLine> lines = CapacityVerdictLines(r, DecideCapacityVerdict(r));
  // A bound at max_rate gains at least 900, so the share is at most 50 / 900.
  EXPECT_EQ(Line(lines, "best vs bounds"),
            "agentkv reaches at most 5.6% of infinite-cache's gain and 50.0% of oracle's gain");
  // Both at max_rate: no share can be told.
  const sim::CapacityResult both = Result({{"baseline", {Found(100, 105)}},
                                           {"agentkv", {AtMax(1000)}},
                                           {"infinite-cache", {AtMax(1000)}}});
  EXPECT_EQ(Line(CapacityVerdictLines(both, DecideCapacityVerdict(both)), "best vs bounds"),
            "agentkv and infinite-cache both meet the SLO at --max-rate: raise it to compare them");
}

TEST(CapacityVerdictTest, EverySeedMustAgree) {
  // Better by 20 % on seed 1, worse by 20 % on seed 2: neither beyond the noise overall.
  const sim::CapacityResult r = Result({{"baseline", {Found(100, 105), Found(100, 105)}},
                                        {"agentkv", {Found(130, 136), Found(80, 84)}},
                                        {"steady", {Found(130, 136), Found(125, 131)}}});
  const CapacityVerdict verdict = DecideCapacityVerdict(r);
  EXPECT_EQ(verdict.arms[0].vs_baseline.standing, ArmStanding::kWithinNoise);
  EXPECT_EQ(verdict.arms[1].vs_baseline.standing, ArmStanding::kBetter);
  // The least change over seeds: 125 / 105 - 1 on seed 2.
  EXPECT_DOUBLE_EQ(verdict.arms[1].vs_baseline.least_change, 125.0 / 105 - 1);
}

TEST(CapacityVerdictTest, NoiseLineSaysWhatDecided) {
  sim::CapacityResult r = Result({{"baseline", {Found(100, 105)}}, {"agentkv", {AtMax(1000)}}});
  r.options.tolerance = 0.25;
  const std::optional<std::string> noise =
      Line(CapacityVerdictLines(r, DecideCapacityVerdict(r)), "noise");
  ASSERT_TRUE(noise.has_value());
  EXPECT_THAT(*noise, HasSubstr("on every seed (1)"));
  EXPECT_THAT(*noise, HasSubstr("+-5%"));
  EXPECT_THAT(*noise, HasSubstr("bisection brackets"));
  EXPECT_THAT(*noise, HasSubstr("--tolerance 25 %"));
  EXPECT_THAT(*noise, HasSubstr("rerun with --seeds"));
}

TEST(CapacityVerdictTest, NoVerdictWithoutABaselineArm) {
  const sim::CapacityResult r = Result({{"agentkv", {Found(100, 105)}}});
  const CapacityVerdict verdict = DecideCapacityVerdict(r);
  EXPECT_FALSE(verdict.baseline.has_value());
  EXPECT_TRUE(verdict.arms.empty());
  EXPECT_TRUE(CapacityVerdictLines(r, verdict).empty());
}

}  // namespace
}  // namespace agentkv::report
