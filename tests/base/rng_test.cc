#include "agentkv/base/rng.h"

#include <gtest/gtest.h>

namespace agentkv {
namespace {

TEST(RngTest, MatchesCounterBasedSplitMix64) {
  const uint64_t seed = 20250701;
  Rng rng(seed);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(rng.Next(), Mix64(seed + (i + 1) * Rng::kGolden)) << "draw " << i;
  }
}

TEST(RngTest, SameSeedSameStream) {
  Rng a(5), b(5), c(6);
  for (int i = 0; i < 10; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(RngTest, UniformStaysInRangeAndHitsBothEnds) {
  Rng rng(1);
  bool lo = false, hi = false;
  for (int i = 0; i < 10000; ++i) {
    const int64_t v = rng.Uniform(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    lo |= v == -3;
    hi |= v == 3;
  }
  EXPECT_TRUE(lo);
  EXPECT_TRUE(hi);
  EXPECT_EQ(rng.Uniform(9, 9), 9);
}

TEST(RngTest, UniformDoubleAndBernoulli) {
  Rng rng(2);
  int heads = 0;
  for (int i = 0; i < 20000; ++i) {
    const double d = rng.UniformDouble();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    heads += rng.Bernoulli(0.25) ? 1 : 0;
  }
  EXPECT_NEAR(heads / 20000.0, 0.25, 0.02);
}

}  // namespace
}  // namespace agentkv
