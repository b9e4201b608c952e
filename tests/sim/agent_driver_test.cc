// Tests of AgentDriver: closed-loop agents on a small fleet, sub-agents with parent hints and
// joins, conservation, session closes and determinism.
#include "agentkv/sim/agent_driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/routing/router.h"
#include "agentkv/sim/event_loop.h"
#include "agentkv/sim/fleet_model.h"

namespace agentkv::sim {
namespace {

constexpr int32_t kBlock = 16;

WekaRequest Req(double t, int64_t blocks, uint64_t first_id, int64_t out, double think = 0) {
  WekaRequest r;
  r.t = TimeNs::Seconds(t);
  r.input_tokens = blocks * kBlock + 3;
  r.output_tokens = out;
  for (int64_t i = 0; i < blocks; ++i) r.hash_ids.push_back(first_id + static_cast<uint64_t>(i));
  r.think_time = TimeNs::Seconds(think);
  return r;
}

// Conversation 0 (id 1): four requests; sub-agent 0 (id 1001) spawns 2 s after request 2 and
// is joined by request 3 (its recorded end, 12 + 1 s, precedes t_3 = 30 s, while request 3's
// think time is only 0.1 s); sub-agent 1 (id 1002) spawns 1 s after request 2 and outlives
// request 3 in the trace (11 + 50 > 30), so it runs in the background.
// Conversation 1 (id 2): three requests, no sub-agent, starts 0.5 s in.
AgenticWorkload TinyWorkload() {
  WekaConversation c0;
  c0.id = "c0";
  c0.block_size = kBlock;
  c0.requests = {Req(0, 4, 1, 8), Req(2, 6, 1, 8, /*think=*/1), Req(10, 8, 1, 8),
                 Req(30, 10, 1, 8, /*think=*/0.1)};
  WekaSubagent joined;
  joined.agent_id = "agent_001";
  joined.spawn = TimeNs::Seconds(12);
  joined.requests = {Req(0, 5, 100, 6), Req(1, 7, 100, 6, /*think=*/0.5)};
  WekaSubagent background;
  background.agent_id = "agent_002";
  background.spawn = TimeNs::Seconds(11);
  background.requests = {Req(0, 3, 200, 5), Req(50, 4, 200, 5, /*think=*/50)};
  c0.subagents = {joined, background};
  WekaConversation c1;
  c1.id = "c1";
  c1.block_size = kBlock;
  c1.requests = {Req(0, 6, 1, 4), Req(3, 7, 1, 4), Req(4, 9, 1, 0, /*think=*/0.25)};
  AgenticWorkload workload;
  workload.conversations = {c0, c1};
  workload.starts = {TimeNs(0), TimeNs::Millis(500)};
  return workload;
}

struct Sim {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet;
  std::unique_ptr<GatewayModel> gateway;
};

// Two engines behind a round-robin router, behind a gateway whose session lifecycle (close on
// every engine at the end of a conversation) is on when `lifecycle` (`num_engines` of them).
std::unique_ptr<Sim> MakeSim(kv::SessionCloseMode mode = kv::SessionCloseMode::kDereference,
                             bool lifecycle = false, int32_t num_engines = 2) {
  auto sim = std::make_unique<Sim>();
  FleetModelOptions options;
  options.num_engines = num_engines;
  options.router.policy = routing::RouterPolicy::kRoundRobin;
  options.engine.config.kv_pool.tokens_per_block = kBlock;
  options.engine.config.kv_pool.max_total_tokens = 1024 * kBlock;
  options.engine.config.cache.session_close_mode = mode;
  StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(&sim->loop, options);
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  if (!fleet.ok()) return sim;
  sim->fleet = std::move(*fleet);
  GatewayModelOptions gateway_options;
  gateway_options.agentic.agentic_session_lifecycle = lifecycle;
  StatusOr<std::unique_ptr<GatewayModel>> gateway =
      GatewayModel::Create(&sim->loop, sim->fleet.get(), gateway_options);
  EXPECT_TRUE(gateway.ok()) << gateway.status();
  if (gateway.ok()) sim->gateway = std::move(*gateway);
  return sim;
}

AgentDriverResult Drive(Sim& sim, const AgenticWorkload& workload, AgentDriverOptions options) {
  StatusOr<AgentDriverResult> result =
      RunAgentWorkload(&sim.loop, sim.gateway.get(), workload, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : AgentDriverResult{};
}

// The request of `conversation` with `index` in the log.
const DriverRequest& Find(const AgentDriverResult& r, int64_t conversation, int32_t index) {
  const auto it = std::find_if(r.requests.begin(), r.requests.end(), [&](const DriverRequest& q) {
    return q.conversation == ConversationId(conversation) && q.index == index;
  });
  EXPECT_NE(it, r.requests.end()) << conversation << "/" << index;
  return *it;
}

const DriverConversationResult& Conv(const AgentDriverResult& r, int64_t conversation) {
  const auto it = std::find_if(r.conversations.begin(), r.conversations.end(),
                               [&](const DriverConversationResult& c) {
                                 return c.conversation == ConversationId(conversation);
                               });
  EXPECT_NE(it, r.conversations.end()) << conversation;
  return *it;
}

TEST(AgentDriverTest, ClosedLoopSubmitsAtCompletionPlusGap) {
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, TinyWorkload(), {});
  ASSERT_EQ(r.requests.size(), 11u);
  // Conversation starts.
  EXPECT_EQ(Find(r, 1, 0).submitted, TimeNs(0));
  EXPECT_EQ(Find(r, 2, 0).submitted, TimeNs::Millis(500));
  // (conversation, index) -> gap before it: think time when > 0, else the t difference.
  const std::map<std::pair<int64_t, int32_t>, TimeNs> gaps = {
      {{1, 1}, TimeNs::Seconds(1)},     {{1, 2}, TimeNs::Seconds(8)},
      {{1001, 1}, TimeNs::Millis(500)}, {{1002, 1}, TimeNs::Seconds(50)},
      {{2, 1}, TimeNs::Seconds(3)},     {{2, 2}, TimeNs::Millis(250)}};
  for (const auto& [key, gap] : gaps) {
    const DriverRequest& previous = Find(r, key.first, key.second - 1);
    const DriverRequest& request = Find(r, key.first, key.second);
    ASSERT_TRUE(previous.completed.has_value());
    EXPECT_EQ(request.ready, *previous.completed + gap) << key.first << "/" << key.second;
    EXPECT_EQ(request.submitted, request.ready) << key.first << "/" << key.second;
    // Responses take simulated time, so the closed loop lags the recorded timeline.
    EXPECT_GT(*previous.completed, previous.submitted);
  }
  // Sub-agents spawn relative to the completion of their anchor (request 2 of conversation 1).
  const TimeNs anchor = *Find(r, 1, 2).completed;
  EXPECT_EQ(Find(r, 1001, 0).submitted, anchor + TimeNs::Seconds(2));
  EXPECT_EQ(Find(r, 1002, 0).submitted, anchor + TimeNs::Seconds(1));
  EXPECT_EQ(Conv(r, 1001).start, anchor + TimeNs::Seconds(2));
  // Per-conversation figures.
  const DriverConversationResult& c2 = Conv(r, 2);
  EXPECT_EQ(c2.start, TimeNs::Millis(500));
  EXPECT_EQ(c2.end, Find(r, 2, 2).completed);
  EXPECT_EQ(c2.requests_issued, 3);
  EXPECT_GT(c2.total_ttft, TimeNs(0));
  EXPECT_GE(c2.total_latency, c2.total_ttft);
  EXPECT_GT(c2.cached_tokens, 0) << "later turns reuse the growing prefix";
}

TEST(AgentDriverTest, NextTurnReusesThePreviousAnswersBlocks) {
  std::unique_ptr<Sim> sim = MakeSim(kv::SessionCloseMode::kDereference, false, /*num_engines=*/1);
  // Turn 0: 67 prompt tokens (4 blocks) and 40 output tokens, whose KV (106 tokens) fills
  // blocks 4 and 5; turn 1 re-sends them as its blocks 4-5 (ids 5 and 6 extend ids 1-4).
  WekaConversation c;
  c.id = "c";
  c.block_size = kBlock;
  c.requests = {Req(0, 4, 1, 40), Req(1, 8, 1, 1)};
  AgenticWorkload workload;
  workload.conversations = {c};
  workload.starts = {TimeNs(0)};
  const AgentDriverResult r = Drive(*sim, workload, {});
  ASSERT_EQ(r.requests.size(), 2u);
  // Turn 1 finds turn 0's prompt and answer cached: 6 blocks, not just the 4 prompt blocks.
  EXPECT_EQ(Conv(r, 1).cached_tokens, 6 * kBlock);
}

TEST(AgentDriverTest, SubagentsRunUnderTheirOwnIdsWithTheParentHint) {
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, TinyWorkload(), {});
  int64_t sub_requests = 0;
  for (const DriverRequest& q : r.requests) {
    if (q.conversation.value() > 1000) {
      ++sub_requests;
      EXPECT_EQ(q.parent, ConversationId(1));
    } else {
      EXPECT_FALSE(q.parent.has_value());
    }
  }
  EXPECT_EQ(sub_requests, 4);
  ASSERT_EQ(r.conversations.size(), 4u);
  EXPECT_EQ(r.conversations[0].conversation, ConversationId(1));
  EXPECT_EQ(r.conversations[1].conversation, ConversationId(1001));
  EXPECT_EQ(r.conversations[1].subagent, 0);
  EXPECT_EQ(r.conversations[2].conversation, ConversationId(1002));
  EXPECT_EQ(r.conversations[3].conversation, ConversationId(2));
  // Each request reached the engine the log names.
  for (const DriverRequest& q : r.requests) {
    EXPECT_NE(sim->fleet->engine(*q.engine).FindRecord(q.id), nullptr) << q.id;
  }
}

TEST(AgentDriverTest, JoinWaitsForTheSubagentAndBackgroundAgentsDoNot) {
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, TinyWorkload(), {});
  const DriverRequest& joined_request = Find(r, 1, 3);
  const TimeNs sub_end = *Conv(r, 1001).end;
  EXPECT_EQ(joined_request.ready, *Find(r, 1, 2).completed + TimeNs::Millis(100));
  EXPECT_LT(joined_request.ready, sub_end);
  EXPECT_EQ(joined_request.submitted, sub_end);
  EXPECT_EQ(Conv(r, 1).total_join_wait, sub_end - joined_request.ready);
  // The background sub-agent outlives the parent's last request.
  EXPECT_GT(*Conv(r, 1002).end, *Conv(r, 1).end);
  EXPECT_LT(joined_request.submitted, Find(r, 1002, 1).submitted);
}

