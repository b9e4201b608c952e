// Tests of the open-loop feed: what it refuses, how it sizes the infinite-cache arm, and that
// each request is its own session from arrival to completion (run through RunOpenLoopArm).
#include "agentkv/sim/replay/open_loop_feed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "agentkv/base/bounds.h"
#include "tests/sim/arm_names.h"

namespace agentkv::sim {
namespace {

using testing::HasSubstr;

TEST(OpenLoopFeedTest, RefusesATokenCountOutOfBoundNamingTheRequest) {
  std::vector<OpenLoopRequest> requests(2);
  requests[1].output_tokens = kMaxTokens + 1;
  const OpenLoopFeed feed(requests, 16);
  const Status status = feed.Validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("requests[1].output_tokens"));
}

TEST(OpenLoopFeedTest, InfiniteCapacityLeavesOutARequestNoEngineHolds) {
  std::vector<OpenLoopRequest> requests(2);
  requests[0] = {.arrival = TimeNs(0), .hash_ids = {1, 2}, .prompt_tokens = 32, .output_tokens = 1};
  // 100 blocks: more than the 10-block engine holds.
  requests[1] = {.arrival = TimeNs(0), .hash_ids = {}, .prompt_tokens = 1600, .output_tokens = 1};
  const OpenLoopFeed feed(requests, 16);
  // Two distinct blocks plus 1 / 16 + 2 for the first request's tail.
  EXPECT_EQ(feed.InfiniteCapacityBlocks(10), 2 + 2);
}

TEST(OpenLoopFeedTest, EachRequestIsItsOwnSessionFromArrivalToCompletion) {
  std::vector<OpenLoopRequest> requests(2);
  requests[0] = {.arrival = TimeNs::Seconds(1), .hash_ids = {1}, .prompt_tokens = 16};
  requests[1] = {.arrival = TimeNs::Seconds(3), .hash_ids = {1}, .prompt_tokens = 16};
  ReplayOptions options;
  options.num_engines = 1;
  options.engine.kv_pool.max_total_tokens = 64 * 16;
  options.fixed_step_time = TimeNs::Seconds(0.5);
  StatusOr<ArmRun> run =
      RunOpenLoopArm(requests, 16, options, testing_support::Arms({"baseline"}).front());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->result.sessions, 2);
  EXPECT_EQ(run->result.conversations, 2);
  // One prefill step and one decode step each (two output tokens: one per step).
  ASSERT_EQ(run->result.session_times_s.size(), 2u);
  EXPECT_EQ(run->result.session_times_s[0], run->result.session_times_s[1]);
  EXPECT_GT(run->result.session_times_s[0], 0.0);
  // From the first arrival (1 s) to the last completion.
  EXPECT_DOUBLE_EQ(run->result.makespan_s, 2.0 + run->result.session_times_s[1]);
  EXPECT_EQ(run->result.server_time.count, 2);
}

}  // namespace
}  // namespace agentkv::sim
