#include "agentkv/base/strong_id.h"

#include <gtest/gtest.h>

#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "agentkv/base/time.h"

namespace agentkv {
namespace {

TEST(StrongIdTest, DistinctKindsDoNotConvert) {
  static_assert(!std::is_convertible_v<RequestId, SessionId>);
  static_assert(!std::is_convertible_v<int64_t, RequestId>);
  EXPECT_LT(RequestId(1), RequestId(2));
  EXPECT_EQ(SessionId(7).value(), 7);
  std::unordered_set<RequestId> set{RequestId(1), RequestId(1), RequestId(3)};
  EXPECT_EQ(set.size(), 2u);
  std::ostringstream os;
  os << BlockId(12);
  EXPECT_EQ(os.str(), "12");
}

TEST(TimeTest, StepsAndNanosecondsAreArithmetic) {
  Step s(3);
  ++s;
  EXPECT_EQ(s, Step(4));
  EXPECT_EQ(s + Step(6), Step(10));
  EXPECT_EQ(TimeNs::Seconds(1.5).ns(), 1'500'000'000);
  EXPECT_EQ((TimeNs::Millis(3) - TimeNs::Millis(1)).ns(), 2'000'000);
  EXPECT_DOUBLE_EQ(TimeNs(2'500'000'000).seconds(), 2.5);
}

}  // namespace
}  // namespace agentkv
