// Tests of SummarizeDurations: nearest-rank percentiles (rank ceil(p * n), 1-based), mean and
// max, on empty, single-value, 1..100 and unsorted inputs; and of the shares of the ideal
// (IdealShare, IdealSharesOf, FillIdealShares) on hand-built results whose shares are known.
#include "agentkv/sim/replay/replay_result.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace agentkv::sim {
namespace {

using ::testing::ElementsAre;

TEST(SummarizeDurationsTest, EmptyInputGivesAllZeroSummary) {
  std::vector<double> seconds;
  EXPECT_EQ(SummarizeDurations(seconds), DurationSummary{});
}

TEST(SummarizeDurationsTest, OneValueIsEveryStatistic) {
  std::vector<double> seconds = {2.5};
  const DurationSummary s = SummarizeDurations(seconds);
  EXPECT_EQ(s.count, 1);
  EXPECT_DOUBLE_EQ(s.mean_s, 2.5);
  EXPECT_DOUBLE_EQ(s.p50_s, 2.5);
  EXPECT_DOUBLE_EQ(s.p90_s, 2.5);
  EXPECT_DOUBLE_EQ(s.p95_s, 2.5);
  EXPECT_DOUBLE_EQ(s.p99_s, 2.5);
  EXPECT_DOUBLE_EQ(s.max_s, 2.5);
}

TEST(SummarizeDurationsTest, NearestRankOnOneToHundred) {
  std::vector<double> seconds;
  for (int i = 1; i <= 100; ++i) seconds.push_back(i);
  const DurationSummary s = SummarizeDurations(seconds);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.mean_s, 50.5);
  EXPECT_DOUBLE_EQ(s.p50_s, 50);
  EXPECT_DOUBLE_EQ(s.p90_s, 90);
  EXPECT_DOUBLE_EQ(s.p95_s, 95);
  EXPECT_DOUBLE_EQ(s.p99_s, 99);
  EXPECT_DOUBLE_EQ(s.max_s, 100);
}

TEST(SummarizeDurationsTest, RankRoundsUpBetweenSamples) {
  // n = 10: p50 -> rank 5, p90 -> rank 9, p95 -> rank ceil(9.5) = 10, p99 -> rank 10.
  std::vector<double> seconds = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  const DurationSummary s = SummarizeDurations(seconds);
  EXPECT_DOUBLE_EQ(s.p50_s, 50);
  EXPECT_DOUBLE_EQ(s.p90_s, 90);
  EXPECT_DOUBLE_EQ(s.p95_s, 100);
  EXPECT_DOUBLE_EQ(s.p99_s, 100);
  // n = 2: p50 -> rank 1.
  std::vector<double> two = {4, 1};
  EXPECT_DOUBLE_EQ(SummarizeDurations(two).p50_s, 1);
}

TEST(SummarizeDurationsTest, UnsortedInputIsSortedInPlace) {
  std::vector<double> seconds = {5, 1, 4, 2, 3};
  const DurationSummary s = SummarizeDurations(seconds);
  EXPECT_THAT(seconds, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean_s, 3);
  EXPECT_DOUBLE_EQ(s.p50_s, 3);
  EXPECT_DOUBLE_EQ(s.p90_s, 5);
  EXPECT_DOUBLE_EQ(s.max_s, 5);
}

// ---- Shares of the ideal ----------------------------------------------------------------------

ArmResult ShareArm(const std::string& name, int64_t cold, int64_t evicted_recompute,
                   double server_time_mean_s) {
  ArmResult arm;
  arm.arm = name;
  arm.cold_tokens = cold;
  arm.evicted_recompute_tokens = evicted_recompute;
  arm.uncached_tokens = cold + evicted_recompute;
  arm.server_time.count = 4;
  arm.server_time.mean_s = server_time_mean_s;
  return arm;
}

