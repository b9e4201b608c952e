// Tests of SummarizeDurations: nearest-rank percentiles (rank ceil(p * n), 1-based), mean and
// max, on empty, single-value, 1..100 and unsorted inputs.
#include "agentkv/sim/replay_result.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace agentkv::sim
