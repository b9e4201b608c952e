// Tests of PauseEstimator (pause_estimator.h): Estimate's quantiles per pause kind and per tool,
// the minimum sample count and the tool-to-kind fallback, fading, and what it ignores (the
// former PauseEstimator's tests); the distribution answers with a prior on the octave grid
// (the former engine::PauseDistribution's tests); and the vocabulary (base/pause.h).
#include "agentkv/kv/pause_estimator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <utility>

#include "agentkv/base/check.h"

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

TEST(PauseEstimatorTest, EstimatesTheMedianPerKind) {
  PauseEstimator gaps;
  for (int i = 1; i <= 99; ++i) {
    gaps.Observe(PauseKind::kToolCall, "", TimeNs::Millis(100 * i));     // median 5 s
    gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(60.0 * i));  // median 3000 s
  }
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall), TimeNs::Seconds(5)));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kHumanTurn), TimeNs::Seconds(3000)));
  EXPECT_EQ(gaps.Estimate(PauseKind::kSubagentWait), std::nullopt);
  EXPECT_EQ(gaps.samples(PauseKind::kToolCall), 99);
}

TEST(PauseEstimatorTest, IsRobustToAHeavyTail) {
  PauseEstimator gaps;
  for (int i = 0; i < 90; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(2));
  // A tenth of sessions walked away for a day: the median does not move.
  for (int i = 0; i < 10; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(86400));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall), TimeNs::Seconds(2)));
}

TEST(PauseEstimatorTest, HonoursTheQuantileOption) {
  PauseEstimator gaps(PauseEstimator::Options{.quantile = 0.9});
  for (int i = 1; i <= 100; ++i) gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(i));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kHumanTurn), TimeNs::Seconds(90)));
}

TEST(PauseEstimatorTest, AToolWithEnoughSamplesHasItsOwnEstimateElseItsKinds) {
  PauseEstimator gaps(PauseEstimator::Options{.min_samples = 4});
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

TEST(PauseEstimatorTest, NeedsMinSamplesBeforeItEstimates) {
  PauseEstimator gaps(PauseEstimator::Options{.min_samples = 3});
  gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(10));
  gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(10));
  EXPECT_EQ(gaps.Estimate(PauseKind::kHumanTurn), std::nullopt);
  gaps.Observe(PauseKind::kHumanTurn, "", TimeNs::Seconds(10));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kHumanTurn), TimeNs::Seconds(10)));
}

TEST(PauseEstimatorTest, OldObservationsFadeSoTheEstimateFollowsADrift) {
  PauseEstimator gaps(PauseEstimator::Options{.min_samples = 4, .max_samples = 64});
  for (int i = 0; i < 1000; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(1));
  for (int i = 0; i < 200; ++i) gaps.Observe(PauseKind::kToolCall, "", TimeNs::Seconds(20));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall), TimeNs::Seconds(20)));
  EXPECT_LT(gaps.samples(PauseKind::kToolCall), 64);
}

TEST(PauseEstimatorTest, IgnoresHintsWithoutAPauseAndNegativeGaps) {
  PauseEstimator gaps(PauseEstimator::Options{.min_samples = 1});
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

TEST(PauseEstimatorTest, ToolsBeyondTheCapShareTheirKindsDistribution) {
  PauseEstimator gaps(PauseEstimator::Options{.min_samples = 1, .max_tools = 1});
  gaps.Observe(PauseKind::kToolCall, "A", TimeNs::Seconds(1));
  gaps.Observe(PauseKind::kToolCall, "B", TimeNs::Seconds(100));
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "A"), TimeNs::Seconds(1)));
  // B was not tracked: the kind's median of {1 s, 100 s} (the upper one).
  EXPECT_TRUE(Near(gaps.Estimate(PauseKind::kToolCall, "B"), TimeNs::Seconds(100)));
}

