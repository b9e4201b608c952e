// Scenario tests of KvCacheManager's request path: prefix matching, the request lifecycle
// (admit, reserve, commit, release), committed-block sharing and partial blocks, Reset, the
// event log, error statuses, determinism and metadata size. Eviction and retention scenarios
// live in block_cache_eviction_test.cc and block_cache_retention_test.cc.
#include "agentkv/kv/kv_cache_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kv_cache_manager_fixture.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_internal::Concat;
using testing_internal::Ev;
using testing_internal::From;
using testing_internal::Matched;
using testing_internal::Opts;
using testing_internal::Tokens;
using testing_internal::WholePrompt;

// ---- Matching -----------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, HitMissAndPartialPrefixMatch) {
  Build(16, 0);
  const std::vector<int32_t> a = Tokens(0, 12);
  const std::vector<BlockKey> ka = Keys(a);
  ASSERT_EQ(ka.size(), 3u);

  EXPECT_EQ(RunRequest(1, ka, 12), Matched(0, 0));  // cold miss
  EXPECT_EQ(cache().Match(ka), Matched(3, 0));      // full hit

  // Shares the first two blocks with `a`, then diverges.
  const std::vector<int32_t> b = Concat(Tokens(0, 8), Tokens(500, 12));
  const std::vector<BlockKey> kb = Keys(b);
  ASSERT_EQ(kb.size(), 5u);
  EXPECT_EQ(cache().Match(kb), Matched(2, 0));
  EXPECT_EQ(cache().Match(Keys(Tokens(1000, 12))), Matched(0, 0));

  // Match has no side effects.
  const KvCacheStats before = cache().stats();
  EXPECT_EQ(cache().Match(kb), Matched(2, 0));
  EXPECT_EQ(cache().stats(), before);

  EXPECT_EQ(Admit(2, kb, 20), Matched(2, 0));
  Reserve(2, 20);
  Commit(2, From(kb, 2));
  Finish(2);
  EXPECT_EQ(cache().Match(kb), Matched(5, 0));
  EXPECT_EQ(cache().Match(ka), Matched(3, 0));

  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.lookups, 2);
  EXPECT_EQ(s.lookup_blocks, 3 + 5);
  EXPECT_EQ(s.matched_device_blocks, 2);
  EXPECT_EQ(s.matched_device_tokens, 8);
  EXPECT_EQ(s.matched_host_blocks, 0);
  EXPECT_EQ(s.uncached_tokens, 12 + (20 - 8));
  EXPECT_EQ(s.stored_blocks, 3 + 3);
  EXPECT_EQ(s.device.cached, 6);
  EXPECT_EQ(s.device.evictable, 6);
  EXPECT_EQ(s.device.free, 10);
}

TEST_F(KvCacheManagerTest, OnlyFullBlocksMatchSoMatchesArePageAligned) {
  // SGLang's page-aligned cases: (page size, tokens) -> matched tokens.
  struct Case {
    int32_t tokens_per_block;
    int32_t tokens;
    int64_t matched_tokens;
  };
  for (const Case c : {Case{1, 5, 5}, Case{2, 5, 4}, Case{4, 6, 4}}) {
    SCOPED_TRACE(testing::Message() << "page " << c.tokens_per_block << " tokens " << c.tokens);
    Build(Options(16, 0, c.tokens_per_block));
    const std::vector<int32_t> prompt = Tokens(0, c.tokens);
    RunRequest(1, Keys(prompt), c.tokens);
    EXPECT_EQ(cache().stats().stored_blocks, c.matched_tokens / c.tokens_per_block);
    EXPECT_EQ(cache().stats().device.cached, c.matched_tokens / c.tokens_per_block);

    // A longer prompt with the same first `tokens` tokens reuses only the full blocks: the
    // tokens of the trailing partial block are recomputed.
    const std::vector<int32_t> longer = Concat(prompt, Tokens(100, 3));
    const std::vector<BlockKey> keys = Keys(longer);
    EXPECT_EQ(cache().Match(keys).device_blocks * c.tokens_per_block, c.matched_tokens);
    const PrefixMatch m = Admit(2, keys, static_cast<int64_t>(longer.size()));
    EXPECT_EQ(m.device_blocks * c.tokens_per_block, c.matched_tokens);
    EXPECT_EQ(cache().stats().matched_device_tokens, c.matched_tokens);
    EXPECT_EQ(cache().stats().uncached_tokens,
              c.tokens + static_cast<int64_t>(longer.size()) - c.matched_tokens);
    Finish(2);
  }
}

