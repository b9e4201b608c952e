// Scenario tests of ConversationRetention (conversation_retention.h), driven through
// KvCacheManager: per-conversation retention records (TensorRT-LLM
// block_reuse_config.policy = per_conversation, max_num_turns): the cache keeps a record of
// each of a conversation's last max_num_turns turns, and when a record falls out, the blocks
// that turn computed itself and that no newer turn of the conversation, no other
// conversation's retained record, no running request and no other path uses are released
// (kReleased events, retention_dropped_blocks). Under policy default no records are kept.
#include "agentkv/kv/conversation_retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "block_cache_harness.h"
#include "kv_cache_manager_fixture.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using testing_internal::Concat;
using testing_internal::Ev;
using testing_internal::Matched;
using testing_internal::Opts;
using testing_internal::Tokens;

constexpr int64_t kConversation = 7;
constexpr int64_t kOther = 8;

class KvCacheConversationTest : public KvCacheManagerTest {
 protected:
  static KvCacheOptions ConversationOptions(int64_t device_blocks, int64_t host_blocks,
                                            int32_t max_num_turns = 1) {
    KvCacheOptions o = Options(device_blocks, host_blocks);
    o.block_reuse_policy = BlockReusePolicy::kPerConversation;
    o.max_num_turns = max_num_turns;
    return o;
  }

  PrefixMatch Turn(int64_t id, int64_t conversation, const std::vector<BlockKey>& keys,
                   int64_t tokens) {
    return RunRequestWith(id, keys, tokens, Opts().Conversation(conversation));
  }

  // The shared history prefix of every turn below, and its two blocks.
  const std::vector<int32_t> history_ = Tokens(100, 8);
};

TEST_F(KvCacheConversationTest, FallenRecordReleasesTheBlocksNoNewerTurnReuses) {
  Build(ConversationOptions(16, 0));
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 8)));  // h0 h1 a2 a3
  const std::vector<BlockKey> t2 = Keys(Concat(history_, Tokens(300, 4)));  // h0 h1 b2
  Turn(1, kConversation, t1, 16);
  EXPECT_EQ(AdmitWith(2, t2, Opts().Prompt(12).Conversation(kConversation)), Matched(2, 0));
  Reserve(2, 12);
  Commit(2, std::vector<BlockKey>{t2[2]});
  Events();
  // Turn 1's record falls out when turn 2 ends, not when it starts.
  EXPECT_EQ(cache().Match(t1), Matched(4, 0));
  Finish(2);

  // Deepest first; the history turn 2 reused stays.
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kReleased, t1[3], Tier::kDevice),
                                    Ev(KvEventKind::kReleased, t1[2], Tier::kDevice)));
  EXPECT_EQ(cache().Match(t1), Matched(2, 0));
  EXPECT_EQ(cache().Match(t2), Matched(3, 0));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.retention_dropped_blocks, 2);
  EXPECT_EQ(s.device.cached, 3);
  EXPECT_EQ(s.drops, 0);  // a release is no eviction
  EXPECT_EQ(s.device_evictions, 0);
}

TEST_F(KvCacheConversationTest, TurnThatReusesTheWholePreviousTurnReleasesNothing) {
  Build(ConversationOptions(16, 0));
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 4)));
  const std::vector<BlockKey> t2 = Keys(Concat(Concat(history_, Tokens(200, 4)), Tokens(300, 8)));
  Turn(1, kConversation, t1, 12);
  EXPECT_EQ(Turn(2, kConversation, t2, 20), Matched(3, 0));
  EXPECT_EQ(cache().Match(t2), Matched(5, 0));
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 0);
}

TEST_F(KvCacheConversationTest, BlocksAnEarlierTurnComputedAreReleasedWhenNoLongerReused) {
  // a2 was computed by turn 1 and reused by turn 2; when turn 2's record falls out and turn 3
  // no longer reuses it, it is still the conversation's own block and goes with x3.
  Build(ConversationOptions(16, 0));
  const std::vector<int32_t> first = Concat(history_, Tokens(200, 4));
  const std::vector<BlockKey> t2 = Keys(Concat(first, Tokens(300, 4)));  // h0 h1 a2 x3
  Turn(1, kConversation, Keys(first), 12);
  EXPECT_EQ(Turn(2, kConversation, t2, 16), Matched(3, 0));
  Events();
  Turn(3, kConversation, Keys(Concat(history_, Tokens(400, 4))), 12);  // h0 h1 y2
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kReleased), ElementsAre(t2[3], t2[2]));
  EXPECT_EQ(cache().Match(t2), Matched(2, 0));
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 2);
}

TEST_F(KvCacheConversationTest, BlockAnotherConversationRetainsSurvives) {
  Build(ConversationOptions(16, 0));
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 4)));  // h0 h1 a2
  const std::vector<BlockKey> t2 = Keys(Concat(history_, Tokens(300, 4)));  // h0 h1 b2
  Turn(1, kConversation, t1, 12);
  EXPECT_EQ(Turn(2, kOther, t1, 12), Matched(3, 0));  // retains a2, computed nothing
  Turn(3, kConversation, t2, 12);
  EXPECT_EQ(cache().FindTier(t1[2]), Tier::kDevice);
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 0);

  // When the other conversation's record falls out, a2 is not its own block to release.
  Turn(4, kOther, Keys(Tokens(900, 4)), 4);
  EXPECT_EQ(cache().FindTier(t1[2]), Tier::kDevice);
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 0);
}

