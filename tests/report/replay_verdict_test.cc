// Tests of the replay verdict: an arm better than the baseline beyond the noise floor is named,
// one within it is not, an arm worse on either headline metric is called worse, the best arm
// leads with those within noise of it, the bounds are never candidates, the words say how noise
// was decided, and shares past 100 % read "exceeds the bound".
#include "agentkv/report/replay_verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report {
namespace {

using sim::ArmResult;
using sim::ReplayResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ArmResult Arm(const std::string& name, double server_time_mean_s, int64_t uncached) {
  ArmResult arm;
  arm.arm = name;
  arm.server_time.mean_s = server_time_mean_s;
  arm.uncached_tokens = uncached;
  return arm;
}

// Baseline 100 s and 1,000 uncached tokens; the changes are in the arm names' comments.
ReplayResult SixArmsAndTheBounds() {
  ReplayResult result;
  result.setup.seed = 3;
  result.arms = {Arm("baseline", 100, 1000),     Arm("+big", 60, 700),  // -40 %, -30 %: beats it.
                 Arm("+noise", 97, 980),                                // -3 %, -2 %: within 5 %.
                 Arm("+close", 62, 1000),  // -38 %, 0 %: beats it, within noise of +big.
                 Arm("+mixed", 80, 1100),  // -20 %, +10 %: worse on uncached tokens.
                 Arm("+small", 90, 1000),  // -10 %: beats it, not within noise of +big.
                 Arm("infinite-cache", 40, 100), Arm("oracle", 90, 800)};
  sim::FillIdealShares(result);
  return result;
}

std::vector<std::string> Names(const ReplayResult& result, const ReplayVerdict& verdict,
                               const std::vector<size_t>& indices) {
  std::vector<std::string> names;
  for (const size_t k : indices) names.push_back(result.arms[verdict.arms[k].arm].arm);
  return names;
}

const ArmVerdict& Of(const ReplayResult& result, const ReplayVerdict& verdict,
                     const std::string& name) {
  for (const ArmVerdict& v : verdict.arms) {
    if (result.arms[v.arm].arm == name) return v;
  }
  ADD_FAILURE() << "no verdict for " << name;
  return verdict.arms.front();
}

TEST(DecideVerdictTest, NamesOnlyArmsBeyondTheNoise) {
  const ReplayResult result = SixArmsAndTheBounds();
  const ReplayVerdict verdict = DecideVerdict(result);
  EXPECT_EQ(verdict.noise, kSeedNoise);
  EXPECT_EQ(verdict.baseline, 0u);
  EXPECT_EQ(Of(result, verdict, "+big").standing, ArmStanding::kBetter);
  EXPECT_EQ(Of(result, verdict, "+noise").standing, ArmStanding::kWithinNoise);
  EXPECT_EQ(Of(result, verdict, "+mixed").standing, ArmStanding::kWorse);
  EXPECT_EQ(Of(result, verdict, "+small").standing, ArmStanding::kBetter);
  EXPECT_DOUBLE_EQ(*Of(result, verdict, "+big").server_time_change, -0.4);
  EXPECT_DOUBLE_EQ(*Of(result, verdict, "+big").uncached_change, -0.3);
  // Best first; the leaders are the best and those within the noise of its server time.
  EXPECT_THAT(Names(result, verdict, verdict.ranked), ElementsAre("+big", "+close", "+small"));
  EXPECT_THAT(Names(result, verdict, verdict.leaders), ElementsAre("+big", "+close"));
}

TEST(DecideVerdictTest, TheNoiseFloorDecidesWhatCounts) {
  const ReplayResult result = SixArmsAndTheBounds();
  // With no floor, a 3 % gain counts; with a 50 % floor, nothing does.
  EXPECT_EQ(Of(result, DecideVerdict(result, 0), "+noise").standing, ArmStanding::kBetter);
  const ReplayVerdict strict = DecideVerdict(result, 0.5);
  EXPECT_TRUE(strict.ranked.empty());
  EXPECT_TRUE(strict.leaders.empty());
}

TEST(DecideVerdictTest, BoundsAreNeverCandidates) {
  const ReplayResult result = SixArmsAndTheBounds();
  const ReplayVerdict verdict = DecideVerdict(result);
  ASSERT_EQ(verdict.bounds.size(), 2u);
  EXPECT_EQ(result.arms[verdict.bounds[0].arm].arm, "infinite-cache");
  EXPECT_EQ(result.arms[verdict.bounds[1].arm].arm, "oracle");
  EXPECT_EQ(verdict.arms.size(), 5u) << "every arm but the baseline and the bounds";
}

TEST(VerdictLinesTest, SayWhatToTurnOnAndHowNoiseWasDecided) {
  const ReplayResult result = SixArmsAndTheBounds();
  const std::vector<VerdictLine> lines = VerdictLines(result, DecideVerdict(result));
  std::vector<std::string> labels;
  std::string text;
  for (const VerdictLine& line : lines) {
    labels.push_back(line.label);
    text += line.label + ": " + line.text + "\n";
  }
  EXPECT_THAT(labels, ElementsAre("turn on", "as good", "also better", "within noise", "worse",
                                  "bound", "bound", "best vs bounds", "sessions at SLO", "noise"));
  EXPECT_THAT(text, HasSubstr("turn on: +big (server time -40%, uncached tokens -30%)"));
  EXPECT_THAT(text, HasSubstr("as good: +close (server time -38%"));
  EXPECT_THAT(text, HasSubstr("also better: +small (server time -10%"));
  EXPECT_THAT(text, HasSubstr("within noise: +noise\n"));
  EXPECT_THAT(text, HasSubstr("worse: +mixed (server time -20%, uncached tokens +10%)"));
  // +big closes 40/60 of the infinite-cache gap in server time and passes the oracle.
  EXPECT_THAT(text, HasSubstr("of infinite-cache's gain, 66.7% on server time"));
  EXPECT_THAT(text, HasSubstr("of oracle's gain, exceeds the bound on server time"));
  EXPECT_THAT(text, HasSubstr("noise: one seed (3) and no noise estimate of this run's own"));
  EXPECT_THAT(text, HasSubstr("beyond +-5%"));
}

TEST(VerdictLinesTest, NoArmBeyondTheNoiseKeepsTheBaseline) {
  ReplayResult result;
  result.arms = {Arm("baseline", 100, 1000), Arm("+noise", 98, 1010)};
  const std::vector<VerdictLine> lines = VerdictLines(result, DecideVerdict(result));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].label, "keep");
  EXPECT_THAT(lines[0].text, HasSubstr("baseline: no arm beats it beyond the noise (+-5%)"));
  EXPECT_TRUE(VerdictLines(ReplayResult{}, DecideVerdict(ReplayResult{})).empty());
}

TEST(ShareOfBoundTextTest, SharesPastTheBoundAreNotPercentages) {
  EXPECT_EQ(ShareOfBoundText(0.42), "42.0%");
  EXPECT_EQ(ShareOfBoundText(1.0), "100.0%");
  EXPECT_EQ(ShareOfBoundText(1.0004), "100.0%") << "prints as 100.0 %";
  EXPECT_EQ(ShareOfBoundText(1.001), "exceeds the bound");
  EXPECT_EQ(ShareOfBoundText(8.84), "exceeds the bound");
  EXPECT_EQ(ShareOfBoundText(-0.5), "-50.0%");
  EXPECT_EQ(ShareOfBoundText(-0.0), "0.0%");
}

}  // namespace
}  // namespace agentkv::report
