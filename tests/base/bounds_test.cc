#include "agentkv/base/bounds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace agentkv {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(BoundsTest, TokensAcceptTheirWholeRangeAndNothingElse) {
  EXPECT_TRUE(CheckTokens("max_tokens", 0).ok());
  EXPECT_TRUE(CheckTokens("max_tokens", kMaxTokens).ok());
  const Status over = CheckTokens("max_tokens", kMaxTokens + 1);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.message(), "max_tokens: 1099511627777 is out of range [0, 1099511627776] tokens");
  EXPECT_FALSE(CheckTokens("max_tokens", -1).ok());
  EXPECT_FALSE(CheckTokens("max_tokens", kMax).ok());
  EXPECT_FALSE(CheckTokens("max_tokens", kMin).ok());
}

TEST(BoundsTest, CountsAndTimesHaveTheirOwnBounds) {
  EXPECT_TRUE(CheckCount("sessions", kMaxCount).ok());
  EXPECT_EQ(CheckCount("sessions", kMaxCount + 1).message(),
            "sessions: 4294967297 is out of range [0, 4294967296]");
  EXPECT_TRUE(CheckTimeNs("t", kMaxTimeNs).ok());
  EXPECT_FALSE(CheckTimeNs("t", kMaxTimeNs + 1).ok());
  EXPECT_FALSE(CheckTimeNs("t", -1).ok());
}

TEST(BoundsTest, SecondsAndMillisAreCheckedBeforeConversion) {
  EXPECT_EQ(TimeFromSeconds("t", 1.5).value(), TimeNs(1'500'000'000));
  EXPECT_EQ(TimeFromMillis("timestamp", 2).value(), TimeNs(2'000'000));
  EXPECT_EQ(TimeFromSeconds("t", 365.0 * 24 * 3600).value(), TimeNs(kMaxTimeNs));
  const StatusOr<TimeNs> huge = TimeFromMillis("timestamp", 9.3e12);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "timestamp: 9300000000000 is out of range [0, 31536000000] ms");
  EXPECT_FALSE(TimeFromSeconds("t", -0.5).ok());
  EXPECT_FALSE(TimeFromSeconds("t", std::nan("")).ok());
  EXPECT_FALSE(TimeFromSeconds("t", std::numeric_limits<double>::infinity()).ok());
  EXPECT_FALSE(TimeFromSeconds("t", 1e300).ok());
  // The bound survives a round trip through seconds (found by admission_wire_fuzz).
  const TimeNs year(kMaxTimeNs);
  EXPECT_EQ(TimeFromSeconds("t", year.seconds()).value(), year);
  EXPECT_FALSE(TimeFromSeconds("t", year.seconds() + 1e-3).ok());
}

TEST(BoundsTest, CheckedArithmeticReportsOverflow) {
  EXPECT_EQ(CheckedAdd(1, 2), 3);
  EXPECT_EQ(CheckedAdd(kMax, 1), std::nullopt);
  EXPECT_EQ(CheckedAdd(kMin, -1), std::nullopt);
  EXPECT_EQ(CheckedSub(kMin, 1), std::nullopt);
  EXPECT_EQ(CheckedSub(0, kMin), std::nullopt);
  EXPECT_EQ(CheckedMul(kMax, 2), std::nullopt);
  EXPECT_EQ(CheckedMul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
}

TEST(BoundsTest, SaturatingArithmeticClampsAtTheLimits) {
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax - 5, 3), kMax - 2);
  EXPECT_EQ(SaturatingAdd(kMin, -1), kMin);
  EXPECT_EQ(SaturatingSub(kMin, 1), kMin);
  EXPECT_EQ(SaturatingSub(0, kMin), kMax);
  EXPECT_EQ(SaturatingSub(5, 7), -2);
  EXPECT_EQ(SaturatingMul(kMax, 2), kMax);
  EXPECT_EQ(SaturatingMul(kMax, -2), kMin);
  EXPECT_EQ(SaturatingMul(kMin, -1), kMax);
  EXPECT_EQ(SaturatingMul(-3, 4), -12);
}

TEST(BoundsTest, OutOfRangeErrorHasTheChecksFormat) {
  const Status huge = OutOfRangeError("in", "18446744073709551615", kMaxTokens, "tokens");
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(huge.message(), "in: 18446744073709551615 is out of range [0, 1099511627776] tokens");
  EXPECT_EQ(OutOfRangeError("turn", "4294967297", kMaxCount, ""),
            CheckCount("turn", kMaxCount + 1));
}

TEST(BoundsTest, SaturatingTimeAdditionStaysAtTheLimit) {
  EXPECT_EQ(SaturatingAdd(TimeNs(kMax - 1), TimeNs(kMaxTimeNs)), TimeNs(kMax));
  EXPECT_EQ(SaturatingAdd(TimeNs(2), TimeNs(3)), TimeNs(5));
  EXPECT_EQ(SaturatingAdd(TimeNs(kMin), TimeNs(-1)), TimeNs(kMin));
}

// Sums of many bounded values stay exact: the bounds leave that headroom by design.
TEST(BoundsTest, BoundedValuesSumWithoutOverflow) {
  int64_t tokens = 0;
  for (int i = 0; i < (1 << 23) - 1; i += 4096) tokens = CheckedAdd(tokens, kMaxTokens).value();
  EXPECT_GT(tokens, 0);
  int64_t times = 0;
  for (int i = 0; i < 292; ++i) times = CheckedAdd(times, kMaxTimeNs).value();
  EXPECT_GT(times, 0);
}

}  // namespace
}  // namespace agentkv