TEST_F(KvCacheManagerTest, DifferentExtraKeysNeverShareBlocks) {
  Build(16, 0);
  const std::vector<int32_t> tokens = Tokens(0, 8);
  const std::vector<BlockKey> salted1 = Keys(tokens, /*extra_key=*/1);
  const std::vector<BlockKey> salted2 = Keys(tokens, /*extra_key=*/2);
  const std::vector<BlockKey> plain = Keys(tokens);

  RunRequest(1, salted1, 8);
  EXPECT_EQ(cache().Match(salted1), Matched(2, 0));
  EXPECT_EQ(cache().Match(salted2), Matched(0, 0));
  EXPECT_EQ(cache().Match(plain), Matched(0, 0));
  EXPECT_EQ(RunRequest(2, salted2, 8), Matched(0, 0));
  EXPECT_EQ(RunRequest(3, plain, 8), Matched(0, 0));
  EXPECT_EQ(cache().stats().device.cached, 6);
  EXPECT_EQ(cache().stats().stored_blocks, 6);

  // The salt enters through the chain's root only (vLLM: cache_salt in block 0 only); the
  // next block chains on its parent with the tokens alone.
  const std::vector<int32_t> second(tokens.begin() + 4, tokens.end());
  EXPECT_EQ(salted1[1], BlockKeyHasher::TokenBlockKey(salted1[0], second));
  EXPECT_NE(salted1[0], salted2[0]);
}

// ---- Sharing and partial blocks -----------------------------------------------------------------

TEST_F(KvCacheManagerTest, CommittingAKeyAnotherRequestCommittedSharesTheBlock) {
  Build(6, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  // Both requests start before either has computed the prompt: both miss.
  EXPECT_EQ(Admit(1, a, 8), Matched(0, 0));
  EXPECT_EQ(Admit(2, a, 8), Matched(0, 0));
  Reserve(1, 8);
  Reserve(2, 8);
  EXPECT_EQ(cache().stats().device.held, 4);
  Commit(1, a);
  Commit(2, a);  // switches to request 1's blocks and frees its own
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kStored), ElementsAre(a[0], a[1]));
  KvCacheStats s = cache().stats();
  EXPECT_EQ(s.stored_blocks, 2);
  EXPECT_EQ(s.device.held, 2);
  EXPECT_EQ(s.device.cached, 2);
  EXPECT_EQ(s.device.free, 4);

  // Still held by request 2 after request 1 ends: six blocks cannot be found.
  Finish(1);
  EXPECT_EQ(cache().stats().device.held, 2);
  EXPECT_EQ(cache().stats().device.evictable, 0);
  Admit(3, {}, 0);
  EXPECT_EQ(TryReserve(3, 24).code(), StatusCode::kResourceExhausted);
  Finish(2);
  EXPECT_EQ(cache().stats().device.evictable, 2);
  Reserve(3, 24);
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  Finish(3);
}

TEST_F(KvCacheManagerTest, CommittingAKeyThatBecameEvictableRevivesTheCachedBlock) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  Admit(1, a, 4);
  Admit(2, a, 4);
  Reserve(1, 4);
  Reserve(2, 4);
  Commit(1, a);
  Finish(1);
  EXPECT_EQ(cache().stats().device.evictable, 1);
  Commit(2, a);
  EXPECT_EQ(cache().stats().device.evictable, 0);
  EXPECT_EQ(cache().stats().device.held, 1);
  EXPECT_EQ(cache().stats().device.free, 3);
  Finish(2);
  EXPECT_EQ(cache().Match(a), Matched(1, 0));
}