TEST_F(KvCacheConversationTest, BlockARunningRequestHoldsSurvives) {
  Build(ConversationOptions(16, 0));
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 4)));
  const std::vector<BlockKey> t2 = Keys(Concat(history_, Tokens(300, 4)));
  Turn(1, kConversation, t1, 12);
  EXPECT_EQ(Admit(2, t1, 12), Matched(3, 0));  // no conversation, holds a2
  Turn(3, kConversation, t2, 12);
  EXPECT_EQ(cache().FindTier(t1[2]), Tier::kDevice);
  Finish(2);
  // The record is gone: nothing releases a2 later either.
  EXPECT_EQ(cache().FindTier(t1[2]), Tier::kDevice);
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 0);
}

TEST_F(KvCacheConversationTest, BlockAnotherPathExtendsSurvives) {
  Build(ConversationOptions(16, 0));
  const std::vector<int32_t> first = Concat(history_, Tokens(200, 4));
  const std::vector<BlockKey> t1 = Keys(first);
  Turn(1, kConversation, t1, 12);
  RunRequest(2, Keys(Concat(first, Tokens(800, 4))), 16);  // no conversation: extends a2
  Turn(3, kConversation, Keys(Concat(history_, Tokens(300, 4))), 12);
  EXPECT_EQ(cache().FindTier(t1[2]), Tier::kDevice);
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 0);
}

TEST_F(KvCacheConversationTest, PrefixTheConversationReusedIsNotItsToRelease) {
  Build(ConversationOptions(16, 0));
  const std::vector<BlockKey> system = Keys(history_);
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 4)));
  RunRequest(1, system, 8);  // no conversation computed the system prompt
  EXPECT_EQ(Turn(2, kConversation, t1, 12), Matched(2, 0));
  Events();
  Turn(3, kConversation, Keys(Tokens(900, 4)), 4);  // an unrelated next turn
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kReleased), ElementsAre(t1[2]));
  EXPECT_EQ(cache().Match(system), Matched(2, 0));
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 1);
}

TEST_F(KvCacheConversationTest, FallenRecordReleasesHostBlocksToo) {
  Build(ConversationOptions(4, 4));
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 4)));
  Turn(1, kConversation, t1, 12);
  RunRequest(2, Keys(Tokens(900, 8)), 8);  // offloads a2, the least recently used leaf
  ASSERT_EQ(cache().Match(t1), Matched(2, 1));
  Events();
  Turn(3, kConversation, Keys(Concat(history_, Tokens(300, 4))), 12);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kReleased), ElementsAre(t1[2]));
  EXPECT_EQ(cache().FindTier(t1[2]), std::nullopt);
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 1);
}

// ---- max_num_turns 1 and 2 over one turn sequence -------------------------------------------

struct TurnTableCase {
  int32_t max_num_turns;
  // Per turn, the names of the blocks released when it ends.
  std::vector<std::vector<std::string>> released;
};

class KvCacheTurnTableTest : public KvCacheConversationTest,
                             public ::testing::WithParamInterface<TurnTableCase> {};

TEST_P(KvCacheTurnTableTest, RecordsOfTheLastTurnsAreKept) {
  Build(ConversationOptions(16, 0, GetParam().max_num_turns));
  // Turns: t1 = h0 h1 a2 | t2 = h0 h1 b2 b3 | t3 = h0 h1 b2 c3 | t4 = h0 h1 b2 c3 d4.
  const std::vector<int32_t> b = Concat(history_, Tokens(300, 4));
  const std::vector<int32_t> c = Concat(b, Tokens(400, 4));
  const std::vector<std::vector<int32_t>> turns = {
      Concat(history_, Tokens(200, 4)), Concat(b, Tokens(350, 4)), c, Concat(c, Tokens(500, 4))};
  const std::vector<BlockKey> a2 = Keys(turns[0]), b3 = Keys(turns[1]), d4 = Keys(turns[3]);
  const auto name_of = [&](BlockKey k) -> std::string {
    if (k == a2[2]) return "a2";
    if (k == b3[2]) return "b2";
    if (k == b3[3]) return "b3";
    if (k == d4[3]) return "c3";
    if (k == d4[4]) return "d4";
    return "h";
  };
  for (size_t t = 0; t < turns.size(); ++t) {
    SCOPED_TRACE("turn " + std::to_string(t + 1));
    Events();
    Turn(static_cast<int64_t>(t + 1), kConversation, Keys(turns[t]),
         static_cast<int64_t>(turns[t].size()));
    std::vector<std::string> released;
    for (const BlockKey k : KeysOf(Events(), KvEventKind::kReleased)) {
      released.push_back(name_of(k));
    }
    EXPECT_THAT(released, ElementsAreArray(GetParam().released[t]));
  }
  int64_t total = 0;
  for (const auto& r : GetParam().released) total += static_cast<int64_t>(r.size());
  EXPECT_EQ(cache().stats().retention_dropped_blocks, total);
  EXPECT_EQ(cache().Match(d4), Matched(5, 0));
}