TEST(PauseEstimatorTest, IsDeterministic) {
  PauseEstimator a;
  PauseEstimator b;
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

TEST(PauseEstimatorTest, NamesEveryKind) {
  EXPECT_EQ(PauseKindName(PauseKind::kUnknown), "unknown");
  EXPECT_EQ(PauseKindName(PauseKind::kToolCall), "tool_call");
  EXPECT_EQ(PauseKindName(PauseKind::kSubagentWait), "subagent_wait");
  EXPECT_EQ(PauseKindName(PauseKind::kHumanTurn), "human_turn");
  EXPECT_EQ(PauseKindName(PauseKind::kSessionEnd), "session_end");
}

TEST(PauseEstimatorTest, OnlyToolCallsSubagentWaitsAndHumanTurnsAreReturningPauses) {
  EXPECT_TRUE(IsReturningPause(PauseKind::kToolCall));
  EXPECT_TRUE(IsReturningPause(PauseKind::kSubagentWait));
  EXPECT_TRUE(IsReturningPause(PauseKind::kHumanTurn));
  EXPECT_FALSE(IsReturningPause(PauseKind::kUnknown));
  EXPECT_FALSE(IsReturningPause(PauseKind::kSessionEnd));
}

// The former PauseDistribution's tests, on the engine's options.

PauseEstimator MustCreate(
    const PauseEstimator::Options& options = PauseEstimator::DistributionOptions()) {
  StatusOr<PauseEstimator> d = PauseEstimator::Create(options);
  AGENTKV_CHECK(d.ok()) << d.status();
  return *std::move(d);
}

constexpr PauseClass kMain{PauseKind::kToolCall};
constexpr PauseClass kSub{PauseKind::kToolCall, true};
constexpr PauseClass kWait{PauseKind::kSubagentWait};

TEST(PauseEstimatorTest, OptionsValidateNamesTheFieldWithItsOwner) {
  EXPECT_TRUE(PauseEstimator::DistributionOptions().Validate().ok());
  PauseEstimator::Options o = PauseEstimator::DistributionOptions();
  o.max_samples = 1;
  EXPECT_THAT(o.Validate().message(), ::testing::HasSubstr("PauseEstimator.Options.max_samples"));
  EXPECT_THAT(o.Validate("X.").message(), ::testing::HasSubstr("X.max_samples"));
  o = PauseEstimator::DistributionOptions();
  o.prior_pause = TimeNs(0);
  EXPECT_THAT(PauseEstimator::Create(o).status().message(), ::testing::HasSubstr("prior_pause"));
}

TEST(PauseEstimatorTest, BucketsAreLogSpacedFrom250Ms) {
  const PauseGrid grid = PauseGrid::Octaves();
  EXPECT_EQ(grid.finite_buckets(), 14);
  EXPECT_EQ(grid.edge(0), TimeNs::Millis(250));
  EXPECT_EQ(grid.edge(3), TimeNs::Seconds(2));
  EXPECT_EQ(grid.BucketOf(TimeNs::Seconds(2)), 3);
  EXPECT_EQ(grid.BucketOf(TimeNs::Millis(2001)), 4);
  EXPECT_EQ(grid.BucketOf(TimeNs::Seconds(1e6)), 14);
}

TEST(PauseEstimatorTest, QuarterOctavesHoldSmallDurationsExactlyAndCoverEveryDuration) {
  const PauseGrid grid = PauseGrid::QuarterOctaves();
  EXPECT_EQ(grid.Middle(grid.BucketOf(TimeNs(3))), TimeNs(3));
  EXPECT_EQ(grid.Middle(grid.BucketOf(TimeNs(7))), TimeNs(7));
  EXPECT_EQ(grid.Middle(grid.BucketOf(TimeNs(8))), TimeNs(9));  // [8, 9]
  EXPECT_LT(grid.BucketOf(TimeNs(std::numeric_limits<int64_t>::max())), grid.finite_buckets());
}

TEST(PauseEstimatorTest, SamplesOutweighThePriorAndClassesStayApart) {
  PauseEstimator d = MustCreate();
  for (int i = 0; i < 100; ++i) d.Observe(kSub, TimeNs::Seconds(60));
  EXPECT_EQ(d.samples(kSub), 100);
  EXPECT_EQ(d.samples(kMain), 0);
  EXPECT_LT(d.ReturnProbability(kSub, TimeNs::Seconds(32)), 0.05);
  EXPECT_GT(d.ReturnProbability(kMain, TimeNs::Seconds(32)), 0.99);
}

TEST(PauseEstimatorTest, ConditionalQuantileIsTheEdgeWhereTheShareHasReturned) {
  PauseEstimator::Options o = PauseEstimator::DistributionOptions();
  o.prior_weight = 0;
  PauseEstimator d = MustCreate(o);
  // Half the pauses are 1 s, half 100 s (bucket edge 128 s).
  for (int i = 0; i < 10; ++i) {
    d.Observe(kMain, TimeNs::Seconds(1));
    d.Observe(kMain, TimeNs::Seconds(100));
  }
  EXPECT_EQ(d.ConditionalQuantile(kMain, 0.25, TimeNs(0)), TimeNs::Seconds(1));
  EXPECT_EQ(d.ConditionalQuantile(kMain, 0.5, TimeNs(0)), TimeNs::Seconds(1));
  EXPECT_EQ(d.ConditionalQuantile(kMain, 0.75, TimeNs(0)), TimeNs::Seconds(128));
  // Once a pause has lasted 5 s, the short ones are ruled out.
  EXPECT_EQ(d.ConditionalQuantile(kMain, 0.25, TimeNs::Seconds(5)), TimeNs::Seconds(128));
  // Past every sample, nothing is known.
  EXPECT_EQ(d.ConditionalQuantile(kMain, 0.25, TimeNs::Seconds(200)), std::nullopt);
  // Never returning takes the mass beyond the finite edges.
  for (int i = 0; i < 60; ++i) d.ObserveNoReturn(kMain);
  EXPECT_EQ(d.ConditionalQuantile(kMain, 0.5, TimeNs(0)), std::nullopt);
}

TEST(PauseEstimatorTest, CountsHalveAtTheDecayBound) {
  PauseEstimator::Options o = PauseEstimator::DistributionOptions();
  o.max_samples = 8;
  PauseEstimator d = MustCreate(o);
  for (int i = 0; i < 7; ++i) d.Observe(kWait, TimeNs::Seconds(1));
  EXPECT_EQ(d.samples(kWait), 7);
  d.Observe(kWait, TimeNs::Seconds(1));
  EXPECT_EQ(d.samples(kWait), 4);
}

TEST(PauseEstimatorTest, ParsesEveryNameAndNothingElse) {
  for (const PauseKind kind : kAllPauseKinds) {
    EXPECT_EQ(ParsePauseKind(PauseKindName(kind)), kind);
  }
  EXPECT_EQ(ParsePauseKind(""), std::nullopt);
  EXPECT_EQ(ParsePauseKind("Tool_call"), std::nullopt);
  EXPECT_EQ(ParsePauseKind("none"), std::nullopt);
}

}  // namespace
}  // namespace agentkv::kv