TEST_F(KvCacheManagerTest, PartialLastBlockIsNotCommittedAndIsFreedOnRelease) {
  Build(8, 0);
  const std::vector<int32_t> tokens = Tokens(0, 10);  // two full blocks and 2 tokens
  const std::vector<BlockKey> keys = Keys(tokens);
  ASSERT_EQ(keys.size(), 2u);
  Admit(1, keys, 10);
  Reserve(1, 10);
  EXPECT_EQ(cache().stats().device.held, 3);
  EXPECT_EQ(cache().stats().device.free, 5);
  // Decode fills the partial block without allocating until it is full.
  Reserve(1, 12);
  EXPECT_EQ(cache().stats().device.free, 5);
  Reserve(1, 13);
  EXPECT_EQ(cache().stats().device.free, 4);
  Commit(1, keys);
  EXPECT_EQ(cache().stats().device.cached, 2);
  EXPECT_EQ(cache().stats().device.held, 4);
  Finish(1);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.device.held, 0);
  EXPECT_EQ(s.device.cached, 2);
  EXPECT_EQ(s.device.evictable, 2);
  EXPECT_EQ(s.device.free, 6);
  // The next turn reuses the full blocks and recomputes the rest.
  EXPECT_EQ(cache().Match(Keys(Concat(tokens, Tokens(50, 2)))), Matched(2, 0));
}

TEST_F(KvCacheManagerTest, CommitInOrderAfterTheMatchedPrefix) {
  Build(8, 0);
  const std::vector<BlockKey> keys = Keys(Tokens(0, 16));
  RunRequest(1, std::vector<BlockKey>(keys.begin(), keys.begin() + 1), 4);
  EXPECT_EQ(Admit(2, keys, 16), Matched(1, 0));
  Reserve(2, 16);
  // Commits may come in pieces; each continues after the previous one.
  Commit(2, From(keys, 1).first(1));
  EXPECT_EQ(cache().Match(keys), Matched(2, 0));
  Commit(2, From(keys, 2));
  EXPECT_EQ(cache().Match(keys), Matched(4, 0));
  // Nothing left to commit: one more key exceeds what the request holds.
  const std::vector<BlockKey> more = {BlockKey(42)};
  EXPECT_EQ(TryCommit(2, more).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache().FindTier(BlockKey(42)), std::nullopt);
  Finish(2);
}

TEST_F(KvCacheManagerTest, CommitOfAKeyCachedUnderAnotherParentIsRefused) {
  // Keys are opaque: a caller that reuses a key under a different prefix must not corrupt
  // the index. The block stays uncommitted and is freed on release.
  Build(8, 0);
  const std::vector<BlockKey> first = {BlockKey(1), BlockKey(2)};
  const std::vector<BlockKey> second = {BlockKey(3), BlockKey(2)};
  RunRequest(1, first, 8);
  Admit(2, second, 8);
  Reserve(2, 8);
  const Status s = TryCommit(2, second);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(cache().FindTier(BlockKey(3)), Tier::kDevice);
  EXPECT_EQ(cache().Match(second), Matched(1, 0));
  EXPECT_EQ(cache().Match(first), Matched(2, 0));
  Finish(2);
  EXPECT_EQ(cache().stats().device.cached, 3);
  EXPECT_EQ(cache().stats().device.free, 5);
}

