// Tests of the streamed agentic workload in the replay: a synthetic source whose sessions are
// built as they start and dropped as they end gives the same replay, byte for byte, as the
// workload generated whole, and the driver holds only the sessions that are live.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "agentkv/report/replay_report.h"
#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sim/replay/replay.h"
#include "agentkv/sim/workload/conversation_source.h"
#include "agentkv/sim/workload/synthetic_agentic.h"
#include "tests/sim/arm_names.h"

namespace agentkv::sim {
namespace {

using testing_support::Arms;

// Sessions of a tenth of the real context, with sub-agents, arriving `interarrival_s` apart on
// average: short enough that later sessions start after earlier ones ended.
SyntheticAgenticOptions Sessions(int64_t sessions, double interarrival_s, uint64_t seed) {
  SyntheticAgenticOptions options;
  options.seed = seed;
  options.sessions = sessions;
  options.turns = LogNormal{8.0, 0.3};
  options.max_turns = 12;
  options.context_scale = 0.1;
  options.max_context_blocks = 1000;
  options.mean_session_interarrival = TimeNs::Seconds(interarrival_s);
  options.subagent_spawn_probability = 0.3;
  options.subagent_requests = LogNormal{3.0, 0.2};
  options.max_subagent_requests = 4;
  options.subagent_duration_s = LogNormal{20.0, 0.3};
  options.subagent_new_input_tokens = LogNormal{2000.0, 0.5};
  options.human_gap_s = LogNormal{30.0, 0.5};
  options.tool_gap_s = LogNormal{0.5, 0.5};
  return options;
}

TEST(StreamedReplayTest, AStreamedWorkloadReplaysByteForByteAsTheWholeOne) {
  for (const uint64_t seed : {1, 2}) {
    const SyntheticAgenticOptions generator = Sessions(10, 20, seed);
    StatusOr<AgenticWorkload> whole = GenerateSyntheticAgentic(generator);
    StatusOr<std::shared_ptr<const ConversationSource>> stream = StreamSyntheticAgentic(generator);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_TRUE(stream.ok()) << stream.status();
    ReplayOptions options;
    options.engine.kv_pool.max_total_tokens = 8 * 1024;
    options.shared_prefix_ids = 23;
    // Every arm that reads the workload beyond the driver: the oracle's future, the
    // infinite-cache size, demotion (sub-agents), the host tier and session closes.
    options.arms = Arms({"baseline", "+lifecycle", "+subagent-demotion", "+admission-v2",
                         "+stall-offload+host-tier", "oracle", "infinite-cache"});
    StatusOr<ReplayResult> expected = RunReplay(*whole, "w", seed, options);
    StatusOr<ReplayResult> streamed = RunReplay(**stream, "w", seed, options);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    EXPECT_GT(expected->arms.front().requests_completed, 40);
    EXPECT_EQ(report::ReplayResultJson(*streamed), report::ReplayResultJson(*expected))
        << "seed " << seed;
  }
}

struct Fleet {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet;
  std::unique_ptr<GatewayModel> gateway;
};

std::unique_ptr<Fleet> MakeFleet() {
  auto f = std::make_unique<Fleet>();
  FleetModelOptions options;
  options.num_engines = 2;
  options.engine.config.kv_pool.tokens_per_block = kSyntheticBlockSize;
  options.engine.config.kv_pool.max_total_tokens = 4096 * kSyntheticBlockSize;
  f->fleet = FleetModel::Create(&f->loop, options).value();
  GatewayModelOptions gateway;
  gateway.agentic.agentic_session_lifecycle = true;
  f->gateway = GatewayModel::Create(&f->loop, f->fleet.get(), gateway).value();
  return f;
}

// Sessions far apart hold one or two conversations at a time; at the end, none. The driver's
// result equals the whole workload's.
TEST(StreamedReplayTest, TheDriverHoldsOnlyLiveConversations) {
  const SyntheticAgenticOptions generator = Sessions(40, 3000, 3);
  const std::shared_ptr<const ConversationSource> stream =
      StreamSyntheticAgentic(generator).value();
  std::unique_ptr<Fleet> f = MakeFleet();
  std::unique_ptr<AgentDriver> driver =
      AgentDriver::Create(&f->loop, f->gateway.get(), stream.get(), {}).value();
  EXPECT_EQ(driver->held_conversations(), 0) << "nothing is loaded before its start";
  ASSERT_TRUE(driver->Start().ok());
  int64_t most = 0;
  while (f->loop.RunNext()) most = std::max(most, driver->held_conversations());
  ASSERT_TRUE(driver->status().ok()) << driver->status();
  ASSERT_TRUE(driver->done());
  EXPECT_GE(most, 1);
  EXPECT_LE(most, 4) << "of 40 sessions, about 3,000 s apart";
  EXPECT_EQ(driver->held_conversations(), 0);

  const AgenticWorkload whole = GenerateSyntheticAgentic(generator).value();
  std::unique_ptr<Fleet> g = MakeFleet();
  StatusOr<AgentDriverResult> expected = RunAgentWorkload(&g->loop, g->gateway.get(), whole, {});
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(driver->result(), *expected);
  EXPECT_EQ(driver->result().conversations.size(), expected->conversations.size());
}

// Past 1000 conversations the main agents take ids (k + 1) * 1000, which no sub-agent id takes.
TEST(StreamedReplayTest, MoreThanAThousandConversationsKeepDistinctIds) {
  SyntheticAgenticOptions generator = Sessions(1005, 1, 4);
  generator.turns = LogNormal{1.0, 0.0};
  generator.subagent_spawn_probability = 0.0;
  const std::shared_ptr<const ConversationSource> stream =
      StreamSyntheticAgentic(generator).value();
  std::unique_ptr<Fleet> f = MakeFleet();
  std::unique_ptr<AgentDriver> driver =
      AgentDriver::Create(&f->loop, f->gateway.get(), stream.get(), {}).value();
  ASSERT_TRUE(driver->Start().ok());
  f->loop.RunUntilIdle();
  ASSERT_TRUE(driver->status().ok()) << driver->status();
  const AgentDriverResult& r = driver->result();
  ASSERT_EQ(r.conversations.size(), 1005u);
  EXPECT_EQ(r.conversations[998].conversation, ConversationId(999));
  EXPECT_EQ(r.conversations[999].conversation, ConversationId(1000));
  EXPECT_EQ(r.conversations[1000].conversation, ConversationId(1'001'000));
  EXPECT_EQ(r.conversations[1004].conversation, ConversationId(1'005'000));
  EXPECT_EQ(r.requests_completed, 1005);
}

}  // namespace
}  // namespace agentkv::sim
