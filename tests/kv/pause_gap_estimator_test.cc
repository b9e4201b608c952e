// Tests of PauseGapEstimator (pause_gap_estimator.h): quantiles per pause kind and per tool,
// the minimum sample count and the tool-to-kind fallback, fading, and what it ignores.
#include "agentkv/kv/pause_gap_estimator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

namespace agentkv::kv {
namespace {

// Whether `estimate` is within 10 % of `exact` (the histogram's resolution).
::testing::AssertionResult Near(std::optional<TimeNs> estimate, TimeNs exact) {
  if (!estimate.has_value()) return ::testing::AssertionFailure() << "no estimate";
  const double ratio = estimate->seconds() / exact.seconds();
  if (ratio < 0.9 || ratio > 1.1) {
    return ::testing::AssertionFailure()
           << estimate->seconds() << " s is not within 10 % of " << exact.seconds() << " s";
  }
  return ::testing::AssertionSuccess();
}

TEST(PauseGapEstimatorTest, EstimatesTheMedianPerKind) {
  PauseGapEstimator gaps;
  for (int i = 1; i <= 99; ++i) {
    gaps.Observe(PauseKind::kToolCall, "", TimeNs::Millis(100 * i));     // median 5 s
    gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(60.0 * i));  // median 3000 s
  }
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall), TimeNs::Seconds(5)));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kHumanTurn), TimeNs::Seconds(3000)));
  EXPECT_EQ(gaps.Estimate(PauseKind::kSubagentWait), std::nullopt);
  EXPECT_EQ(gaps.samples(PauseKind::kToolCall), 99);
}

TEST(PauseGapEstimatorTest, IsRobustToAHeavyTail) {
  PauseGapEstimator gaps;
  for (int i = 0; i < 90; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(2));
  // A tenth of sessions walked away for a day: the median does not move.
  for (int i = 0; i < 10; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(86400));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall), TimeNs::Seconds(2)));
}

TEST(PauseGapEstimatorTest, HonoursTheQuantileOption) {
  PauseGapEstimator gaps(PauseGapEstimator::Options{.quantile = 0.9});
  for (int i = 1; i <= 100; ++i) gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(i));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kHumanTurn), TimeNs::Seconds(90)));
}

TEST(PauseGapEstimatorTest, AToolWithEnoughSamplesHasItsOwnEstimateElseItsKinds) {
  PauseGapEstimator gaps(PauseGapEstimator::Options{.min_samples = 4});
  for (int i = 0; i < 10; ++i) gaps.Observe(PauseKind::kToolCall, "Read", TimeNs::Millis(200));
  for (int i = 0; i < 3; ++i) gaps.Observe(PauseKind::kToolCall, "Bash", TimeNs::Seconds(30));
  // Bash has 3 < 4 samples: the kind's median (10 reads, 3 Bash) stands in for it.
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "Read"), TimeNs::Millis(200)));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "Bash"), TimeNs::Millis(200)));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "Unknown"), TimeNs::Millis(200)));
  gaps.Observe(PauseKind::kToolCall, "Bash", TimeNs::Seconds(30));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "Bash"), TimeNs::Seconds(30)));
  // A tool is tracked per kind.
  EXPECT_EQ(gaps.Estimate(PauseKind::kSubagentWait, "Bash"), std::nullopt);
}

TEST(PauseGapEstimatorTest, NeedsMinSamplesBeforeItEstimates) {
  PauseGapEstimator gaps(PauseGapEstimator::Options{.min_samples = 3});
  gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(10));
  gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(10));
  EXPECT_EQ(gaps.Estimate(PauseKind::kHumanTurn), std::nullopt);
  gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(10));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kHumanTurn), TimeNs::Seconds(10)));
}