TEST(AgentDriverTest, EveryRequestCompletesOnce) {
  std::unique_ptr<Sim> sim = MakeSim();
  const AgenticWorkload workload = TinyWorkload();
  const AgentDriverResult r = Drive(*sim, workload, {.first_request_id = 7});
  int64_t total = 0;
  for (const WekaConversation& c : workload.conversations) total += c.TotalRequests();
  EXPECT_EQ(r.requests_issued, total);
  EXPECT_EQ(r.requests_completed, total);
  EXPECT_EQ(sim->fleet->num_submitted(), total);
  EXPECT_EQ(sim->fleet->num_completed(), total);
  for (size_t i = 0; i < r.requests.size(); ++i) {
    EXPECT_EQ(r.requests[i].id, RequestId(7 + static_cast<int64_t>(i)));
    EXPECT_TRUE(r.requests[i].completed.has_value());
  }
  int64_t per_conversation = 0;
  for (const DriverConversationResult& c : r.conversations) {
    EXPECT_EQ(c.requests_issued, c.requests_completed);
    EXPECT_TRUE(c.end.has_value());
    per_conversation += c.requests_completed;
  }
  EXPECT_EQ(per_conversation, total);
  EXPECT_EQ(r.makespan_end, *Conv(r, 1002).end);
}

