#include "agentkv/base/status.h"

#include <gtest/gtest.h>

namespace agentkv {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("x must be even, got " + std::to_string(x));
  return x / 2;
}

Status QuarterInto(int x, int& out) {
  AGENTKV_ASSIGN_OR_RETURN(const int half, Half(x));
  AGENTKV_ASSIGN_OR_RETURN(out, Half(half));
  return Status::Ok();
}

Status FailIfNegative(int x) {
  AGENTKV_RETURN_IF_ERROR(x < 0 ? FailedPreconditionError("negative") : Status::Ok());
  return NotFoundError("reached the end");
}

TEST(StatusTest, OkHasNoMessage) {
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorsCarryCanonicalCodeAndMessage) {
  EXPECT_EQ(InvalidArgumentError("bad").ToString(), "INVALID_ARGUMENT: bad");
  EXPECT_EQ(NotFoundError("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(AlreadyExistsError("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ResourceExhaustedError("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(FailedPreconditionError("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(UnavailableError("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(DeadlineExceededError("x").ToString(), "DEADLINE_EXCEEDED: x");
  EXPECT_EQ(InternalError("x").ToString(), "INTERNAL: x");
}

TEST(StatusTest, StatusOrHoldsValueOrError) {
  const StatusOr<int> ok = Half(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 4);
  const StatusOr<int> bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "x must be even, got 3");
}

TEST(StatusTest, MacrosPropagateTheFirstError) {
  int out = 0;
  EXPECT_TRUE(QuarterInto(12, out).ok());
  EXPECT_EQ(out, 3);
  const Status s = QuarterInto(6, out);  // 6 / 2 = 3 is odd.
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x must be even, got 3");
  EXPECT_EQ(FailIfNegative(-1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(FailIfNegative(1).code(), StatusCode::kNotFound);
}

TEST(StatusDeathTest, ValueOfFailedStatusOrAborts) {
  const StatusOr<int> bad = Half(1);
  EXPECT_DEATH((void)bad.value(), "value\\(\\) of a failed StatusOr");
}

TEST(CheckDeathTest, FailedCheckPrintsConditionAndMessage) {
  const int x = 3;
  EXPECT_DEATH(AGENTKV_CHECK_EQ(x, 4) << "context",
               "CHECK failed: \\(x\\) == \\(4\\) 3 vs 4 context");
}

}  // namespace
}  // namespace agentkv