INSTANTIATE_TEST_SUITE_P(MaxNumTurns, KvCacheTurnTableTest,
                         ::testing::Values(TurnTableCase{1, {{}, {"a2"}, {"b3"}, {}}},
                                           TurnTableCase{2, {{}, {}, {"a2"}, {"b3"}}},
                                           TurnTableCase{4, {{}, {}, {}, {}}}),
                         [](const ::testing::TestParamInfo<TurnTableCase>& c) {
                           return "Keep" + std::to_string(c.param.max_num_turns);
                         });

TEST_F(KvCacheConversationTest, DefaultPolicyKeepsNoRecords) {
  Build(Options(16, 0));  // block_reuse_policy default
  const std::vector<BlockKey> t1 = Keys(Concat(history_, Tokens(200, 8)));
  const std::vector<BlockKey> t2 = Keys(Concat(history_, Tokens(300, 4)));
  Turn(1, kConversation, t1, 16);
  Events();
  Turn(2, kConversation, t2, 12);
  Turn(3, kConversation, Keys(Tokens(900, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kReleased), IsEmpty());
  EXPECT_EQ(cache().Match(t1), Matched(4, 0));
  EXPECT_EQ(cache().Match(t2), Matched(3, 0));
  EXPECT_EQ(cache().stats().retention_dropped_blocks, 0);
  EXPECT_TRUE(cache().PlanCommittedRetention(ConversationId(kConversation)).empty());
}

// ---- ConversationRetention directly over a BlockCache ------------------------------------

using testing_internal::BlockCacheHarness;

KvCacheOptions PerConversation(int32_t max_num_turns) {
  KvCacheOptions o = BlockCacheHarness::Options(16);
  o.block_reuse_policy = BlockReusePolicy::kPerConversation;
  o.max_num_turns = max_num_turns;
  return o;
}

// Runs one turn of `conversation` over `keys` and records it, as KvCacheManager does.
void RunTurn(BlockCacheHarness& h, ConversationRetention& records, int64_t id,
             ConversationId conversation, const std::vector<BlockKey>& keys) {
  h.Start(id, keys);
  const CommittedChain chain = h.ChainOf(id);
  h.Finish(id);
  records.RecordTurn(conversation, chain, h.cache());
  h.CheckInvariants();
  const Status s = records.CheckInvariants();
  ASSERT_TRUE(s.ok()) << s;
}

TEST(ConversationRetentionUnitTest, UnderPolicyDefaultNothingIsRecorded) {
  const KvCacheOptions o = BlockCacheHarness::Options(16);
  BlockCacheHarness h(o);
  ConversationRetention records(o);
  EXPECT_FALSE(records.enabled());
  RunTurn(h, records, 1, ConversationId(1), h.Chain(1, 2));
  EXPECT_TRUE(records.Plan(ConversationId(1), h.cache()).empty());
}

TEST(ConversationRetentionUnitTest, AFallenTurnReleasesTheBlocksItComputed) {
  const KvCacheOptions o = PerConversation(1);
  BlockCacheHarness h(o);
  ConversationRetention records(o);
  const std::vector<BlockKey> first = h.Chain(1, 2);
  RunTurn(h, records, 1, ConversationId(1), first);
  RunTurn(h, records, 2, ConversationId(1), h.Chain(100, 1));
  EXPECT_FALSE(h.cache().Find(first[0]).has_value());
  EXPECT_FALSE(h.cache().Find(first[1]).has_value());
  EXPECT_EQ(records.counters().retention_dropped_blocks, 2);
}

TEST(ConversationRetentionUnitTest, PlanStopsAtAForkAndApplySetsThePriority) {
  const KvCacheOptions o = PerConversation(2);
  BlockCacheHarness h(o);
  ConversationRetention records(o);
  const std::vector<BlockKey> own = h.Chain(1, 3);
  RunTurn(h, records, 1, ConversationId(1), own);
  // Another conversation extends own[1] with a block of its own: a fork.
  std::vector<BlockKey> other(own.begin(), own.begin() + 2);
  other.push_back(BlockKeyHasher::TokenBlockKey(own[1], std::vector<int32_t>{70, 71, 72, 73}));
  RunTurn(h, records, 2, ConversationId(2), other);
  const CommittedRetentionHandle handle = records.Plan(ConversationId(1), h.cache());
  EXPECT_EQ(handle.conversation(), ConversationId(1));
  EXPECT_THAT(handle.keys(), ElementsAre(own[2]));
  std::vector<BlockKey> applied;
  EXPECT_EQ(ConversationRetention::Apply(handle, 5, h.cache(), &applied), 1);
  EXPECT_THAT(applied, ElementsAre(own[2]));
  EXPECT_EQ(*h.cache().GetPriority(own[2]), 5);
  EXPECT_EQ(*h.cache().GetPriority(own[1]), kDefaultPriority);
  h.CheckInvariants();
}

}  // namespace
}  // namespace agentkv::kv
