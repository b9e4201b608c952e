// Scenario tests of BlockCache's retention (block_cache.h), driven through the KvCacheManager
// fixture, which hands requests without a session or conversation straight to the core: SetPriority
// re-queueing a block on its tier (also when it is held or on the host), priority durations that
// revert at exactly start plus duration to the configured default, and per-request retention
// configs (token ranges, the decode priority, and requests without a config).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "kv_cache_manager_fixture.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using testing_internal::Concat;
using testing_internal::Ev;
using testing_internal::Matched;
using testing_internal::Tokens;
using testing_internal::WholePrompt;

// ---- Priority changes and re-queueing -----------------------------------------------------------

TEST_F(KvCacheManagerTest, PriorityChangeRequeuesAndDemotionToZeroDropsEvenWithAHostTier) {
  // TensorRT-LLM issue #13080: a demotion must move the block to its new bucket, and at
  // priority 0 the block is below the offload threshold, so it is dropped, not offloaded.
  Build(4, 4);
  std::vector<std::vector<BlockKey>> chains;
  for (int32_t i = 0; i < 4; ++i) {
    chains.push_back(Keys(Tokens(100 * (i + 1), 4)));
    RunRequest(i + 1, chains.back(), 4);
  }
  const BlockKey a = chains[0][0], b = chains[1][0], d = chains[3][0];
  SetPriority(b, 0);                                      // back of bucket 0
  SetPriority(d, 0, std::nullopt, /*evict_first=*/true);  // front of bucket 0
  EXPECT_EQ(PriorityOf(d), 0);
  Events();

  Admit(9, {}, 0);
  Reserve(9, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, d, Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(d), std::nullopt);
  Reserve(9, 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, b, Tier::kDevice)));
  // The next victim, `a` at the default priority 35, does go to the host.
  Reserve(9, 12);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, a, Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(a), Tier::kHost);

  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 2);
  EXPECT_EQ(s.offloads, 1);
  EXPECT_EQ(s.device_evictions, 3);
  EXPECT_EQ(s.host.cached, 1);
  Finish(9);
}

TEST_F(KvCacheManagerTest, PriorityChangeOfAHostBlockRequeuesItOnTheHost) {
  Build(2, 2);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  RunRequest(3, Keys(Tokens(300, 8)), 8);  // offloads a then b; host LRU order a, b
  ASSERT_EQ(cache().FindTier(a[0]), Tier::kHost);
  ASSERT_EQ(cache().FindTier(b[0]), Tier::kHost);
  SetPriority(b[0], 10);  // b becomes the host tier's victim
  Events();
  RunRequest(4, Keys(Tokens(400, 4)), 4);
  const std::vector<KvEvent> events = Events();
  EXPECT_THAT(KeysOf(events, KvEventKind::kEvicted), ElementsAre(b[0]));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(b[0]), std::nullopt);
}

TEST_F(KvCacheManagerTest, SetPriorityOfAHeldBlockAppliesWhenItIsReleased) {
  Build(2, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, b, 4);
  Admit(2, a, 4);
  Reserve(2, 4);
  Commit(2, a);
  SetPriority(a[0], 5);  // held: not evictable now, but first once released
  EXPECT_EQ(PriorityOf(a[0]), 5);
  Finish(2);
  Events();
  RunRequest(3, Keys(Tokens(200, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[0]));
}

// ---- Durations and the default priority ---------------------------------------------------------

TEST_F(KvCacheManagerTest, RetentionDurationRevertsAtExactlyStartPlusDuration) {
  Build(8, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  Advance(2);
  ASSERT_EQ(cache().current_step(), Step(2));
  RunRequest(1, a, 8, WholePrompt(90, /*duration=*/3));  // retained from step 2 to step 5
  for (int64_t step = 2; step < 5; ++step) {
    EXPECT_EQ(cache().current_step(), Step(step));
    EXPECT_EQ(PriorityOf(a[0]), 90) << "step " << step;
    EXPECT_EQ(PriorityOf(a[1]), 90) << "step " << step;
    EXPECT_EQ(cache().stats().expirations, 0);
    Advance();
  }
  EXPECT_EQ(cache().current_step(), Step(5));
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(a[1]), kDefaultPriority);
  EXPECT_EQ(cache().stats().expirations, 2);
  Advance(10);
  EXPECT_EQ(cache().stats().expirations, 2);
}

TEST_F(KvCacheManagerTest, SetPriorityDurationRevertsAtExactlyStartPlusDuration) {
  Build(8, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  Advance();
  SetPriority(a[0], 70, /*duration=*/4);  // step 1 -> reverts at step 5
  SetPriority(b[0], 80, /*duration=*/2);
  SetPriority(b[0], 60);  // no duration: cancels b's pending expiry
  Advance(3);
  EXPECT_EQ(cache().current_step(), Step(4));
  EXPECT_EQ(PriorityOf(a[0]), 70);
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(b[0]), 60);
  EXPECT_EQ(cache().stats().expirations, 1);

  // Setting a duration again restarts the count from the current step.
  SetPriority(a[0], 90, 2);  // step 5 -> 7
  Advance();
  SetPriority(a[0], 95, 2);  // step 6 -> 8
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), 95);
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority);
  EXPECT_EQ(cache().stats().expirations, 2);
}

