// Tests of the agentic workload helpers: Poisson start times and folding starts into request
// times, including times at the end of int64 nanoseconds (they saturate, never wrap).
#include "agentkv/sim/workload/agentic_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace agentkv::sim {
namespace {

constexpr TimeNs kEnd(std::numeric_limits<int64_t>::max());

TEST(AgenticWorkloadTest, PoissonStartsBeginAtZeroAndAreSeeded) {
  const std::vector<TimeNs> starts = PoissonStarts(50, TimeNs::Seconds(60), 7);
  ASSERT_EQ(starts.size(), 50u);
  EXPECT_EQ(starts[0], TimeNs(0));
  EXPECT_TRUE(std::is_sorted(starts.begin(), starts.end()));
  EXPECT_GT(starts.back(), TimeNs::Seconds(60 * 20));
  EXPECT_EQ(starts, PoissonStarts(50, TimeNs::Seconds(60), 7));
  EXPECT_NE(starts, PoissonStarts(50, TimeNs::Seconds(60), 8));
  EXPECT_EQ(PoissonStarts(3, TimeNs(0), 7), (std::vector<TimeNs>(3, TimeNs(0))));
}

// A mean of centuries: draws and sums past int64 nanoseconds saturate instead of wrapping
// (or converting an out-of-range double), so starts never go negative or backwards.
TEST(AgenticWorkloadTest, PoissonStartsSaturateAtTheEndOfTime) {
  const std::vector<TimeNs> starts = PoissonStarts(40, TimeNs(kEnd.ns() / 4), 3);
  EXPECT_TRUE(std::is_sorted(starts.begin(), starts.end()));
  EXPECT_EQ(starts.front(), TimeNs(0));
  EXPECT_EQ(starts.back(), kEnd);
}

TEST(AgenticWorkloadTest, FoldingStartsShiftsMainRequestsAndSpawnsOnly) {
  AgenticWorkload workload;
  WekaConversation c;
  c.requests.resize(2);
  c.requests[1].t = TimeNs::Seconds(3);
  c.requests[1].think_time = TimeNs::Seconds(1);
  c.subagents.resize(1);
  c.subagents[0].completion = TimeNs::Seconds(2);
  c.subagents[0].requests.resize(1);
  c.subagents[0].requests[0].t = TimeNs::Seconds(1);
  workload.conversations = {c, c};
  workload.starts = {TimeNs::Seconds(10), TimeNs(kEnd.ns() - 1)};
  const std::vector<WekaConversation> folded = FoldConversationStarts(workload);
  EXPECT_EQ(folded[0].requests[1].t, TimeNs::Seconds(13));
  EXPECT_EQ(folded[0].requests[1].think_time, TimeNs::Seconds(1));
  EXPECT_EQ(folded[0].subagents[0].completion, TimeNs::Seconds(12));
  EXPECT_EQ(folded[0].subagents[0].spawn(), TimeNs::Seconds(12));
  EXPECT_EQ(folded[0].subagents[0].requests[0].t, TimeNs::Seconds(1));
  EXPECT_EQ(folded[1].requests[0].t, TimeNs(kEnd.ns() - 1));
  EXPECT_EQ(folded[1].requests[1].t, kEnd);
  EXPECT_EQ(folded[1].subagents[0].spawn(), kEnd);
}

// A sub-agent recorded as running longer than its completion time spawned at the conversation
// start (spawn() clamps at 0); folded, it still spawns at the start, not before it.
TEST(AgenticWorkloadTest, FoldingKeepsAClampedSpawnAtTheStart) {
  AgenticWorkload workload;
  WekaConversation c;
  c.requests.resize(1);
  c.subagents.resize(1);
  c.subagents[0].completion = TimeNs::Seconds(2);
  c.subagents[0].duration = TimeNs::Seconds(5);
  ASSERT_EQ(c.subagents[0].spawn(), TimeNs(0));
  workload.conversations = {c};
  workload.starts = {TimeNs::Seconds(10)};
  const std::vector<WekaConversation> folded = FoldConversationStarts(workload);
  EXPECT_EQ(folded[0].subagents[0].completion, TimeNs::Seconds(12));
  EXPECT_EQ(folded[0].subagents[0].spawn(), TimeNs::Seconds(10));
}

TEST(AgenticWorkloadTest, GatedMeansSomeConversationWaitsForAGroup) {
  AgenticWorkload workload;
  workload.conversations.resize(2);
  workload.starts.resize(2);
  EXPECT_FALSE(workload.gated());
  workload.groups = {0, 1};
  workload.start_after_group = {-1, -1};
  EXPECT_FALSE(workload.gated());
  workload.start_after_group[1] = 0;
  EXPECT_TRUE(workload.gated());
}

}  // namespace
}  // namespace agentkv::sim