// baseline: uncached 1,000 (400 cold + 600 evicted), server time 10 s; infinite-cache: 400 and
// 0, 6 s. "+half" closes half of each gap, "+worse" is worse than the baseline, "+better-routing"
// has fewer cold tokens than both (a router that keeps sessions on warm engines).
ReplayResult ShareResult() {
  ReplayResult result;
  result.arms.push_back(ShareArm("+half", 400, 300, 8));
  result.arms.push_back(ShareArm("baseline", 400, 600, 10));
  result.arms.push_back(ShareArm("+worse", 400, 900, 11));
  result.arms.push_back(ShareArm("infinite-cache", 400, 0, 6));
  result.arms.push_back(ShareArm("+better-routing", 250, 150, 5));
  return result;
}

TEST(IdealShareTest, IsTheShareOfTheGapClosed) {
  EXPECT_EQ(IdealShare(10, 10, 6), 0.0);
  EXPECT_EQ(IdealShare(10, 6, 6), 1.0);
  EXPECT_EQ(IdealShare(10, 8, 6), 0.5);
  EXPECT_EQ(IdealShare(10, 12, 6), -0.5);
  EXPECT_EQ(IdealShare(10, 4, 6), 1.5);
  // No gap to close: no share (not a division by zero).
  EXPECT_EQ(IdealShare(7, 7, 7), std::nullopt);
  EXPECT_EQ(IdealShare(7, 3, 7), std::nullopt);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(IdealShare(nan, 1, 0), std::nullopt);
  EXPECT_EQ(IdealShare(10, inf, 6), std::nullopt);
  EXPECT_EQ(IdealShare(10, 8, -inf), std::nullopt);
}

TEST(IdealSharesOfTest, HandBuiltResultGivesKnownShares) {
  const std::vector<IdealShares> shares = IdealSharesOf(ShareResult());
  ASSERT_EQ(shares.size(), 5u);
  // +half: (1000 - 700) / (1000 - 400), (600 - 300) / 600, (10 - 8) / (10 - 6).
  EXPECT_DOUBLE_EQ(*shares[0].uncached_tokens, 0.5);
  EXPECT_DOUBLE_EQ(*shares[0].evicted_recompute_tokens, 0.5);
  EXPECT_DOUBLE_EQ(*shares[0].server_time_mean, 0.5);
  // The reference arms are exactly 0 and 1.
  EXPECT_EQ(shares[1], (IdealShares{0.0, 0.0, 0.0}));
  EXPECT_EQ(shares[3], (IdealShares{1.0, 1.0, 1.0}));
  // Worse than the baseline: negative.
  EXPECT_DOUBLE_EQ(*shares[2].uncached_tokens, -0.5);
  EXPECT_DOUBLE_EQ(*shares[2].evicted_recompute_tokens, -0.5);
  EXPECT_DOUBLE_EQ(*shares[2].server_time_mean, -0.25);
  // Fewer cold tokens than the infinite cache: the two token shares part, and can pass 1.
  EXPECT_DOUBLE_EQ(*shares[4].uncached_tokens, 1.0);  // (1000 - 400) / 600
  EXPECT_DOUBLE_EQ(*shares[4].evicted_recompute_tokens, 0.75);
  EXPECT_DOUBLE_EQ(*shares[4].server_time_mean, 1.25);
}

TEST(IdealSharesOfTest, AMissingReferenceArmLeavesEveryShareUnset) {
  for (const char* missing : {"baseline", "infinite-cache"}) {
    SCOPED_TRACE(missing);
    ReplayResult result = ShareResult();
    for (ArmResult& arm : result.arms) {
      // Renamed, not removed: deltas fall back to the first arm without a "baseline", but a
      // share needs both named ends.
      if (arm.arm == missing) arm.arm = "lru";
    }
    const std::vector<IdealShares> shares = IdealSharesOf(result);
    ASSERT_EQ(shares.size(), result.arms.size());
    for (const IdealShares& s : shares) EXPECT_EQ(s, IdealShares{});
  }
  EXPECT_TRUE(IdealSharesOf(ReplayResult{}).empty());
}