TEST(PauseGapEstimatorTest, OldObservationsFadeSoTheEstimateFollowsADrift) {
  PauseGapEstimator gaps(PauseGapEstimator::Options{.min_samples = 4, .max_samples = 64});
  for (int i = 0; i < 1000; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(1));
  for (int i = 0; i < 200; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(20));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall), TimeNs::Seconds(20)));
  EXPECT_LT(gaps.samples(PauseKind::kToolCall), 64);
}

TEST(PauseGapEstimatorTest, IgnoresHintsWithoutAPauseAndNegativeGaps) {
  PauseGapEstimator gaps(PauseGapEstimator::Options{.min_samples = 1});
  gaps.Observe(PauseKind::kUnknown, "", TimeNs::Seconds(1));
  gaps.Observe(PauseKind::kSessionEnd, "", TimeNs::Seconds(1));
  gaps.Observe(PauseKind::kToolCall, "", TimeNs(-5));
  EXPECT_EQ(gaps.Estimate(PauseKind::kUnknown), std::nullopt);
  EXPECT_EQ(gaps.Estimate(PauseKind::kSessionEnd), std::nullopt);
  EXPECT_EQ(gaps.Estimate(PauseKind::kToolCall), std::nullopt);
  // Zero and tiny gaps are exact.
  gaps.Observe(PauseKind::kToolCall, "", TimeNs(0));
  EXPECT_EQ(gaps.Estimate(PauseKind::kToolCall), TimeNs(0));
}

TEST(PauseGapEstimatorTest, ToolsBeyondTheCapShareTheirKindsDistribution) {
  PauseGapEstimator gaps(PauseGapEstimator::Options{.min_samples = 1, .max_tools = 1});
  gaps.Observe(PauseKind::kToolCall, "A", TimeNs::Seconds(1));
  gaps.Observe(PauseKind::kToolCall, "B", TimeNs::Seconds(100));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "A"), TimeNs::Seconds(1)));
  // B was not tracked: the kind's median of {1 s, 100 s} (the upper one).
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "B"), TimeNs::Seconds(100)));
}

TEST(PauseGapEstimatorTest, IsDeterministic) {
  PauseGapEstimator a;
  PauseGapEstimator b;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) {
    const auto kind = static_cast<PauseKind>(1 + rng() % 3);
    const TimeNs gap(static_cast<int64_t>(rng() % (int64_t{1} << 40)));
    a.Observe(kind, i % 7 == 0 ? "T" : "", gap);
    b.Observe(kind, i % 7 == 0 ? "T" : "", gap);
  }
  for (int k = 1; k <= 3; ++k) {
    EXPECT_EQ(a.Estimate(static_cast<PauseKind>(k), "T"),
              b.Estimate(static_cast<PauseKind>(k), "T"));
    EXPECT_EQ(a.Estimate(static_cast<PauseKind>(k)), b.Estimate(static_cast<PauseKind>(k)));
  }
}

TEST(PauseGapEstimatorTest, NamesEveryKind) {
  EXPECT_EQ(PauseKindName(PauseKind::kUnknown), "unknown");
  EXPECT_EQ(PauseKindName(PauseKind::kToolCall), "tool_call");
  EXPECT_EQ(PauseKindName(PauseKind::kSubagentWait), "subagent_wait");
  EXPECT_EQ(PauseKindName(PauseKind::kHumanTurn), "human_turn");
  EXPECT_EQ(PauseKindName(PauseKind::kSessionEnd), "session_end");
}

TEST(PauseGapEstimatorTest, OnlyToolCallsSubagentWaitsAndHumanTurnsAreReturningPauses) {
  EXPECT_TRUE(IsReturningPause(PauseKind::kToolCall));
  EXPECT_TRUE(IsReturningPause(PauseKind::kSubagentWait));
  EXPECT_TRUE(IsReturningPause(PauseKind::kHumanTurn));
  EXPECT_FALSE(IsReturningPause(PauseKind::kUnknown));
  EXPECT_FALSE(IsReturningPause(PauseKind::kSessionEnd));
}

}  // namespace
}  // namespace agentkv::kv
