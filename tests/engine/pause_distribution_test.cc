#include "agentkv/kv/pause_estimator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

using ::testing::HasSubstr;

PauseDistribution MustCreate(const PauseDistributionOptions& options = {}) {
  StatusOr<PauseDistribution> d = PauseDistribution::Create(options);
  AGENTKV_CHECK(d.ok()) << d.status();
  return *std::move(d);
}

TEST(PauseDistributionTest, OptionsValidateNamesTheFieldWithItsOwner) {
  EXPECT_TRUE(PauseDistributionOptions{}.Validate().ok());
  PauseDistributionOptions o;
  o.decay_at = 1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("PauseDistributionOptions.decay_at"));
  EXPECT_THAT(o.Validate("X.").message(), HasSubstr("X.decay_at"));
  o = {};
  o.prior_pause = TimeNs(0);
  EXPECT_THAT(PauseDistribution::Create(o).status().message(), HasSubstr("prior_pause"));
}

TEST(PauseDistributionTest, BucketsAreLogSpacedFrom250Ms) {
  EXPECT_EQ(PauseDistribution::BucketEdge(0), TimeNs::Millis(250));
  EXPECT_EQ(PauseDistribution::BucketEdge(3), TimeNs::Seconds(2));
  EXPECT_EQ(PauseDistribution::BucketOf(TimeNs::Seconds(2)), 3);
  EXPECT_EQ(PauseDistribution::BucketOf(TimeNs::Millis(2001)), 4);
  EXPECT_EQ(PauseDistribution::BucketOf(TimeNs::Seconds(1e6)), kPauseBuckets - 1);
}

TEST(PauseDistributionTest, SamplesOutweighThePriorAndClassesStayApart) {
  PauseDistribution d = MustCreate();
  for (int i = 0; i < 100; ++i) d.ObservePause(1, TimeNs::Seconds(60));
  EXPECT_EQ(d.samples(1), 100);
  EXPECT_EQ(d.samples(0), 0);
  EXPECT_LT(d.ReturnProbability(1, TimeNs::Seconds(32)), 0.05);
  EXPECT_GT(d.ReturnProbability(0, TimeNs::Seconds(32)), 0.99);
}

TEST(PauseDistributionTest, ConditionalQuantileIsTheEdgeWhereTheShareHasReturned) {
  PauseDistributionOptions o;
  o.prior_weight = 0;
  PauseDistribution d = MustCreate(o);
  // Half the pauses are 1 s, half 100 s (bucket edge 128 s).
  for (int i = 0; i < 10; ++i) {
    d.ObservePause(0, TimeNs::Seconds(1));
    d.ObservePause(0, TimeNs::Seconds(100));
  }
  EXPECT_EQ(d.ConditionalQuantile(0, 0.25, TimeNs(0)), TimeNs::Seconds(1));
  EXPECT_EQ(d.ConditionalQuantile(0, 0.5, TimeNs(0)), TimeNs::Seconds(1));
  EXPECT_EQ(d.ConditionalQuantile(0, 0.75, TimeNs(0)), TimeNs::Seconds(128));
  // Once a pause has lasted 5 s, the short ones are ruled out.
  EXPECT_EQ(d.ConditionalQuantile(0, 0.25, TimeNs::Seconds(5)), TimeNs::Seconds(128));
  // Past every sample, nothing is known.
  EXPECT_EQ(d.ConditionalQuantile(0, 0.25, TimeNs::Seconds(200)), std::nullopt);
  // Never returning takes the mass beyond the finite edges.
  for (int i = 0; i < 60; ++i) d.ObserveNoReturn(0);
  EXPECT_EQ(d.ConditionalQuantile(0, 0.5, TimeNs(0)), std::nullopt);
}

TEST(PauseDistributionTest, CountsHalveAtTheDecayBound) {
  PauseDistributionOptions o;
  o.decay_at = 8;
  PauseDistribution d = MustCreate(o);
  for (int i = 0; i < 7; ++i) d.ObservePause(2, TimeNs::Seconds(1));
  EXPECT_EQ(d.samples(2), 7);
  d.ObservePause(2, TimeNs::Seconds(1));
  EXPECT_EQ(d.samples(2), 4);
}

}  // namespace
}  // namespace agentkv::engine