TEST(IdealSharesOfTest, NoGapBetweenTheReferencesLeavesThatShareUnset) {
  ReplayResult result = ShareResult();
  // The baseline never evicts and runs as fast as the infinite cache: no gap, no share (the
  // report shows "-", the JSON null).
  result.arms[1] = ShareArm("baseline", 400, 0, 6);
  const std::vector<IdealShares> shares = IdealSharesOf(result);
  for (const IdealShares& s : shares) {
    EXPECT_EQ(s.uncached_tokens, std::nullopt);
    EXPECT_EQ(s.evicted_recompute_tokens, std::nullopt);
    EXPECT_EQ(s.server_time_mean, std::nullopt);
  }
  // A gap in server time alone keeps that share.
  result.arms[1].server_time.mean_s = 10;
  EXPECT_EQ(IdealSharesOf(result)[0].uncached_tokens, std::nullopt);
  EXPECT_DOUBLE_EQ(*IdealSharesOf(result)[0].server_time_mean, 0.5);
}

TEST(FillIdealSharesTest, SetsEveryArmsShares) {
  ReplayResult result = ShareResult();
  for (const ArmResult& arm : result.arms) EXPECT_EQ(arm.ideal_share, IdealShares{});
  FillIdealShares(result);
  const std::vector<IdealShares> expected = IdealSharesOf(ShareResult());
  for (size_t i = 0; i < result.arms.size(); ++i) {
    EXPECT_EQ(result.arms[i].ideal_share, expected[i]) << result.arms[i].arm;
  }
  EXPECT_DOUBLE_EQ(*result.arms[0].ideal_share.uncached_tokens, 0.5);
}

// The shares of the oracle: the same ratio with the arm named "oracle" as the 100 % end.
TEST(IdealSharesOfTest, TheOracleIsTheOtherReference) {
  ReplayResult result = ShareResult();
  // oracle: uncached 800 (400 cold + 400 evicted), server time 9 s.
  result.arms.push_back(ShareArm("oracle", 400, 400, 9));
  FillIdealShares(result);
  // +half: (1000 - 700) / (1000 - 800) = 1.5, (600 - 300) / (600 - 400), (10 - 8) / (10 - 9).
  const IdealShares& half = result.arms[0].oracle_share;
  EXPECT_DOUBLE_EQ(*half.uncached_tokens, 1.5);
  EXPECT_DOUBLE_EQ(*half.evicted_recompute_tokens, 1.5);
  EXPECT_DOUBLE_EQ(*half.server_time_mean, 2.0);
  EXPECT_EQ(result.arms[1].oracle_share, (IdealShares{0.0, 0.0, 0.0}));
  EXPECT_EQ(result.arms[5].oracle_share, (IdealShares{1.0, 1.0, 1.0}));
  // -1.5: (1000 - 1300) / 200.
  EXPECT_DOUBLE_EQ(*result.arms[2].oracle_share.uncached_tokens, -1.5);
  // The shares of the infinite cache are untouched by the oracle arm.
  EXPECT_EQ(result.arms[0].ideal_share, IdealSharesOf(ShareResult())[0]);
  EXPECT_EQ(IdealSharesOf(result, "oracle")[0], half);
  // Without an oracle arm, or with the oracle equal to the baseline, they are unset.
  ReplayResult no_oracle = ShareResult();
  FillIdealShares(no_oracle);
  for (const ArmResult& arm : no_oracle.arms) EXPECT_EQ(arm.oracle_share, IdealShares{});
  result.arms[5] = ShareArm("oracle", 400, 600, 10);
  FillIdealShares(result);
  for (const ArmResult& arm : result.arms) EXPECT_EQ(arm.oracle_share, IdealShares{});
}

}  // namespace
}  // namespace agentkv::sim
