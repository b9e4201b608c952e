// Tests of the fleet arm's summary families that read the arm's totals (hit ratios and
// throughput); the per-request families are RequestTally's (request_tally_test.cc).
#include "agentkv/sim/replay/arm_summary.h"

#include <gtest/gtest.h>

namespace agentkv::sim {
namespace {

TEST(ArmSummaryTest, HitRatiosAreCachedOverPromptInTokensAndWholeBlocks) {
  ArmResult result;
  result.prompt_tokens = 400;
  result.prompt_blocks = 25;
  result.cached_device_tokens = 100;
  result.cached_host_tokens = 40;
  SummarizeHitRatios(16, result);
  EXPECT_EQ(result.cached_device_blocks, 6);
  EXPECT_EQ(result.cached_host_blocks, 2);
  EXPECT_DOUBLE_EQ(result.token_hit_ratio_device, 0.25);
  EXPECT_DOUBLE_EQ(result.token_hit_ratio_host, 0.1);
  EXPECT_DOUBLE_EQ(result.block_hit_ratio_device, 6.0 / 25);
  EXPECT_DOUBLE_EQ(result.block_hit_ratio_host, 2.0 / 25);
}

TEST(ArmSummaryTest, ThroughputIsOverTheMakespanAndZeroWithoutOne) {
  ArmResult result;
  result.requests_completed = 10;
  result.output_tokens = 500;
  SummarizeThroughput(TimeNs::Seconds(5), result);
  EXPECT_DOUBLE_EQ(result.makespan_s, 5);
  EXPECT_DOUBLE_EQ(result.requests_per_s, 2);
  EXPECT_DOUBLE_EQ(result.output_tokens_per_s, 100);
  ArmResult empty;
  SummarizeThroughput(TimeNs(0), empty);
  EXPECT_EQ(empty.requests_per_s, 0);
}

}  // namespace
}  // namespace agentkv::sim
