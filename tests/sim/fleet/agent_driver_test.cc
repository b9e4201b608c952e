// Tests of AgentDriver: closed-loop agents on a small fleet, sub-agents with parent hints and
// joins, conservation, session closes, determinism and the keys retired as conversations end.
#include "agentkv/sim/fleet/agent_driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/routing/router.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/workload/pause_type.h"
#include "agentkv/sim/workload/weka_trace.h"

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

// Conversation 0 (id 1, model "opus"): four requests; request 2 records 0.5 s of server time.
// Sub-agent 0 (id 1001, "haiku", completed) runs from 12 s to 13.5 s on the parent's timeline
// (entry t = 13.5, duration 1.5 s): it spawns 12 - 10 - 0.5 = 1.5 s after request 2 completes
// and is joined by request 3, the first parent request at or after its completion (t_3 = 30 s;
// request 3's think time is only 0.1 s). Sub-agent 1 (id 1002, "opus", async_launched) runs
// from 11 s to 20 s: it completes before t_3 too, but was launched in the background, so
// nobody waits for it (its own requests outlive the parent).
// Conversation 1 (id 2): three requests, no sub-agent, starts 0.5 s in; request 0 records 1 s
// of server time and request 1 no think time, so request 1's gap is 3 - 0 - 1 = 2 s.
// Pauses: conversation 0 calls a tool (0 -> 1), ends its turn (1 -> 2: a human turn), then
// waits for sub-agent 0 (2 -> 3); conversation 1 records no content types and no stop reason
// (human turns).
AgenticWorkload TinyWorkload() {
  WekaConversation c0;
  c0.id = "c0";
  c0.block_size = kBlock;
  c0.requests = {Req(0, 4, 1, 8), Req(2, 6, 1, 8, /*think=*/1), Req(10, 8, 1, 8),
                 Req(30, 10, 1, 8, /*think=*/0.1)};
  for (WekaRequest& r : c0.requests) r.model = "opus";
  c0.requests[0].stop = "tool_use";
  c0.requests[0].output_types = {"thinking", "tool_use"};
  c0.requests[1].input_types = {"tool_result"};
  c0.requests[1].stop = "end_turn";
  c0.requests[2].input_types = {"text"};
  c0.requests[2].stop = "tool_use";
  c0.requests[2].api_time = TimeNs::Millis(500);
  c0.requests[3].input_types = {"tool_result"};
  WekaSubagent joined;
  joined.agent_id = "agent_001";
  joined.completion = TimeNs::Millis(13'500);
  joined.duration = TimeNs::Millis(1'500);
  joined.status = SubagentStatus::kCompleted;
  joined.models = {"haiku"};
  joined.requests = {Req(0, 5, 100, 6), Req(1, 7, 100, 6, /*think=*/0.5)};
  joined.requests[0].stop = "tool_use";
  joined.requests[1].input_types = {"tool_result"};
  WekaSubagent background;
  background.agent_id = "agent_002";
  background.completion = TimeNs::Seconds(20);
  background.duration = TimeNs::Seconds(9);
  background.status = SubagentStatus::kAsyncLaunched;
  background.models = {"opus"};
  background.requests = {Req(0, 3, 200, 5), Req(50, 4, 200, 5, /*think=*/50)};
  c0.subagents = {joined, background};
  WekaConversation c1;
  c1.id = "c1";
  c1.block_size = kBlock;
  c1.requests = {Req(0, 6, 1, 4), Req(3, 7, 1, 4), Req(4, 9, 1, 0, /*think=*/0.25)};
  c1.requests[0].api_time = TimeNs::Seconds(1);
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

// `num_engines` engines (default two) of `blocks_per_engine` `block`-token blocks behind a
// round-robin router, behind a gateway whose session lifecycle (close on every engine at the
// end of a conversation) is on when `lifecycle`, and which ends sessions idle for
// `idle_timeout` (0: never).
std::unique_ptr<Sim> MakeSim(kv::SessionCloseMode mode = kv::SessionCloseMode::kDereference,
                             bool lifecycle = false, int32_t block = kBlock,
                             int64_t blocks_per_engine = 1024, int32_t num_engines = 2,
                             TimeNs idle_timeout = TimeNs(0)) {
  auto sim = std::make_unique<Sim>();
  FleetModelOptions options;
  options.num_engines = num_engines;
  options.router.policy = routing::RouterPolicy::kRoundRobin;
  options.engine.config.kv_pool.tokens_per_block = block;
  options.engine.config.kv_pool.max_total_tokens = blocks_per_engine * block;
  options.engine.config.cache.session_close_mode = mode;
  StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(&sim->loop, options);
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  if (!fleet.ok()) return sim;
  sim->fleet = std::move(*fleet);
  GatewayModelOptions gateway_options;
  gateway_options.agentic.agentic_session_lifecycle = lifecycle;
  gateway_options.session_idle_timeout = idle_timeout;
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
      {{2, 1}, TimeNs::Seconds(2)},     {{2, 2}, TimeNs::Millis(250)}};
  for (const auto& [key, gap] : gaps) {
    const DriverRequest& previous = Find(r, key.first, key.second - 1);
    const DriverRequest& request = Find(r, key.first, key.second);
    ASSERT_TRUE(previous.completed.has_value());
    EXPECT_EQ(request.ready, *previous.completed + gap) << key.first << "/" << key.second;
    EXPECT_EQ(request.submitted, request.ready) << key.first << "/" << key.second;
    // Responses take simulated time, so the closed loop lags the recorded timeline.
    EXPECT_GT(*previous.completed, previous.submitted);
  }
  // Sub-agents spawn at completion - duration, relative to the completion of their anchor
  // (request 2 of conversation 1, t = 10 s, 0.5 s of recorded server time).
  const TimeNs anchor = *Find(r, 1, 2).completed;
  EXPECT_EQ(Find(r, 1001, 0).submitted, anchor + TimeNs::Millis(1'500));
  EXPECT_EQ(Find(r, 1002, 0).submitted, anchor + TimeNs::Millis(500));
  EXPECT_EQ(Conv(r, 1001).start, anchor + TimeNs::Millis(1'500));
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
  std::unique_ptr<Sim> sim = MakeSim(kv::SessionCloseMode::kDereference, false, kBlock, 1024,
                                     /*num_engines=*/1);
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
  // The trace sent request 3 16.5 s after the sub-agent's result (t_3 - completion).
  EXPECT_EQ(joined_request.submitted, sub_end + TimeNs::Millis(16'500));
  EXPECT_EQ(Conv(r, 1).total_join_wait, joined_request.submitted - joined_request.ready);
  // The async_launched sub-agent outlives the parent's last request, which did not wait.
  EXPECT_GT(*Conv(r, 1002).end, *Conv(r, 1).end);
  EXPECT_LT(joined_request.submitted, Find(r, 1002, 1).submitted);
}

// The same sub-agent is waited for when the trace says it completed, and not when it says it
// was launched in the background.
TEST(AgentDriverTest, OnlyCompletedSubagentsAreJoined) {
  AgenticWorkload workload = TinyWorkload();
  WekaSubagent& background = workload.conversations[0].subagents[1];
  std::unique_ptr<Sim> async_sim = MakeSim();
  const AgentDriverResult async_run = Drive(*async_sim, workload, {});
  EXPECT_LT(Find(async_run, 1, 3).submitted, *Conv(async_run, 1002).end);

  background.status = SubagentStatus::kCompleted;
  std::unique_ptr<Sim> completed_sim = MakeSim();
  const AgentDriverResult completed_run = Drive(*completed_sim, workload, {});
  // Joined: request 3 goes 10 s (t_3 - its completion, 30 - 20) after it ended.
  EXPECT_GE(Find(completed_run, 1, 3).submitted,
            *Conv(completed_run, 1002).end + TimeNs::Seconds(10));
}

// A sub-agent the trace completes after the parent's last request is not joined.
TEST(AgentDriverTest, SubagentCompletingAfterTheParentIsNotJoined) {
  AgenticWorkload workload = TinyWorkload();
  workload.conversations[0].subagents[1].status = SubagentStatus::kCompleted;
  workload.conversations[0].subagents[1].completion = TimeNs::Seconds(40);
  workload.conversations[0].subagents[1].duration = TimeNs::Seconds(29);
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, workload, {});
  EXPECT_GT(*Conv(r, 1002).end, *Conv(r, 1).end);
}

// Every request records the pause that follows it (kSessionEnd after an agent's last), the
// same value its KV hint carries: the pause before request n is request n-1's.
TEST(AgentDriverTest, RecordsThePauseAfterEveryRequest) {
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, TinyWorkload(), {});
  const std::map<std::pair<int64_t, int32_t>, PauseKind> pauses = {
      {{1, 0}, PauseKind::kToolCall},     {{1, 1}, PauseKind::kHumanTurn},
      {{1, 2}, PauseKind::kSubagentWait}, {{1, 3}, PauseKind::kSessionEnd},
      {{1001, 0}, PauseKind::kToolCall},  {{1001, 1}, PauseKind::kSessionEnd},
      {{1002, 0}, PauseKind::kHumanTurn}, {{1002, 1}, PauseKind::kSessionEnd},
      {{2, 0}, PauseKind::kHumanTurn},    {{2, 1}, PauseKind::kHumanTurn},
      {{2, 2}, PauseKind::kSessionEnd}};
  ASSERT_EQ(r.requests.size(), pauses.size());
  for (const auto& [key, pause] : pauses) {
    EXPECT_EQ(Find(r, key.first, key.second).next_pause, pause)
        << key.first << "/" << key.second << ": " << PauseKindName(pause);
  }
}

TEST(AgentDriverTest, SubagentModelsExcludeLeavesOutOtherModels) {
  std::unique_ptr<Sim> shared_sim = MakeSim();
  const AgentDriverResult shared = Drive(*shared_sim, TinyWorkload(), {});
  EXPECT_EQ(shared.requests_issued, 11);
  EXPECT_EQ(Find(shared, 1, 2).next_pause, PauseKind::kSubagentWait);

  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r =
      Drive(*sim, TinyWorkload(), {.subagent_models = SubagentModels::kExclude});
  // Sub-agent 0 runs on "haiku" under an "opus" main agent: left out, and not waited for.
  EXPECT_EQ(r.requests_issued, 9);
  ASSERT_EQ(r.conversations.size(), 3u);
  EXPECT_EQ(r.conversations[1].conversation, ConversationId(1002));
  for (const DriverRequest& q : r.requests) EXPECT_NE(q.conversation, ConversationId(1001));
  const DriverRequest& request3 = Find(r, 1, 3);
  // Request 3 joins nothing now: a plain tool call follows request 2 (it stopped with
  // tool_use, request 3 sends a tool_result).
  EXPECT_EQ(Find(r, 1, 2).next_pause, PauseKind::kToolCall);
  EXPECT_EQ(request3.submitted, request3.ready);
}

// A left-out sub-agent has no agent, so the agents of the conversation are counted by those
// kept: the driver once stepped over the left-out ones into the next conversation's agents and
// began conversation 2 (a main agent has no anchor) at conversation 1's start, 500 ms early.
TEST(AgentDriverTest, SubagentModelsExcludeStartsLaterConversationsOnTime) {
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r =
      Drive(*sim, TinyWorkload(), {.subagent_models = SubagentModels::kExclude});
  EXPECT_EQ(Conv(r, 2).start, TimeNs::Millis(500));
  EXPECT_EQ(Find(r, 2, 0).submitted, TimeNs::Millis(500));
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
      const kv::KvCacheManager& cache = closed->fleet->engine(EngineId(e)).engine().cache();
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

// Two agents pause two minutes for a tool while the gateway ends sessions idle for one. The one
// the workload marks retained (a partial-rollout trajectory) keeps its session: no close until
// its end, and its return reuses its whole first prompt. The other is closed during the pause
// (its KV released) and returns to nothing cached. Without the mark both lose their sessions.
TEST(AgentDriverTest, ARetainedConversationKeepsItsSessionThroughAPauseLongerThanTheIdleTimeout) {
  WekaConversation c;
  c.block_size = kBlock;
  c.requests = {Req(0, 8, 1, 4), Req(130, 12, 1, 4, /*think=*/120)};
  AgenticWorkload workload;
  workload.conversations = {c, c};
  workload.conversations[0].id = "retained";
  workload.conversations[1].id = "plain";
  workload.starts = {TimeNs(0), TimeNs(0)};
  for (const bool marked : {true, false}) {
    SCOPED_TRACE(marked ? "first conversation retained" : "no retention");
    workload.retained = marked ? std::vector<bool>{true, false} : std::vector<bool>{};
    std::unique_ptr<Sim> sim =
        MakeSim(kv::SessionCloseMode::kRelease, /*lifecycle=*/true, kBlock, 1024,
                /*num_engines=*/1, /*idle_timeout=*/TimeNs::Seconds(60));
    const AgentDriverResult r = Drive(*sim, workload, {});
    ASSERT_EQ(r.requests_completed, 4);
    EXPECT_GE(Find(r, 1, 1).submitted - *Find(r, 1, 0).completed, TimeNs::Seconds(120));
    // Each conversation's first request caches nothing: only its return can hit.
    EXPECT_EQ(Conv(r, 1).cached_tokens, marked ? 8 * kBlock : 0);
    EXPECT_EQ(Conv(r, 2).cached_tokens, 0);
    // Closes on the one engine: the plain session's idle close and its end; the retained one's
    // end only (without the mark, an idle close too).
    EXPECT_EQ(sim->gateway->engine_session_closes(), marked ? 3 : 4);
    // Retained, its end releases the KV it kept. (An engine remembers a closed session, so
    // without the mark the new incarnation's blocks are not that session's: its end frees
    // none of them.)
    if (marked) {
      EXPECT_GT(Conv(r, 1).closed_session_tokens, 0);
    }
    EXPECT_TRUE(sim->gateway->CheckDrained().ok()) << sim->gateway->CheckDrained();
  }
  workload.retained = {true};
  std::unique_ptr<Sim> sim = MakeSim();
  EXPECT_EQ(RunAgentWorkload(&sim->loop, sim->gateway.get(), workload, {}).status().code(),
            StatusCode::kInvalidArgument)
      << "one retention mark per conversation";
}

TEST(AgentDriverTest, TwoRunsAreIdentical) {
  std::unique_ptr<Sim> a = MakeSim(kv::SessionCloseMode::kDereference, /*lifecycle=*/true);
  std::unique_ptr<Sim> b = MakeSim(kv::SessionCloseMode::kDereference, /*lifecycle=*/true);
  const AgentDriverResult first = Drive(*a, TinyWorkload(), {});
  const AgentDriverResult second = Drive(*b, TinyWorkload(), {});
  EXPECT_EQ(first, second);
  EXPECT_EQ(a->loop.processed(), b->loop.processed());
}

// Without the request log the driver holds a request from its submit to its completion only;
// the completion callback is told of each, once, with what the log would have said of it.
TEST(AgentDriverTest, WithoutTheLogEveryCompletionIsToldOnceAsTheLogWouldHaveIt) {
  std::unique_ptr<Sim> kept_sim = MakeSim();
  const AgentDriverResult kept = Drive(*kept_sim, TinyWorkload(), {});
  struct Told {
    DriverRequest request;
    RequestId gateway_id;
    std::optional<TimeNs> finished;
    int32_t workload_index = 0;
    std::optional<PauseKind> pause_before;
  };
  std::vector<Told> told;
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r =
      Drive(*sim, TinyWorkload(),
            {.keep_request_log = false, .on_request_completed = [&](const DriverCompletion& done) {
               told.push_back({done.request, done.gateway.id, done.engine.finished,
                               done.workload_index, done.pause_before});
             }});
  EXPECT_TRUE(r.requests.empty());
  EXPECT_EQ(r.conversations, kept.conversations);
  EXPECT_EQ(r.requests_completed, kept.requests_completed);
  EXPECT_EQ(r.makespan_end, kept.makespan_end);
  ASSERT_EQ(told.size(), kept.requests.size());
  std::set<int64_t> ids;
  for (const Told& t : told) {
    ids.insert(t.request.id.value());
    const DriverRequest& logged = Find(kept, t.request.conversation.value(), t.request.index);
    EXPECT_EQ(t.request, logged);
    EXPECT_EQ(t.gateway_id, logged.id);
    EXPECT_EQ(t.finished, logged.completed);
    // Conversations 1 and 2 are workload 0 and 1; sub-agents 1001 and 1002 are conversation 1's.
    const int64_t conversation = t.request.conversation.value();
    EXPECT_EQ(t.workload_index, (conversation < 1000 ? conversation : conversation / 1000) - 1);
    if (t.request.index == 0) {
      EXPECT_FALSE(t.pause_before.has_value());
    } else {
      EXPECT_EQ(t.pause_before,
                Find(kept, t.request.conversation.value(), t.request.index - 1).next_pause);
    }
  }
  EXPECT_EQ(ids.size(), told.size()) << "a request told twice";
}

// Passes everything to the gateway model and records each RetireKeys call.
class RetireRecorder final : public AgentTarget {
 public:
  explicit RetireRecorder(GatewayModel* gateway) : gateway_(gateway) {}
  const kv::BlockKeyHasher& hasher() const override { return gateway_->hasher(); }
  int32_t tokens_per_block() const override { return gateway_->tokens_per_block(); }
  void set_completion_callback(CompletionCallback callback) override {
    gateway_->set_completion_callback(std::move(callback));
  }
  Status Submit(GatewayRequest request) override { return gateway_->Submit(std::move(request)); }
  std::vector<int64_t> EndSession(SessionId session) override {
    return gateway_->EndSession(session);
  }
  void RetireKeys(std::span<const kv::BlockKey> keys) override {
    retired.emplace_back(keys.begin(), keys.end());
    gateway_->RetireKeys(keys);
  }

  std::vector<std::vector<kv::BlockKey>> retired;

 private:
  GatewayModel* gateway_;
};

// `n` conversations one after another (each starts after the previous one's last turn), each of
// three turns over its own growing chain of 3 shared ids then `own` ids of its own.
AgenticWorkload SequentialConversations(int32_t n, int64_t own) {
  AgenticWorkload workload;
  for (int32_t k = 0; k < n; ++k) {
    WekaConversation c;
    c.id = "c" + std::to_string(k);
    c.block_size = kBlock;
    for (int32_t turn = 0; turn < 3; ++turn) {
      WekaRequest r = Req(turn, 0, 0, 4);
      r.hash_ids = {0, 1, 2};
      for (int64_t i = 0; i < own * (turn + 1) / 3; ++i) {
        r.hash_ids.push_back(100 + static_cast<uint64_t>(i));
      }
      r.input_tokens = static_cast<int64_t>(r.hash_ids.size()) * kBlock + 3;
      c.requests.push_back(r);
    }
    workload.conversations.push_back(c);
    workload.starts.push_back(TimeNs::Seconds(100 * k));
  }
  return workload;
}

// Once a conversation's agents have all ended, the driver retires the keys only it can name:
// each chain's keys past the shared prefix, and none of the shared ones.
TEST(AgentDriverTest, AnEndedConversationRetiresTheKeysOnlyItCanName) {
  std::unique_ptr<Sim> sim = MakeSim(kv::SessionCloseMode::kDereference, false, kBlock, 1024, 1);
  RetireRecorder recorder(sim->gateway.get());
  const AgenticWorkload workload = SequentialConversations(/*n=*/3, /*own=*/6);
  const AgentDriverOptions options{.shared_prefix_ids = 3};
  StatusOr<AgentDriverResult> result = RunAgentWorkload(&sim->loop, &recorder, workload, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(recorder.retired.size(), 3U);
  const kv::BlockKeyHasher& hasher = sim->gateway->hasher();
  for (size_t k = 0; k < 3; ++k) {
    const std::vector<uint64_t>& last = workload.conversations[k].requests.back().hash_ids;
    const std::vector<kv::BlockKey> keys = DriverKeysOf(hasher, 3, last, k + 1);
    // The last turn extends the others, so its keys past the 3 shared ones are all of them.
    const std::set<kv::BlockKey> want(keys.begin() + 3, keys.end());
    const std::set<kv::BlockKey> got(recorder.retired[k].begin(), recorder.retired[k].end());
    EXPECT_EQ(got, want) << "conversation " << k;
    for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(got.contains(keys[i])) << "shared block " << i;
  }
}

// Many conversations through one small engine: what its miss accounting remembers afterwards is
// bounded by the cache (the retired blocks still cached), not by every conversation's lost keys.
TEST(AgentDriverTest, TheMissAccountingForgetsEndedConversations) {
  constexpr int64_t kCacheBlocks = 64;
  std::unique_ptr<Sim> sim =
      MakeSim(kv::SessionCloseMode::kDereference, false, kBlock, kCacheBlocks, 1);
  const AgenticWorkload workload = SequentialConversations(/*n=*/40, /*own=*/30);
  const AgentDriverResult r = Drive(*sim, workload, {});
  ASSERT_EQ(r.requests_completed, 120);
  const EngineModel& engine = sim->fleet->engine(EngineId(0));
  // 40 conversations of 33 blocks each, all distinct (each conversation chains its ids under its
  // own namespace), went through a 64-block cache: at least 1,256 keys were lost, which the
  // engine would all remember without retirement.
  EXPECT_LE(engine.remembered_keys(), static_cast<size_t>(kCacheBlocks));
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

// On the public WEKA traces, every sub-agent the trace completed before a later parent request
// (all of them are `completed`) runs inside its parent's wait: each of its requests completes
// before the parent's joined request is submitted, and that request records a sub-agent wait.
// Read as spawned at the entry's `t` (its completion) and joined by timing, most of them ran
// after the parent had resumed.
TEST(AgentDriverDataTest, SubagentsOfThePublicTracesRunWhileTheParentWaits) {
  StatusOr<std::vector<WekaConversation>> conversations =
      ReadWekaTraces({(std::filesystem::path(AGENTKV_DATA_DIR) / "weka").string()});
  ASSERT_TRUE(conversations.ok()) << conversations.status();
  AgenticWorkload workload;
  workload.conversations = *std::move(conversations);
  for (size_t k = 0; k < workload.conversations.size(); ++k) {
    workload.starts.push_back(TimeNs::Seconds(60.0 * static_cast<double>(k)));
  }
  std::unique_ptr<Sim> sim = MakeSim(kv::SessionCloseMode::kDereference, /*lifecycle=*/false,
                                     /*block=*/64, /*blocks_per_engine=*/8192);
  const AgentDriverResult r = Drive(*sim, workload, {});
  ASSERT_EQ(r.requests_completed, 1507);
  int64_t joined_requests = 0;
  int64_t inside_wait = 0;
  int64_t subagent_waits = 0;
  for (size_t k = 0; k < workload.conversations.size(); ++k) {
    const WekaConversation& c = workload.conversations[k];
    for (size_t j = 0; j < c.subagents.size(); ++j) {
      const WekaSubagent& sub = c.subagents[j];
      ASSERT_EQ(sub.status, SubagentStatus::kCompleted) << c.source;
      const auto joined =
          std::find_if(c.requests.begin(), c.requests.end(),
                       [&sub](const WekaRequest& q) { return q.t >= sub.completion; });
      if (joined == c.requests.end()) continue;
      const DriverRequest& parent =
          Find(r, static_cast<int64_t>(k) + 1, static_cast<int32_t>(joined - c.requests.begin()));
      ASSERT_GT(joined - c.requests.begin(), 0) << c.source;
      EXPECT_EQ(Find(r, static_cast<int64_t>(k) + 1,
                     static_cast<int32_t>(joined - c.requests.begin()) - 1)
                    .next_pause,
                PauseKind::kSubagentWait)
          << c.source << " " << sub.agent_id;
      for (size_t i = 0; i < sub.requests.size(); ++i) {
        const DriverRequest& q =
            Find(r, (static_cast<int64_t>(k) + 1) * 1000 + static_cast<int64_t>(j) + 1,
                 static_cast<int32_t>(i));
        ++joined_requests;
        if (q.completed.has_value() && *q.completed <= parent.submitted) ++inside_wait;
      }
    }
  }
  for (const DriverRequest& q : r.requests) {
    if (q.next_pause == PauseKind::kSubagentWait) ++subagent_waits;
  }
  // 24 of the 26 sub-agents (264 requests) complete before a later parent request, which they
  // join on 12 requests.
  EXPECT_EQ(subagent_waits, 12);
  EXPECT_EQ(joined_requests, 264);
  EXPECT_EQ(inside_wait, joined_requests);
}

// ---- Start gating (AgenticWorkload::groups / start_after_group) -----------------------------

// `groups` x `per_group` conversations of three requests each (tool gaps of 1-3 s, lengths
// differing per conversation so that their ends differ); conversation i is in group
// i / per_group and gated on group (group - lag), or ungated when that is negative.
AgenticWorkload GatedWorkload(int32_t groups, int32_t per_group, int32_t lag) {
  AgenticWorkload workload;
  for (int32_t g = 0; g < groups; ++g) {
    for (int32_t m = 0; m < per_group; ++m) {
      const int32_t i = g * per_group + m;
      WekaConversation c;
      c.id = "c" + std::to_string(i);
      c.block_size = kBlock;
      const double gap = 1.0 + (i % 3);
      c.requests = {Req(0, 4, 1, 8 + i), Req(gap, 6, 1, 8, gap), Req(2 * gap, 8, 1, 8, gap)};
      workload.conversations.push_back(c);
      workload.starts.push_back(TimeNs(0));
      workload.groups.push_back(g);
      workload.start_after_group.push_back(std::max(-1, g - lag));
    }
  }
  return workload;
}

// Per group: the first submission and the last completion of its requests.
struct GroupSpan {
  TimeNs first_submitted = TimeNs(std::numeric_limits<int64_t>::max());
  TimeNs last_completed;
};

std::vector<GroupSpan> Spans(const AgenticWorkload& workload, const AgentDriverResult& r) {
  std::vector<GroupSpan> spans;
  for (const DriverRequest& q : r.requests) {
    const size_t k = static_cast<size_t>(q.conversation.value() - 1);
    const size_t g = static_cast<size_t>(workload.groups[k]);
    if (spans.size() <= g) spans.resize(g + 1);
    spans[g].first_submitted = std::min(spans[g].first_submitted, q.submitted);
    EXPECT_TRUE(q.completed.has_value());
    spans[g].last_completed = std::max(spans[g].last_completed, *q.completed);
  }
  return spans;
}

TEST(AgentDriverTest, SynchronousGroupsNeverOverlap) {
  const AgenticWorkload workload = GatedWorkload(/*groups=*/3, /*per_group=*/3, /*lag=*/1);
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, workload, {});
  EXPECT_EQ(r.requests_completed, 27);
  const std::vector<GroupSpan> spans = Spans(workload, r);
  ASSERT_EQ(spans.size(), 3u);
  for (size_t g = 1; g < spans.size(); ++g) {
    // Group g begins exactly when group g - 1's last request completed (start 0, t_0 = 0).
    EXPECT_EQ(spans[g].first_submitted, spans[g - 1].last_completed) << g;
  }
  for (size_t k = 3; k < r.conversations.size(); ++k) {
    EXPECT_EQ(r.conversations[k].start, spans[k / 3 - 1].last_completed);
  }
}

TEST(AgentDriverTest, BoundedStalenessGatesOnTheGroupLagPlusOneBack) {
  // Staleness 1: group g waits for group g - 2 (and every earlier one) only.
  const AgenticWorkload workload = GatedWorkload(/*groups=*/4, /*per_group=*/2, /*lag=*/2);
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, workload, {});
  EXPECT_EQ(r.requests_completed, 24);
  const std::vector<GroupSpan> spans = Spans(workload, r);
  ASSERT_EQ(spans.size(), 4u);
  // Groups 0 and 1 start at once, so they overlap: the gate is not the synchronous one.
  EXPECT_EQ(spans[0].first_submitted, TimeNs(0));
  EXPECT_EQ(spans[1].first_submitted, TimeNs(0));
  for (size_t g = 2; g < spans.size(); ++g) {
    TimeNs ended;  // Every group <= g - 2 has ended.
    for (size_t e = 0; e + 2 <= g; ++e) ended = std::max(ended, spans[e].last_completed);
    EXPECT_EQ(spans[g].first_submitted, ended) << g;
    // At most two groups in flight: group g starts before group g - 1 ended.
    EXPECT_LT(spans[g].first_submitted, spans[g - 1].last_completed) << g;
  }
}

TEST(AgentDriverTest, AGatedConversationKeepsALaterStart) {
  AgenticWorkload workload = GatedWorkload(/*groups=*/2, /*per_group=*/1, /*lag=*/1);
  workload.starts[1] = TimeNs::Seconds(1000);
  std::unique_ptr<Sim> sim = MakeSim();
  const AgentDriverResult r = Drive(*sim, workload, {});
  EXPECT_EQ(r.conversations[1].start, TimeNs::Seconds(1000));
}

TEST(AgentDriverTest, RejectsMalformedGates) {
  std::unique_ptr<Sim> sim = MakeSim();
  AgenticWorkload workload = GatedWorkload(2, 2, 1);
  workload.groups.pop_back();
  EXPECT_FALSE(AgentDriver::Create(&sim->loop, sim->gateway.get(), &workload, {}).ok());
  workload = GatedWorkload(2, 2, 1);
  workload.start_after_group[3] = 1;  // Its own group: it would wait for itself.
  StatusOr<std::unique_ptr<AgentDriver>> driver =
      AgentDriver::Create(&sim->loop, sim->gateway.get(), &workload, {});
  ASSERT_FALSE(driver.ok());
  EXPECT_NE(driver.status().message().find("conversations[3] is in group 1 gated on group 1"),
            std::string::npos)
      << driver.status();
  workload = GatedWorkload(2, 2, 1);
  workload.groups[0] = -1;
  workload.start_after_group[0] = -1;
  EXPECT_FALSE(AgentDriver::Create(&sim->loop, sim->gateway.get(), &workload, {}).ok());
}

}  // namespace
}  // namespace agentkv::sim
