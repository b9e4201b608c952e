#include "agentkv/net/http_status.h"

#include <gtest/gtest.h>

namespace agentkv::net {
namespace {

TEST(HttpStatusForTest, MapsEveryCanonicalCode) {
  struct Row {
    StatusCode code;
    int http;
  };
  const Row rows[] = {
      {StatusCode::kOk, 200},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kNotFound, 404},
      {StatusCode::kAlreadyExists, 409},
      {StatusCode::kFailedPrecondition, 409},
      {StatusCode::kResourceExhausted, 413},
      {StatusCode::kInternal, 500},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kDeadlineExceeded, 504},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(static_cast<int>(HttpStatusFor(row.code)), row.http) << StatusCodeName(row.code);
  }
}

TEST(HttpStatusForTest, EveryFailureIsAnErrorStatus) {
  for (int c = static_cast<int>(StatusCode::kInvalidArgument);
       c <= static_cast<int>(StatusCode::kInternal); ++c) {
    const auto code = static_cast<StatusCode>(c);
    EXPECT_GE(static_cast<int>(HttpStatusFor(code)), 400) << StatusCodeName(code);
  }
}

}  // namespace
}  // namespace agentkv::net