TEST(AgentDriverTest, CloseSessionsOnEndFreesSessionKv) {
  std::unique_ptr<Sim> kept = MakeSim(kv::SessionCloseMode::kRelease);
  const AgentDriverResult open = Drive(*kept, TinyWorkload(), {});
  std::unique_ptr<Sim> closed = MakeSim(kv::SessionCloseMode::kRelease, /*lifecycle=*/true);
  const AgentDriverResult freed = Drive(*closed, TinyWorkload(), {});
  int64_t kept_used = 0;
  int64_t closed_used = 0;
  for (int32_t e = 0; e < 2; ++e) {
    kept_used += kept->fleet->gauges(EngineId(e)).num_used_tokens +
                 kept->fleet->gauges(EngineId(e)).evictable_tokens;
    closed_used += closed->fleet->gauges(EngineId(e)).num_used_tokens +
                   closed->fleet->gauges(EngineId(e)).evictable_tokens;
    for (int64_t session : {1, 1001, 1002, 2}) {
      const kv::KvCacheManager& cache = closed->fleet->engine(EngineId(e)).scheduler().cache();
      EXPECT_FALSE(cache.SessionOpen(SessionId(session))) << session;
    }
  }
  int64_t tokens = 0;
  for (const DriverConversationResult& c : freed.conversations) {
    EXPECT_GT(c.closed_session_tokens, 0) << c.conversation;
    tokens += c.closed_session_tokens;
  }
  for (const DriverConversationResult& c : open.conversations) {
    EXPECT_EQ(c.closed_session_tokens, 0);
  }
  EXPECT_GT(tokens, 0);
  EXPECT_LT(closed_used, kept_used);
  EXPECT_EQ(closed_used, 0);
}