// ---- Reset --------------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, ResetIsRefusedWhileBlocksAreHeldAndThenEmptiesEverything) {
  Build(2, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  const std::vector<BlockKey> b = Keys(Tokens(100, 8));
  RunRequest(1, a, 8, WholePrompt(60, /*duration=*/3));
  Admit(2, b, 8);
  Reserve(2, 8);
  Commit(2, b);  // offloads a
  Events();

  const KvCacheStats before = cache().stats();
  const Status refused = TryReset();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(cache().stats(), before);
  EXPECT_EQ(cache().Match(a), Matched(0, 2));
  EXPECT_EQ(cache().Match(b), Matched(2, 0));
  EXPECT_THAT(Events(), IsEmpty());

  Finish(2);
  ASSERT_TRUE(TryReset().ok());
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kCleared, BlockKey(), Tier::kDevice)));
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  EXPECT_EQ(cache().Match(b), Matched(0, 0));
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
  EXPECT_EQ(cache().GetPriority(b[0]).status().code(), StatusCode::kNotFound);
  const KvCacheStats after = cache().stats();
  EXPECT_EQ(after.device, (TierGauges{2, 2, 0, 0, 0}));
  EXPECT_EQ(after.host, (TierGauges{4, 4, 0, 0, 0}));
  // Counters are cumulative and survive a reset.
  EXPECT_EQ(after.stored_blocks, 4);
  EXPECT_EQ(after.lookups, 2);
  EXPECT_EQ(after.offloads, 2);
  // The pending retention expiry went with the blocks.
  Advance(5);
  EXPECT_EQ(cache().stats().expirations, 0);
  // And the cache fills again from scratch.
  EXPECT_EQ(RunRequest(3, a, 8), Matched(0, 0));
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
}

// ---- Events -------------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, EventsAreRecordedInOrderWithKeysTiersAndSteps) {
  Build(2, 1);
  const std::vector<BlockKey> ab = Keys(Tokens(0, 8));
  const std::vector<BlockKey> c = Keys(Tokens(100, 4));
  const std::vector<BlockKey> d = Keys(Tokens(200, 4));
  const std::vector<BlockKey> e = Keys(Tokens(300, 4));
  const BlockKey a = ab[0], b = ab[1];

  RunRequest(1, ab, 8);
  RunRequest(2, c, 4);  // b -> host
  Advance();
  RunRequest(3, ab, 8);  // b back, c -> host
  RunRequest(4, d, 4);   // b -> host, evicting c from it
  SetPriority(a, 10);
  Advance();
  RunRequest(5, e, 4);  // a dropped, and with it b from the host
  ASSERT_TRUE(TryReset().ok());

  using K = KvEventKind;
  const Tier kDev = Tier::kDevice, kHost = Tier::kHost;
  EXPECT_THAT(Events(),
              ElementsAre(Ev(K::kStored, a, kDev, 0), Ev(K::kStored, b, kDev, 0),
                          Ev(K::kOffloaded, b, kDev, 0), Ev(K::kStored, c[0], kDev, 0),
                          Ev(K::kOffloaded, c[0], kDev, 1), Ev(K::kOnboarded, b, kHost, 1),
                          Ev(K::kEvicted, c[0], kHost, 1), Ev(K::kOffloaded, b, kDev, 1),
                          Ev(K::kStored, d[0], kDev, 1), Ev(K::kDropped, a, kDev, 2),
                          Ev(K::kDropped, b, kHost, 2), Ev(K::kStored, e[0], kDev, 2),
                          Ev(K::kCleared, BlockKey(), kDev, 2)));
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(cache().dropped_events(), 0);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.stored_blocks, 5);
  EXPECT_EQ(s.offloads, 3);
  EXPECT_EQ(s.onboards, 1);
  EXPECT_EQ(s.drops, 3);  // c evicted from the host, a and b dropped
  EXPECT_EQ(s.device_evictions, 4);
}

TEST_F(KvCacheManagerTest, EventLogIsBoundedAndCountsWhatItDropped) {
  KvCacheOptions o = Options(8, 0);
  o.event_log_capacity = 3;
  Build(o);
  const std::vector<BlockKey> keys = Keys(Tokens(0, 20));
  RunRequest(1, keys, 20);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kStored), ElementsAre(keys[2], keys[3], keys[4]));
  EXPECT_EQ(cache().dropped_events(), 2);
  const std::vector<BlockKey> more = Keys(Tokens(100, 4));
  RunRequest(2, more, 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kStored), ElementsAre(more[0]));
  EXPECT_EQ(cache().dropped_events(), 2);
}

