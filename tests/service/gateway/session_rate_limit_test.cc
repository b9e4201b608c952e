#include "agentkv/service/gateway/session_rate_limit.h"

#include <gtest/gtest.h>

namespace agentkv::service {
namespace {

TimeNs Ms(int64_t ms) { return TimeNs::Millis(ms); }

TEST(TokenBucketTest, StartsFullThenRefillsAtTheRate) {
  TokenBucket bucket(/*rate_per_s=*/10, /*burst=*/3, Ms(0));
  // A step table: {time, expected outcome of one Take}.
  struct Step {
    int64_t ms;
    bool allowed;
  };
  const Step steps[] = {
      {0, true},     {0, true},    {0, true},    {0, false},  // The burst, then empty.
      {50, false},                                            // Half a token.
      {100, true},   {100, false},                            // One token a 100 ms.
      {1000, true},  {1000, true}, {1000, true},              // Refilled to the burst, not beyond.
      {1000, false},
  };
  for (const Step& step : steps) {
    EXPECT_EQ(bucket.Take(Ms(step.ms)), step.allowed) << "at " << step.ms << " ms";
    EXPECT_GE(bucket.tokens(Ms(step.ms)), 0.0);
    EXPECT_LE(bucket.tokens(Ms(step.ms)), 3.0);
  }
}

TEST(TokenBucketTest, TimeGoingBackwardsRefillsNothing) {
  TokenBucket bucket(1, 1, Ms(1000));
  EXPECT_TRUE(bucket.Take(Ms(1000)));
  EXPECT_FALSE(bucket.Take(Ms(0)));
  EXPECT_FALSE(bucket.Take(Ms(1500)));
  EXPECT_TRUE(bucket.Take(Ms(2000)));
}

TEST(NewSessionLimiterTest, EachClientHasItsOwnBucket) {
  NewSessionLimiter limiter(/*rate_per_s=*/1, /*burst=*/2);
  EXPECT_TRUE(limiter.Allow("acme", Ms(0)));
  EXPECT_TRUE(limiter.Allow("acme", Ms(0)));
  EXPECT_FALSE(limiter.Allow("acme", Ms(0)));
  // Another client is not slowed by the first.
  EXPECT_TRUE(limiter.Allow("beta", Ms(0)));
  EXPECT_TRUE(limiter.Allow("beta", Ms(0)));
  EXPECT_FALSE(limiter.Allow("beta", Ms(10)));
  EXPECT_TRUE(limiter.Allow("acme", Ms(1000)));
  EXPECT_EQ(limiter.clients(), 2u);
}

TEST(NewSessionLimiterTest, RateZeroDisablesTheLimit) {
  NewSessionLimiter limiter(0, 1);
  for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(limiter.Allow("", Ms(0)));
  EXPECT_EQ(limiter.clients(), 0u);
}

}  // namespace
}  // namespace agentkv::service
