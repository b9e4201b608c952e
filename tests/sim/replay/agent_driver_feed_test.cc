// Tests of the closed-loop feed: what it refuses and how it counts sessions (a main agent with
// its sub-agents), run through RunAgenticArm on the shared small workload.
#include "agentkv/sim/replay/agent_driver_feed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentkv/base/bounds.h"
#include "tests/sim/arm_names.h"
#include "tests/sim/small_workload.h"

namespace agentkv::sim {
namespace {

using testing::HasSubstr;

TEST(AgentDriverFeedTest, RefusesAWorkloadWithoutConversations) {
  const AgenticWorkload workload;
  const ReplayOptions options;
  const Status status = AgentDriverFeed(workload, options).Validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("no conversations"));
}

TEST(AgentDriverFeedTest, RefusesASubagentTokenCountOutOfBoundNamingIt) {
  AgenticWorkload workload = testing_support::SmallWorkload(1);
  WekaConversation* with_subagent = nullptr;
  for (WekaConversation& c : workload.conversations) {
    if (!c.subagents.empty() && !c.subagents.front().requests.empty()) with_subagent = &c;
  }
  ASSERT_NE(with_subagent, nullptr);
  with_subagent->subagents.front().requests.front().input_tokens = kMaxTokens + 1;
  const ReplayOptions options;
  const Status status = AgentDriverFeed(workload, options).Validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("sub-agent " + with_subagent->subagents.front().agent_id +
                                          " requests[0].input_tokens"));
}

TEST(AgentDriverFeedTest, ASessionIsAMainAgentWithItsSubagents) {
  const AgenticWorkload workload = testing_support::SmallWorkload(1);
  int64_t agents = 0;
  for (const WekaConversation& c : workload.conversations) {
    agents += 1 + static_cast<int64_t>(c.subagents.size());
  }
  ASSERT_GT(agents, static_cast<int64_t>(workload.conversations.size()));
  ReplayOptions options;
  options.engine.kv_pool.max_total_tokens = 64 * 1024;
  StatusOr<ArmRun> run =
      RunAgenticArm(workload, options, testing_support::Arms({"baseline"}).front());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->result.sessions, static_cast<int64_t>(workload.conversations.size()));
  EXPECT_EQ(run->result.conversations, agents);
  EXPECT_EQ(run->result.server_time.count, run->result.sessions);
  EXPECT_EQ(run->result.session_times_s.size(), workload.conversations.size());
  // No groups: no rollout block.
  EXPECT_FALSE(run->result.rollout.has_value());
}

}  // namespace
}  // namespace agentkv::sim