TEST_F(KvCacheManagerTest, DisabledEventLogRecordsNothing) {
  KvCacheOptions o = Options(8, 0);
  o.event_log_capacity = 0;
  Build(o);
  RunRequest(1, Keys(Tokens(0, 8)), 8);
  ASSERT_TRUE(TryReset().ok());
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(cache().dropped_events(), 0);
  EXPECT_EQ(cache().stats().stored_blocks, 2);
}

// ---- Errors and determinism ---------------------------------------------------------------------

TEST_F(KvCacheManagerTest, UnknownRequestsAreNotFound) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  EXPECT_EQ(TryReserve(7, 4).code(), StatusCode::kNotFound);
  EXPECT_EQ(TryCommit(7, a).code(), StatusCode::kNotFound);
  EXPECT_EQ(TryFinish(7).code(), StatusCode::kNotFound);
  RunRequest(7, a, 4);
  EXPECT_EQ(TryFinish(7).code(), StatusCode::kNotFound) << "a released request is gone";
  EXPECT_EQ(cache().stats().device.free, 3);
}

TEST_F(KvCacheManagerTest, AddRequestRejectsDuplicatesAndBadOptionsWithoutSideEffects) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  RunRequest(1, a, 8);
  EXPECT_EQ(Admit(2, a, 8), Matched(2, 0));
  const KvCacheStats before = cache().stats();

  const StatusOr<PrefixMatch> duplicate = TryAdmit(2, a);
  EXPECT_EQ(duplicate.status().code(), StatusCode::kAlreadyExists);
  RequestOptions negative;
  negative.prompt_tokens = -1;
  const StatusOr<PrefixMatch> bad_tokens = TryAdmit(3, a, negative);
  EXPECT_EQ(bad_tokens.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_tokens.status().message(), HasSubstr("prompt_tokens"));
  RequestOptions bad_retention;
  bad_retention.retention = WholePrompt(101);
  const StatusOr<PrefixMatch> bad_priority = TryAdmit(3, a, bad_retention);
  EXPECT_EQ(bad_priority.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_priority.status().message(), HasSubstr("token_ranges[0].priority"));

  EXPECT_EQ(cache().stats(), before);
  EXPECT_EQ(cache().active_requests(), 1);
  EXPECT_EQ(TryFinish(3).code(), StatusCode::kNotFound);
  Finish(2);
  EXPECT_EQ(cache().stats().device.held, 0);
}

TEST_F(KvCacheManagerTest, SetPriorityValidatesItsArguments) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  EXPECT_EQ(TrySetPriority(a[0], 50).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache().GetPriority(a[0]).status().code(), StatusCode::kNotFound);
  RunRequest(1, a, 4);
  const Status high = TrySetPriority(a[0], 101);
  EXPECT_EQ(high.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(high.message(), HasSubstr("101"));
  EXPECT_EQ(TrySetPriority(a[0], -1).code(), StatusCode::kInvalidArgument);
  const Status zero = TrySetPriority(a[0], 50, 0);
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.message(), HasSubstr("duration"));
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority) << "a refused change changes nothing";
  SetPriority(a[0], 0);
  EXPECT_EQ(PriorityOf(a[0]), 0);
  SetPriority(a[0], kMaxPriority);
  EXPECT_EQ(PriorityOf(a[0]), kMaxPriority);
}