TEST_F(KvCacheManagerTest, ExpiredPriorityRequeuesTheBlockForEviction) {
  Build(2, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 4, WholePrompt(90, /*duration=*/1));
  RunRequest(2, b, 4);
  SetPriority(b[0], 40);
  // Retained at 90, `a` would outlive `b` at 40; back at 35 after its step, it goes first.
  Advance();
  Events();
  RunRequest(3, Keys(Tokens(200, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[0]));
}

TEST_F(KvCacheManagerTest, DurationRevertsToTheConfiguredDefaultPriority) {
  KvCacheOptions o = Options(4, 0);
  o.default_priority = 50;
  Build(o);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  RunRequest(1, a, 8);
  EXPECT_EQ(PriorityOf(a[0]), 50);  // new blocks get the configured default
  SetPriority(a[0], 10, 1);
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), 50);
}

// ---- Retention configs --------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, DecodeBlocksGetTheDecodePriority) {
  Build(8, 0);
  const std::vector<int32_t> sequence = Tokens(0, 16);  // 8 prompt + 8 generated tokens
  const std::vector<BlockKey> keys = Keys(sequence);
  RetentionConfig retention = WholePrompt(50);
  retention.decode_priority = 80;
  const std::vector<BlockKey> prompt_keys(keys.begin(), keys.begin() + 2);
  Admit(1, prompt_keys, 8, retention);
  Reserve(1, 16);
  Commit(1, keys);
  Finish(1);
  EXPECT_EQ(PriorityOf(keys[0]), 50);
  EXPECT_EQ(PriorityOf(keys[1]), 50);
  EXPECT_EQ(PriorityOf(keys[2]), 80);
  EXPECT_EQ(PriorityOf(keys[3]), 80);
}

TEST_F(KvCacheManagerTest, RetentionRangeAppliesToTheBlockWhoseFirstTokenIsInIt) {
  Build(8, 0);
  const std::vector<BlockKey> keys = Keys(Tokens(0, 16));
  RetentionConfig retention;
  TokenRangeRetention range;
  range.token_start = 2;  // tokens 2 and 3 are in block 0, whose first token is not
  range.token_end = 9;    // token 8 starts block 2
  range.priority = 60;
  retention.token_ranges.push_back(range);
  RunRequest(1, keys, 16, retention);
  EXPECT_EQ(PriorityOf(keys[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(keys[1]), 60);
  EXPECT_EQ(PriorityOf(keys[2]), 60);
  EXPECT_EQ(PriorityOf(keys[3]), kDefaultPriority);
}

TEST_F(KvCacheManagerTest, RequestWithoutRetentionLeavesReusedBlocksPrioritiesUnchanged) {
  Build(8, 0);
  const std::vector<int32_t> prompt = Tokens(0, 8);
  const std::vector<BlockKey> first = Keys(prompt);
  RunRequest(1, first, 8, WholePrompt(70));
  const std::vector<BlockKey> longer = Keys(Concat(prompt, Tokens(100, 4)));
  EXPECT_EQ(RunRequest(2, longer, 12), Matched(2, 0));
  EXPECT_EQ(PriorityOf(longer[0]), 70);
  EXPECT_EQ(PriorityOf(longer[1]), 70);
  EXPECT_EQ(PriorityOf(longer[2]), kDefaultPriority);  // new block: the cache default

  // A config that does not cover the reused blocks leaves them alone as well.
  RetentionConfig tail;
  TokenRangeRetention range;
  range.token_start = 8;
  range.priority = 20;
  tail.token_ranges.push_back(range);
  EXPECT_EQ(RunRequest(3, longer, 12, tail), Matched(3, 0));
  EXPECT_EQ(PriorityOf(longer[0]), 70);
  EXPECT_EQ(PriorityOf(longer[1]), 70);
  EXPECT_EQ(PriorityOf(longer[2]), 20);
}
}  // namespace
}  // namespace agentkv::kv
