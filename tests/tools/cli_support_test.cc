// Tests of cli_support: CheckFlagRange, the one range check of a flag's value and its message.
#include "tools/agentkv/cli_support.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace agentkv::tools {
namespace {

TEST(CheckFlagRangeTest, IntegersNameTheFlagTheRangeAndTheValue) {
  EXPECT_TRUE(CheckFlagRange("--port", 0, 0, 65535).ok());
  EXPECT_TRUE(CheckFlagRange("--port", 65535, 0, 65535).ok());
  EXPECT_EQ(CheckFlagRange("--port", 70000, 0, 65535),
            InvalidArgumentError("--port must be in [0, 65535], got 70000"));
  EXPECT_EQ(CheckFlagRange("--n", int64_t{-1}, 0, int64_t{1} << 40),
            InvalidArgumentError("--n must be in [0, 1099511627776], got -1"));
}

TEST(CheckFlagRangeTest, RealsMayOpenTheLowerEndAndRefuseNaN) {
  EXPECT_TRUE(CheckFlagRange("--f", 1.0, 0.0, 1.0, LowerBound::kOpen).ok());
  EXPECT_EQ(CheckFlagRange("--f", 0.0, 0.0, 1.0, LowerBound::kOpen),
            InvalidArgumentError("--f must be in (0, 1], got 0"));
  EXPECT_TRUE(CheckFlagRange("--s", 0.0, 0.0, 3600.0).ok());
  EXPECT_EQ(CheckFlagRange("--s", 1.5, 0.001, 1.0),
            InvalidArgumentError("--s must be in [0.001, 1], got 1.5"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(CheckFlagRange("--s", nan, 0.0, 3600.0).ok());
  EXPECT_FALSE(CheckFlagRange("--s", nan, 0.0, 3600.0, LowerBound::kOpen).ok());
}

}  // namespace
}  // namespace agentkv::tools