TEST_F(KvCacheManagerTest, EqualCallsGiveEqualEventsAndStats) {
  // Two ranks with the same options and calls must agree exactly.
  auto run = [this] {
    Build(3, 2);
    for (int32_t i = 0; i < 6; ++i) {
      const std::vector<BlockKey> keys = Keys(Tokens(i % 3 * 100, 4 + 4 * (i % 2)));
      std::optional<RetentionConfig> retention;
      if (i == 2) retention = WholePrompt(20);
      RunRequest(i + 1, keys, 4 + 4 * (i % 2), retention);
      Advance();
    }
    return std::make_pair(Events(), cache().stats());
  };
  const auto first = run();
  const auto second = run();
  EXPECT_FALSE(first.first.empty());
  EXPECT_EQ(first.first, second.first);
  EXPECT_EQ(first.second, second.second);
}

TEST_F(KvCacheManagerTest, MetadataStaysWithinSixtyFourBytesPerBlock) {
  Build(60'000, 40'000);
  EXPECT_LE(cache().MetadataBytes(), 64 * 100'000) << cache().MetadataBytes();
  EXPECT_GE(cache().MetadataBytes(), 40 * 100'000) << "the arena alone is 40 bytes per block";
}
// ---- Gap-aware retention ------------------------------------------------------------------------

class GapAwareManagerTest : public KvCacheManagerTest {
 protected:
  void BuildGapAware(int64_t device_blocks, int64_t host_blocks = 0) {
    KvCacheOptions o = Options(device_blocks, host_blocks);
    o.eviction_order = EvictionOrder::kGapAware;
    Build(o);
  }
  void At(double seconds) { cache().AdvanceClock(TimeNs::Seconds(seconds)); }
  // Allocates `n` blocks one at a time for request `id`; the keys evicted, in order.
  std::vector<BlockKey> EvictOrder(int64_t id, int64_t n) {
    Admit(id, {}, 0);
    Events();
    for (int64_t k = 1; k <= n; ++k) Reserve(id, k * kTokensPerBlock);
    std::vector<BlockKey> order = KeysOf(Events(), KvEventKind::kDropped);
    Finish(id);
    return order;
  }
};

TEST_F(GapAwareManagerTest, LearnsEachPauseKindAndRanksASessionByItsExpectedReturn) {
  BuildGapAware(4);
  const std::vector<BlockKey> tool = Keys(Tokens(100, 4));
  const std::vector<BlockKey> human = Keys(Tokens(200, 4));
  // Conversation 1 calls a tool after every turn and is back 2 s later; conversation 2 waits
  // 300 s for its user. Each next request measures the pause its predecessor announced. (No
  // session ids: an open session's blocks would all sit in the referenced eviction class.)
  int64_t id = 0;
  for (int i = 0; i <= 5; ++i) {
    At(300.0 * i);
    RunRequestWith(++id, human, 4, Opts().Conversation(2).Pause(PauseKind::kHumanTurn));
    for (int j = 0; j < 3; ++j) {
      At(300.0 * i + 2.0 * j);
      RunRequestWith(++id, tool, 4, Opts().Conversation(1).Pause(PauseKind::kToolCall, "Read"));
    }
  }
  const PauseEstimator& gaps = cache().pause_gaps();
  ASSERT_TRUE(gaps.Estimate(PauseKind::kHumanTurn).has_value());
  EXPECT_NEAR(gaps.Estimate(PauseKind::kHumanTurn)->seconds(), 300, 30);
  // Most of conversation 1's pauses are 2 s (those across conversation 2's turns are longer).
  EXPECT_NEAR(gaps.Estimate(PauseKind::kToolCall, "Read")->seconds(), 2, 0.2);

  // Conversation 1 finishes first, conversation 2 10 s later: LRU would evict conversation
  // 1's block first, but conversation 2 is expected back much later.
  At(2000);
  RunRequestWith(++id, tool, 4, Opts().Conversation(1).Pause(PauseKind::kToolCall, "Read"));
  At(2010);
  RunRequestWith(++id, human, 4, Opts().Conversation(2).Pause(PauseKind::kHumanTurn));
  At(2020);
  const std::vector<BlockKey> plain = Keys(Tokens(300, 4));
  RunRequest(++id, plain, 4);
  EXPECT_THAT(EvictOrder(++id, 4), ElementsAre(human[0], tool[0], plain[0]));
}

TEST_F(GapAwareManagerTest, AnEndedSessionsEarlierBranchesGoFirstTooButNotWhatALiveSessionUses) {
  BuildGapAware(5);
  // Session 1 runs root+a1, then (after a compaction) root+b1, then root+b1+b2 and ends;
  // session 2 is live on root+c1.
  const std::vector<BlockKey> a = Keys(Concat(Tokens(0, 4), Tokens(10, 4)));
  const std::vector<BlockKey> b = Keys(Concat(Tokens(0, 4), Tokens(20, 8)));
  const std::vector<BlockKey> c = Keys(Concat(Tokens(0, 4), Tokens(30, 4)));
  At(1);
  RunRequestWith(1, a, 8, Opts().Session(1).Pause(PauseKind::kToolCall));
  At(2);
  RunRequestWith(2, c, 8, Opts().Session(2).Pause(PauseKind::kToolCall));
  At(3);
  RunRequestWith(3, std::vector<BlockKey>(b.begin(), b.begin() + 2), 8,
                 Opts().Session(1).Pause(PauseKind::kToolCall));
  At(4);
  RunRequestWith(4, b, 12, Opts().Session(1).Pause(PauseKind::kSessionEnd));
  // Session 1's blocks (b2, b1, then its earlier branch a1) first; the root serves session 2.
  EXPECT_THAT(EvictOrder(5, 5), ElementsAre(b[2], b[1], a[1], c[1], c[0]));
  EXPECT_EQ(cache().stats().device.held, 0);
}

TEST_F(GapAwareManagerTest, AnUnfinishedReleaseRecordsNoPauseAndEndsNothing) {
  BuildGapAware(4);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  At(1);
  RunRequestWith(1, b, 4, Opts().Conversation(2).Pause(PauseKind::kToolCall));
  // Conversation 1's last request is retracted (or aborted) instead of finishing.
  At(2);
  AdmitWith(2, a, Opts().Prompt(4).Conversation(1).Pause(PauseKind::kSessionEnd));
  Reserve(2, 4);
  Commit(2, a);
  ASSERT_TRUE(cache().ReleaseUnfinished(RequestId(2)).ok());
  CheckInvariants();
  // Not unneeded: a ranks by its release time (2), after b (1).
  At(3);
  EXPECT_THAT(EvictOrder(3, 4), ElementsAre(b[0], a[0]));
  // Conversation 2's tool pause was recorded once; a retraction of its next request measures it
  // and records nothing more.
  At(10);
  AdmitWith(4, b, Opts().Prompt(4).Conversation(2).Pause(PauseKind::kToolCall));
  ASSERT_TRUE(cache().ReleaseUnfinished(RequestId(4)).ok());
  At(20);
  RunRequestWith(5, b, 4, Opts().Conversation(2).Pause(PauseKind::kToolCall));
  EXPECT_EQ(cache().pause_gaps().samples(PauseKind::kToolCall), 1);
  EXPECT_EQ(cache().ReleaseUnfinished(RequestId(99)).code(), StatusCode::kNotFound);
}

TEST_F(GapAwareManagerTest, WithoutHintsTheGapAwareOrderIsLru) {
  BuildGapAware(3);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  const std::vector<BlockKey> c = Keys(Tokens(300, 4));
  At(1);
  RunRequest(1, a, 4);
  At(2);
  RunRequest(2, b, 4);
  At(3);
  RunRequest(3, c, 4);
  At(4);
  EXPECT_EQ(RunRequest(4, a, 4), Matched(1, 0));  // a is now the most recent
  EXPECT_THAT(EvictOrder(5, 3), ElementsAre(b[0], c[0], a[0]));
}

}  // namespace
}  // namespace agentkv::kv
