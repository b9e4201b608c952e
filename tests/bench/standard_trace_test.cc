// The standard benchmark trace generator must reproduce the published v1 check values bit for
// bit; otherwise no benchmark figure built on it counts.
#include "bench/standard_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace agentkv::bench {
namespace {

TEST(StandardTraceTest, ReproducesEveryPublishedCheckValue) {
  std::string error;
  const auto trace = StandardTrace::Generate(StandardTraceParams{}, &error);
  ASSERT_TRUE(trace.has_value()) << error;
  EXPECT_EQ(VerifyStandardTraceV1(*trace), "");
  EXPECT_EQ(trace->num_requests(), 4000);
  EXPECT_EQ(trace->total_tokens(), 66'926'133);
  EXPECT_EQ(trace->request_fingerprint(), 0x8071a0350f0929c5ULL);
  EXPECT_EQ(trace->CapacityTokens(0.5), 2'810'976);
}

TEST(StandardTraceTest, PromptsExtendTheSessionHistory) {
  const auto trace = StandardTrace::Generate(StandardTraceParams{});
  ASSERT_TRUE(trace.has_value());
  const int sessions = trace->params().sessions;
  const StandardRequest first = trace->request(0);
  const StandardRequest second_turn = trace->request(sessions);
  ASSERT_EQ(second_turn.session, first.session);
  ASSERT_GT(second_turn.prompt.size(), first.prompt.size() + first.output.size());
  EXPECT_TRUE(std::equal(first.prompt.begin(), first.prompt.end(), second_turn.prompt.begin()));
  EXPECT_TRUE(std::equal(first.output.begin(), first.output.end(),
                         second_turn.prompt.begin() + static_cast<long>(first.prompt.size())));
}

TEST(StandardTraceTest, OtherSeedsAreFlaggedAsNotV1) {
  StandardTraceParams params;
  params.seed = 1;
  const auto trace = StandardTrace::Generate(params);
  ASSERT_TRUE(trace.has_value());
  EXPECT_NE(VerifyStandardTraceV1(*trace).find("fingerprint"), std::string::npos);
}

TEST(StandardTraceTest, InvalidParamsNameTheField) {
  StandardTraceParams params;
  params.new_min = 10;
  params.new_max = 5;
  std::string error;
  EXPECT_FALSE(StandardTrace::Generate(params, &error).has_value());
  EXPECT_NE(error.find("new_min"), std::string::npos) << error;
}

}  // namespace
}  // namespace agentkv::bench