TEST(AgentDriverTest, TwoRunsAreIdentical) {
  std::unique_ptr<Sim> a = MakeSim(kv::SessionCloseMode::kDereference, /*lifecycle=*/true);
  std::unique_ptr<Sim> b = MakeSim(kv::SessionCloseMode::kDereference, /*lifecycle=*/true);
  const AgentDriverResult first = Drive(*a, TinyWorkload(), {});
  const AgentDriverResult second = Drive(*b, TinyWorkload(), {});
  EXPECT_EQ(first, second);
  EXPECT_EQ(a->loop.processed(), b->loop.processed());
}

// Times of a workload built in memory are not bounded like a trace's: think times and starts
// near the end of int64 saturate instead of wrapping into the past (which aborted the loop),
// and every request still completes.
TEST(AgentDriverTest, TimesPastTheEndOfInt64Saturate) {
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 2;
  AgenticWorkload workload = TinyWorkload();
  for (WekaConversation& c : workload.conversations) {
    for (WekaRequest& r : c.requests) r.think_time = TimeNs(kHuge);
  }
  workload.starts = {TimeNs(0), TimeNs(kHuge)};
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, workload, {});
  EXPECT_EQ(r.requests_issued, 11);
  EXPECT_EQ(r.requests_completed, 11);
  EXPECT_EQ(sim->loop.now(), TimeNs(std::numeric_limits<int64_t>::max()));
}

TEST(AgentDriverTest, RejectsMismatchedBlockSizeAndStarts) {
  std::unique_ptr<Sim> sim = MakeSim();
  AgenticWorkload workload = TinyWorkload();
  workload.starts.pop_back();
  EXPECT_FALSE(AgentDriver::Create(&sim->loop, sim->gateway.get(), &workload, {}).ok());
  workload = TinyWorkload();
  workload.conversations[1].block_size = 64;
  EXPECT_FALSE(AgentDriver::Create(&sim->loop, sim->gateway.get(), &workload, {}).ok());
  StatusOr<std::unique_ptr<AgentDriver>> driver =
      AgentDriver::Create(&sim->loop, sim->gateway.get(), &workload, {.first_request_id = -1});
  EXPECT_FALSE(driver.ok());
}

}  // namespace
}  // namespace agentkv::sim
