// Tests of the instant replay's workload sources: an open-loop trace in the order given, the merged
// timeline of agentic conversations (ids, ties, saturation, keys namespaced per conversation, the
// session each request ends) and its staggered starts.
#include "agentkv/sim/instant_sources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/kv/block_key.h"
#include "weka_builders.h"

namespace agentkv::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kBlockTokens = 64;

WekaRequest Request(double t_s, std::vector<uint64_t> ids) {
  WekaRequest r;
  r.t = TimeNs(static_cast<int64_t>(t_s * 1e9));
  r.input_tokens = static_cast<int64_t>(ids.size()) * kBlockTokens + 10;
  r.output_tokens = 1;
  r.hash_ids = std::move(ids);
  return r;
}

using testing_support::Conversation;
using testing_support::Subagent;

// ---- Open loop -----------------------------------------------------------------------------

TEST(InstantSourcesTest, OpenLoopInOrderKeepsTheOrderGivenAndChainsKeys) {
  std::vector<OpenLoopRequest> trace(2);
  trace[0].arrival = TimeNs::Millis(5);
  trace[0].prompt_tokens = 700;
  trace[0].hash_ids = {7, 8};
  trace[1].arrival = TimeNs::Millis(1);  // Earlier, yet second: file order, not time order.
  trace[1].prompt_tokens = 100;
  trace[1].hash_ids = {8};
  const InstantWorkload w = OpenLoopInOrder(trace, 512);
  EXPECT_EQ(w.tokens_per_block, 512);
  ASSERT_EQ(w.requests.size(), 2u);
  const kv::BlockKeyHasher hasher(0);
  EXPECT_EQ(w.requests[0].keys, hasher.KeysFromBlockIds(std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(w.requests[1].keys, hasher.KeysFromBlockIds(std::vector<uint64_t>{8}));
  // Id 8 after 7 is another block than id 8 first.
  EXPECT_NE(w.requests[0].keys[1], w.requests[1].keys[0]);
  EXPECT_EQ(w.requests[0].time, TimeNs::Millis(5));
  EXPECT_EQ(w.requests[0].options.prompt_tokens, 700);
  EXPECT_FALSE(w.requests[0].options.session.has_value());
  EXPECT_FALSE(w.requests[0].options.conversation.has_value());
  EXPECT_FALSE(w.requests[1].ends_session);
}

// ---- Ids ----------------------------------------------------------------------------------

TEST(InstantSourcesTest, ConversationIds) {
  EXPECT_EQ(AgenticConversationId(0), ConversationId(1));
  EXPECT_EQ(AgenticConversationId(4), ConversationId(5));
  EXPECT_EQ(AgenticConversationId(0, 0), ConversationId(1001));
  EXPECT_EQ(AgenticConversationId(2, 4), ConversationId(3005));
  EXPECT_EQ(AgenticConversationId(998, 998), ConversationId(999'999));
}

// ---- The timeline -------------------------------------------------------------------------

TEST(InstantSourcesTest, ScheduleMergesByTimeWithDeterministicTies) {
  // Conversation 0 at 0 s: main at 0, 5, 10; sub-agent 0 spawned at 2 runs at 2 and 5 (a tie
  // with the main agent); sub-agent 1 spawned at 5 runs at 5 (a tie with both).
  // Conversation 1 at 10 s: main at 10 (a tie with conversation 0's third request).
  const std::vector<WekaConversation> conversations = {
      Conversation("a", {Request(0, {1}), Request(5, {1}), Request(10, {1})},
                   {Subagent("s0", 2, {Request(0, {9}), Request(3, {9})}),
                    Subagent("s1", 5, {Request(0, {9})})}),
      Conversation("b", {Request(0, {1})}),
  };
  const std::vector<AgenticScheduleEntry> schedule =
      BuildAgenticSchedule(conversations, TimeNs::Seconds(10));
  const auto at = [](int64_t s, int32_t c, int32_t sub, int32_t r, bool last) {
    return AgenticScheduleEntry{TimeNs::Seconds(static_cast<double>(s)), c, sub, r, last};
  };
  EXPECT_THAT(schedule,
              ElementsAre(at(0, 0, -1, 0, false), at(2, 0, 0, 0, false), at(5, 0, -1, 1, false),
                          at(5, 0, 0, 1, true), at(5, 0, 1, 0, true), at(10, 0, -1, 2, true),
                          at(10, 1, -1, 0, true)));
}

// A sub-agent entry's `t` is its completion: its requests run from completion - duration.
TEST(InstantSourcesTest, SubagentRequestsRunFromTheSpawnNotTheCompletion) {
  WekaConversation c = Conversation("a", {Request(0, {1}), Request(100, {1})});
  WekaSubagent s;
  s.agent_id = "s";
  s.completion = TimeNs::Seconds(95);
  s.duration = TimeNs::Seconds(90);
  s.requests = {Request(0, {9}), Request(7, {9})};
  c.subagents = {s};
  const std::vector<AgenticScheduleEntry> schedule = BuildAgenticSchedule({c}, TimeNs());
  std::vector<std::pair<TimeNs, int32_t>> order;
  for (const AgenticScheduleEntry& e : schedule) order.emplace_back(e.time, e.subagent);
  EXPECT_THAT(order,
              ElementsAre(std::pair{TimeNs(0), -1}, std::pair{TimeNs::Seconds(5), 0},
                          std::pair{TimeNs::Seconds(12), 0}, std::pair{TimeNs::Seconds(100), -1}));
}

TEST(InstantSourcesTest, ScheduleDoesNotDependOnFileOrderOfEqualTimes) {
  // A main agent whose requests are listed out of time order still runs by time.
  const std::vector<WekaConversation> conversations = {
      Conversation("a", {Request(3, {1}), Request(1, {1})})};
  const std::vector<AgenticScheduleEntry> schedule =
      BuildAgenticSchedule(conversations, TimeNs::Seconds(60));
  ASSERT_EQ(schedule.size(), 2u);
  EXPECT_EQ(schedule[0].request, 1);
  EXPECT_FALSE(schedule[0].last_of_conversation);
  EXPECT_EQ(schedule[1].request, 0);
  EXPECT_TRUE(schedule[1].last_of_conversation);
}

// Staggers times many conversations and times near the end of int64 saturate, keeping the
// schedule in order instead of wrapping a late conversation to the front.
TEST(InstantSourcesTest, ScheduleTimesSaturateAtTheEndOfTime) {
  constexpr TimeNs kEnd(std::numeric_limits<int64_t>::max());
  const int64_t q = kEnd.ns() / 3;
  std::vector<WekaConversation> conversations(5, Conversation("a", {Request(0, {1})}));
  conversations[1].requests[0].t = TimeNs(kEnd.ns() - 1);
  conversations[2].subagents = {Subagent("s", 0, {Request(0, {9})})};
  conversations[2].subagents[0].completion = kEnd;
  conversations[2].subagents[0].duration = TimeNs(0);
  // Conversation k starts at k * q: 4q passes int64 and saturates.
  const std::vector<AgenticScheduleEntry> schedule = BuildAgenticSchedule(conversations, TimeNs(q));
  std::vector<std::pair<TimeNs, int32_t>> order;
  for (const AgenticScheduleEntry& e : schedule) order.emplace_back(e.time, e.conversation);
  EXPECT_THAT(order, ElementsAre(std::pair{TimeNs(0), 0}, std::pair{TimeNs(2 * q), 2},
                                 std::pair{TimeNs(3 * q), 3}, std::pair{kEnd, 1},
                                 std::pair{kEnd, 2}, std::pair{kEnd, 4}));
}

TEST(InstantSourcesTest, StaggeredStartsSaturate) {
  EXPECT_THAT(StaggeredStarts(3, TimeNs::Seconds(2)),
              ElementsAre(TimeNs(0), TimeNs::Seconds(2), TimeNs::Seconds(4)));
  EXPECT_TRUE(StaggeredStarts(0, TimeNs::Seconds(1)).empty());
  const TimeNs end(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(StaggeredStarts(3, TimeNs(end.ns() / 2 + 1)).back(), end);
}

TEST(InstantSourcesTest, MergedScheduleUsesTheWorkloadsStarts) {
  // Conversation 1 starts before conversation 0: its request runs first.
  const std::vector<WekaConversation> conversations = {Conversation("a", {Request(0, {1})}),
                                                       Conversation("b", {Request(0, {1})})};
  const std::vector<TimeNs> starts = {TimeNs::Seconds(9), TimeNs::Seconds(3)};
  const std::vector<AgenticScheduleEntry> schedule = MergedSchedule(conversations, starts);
  ASSERT_EQ(schedule.size(), 2u);
  EXPECT_EQ(schedule[0].conversation, 1);
  EXPECT_EQ(schedule[0].time, TimeNs::Seconds(3));
  EXPECT_EQ(schedule[1].conversation, 0);
}

// ---- The merged timeline as an instant workload -------------------------------------------

TEST(InstantSourcesTest, MergedTimelineCarriesIdsKeysAndSessionEnds) {
  AgenticWorkload workload;
  workload.conversations = {
      Conversation("a.json", {Request(0, {1, 2}), Request(5, {1, 2, 3})},
                   {Subagent("agent_001", 2, {Request(0, {11})})}),
      Conversation("b.json", {Request(0, {1, 2})}),
  };
  workload.starts = {TimeNs(0), TimeNs::Seconds(1)};
  StatusOr<InstantWorkload> w = MergedTimeline(workload);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->tokens_per_block, 64);
  // a0 at 0 s, b0 at 1 s, the sub-agent at 2 s, a1 at 5 s.
  ASSERT_EQ(w->requests.size(), 4u);
  const kv::BlockKeyHasher hasher(0);
  const InstantRequest& a0 = w->requests[0];
  const InstantRequest& b0 = w->requests[1];
  const InstantRequest& sub = w->requests[2];
  const InstantRequest& a1 = w->requests[3];
  EXPECT_EQ(a0.keys, hasher.KeysFromBlockIds(std::vector<uint64_t>{1, 2}, 1));
  // The same ids in another file are other blocks.
  EXPECT_EQ(b0.keys, hasher.KeysFromBlockIds(std::vector<uint64_t>{1, 2}, 2));
  EXPECT_NE(a0.keys, b0.keys);
  // A sub-agent shares its parent's namespace.
  EXPECT_EQ(sub.keys, hasher.KeysFromBlockIds(std::vector<uint64_t>{11}, 1));
  EXPECT_EQ(a0.options.session, SessionId(1));
  EXPECT_EQ(a0.options.conversation, ConversationId(1));
  EXPECT_FALSE(a0.options.parent_conversation.has_value());
  EXPECT_EQ(b0.options.session, SessionId(2));
  EXPECT_EQ(sub.options.session, SessionId(1001));
  EXPECT_EQ(sub.options.conversation, ConversationId(1001));
  EXPECT_EQ(sub.options.parent_conversation, ConversationId(1));
  EXPECT_TRUE(sub.options.parent_hint_authenticated);
  EXPECT_EQ(a0.options.prompt_tokens, 2 * kBlockTokens + 10);
  EXPECT_EQ(sub.time, TimeNs::Seconds(2));
  EXPECT_FALSE(a0.ends_session);
  EXPECT_TRUE(b0.ends_session);
  EXPECT_TRUE(sub.ends_session);
  EXPECT_TRUE(a1.ends_session);
  // The gap-aware order's hints: a0 is followed by the wait for its sub-agent (completed at
  // 2 s, before a1 at 5 s); every last request ends its session.
  EXPECT_EQ(a0.options.next_pause, PauseKind::kSubagentWait);
  EXPECT_EQ(b0.options.next_pause, PauseKind::kSessionEnd);
  EXPECT_EQ(sub.options.next_pause, PauseKind::kSessionEnd);
  EXPECT_EQ(a1.options.next_pause, PauseKind::kSessionEnd);
  ASSERT_TRUE(w->describe);
  EXPECT_EQ(w->describe(2), "a.json sub-agent agent_001 request 0");
  EXPECT_EQ(w->describe(3), "a.json request 1");
}

TEST(InstantSourcesTest, MergedTimelineGivesEachRequestTheOutputKeysItsNextTurnReuses) {
  // a0: 138 prompt tokens + 200 output tokens, KV of 337 tokens = 5 full blocks; a1 extends
  // a0's ids and re-sends blocks 2-4 of the answer. a1 -> a2 does not extend (a rewrite).
  WekaRequest a0 = Request(0, {1, 2});
  a0.output_tokens = 200;
  WekaRequest a1 = Request(5, {1, 2, 3, 4, 5, 6});
  a1.output_tokens = 200;
  AgenticWorkload workload;
  workload.conversations = {
      Conversation("a.json", {a0, a1, Request(9, {7, 8, 9, 10, 11, 12, 13})},
                   {Subagent("agent_001", 2, {Request(0, {11})})}),
  };
  workload.starts = {TimeNs(0)};
  StatusOr<InstantWorkload> w = MergedTimeline(workload);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->requests.size(), 4u);
  const kv::BlockKeyHasher hasher(0);
  const std::vector<kv::BlockKey> a1_keys =
      hasher.KeysFromBlockIds(std::vector<uint64_t>{1, 2, 3, 4, 5, 6}, 1);
  EXPECT_EQ(w->requests[0].output_keys,
            std::vector<kv::BlockKey>(a1_keys.begin() + 2, a1_keys.begin() + 5));
  // The sub-agent's only request, a1 (not extended by a2) and a2 (the last) have none.
  EXPECT_THAT(w->requests[1].output_keys, ::testing::IsEmpty());
  EXPECT_THAT(w->requests[2].output_keys, ::testing::IsEmpty());
  EXPECT_THAT(w->requests[3].output_keys, ::testing::IsEmpty());
}

TEST(InstantSourcesTest, MergedTimelineRefusesWhatCannotShareOneCache) {
  const std::vector<WekaConversation> none;
  EXPECT_EQ(MergedTimeline(none, {}).status().message(), "no conversations to replay");
  std::vector<WekaConversation> mixed = {Conversation("a.json", {Request(0, {1})}),
                                         Conversation("b.json", {Request(0, {1})})};
  mixed[1].block_size = 32;
  const std::vector<TimeNs> starts(2);
  EXPECT_EQ(MergedTimeline(mixed, starts).status().message(),
            "all traces of one replay need the same block_size: a.json has 64, b.json has 32");
  const std::vector<WekaConversation> many(kMaxAgenticConversations + 1,
                                           Conversation("c", {Request(0, {1})}));
  EXPECT_THAT(MergedTimeline(many, std::vector<TimeNs>(many.size())).status().message(),
              HasSubstr("at most 999 conversations"));
}

TEST(InstantSourcesTest, MergedTimelineHintsToolCallsAndHumanTurnsAsTheDriverClassifiesThem) {
  WekaRequest tool = Request(0, {1});
  tool.stop = "tool_use";
  WekaRequest turn_end = Request(5, {1, 2});
  turn_end.stop = "end_turn";
  AgenticWorkload workload;
  workload.conversations = {Conversation("a.json", {tool, turn_end, Request(60, {1, 2, 3})})};
  workload.starts = {TimeNs(0)};
  StatusOr<InstantWorkload> w = MergedTimeline(workload);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->requests[0].options.next_pause, PauseKind::kToolCall);
  EXPECT_EQ(w->requests[1].options.next_pause, PauseKind::kHumanTurn);
  EXPECT_EQ(w->requests[2].options.next_pause, PauseKind::kSessionEnd);
}

}  // namespace
}  // namespace agentkv::sim
