// Scenario tests of BlockCache's eviction (block_cache.h), driven through the KvCacheManager
// fixture, which hands requests without a session or conversation straight to the core:
// priority-then-LRU victim order, held blocks and refused allocations that change nothing, cascades
// to dependents on both tiers, the offload threshold that decides offload versus drop, host hits
// that onboard, and tiers of size zero; and the gap-aware order (eviction_order = kGapAware),
// driven on the core directly with explicit release ranks, including a randomized check
// against LRU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "block_cache_harness.h"
#include "kv_cache_manager_fixture.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_internal::Concat;
using testing_internal::Ev;
using testing_internal::From;
using testing_internal::Matched;
using testing_internal::Tokens;

// ---- Eviction order -----------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, EvictionOrderIsLowerPriorityFirstThenLeastRecentlyUsed) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  const std::vector<BlockKey> c = Keys(Tokens(300, 4));
  const std::vector<BlockKey> d = Keys(Tokens(400, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  RunRequest(3, c, 4);
  RunRequest(4, d, 4);
  // A hit makes `a` the most recently used: LRU order is now b, c, d, a.
  EXPECT_EQ(RunRequest(5, a, 4), Matched(1, 0));
  // Priority 20 for c then a: bucket 20 = (c, a), bucket 35 = (b, d).
  SetPriority(c[0], 20);
  SetPriority(a[0], 20);
  Events();

  // One block at a time, so each Reserve evicts exactly the next victim.
  Admit(6, {}, 0);
  const std::vector<BlockKey> expected = {c[0], a[0], b[0], d[0]};
  for (int64_t n = 1; n <= 4; ++n) {
    Reserve(6, n * kTokensPerBlock);
    const std::vector<KvEvent> events = Events();
    ASSERT_THAT(events, ElementsAre(Ev(KvEventKind::kDropped, expected[static_cast<size_t>(n - 1)],
                                       Tier::kDevice)))
        << "eviction " << n;
    EXPECT_EQ(cache().FindTier(expected[static_cast<size_t>(n - 1)]), std::nullopt);
    EXPECT_EQ(cache().stats().device_evictions, n);
  }
  Finish(6);
}

TEST_F(KvCacheManagerTest, HeldBlocksAreNeverEvicted) {
  Build(4, 0);
  const std::vector<BlockKey> held = Keys(Tokens(0, 8));
  const std::vector<BlockKey> idle = Keys(Tokens(100, 4));
  // Request 1 is still running and holds two committed blocks.
  Admit(1, held, 8);
  Reserve(1, 8);
  Commit(1, held);
  RunRequest(2, idle, 4);  // one evictable block; one block free

  // Three blocks would need a held one: refused, and nothing was evicted for it.
  Admit(3, {}, 0);
  const Status s = TryReserve(3, 12);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(cache().FindTier(idle[0]), Tier::kDevice);
  // Two fit: the free block and the idle one.
  Reserve(3, 8);
  EXPECT_EQ(cache().FindTier(idle[0]), std::nullopt);
  EXPECT_EQ(cache().stats().device.held, 4);

  Admit(4, {}, 0);
  EXPECT_EQ(TryReserve(4, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache().Match(held), Matched(2, 0));
  EXPECT_EQ(cache().FindTier(held[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(held[1]), Tier::kDevice);

  // Once request 1 ends its blocks become victims, leaf first.
  Finish(1);
  Reserve(4, 1);
  EXPECT_EQ(cache().FindTier(held[1]), std::nullopt);
  EXPECT_EQ(cache().FindTier(held[0]), Tier::kDevice);
  Finish(3);
  Finish(4);
}

TEST_F(KvCacheManagerTest, FailedAllocationLeavesEveryCountUnchanged) {
  Build(4, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  const std::vector<BlockKey> c = Keys(Tokens(100, 8));
  const std::vector<BlockKey> d = Keys(Tokens(200, 4));
  const std::vector<BlockKey> e = Keys(Tokens(300, 20));
  RunRequest(1, a, 8);
  RunRequest(2, c, 8);
  RunRequest(3, d, 4);  // offloads a[1]
  // Request 10 holds a[0] and onboards a[1] (offloading c[1]): two held, two evictable.
  EXPECT_EQ(Admit(10, a, 8), Matched(1, 1));
  SetPriority(c[0], 60, /*duration=*/5);
  EXPECT_EQ(Admit(11, e, 20), Matched(0, 0));
  Events();

  const KvCacheStats stats = cache().stats();
  ASSERT_EQ(stats.device.held, 2);
  ASSERT_EQ(stats.device.evictable, 2);
  ASSERT_EQ(stats.host.cached, 1);
  const std::vector<PrefixMatch> matches = {cache().Match(a), cache().Match(c), cache().Match(d),
                                            cache().Match(e)};

  // Five blocks are needed, two can be freed: refused, with nothing evicted or allocated.
  const Status s = TryReserve(11, 20);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("needs 5 more blocks"));
  // A held request asking for more is refused the same way.
  EXPECT_EQ(TryReserve(10, 28).code(), StatusCode::kResourceExhausted);

  EXPECT_EQ(cache().stats(), stats);
  EXPECT_THAT((std::vector<PrefixMatch>{cache().Match(a), cache().Match(c), cache().Match(d),
                                        cache().Match(e)}),
              ElementsAreArray(matches));
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(PriorityOf(c[0]), 60);
  EXPECT_EQ(cache().active_requests(), 2);

  // The cache is still usable: two blocks do fit, and the victims are c[0] and d[0].
  Reserve(11, 8);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kOffloaded), ElementsAre(d[0], c[0]));
  Finish(10);
  Finish(11);
}

TEST_F(KvCacheManagerTest, UnderEqualPriorityLruEvictsLeavesFirst) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 12);
  RunRequest(2, b, 4);
  // Reusing a's first two blocks refreshes them, deepest released first, so each parent stays
  // more recent than its child: LRU order a[2], b[0], a[1], a[0].
  EXPECT_EQ(RunRequest(3, std::vector<BlockKey>(a.begin(), a.begin() + 2), 8), Matched(2, 0));
  Admit(4, {}, 0);
  const std::vector<PrefixMatch> a_after = {Matched(2, 0), Matched(2, 0), Matched(1, 0),
                                            Matched(0, 0)};
  for (int64_t n = 1; n <= 4; ++n) {
    Reserve(4, n * kTokensPerBlock);
    EXPECT_EQ(cache().Match(a), a_after[static_cast<size_t>(n - 1)]) << "after " << n;
    EXPECT_EQ(cache().Match(b), n < 2 ? Matched(1, 0) : Matched(0, 0)) << "after " << n;
    EXPECT_EQ(cache().stats().drops, n) << "a leaf eviction never cascades";
  }
  Finish(4);
}

// ---- Cascades -----------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, LowPriorityParentIsEvictedWithItsDeviceDependents) {
  // A parent demoted below its children is the victim; its dependents cannot stay without it,
  // and the dependents of a dropped block are dropped too, whatever their own priority.
  Build(4, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> c = Keys(Tokens(100, 4));
  RunRequest(1, a, 12);
  RunRequest(2, c, 4);
  SetPriority(a[0], 10);
  Events();

  RunRequest(3, Keys(Tokens(200, 4)), 4);  // needs one block, frees three
  const std::vector<KvEvent> events = Events();
  EXPECT_THAT(KeysOf(events, KvEventKind::kDropped), ElementsAre(a[0], a[1], a[2]));
  EXPECT_THAT(KeysOf(events, KvEventKind::kOffloaded), IsEmpty());
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  EXPECT_EQ(cache().FindTier(c[0]), Tier::kDevice);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.device_evictions, 3);
  EXPECT_EQ(s.drops, 3);
  EXPECT_EQ(s.offloads, 0);
  EXPECT_EQ(s.device.free, 2);
  EXPECT_EQ(s.host.cached, 0);
}

TEST_F(KvCacheManagerTest, DroppingAParentAlsoDropsItsHostDependents) {
  Build(2, 4);
  const std::vector<BlockKey> d = Keys(Tokens(0, 8));
  const std::vector<BlockKey> e = Keys(Tokens(100, 4));
  const std::vector<BlockKey> f = Keys(Tokens(200, 4));
  RunRequest(1, d, 8);
  RunRequest(2, e, 4);  // offloads the leaf d[1]
  ASSERT_EQ(cache().FindTier(d[0]), Tier::kDevice);
  ASSERT_EQ(cache().FindTier(d[1]), Tier::kHost);
  SetPriority(d[0], 5);
  Events();

  RunRequest(3, f, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, d[0], Tier::kDevice),
                                    Ev(KvEventKind::kDropped, d[1], Tier::kHost),
                                    Ev(KvEventKind::kStored, f[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(d[1]), std::nullopt);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 2);
  EXPECT_EQ(s.offloads, 1);
  EXPECT_EQ(s.device_evictions, 2);  // d[1] offloaded earlier, d[0] dropped now
  EXPECT_EQ(s.host.cached, 0);
  EXPECT_EQ(s.host.free, 4);
}

TEST_F(KvCacheManagerTest, OffloadableParentTakesItsDeviceSubtreeToTheHostPostOrder) {
  // Tree: r with children x (older) and z (newer). Demoted to 31 (still >= 30), r is the
  // victim and its device descendants follow it to the host, children before parents and
  // newer children first, so the host tier stays closed under prefixes at every moment.
  Build(4, 8);
  const std::vector<int32_t> root = Tokens(0, 4);
  const std::vector<BlockKey> rx = Keys(Concat(root, Tokens(100, 4)));
  const std::vector<BlockKey> rz = Keys(Concat(root, Tokens(200, 4)));
  const std::vector<BlockKey> other = Keys(Tokens(300, 4));
  RunRequest(1, rx, 8);
  EXPECT_EQ(RunRequest(2, rz, 8), Matched(1, 0));
  RunRequest(3, other, 4);
  SetPriority(rx[0], 31);
  Events();

  const std::vector<BlockKey> w = Keys(Tokens(400, 4));
  RunRequest(4, w, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, rz[1], Tier::kDevice),
                                    Ev(KvEventKind::kOffloaded, rx[1], Tier::kDevice),
                                    Ev(KvEventKind::kOffloaded, rx[0], Tier::kDevice),
                                    Ev(KvEventKind::kStored, w[0], Tier::kDevice)));
  EXPECT_EQ(cache().Match(rx), Matched(0, 2));
  EXPECT_EQ(cache().Match(rz), Matched(0, 2));
  EXPECT_EQ(cache().FindTier(other[0]), Tier::kDevice);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.offloads, 3);
  EXPECT_EQ(s.drops, 0);
  EXPECT_EQ(s.device.free, 2);
  EXPECT_EQ(s.host.cached, 3);
  // The subtree comes back whole on the next hit.
  EXPECT_EQ(RunRequest(5, rz, 8), Matched(0, 2));
}

TEST_F(KvCacheManagerTest, OffloadIntoAFullHostEvictsTheHostTiersOwnVictim) {
  Build(2, 1);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  RunRequest(3, Keys(Tokens(200, 4)), 4);  // a -> host
  Events();
  RunRequest(4, Keys(Tokens(300, 4)), 4);  // b -> host, evicting a from it
  const std::vector<KvEvent> events = Events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0], Ev(KvEventKind::kEvicted, a[0], Tier::kHost));
  EXPECT_EQ(events[1], Ev(KvEventKind::kOffloaded, b[0], Tier::kDevice));
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
  EXPECT_EQ(cache().FindTier(b[0]), Tier::kHost);
  EXPECT_EQ(cache().stats().drops, 1);
  EXPECT_EQ(cache().stats().offloads, 2);
}

TEST_F(KvCacheManagerTest, HostEvictionOfAParentDropsItsHostDependents) {
  Build(2, 2);
  const std::vector<BlockKey> pq = Keys(Tokens(0, 8));
  const std::vector<BlockKey> x = Keys(Tokens(100, 8));
  const std::vector<BlockKey> y = Keys(Tokens(200, 4));
  RunRequest(1, pq, 8);
  RunRequest(2, x, 8);  // pq[1] then pq[0] to the host, which is now full
  ASSERT_EQ(cache().Match(pq), Matched(0, 2));
  SetPriority(pq[0], 31);  // the host tier's next victim, ahead of its child
  Events();

  RunRequest(3, y, 4);  // x[1] must go to the host: pq[0] leaves it, and pq[1] with it
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kEvicted, pq[0], Tier::kHost),
                                    Ev(KvEventKind::kDropped, pq[1], Tier::kHost),
                                    Ev(KvEventKind::kOffloaded, x[1], Tier::kDevice),
                                    Ev(KvEventKind::kStored, y[0], Tier::kDevice)));
  EXPECT_EQ(cache().Match(pq), Matched(0, 0));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 2);
  EXPECT_EQ(s.device_evictions, 3) << "host-tier drops are not device evictions";
  EXPECT_EQ(s.host.cached, 1);
  EXPECT_EQ(s.host.free, 1);
}

// ---- Offload, drop and onboard ------------------------------------------------------------------

TEST_F(KvCacheManagerTest, OffloadsAtOrAboveTheThresholdAndDropsBelowIt) {
  Build(2, 4);
  const std::vector<BlockKey> at29 = Keys(Tokens(100, 4));
  const std::vector<BlockKey> at30 = Keys(Tokens(200, 4));
  RunRequest(1, at29, 4);
  RunRequest(2, at30, 4);
  SetPriority(at29[0], 29);
  SetPriority(at30[0], 30);
  Events();

  Admit(3, {}, 0);
  Reserve(3, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, at29[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(at29[0]), std::nullopt);
  EXPECT_EQ(cache().stats().drops, 1);
  EXPECT_EQ(cache().stats().offloads, 0);

  Reserve(3, 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, at30[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(at30[0]), Tier::kHost);
  EXPECT_EQ(PriorityOf(at30[0]), 30);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 1);
  EXPECT_EQ(s.offloads, 1);
  EXPECT_EQ(s.device_evictions, 2);
  EXPECT_EQ(s.host.cached, 1);
  EXPECT_EQ(s.host.free, 3);
  EXPECT_EQ(cache().Match(at30), Matched(0, 1));
  Finish(3);
}

TEST_F(KvCacheManagerTest, ThresholdAboveTheMaximumPriorityNeverOffloads) {
  KvCacheOptions o = Options(1, 4);
  o.offload_threshold = 101;
  Build(o);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  RunRequest(1, a, 4);
  SetPriority(a[0], kMaxPriority);
  RunRequest(2, Keys(Tokens(100, 4)), 4);
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
  EXPECT_EQ(cache().stats().offloads, 0);
  EXPECT_EQ(cache().stats().drops, 1);
}

TEST_F(KvCacheManagerTest, HostHitOnboardsTheBlocks) {
  Build(2, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  const std::vector<BlockKey> b = Keys(Tokens(100, 8));
  RunRequest(1, a, 8);
  RunRequest(2, b, 8);  // offloads a[1], then a[0]
  EXPECT_EQ(cache().Match(a), Matched(0, 2));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kHost);
  Events();

  EXPECT_EQ(Admit(3, a, 10), Matched(0, 2));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kDevice);
  // Each onboarded block took the device slot of one of b's blocks, which went to the host.
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, b[1], Tier::kDevice),
                                    Ev(KvEventKind::kOnboarded, a[0], Tier::kHost),
                                    Ev(KvEventKind::kOffloaded, b[0], Tier::kDevice),
                                    Ev(KvEventKind::kOnboarded, a[1], Tier::kHost)));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.onboards, 2);
  EXPECT_EQ(s.matched_host_blocks, 2);
  EXPECT_EQ(s.matched_host_tokens, 8);
  EXPECT_EQ(s.uncached_tokens, 8 + 8 + 2);
  EXPECT_EQ(s.device.held, 2);
  EXPECT_EQ(s.host.cached, 2);
  EXPECT_EQ(cache().Match(b), Matched(0, 2));

  // The onboarded blocks are held, so the request cannot evict them for its own tail.
  EXPECT_EQ(TryReserve(3, 10).code(), StatusCode::kResourceExhausted);
  Finish(3);
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
}

TEST_F(KvCacheManagerTest, OnboardingStopsWhenTheDeviceCannotMakeRoom) {
  Build(4, 8);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> x = Keys(Tokens(50, 4));
  const std::vector<BlockKey> y = Keys(Tokens(100, 12));
  RunRequest(1, a, 12);
  RunRequest(2, x, 4);
  Admit(3, y, 12);
  Reserve(3, 12);  // evicts a[2], a[1], a[0] to the host
  Commit(3, y);
  ASSERT_EQ(cache().Match(a), Matched(0, 3));

  // Only x can make room: a[0] is onboarded in its place, a[1] and a[2] stay on the host.
  EXPECT_EQ(Admit(4, a, 12), Matched(0, 1));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(a[2]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(x[0]), Tier::kHost);
  EXPECT_EQ(cache().stats().onboards, 1);
  EXPECT_EQ(cache().stats().uncached_tokens, 12 + 4 + 12 + 8);
  EXPECT_EQ(TryReserve(4, 12).code(), StatusCode::kResourceExhausted);
  Finish(3);
  Finish(4);
}

TEST_F(KvCacheManagerTest, CommitOfAKeyCachedOnTheHostPromotesTheHostCopy) {
  Build(4, 8);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> x = Keys(Tokens(50, 4));
  const std::vector<BlockKey> y = Keys(Tokens(100, 12));
  RunRequest(1, a, 12);
  RunRequest(2, x, 4);
  Admit(3, y, 12);
  Reserve(3, 12);
  Commit(3, y);
  EXPECT_EQ(Admit(4, a, 12), Matched(0, 1));  // a[1], a[2] stay on the host
  Finish(3);
  // Request 4 computes blocks 1 and 2 itself (it could not onboard them) and commits them:
  // their keys are cached on the host under its block 0, so the host copies are promoted
  // into the slots its own blocks occupied.
  Reserve(4, 12);
  ASSERT_EQ(cache().FindTier(a[1]), Tier::kHost);
  ASSERT_EQ(cache().FindTier(a[2]), Tier::kHost);
  const int64_t stored = cache().stats().stored_blocks;
  const int64_t onboards = cache().stats().onboards;
  const int64_t free_before = cache().stats().device.free;
  Events();
  Commit(4, From(a, 1));
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOnboarded, a[1], Tier::kHost),
                                    Ev(KvEventKind::kOnboarded, a[2], Tier::kHost)));
  EXPECT_EQ(cache().stats().stored_blocks, stored);
  EXPECT_EQ(cache().stats().onboards, onboards + 2);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[2]), Tier::kDevice);
  EXPECT_EQ(cache().stats().device.held, 3);
  EXPECT_EQ(cache().stats().device.free, free_before);
  Finish(4);
  EXPECT_EQ(cache().Match(a), Matched(3, 0));
}

// ---- Tier sizes of zero -------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, NoDeviceBlocksRefusesEveryReserveCleanly) {
  Build(0, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  EXPECT_EQ(Admit(1, a, 8), Matched(0, 0));
  Reserve(1, 0);  // holding nothing more is fine
  const Status s = TryReserve(1, 1);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(TryCommit(1, a).code(), StatusCode::kFailedPrecondition);
  Commit(1, {});
  Finish(1);
  const KvCacheStats st = cache().stats();
  EXPECT_EQ(st.device.capacity, 0);
  EXPECT_EQ(st.device.free, 0);
  EXPECT_EQ(st.stored_blocks, 0);
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  EXPECT_TRUE(TryReset().ok());
}

TEST_F(KvCacheManagerTest, NoHostBlocksDropsEveryEvictedBlock) {
  Build(1, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  RunRequest(1, a, 4);
  SetPriority(a[0], kMaxPriority);
  Events();
  RunRequest(2, Keys(Tokens(100, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[0]));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.offloads, 0);
  EXPECT_EQ(s.drops, 1);
  EXPECT_EQ(s.host.capacity, 0);
  EXPECT_EQ(s.host.cached, 0);
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
}

// ---- Gap-aware order ---------------------------------------------------------------------------

class GapOrderTest : public ::testing::Test {
 protected:
  using Harness = testing_internal::BlockCacheHarness;
  static constexpr int32_t kTpb = Harness::kTokensPerBlock;

  static KvCacheOptions GapOptions(int64_t device_blocks, int64_t host_blocks = 0) {
    KvCacheOptions o = Harness::Options(device_blocks, host_blocks);
    o.eviction_order = EvictionOrder::kGapAware;
    o.event_log_capacity = 1024;
    return o;
  }
  void Build(int64_t device_blocks, int64_t host_blocks = 0) {
    harness_.emplace(GapOptions(device_blocks, host_blocks));
  }
  BlockCache& cache() { return harness_->cache(); }
  std::vector<BlockKey> Keys(const std::vector<int32_t>& tokens) {
    return cache().hasher().KeysFromTokens(tokens, kTpb);
  }
  // Runs request `id` over `keys` (committing what it missed) and releases it with `rank`.
  void Run(int64_t id, const std::vector<BlockKey>& keys, const ReleaseRank& rank = {}) {
    harness_->Start(id, keys);
    ASSERT_TRUE(cache().Release(RequestId(id), rank).ok());
    harness_->CheckInvariants();
  }
  static ReleaseRank At(double seconds) { return ReleaseRank{TimeNs::Seconds(seconds), false}; }
  // Allocates `n` blocks one at a time for a new request `id`, then releases it; returns each
  // allocation's evictions (the key and event of the first block that left the device).
  std::vector<std::pair<BlockKey, KvEventKind>> Evict(int64_t id, int64_t n) {
    std::vector<std::pair<BlockKey, KvEventKind>> out;
    EXPECT_TRUE(cache().AddRequest(RequestId(id), {}).ok());
    static_cast<void>(cache().TakeEvents());
    for (int64_t k = 1; k <= n; ++k) {
      EXPECT_TRUE(cache().Reserve(RequestId(id), k * kTpb).ok());
      harness_->CheckInvariants();
      for (const KvEvent& e : cache().TakeEvents()) {
        if (e.tier != Tier::kDevice) continue;
        if (e.kind == KvEventKind::kDropped || e.kind == KvEventKind::kOffloaded) {
          out.emplace_back(e.key, e.kind);
          break;
        }
      }
    }
    EXPECT_TRUE(cache().Release(RequestId(id)).ok());
    harness_->CheckInvariants();
    return out;
  }
  static std::vector<BlockKey> KeysOnly(const std::vector<std::pair<BlockKey, KvEventKind>>& v) {
    std::vector<BlockKey> keys;
    for (const auto& [key, kind] : v) keys.push_back(key);
    return keys;
  }

  std::optional<Harness> harness_;
};

TEST_F(GapOrderTest, RanksByEffectiveLastUseWithinAPriorityAndPrioritiesStillDominate) {
  Build(4);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  const std::vector<BlockKey> c = Keys(Tokens(300, 4));
  const std::vector<BlockKey> d = Keys(Tokens(400, 4));
  // Finished in the order a, b, c, d (LRU would evict in that order), each ranked by its finish
  // less its expected pause: a waits for a human (60 s), b for a tool (1 s), c has no hint, d
  // waits for a long sub-agent run (200 s).
  cache().AdvanceClock(TimeNs::Seconds(100));
  Run(1, a, At(100 - 60));
  cache().AdvanceClock(TimeNs::Seconds(110));
  Run(2, b, At(110 - 1));
  cache().AdvanceClock(TimeNs::Seconds(120));
  Run(3, c);  // The clock: 120.
  cache().AdvanceClock(TimeNs::Seconds(130));
  Run(4, d, At(130 - 200));
  // Priorities come first: c at 20 leaves first, d at 60 last, whatever their ranks.
  ASSERT_TRUE(cache().SetPriority(c[0], 20).ok());
  ASSERT_TRUE(cache().SetPriority(d[0], 60).ok());
  EXPECT_THAT(KeysOnly(Evict(10, 4)), ElementsAre(c[0], a[0], b[0], d[0]));
}

TEST_F(GapOrderTest, EqualPrioritiesFollowTheRanksAlone) {
  Build(3);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  const std::vector<BlockKey> d = Keys(Tokens(400, 4));
  Run(1, a, At(40));
  Run(2, b, At(109));
  Run(3, d, At(-70));
  EXPECT_THAT(KeysOnly(Evict(10, 3)), ElementsAre(d[0], a[0], b[0]));
}

TEST_F(GapOrderTest, ABlockSeveralRequestsUseRanksByItsSoonestUser) {
  Build(4);
  // r is the root both x and y extend; z stands alone.
  std::vector<int32_t> rx = Tokens(0, 4);
  std::vector<int32_t> ry = Tokens(0, 4);
  for (int32_t t : Tokens(10, 4)) rx.push_back(t);
  for (int32_t t : Tokens(20, 4)) ry.push_back(t);
  const std::vector<BlockKey> x = Keys(rx);
  const std::vector<BlockKey> y = Keys(ry);
  const std::vector<BlockKey> z = Keys(Tokens(30, 4));
  ASSERT_EQ(x[0], y[0]);
  Run(1, y, At(50));  // y's session returns soon,
  Run(2, z, At(30));
  Run(3, x, At(10));  // x's much later: r keeps y's rank, 50.
  // Ranked by x's release alone, r (10) would leave before z and take y with it.
  EXPECT_THAT(KeysOnly(Evict(10, 4)), ElementsAre(x[1], z[0], y[1], x[0]));
}

TEST_F(GapOrderTest, AnEndedSessionsOwnBlocksGoFirstAndAreDroppedRatherThanOffloaded) {
  Build(5, 4);
  // s is shared: session A continues it with a1 a2, session B with b1.
  std::vector<int32_t> sa = Tokens(0, 4);
  std::vector<int32_t> sb = Tokens(0, 4);
  for (int32_t t : Tokens(10, 8)) sa.push_back(t);
  for (int32_t t : Tokens(20, 4)) sb.push_back(t);
  const std::vector<BlockKey> a = Keys(sa);  // s, a1, a2
  const std::vector<BlockKey> b = Keys(sb);  // s, b1
  ASSERT_EQ(a[0], b[0]);
  const std::vector<BlockKey> c = Keys(Tokens(30, 4));
  Run(1, c, At(0));  // The oldest block of all.
  Run(2, b, At(100));
  Run(3, a, ReleaseRank{std::nullopt, /*session_ended=*/true});
  // a2 and a1 nobody needs any more: first, and not worth a host slot. s still serves B.
  const std::vector<std::pair<BlockKey, KvEventKind>> evicted = Evict(10, 5);
  ASSERT_EQ(evicted.size(), 5u);
  EXPECT_THAT(KeysOnly(evicted), ElementsAre(a[2], a[1], c[0], b[1], b[0]));
  EXPECT_EQ(evicted[0].second, KvEventKind::kDropped);
  EXPECT_EQ(evicted[1].second, KvEventKind::kDropped);
  EXPECT_EQ(evicted[2].second, KvEventKind::kOffloaded);
}

TEST_F(GapOrderTest, RankUnneededStopsAtAHeldBlockOrALiveBranch) {
  Build(8);
  std::vector<int32_t> sa = Tokens(0, 4);
  std::vector<int32_t> sb = Tokens(0, 4);
  for (int32_t t : Tokens(10, 4)) sa.push_back(t);
  for (int32_t t : Tokens(20, 4)) sb.push_back(t);
  const std::vector<BlockKey> a = Keys(sa);
  const std::vector<BlockKey> b = Keys(sb);
  Run(1, a, At(10));
  Run(2, b, At(20));
  // Request 3 holds the shared root: the walk from a[1] marks a[1] only.
  harness_->Start(3, std::vector<BlockKey>{a[0]});
  cache().RankUnneeded(a[1]);
  harness_->CheckInvariants();
  ASSERT_TRUE(cache().Release(RequestId(3), At(5)).ok());
  // The root's rank stays the latest of its users' (20), after b[1]'s own (pushed earlier).
  EXPECT_THAT(KeysOnly(Evict(10, 8)), ElementsAre(a[1], b[1], a[0]));
  // An uncached tip is a no-op.
  cache().RankUnneeded(a[1]);
  harness_->CheckInvariants();
}

TEST_F(GapOrderTest, ANextUseRankingIsRefusedInTheGapAwareOrder) {
  Build(4);
  struct Never : NextUseRanking {
    int64_t NextUse(BlockKey) const override { return kNever; }
  } never;
  EXPECT_EQ(cache().SetNextUseRanking(&never).code(), StatusCode::kInvalidArgument);
}

// Property: with every request ranked at its release time less one common gap, the gap-aware
// order makes exactly LRU's choices (same matches, same events) under random prefix-sharing
// traffic with random retention priorities and concurrent requests; and at the end nothing is
// held and every invariant holds (no block leaked or pinned).
TEST_F(GapOrderTest, EqualGapsBehaveExactlyLikeLruWithinPriorities) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const int64_t device = 6 + static_cast<int64_t>(rng() % 20);
    KvCacheOptions lru_options = Harness::Options(device, seed % 2 == 0 ? 8 : 0);
    lru_options.event_log_capacity = 1 << 12;
    KvCacheOptions gap_options = lru_options;
    gap_options.eviction_order = EvictionOrder::kGapAware;
    Harness lru(lru_options);
    Harness gap(gap_options);
    const TimeNs common_gap = TimeNs::Seconds(static_cast<double>(rng() % 100));
    std::vector<int64_t> running;
    int64_t clock_s = 0;
    for (int64_t id = 1; id <= 300; ++id) {
      clock_s += static_cast<int64_t>(rng() % 3);
      gap.cache().AdvanceClock(TimeNs::Seconds(static_cast<double>(clock_s)));
      // A prompt: one of 4 roots, then 0-3 blocks from one of 3 continuations per level.
      std::vector<int32_t> tokens = Tokens(static_cast<int32_t>(rng() % 4) * 1000, 4);
      const int extra = static_cast<int>(rng() % 4);
      for (int level = 1; level <= extra; ++level) {
        for (int32_t t : Tokens(level * 100 + static_cast<int32_t>(rng() % 3) * 10, 4)) {
          tokens.push_back(t);
        }
      }
      const std::vector<BlockKey> keys = lru.cache().hasher().KeysFromTokens(tokens, kTpb);
      if (static_cast<int64_t>(keys.size()) + 3 > device) continue;
      const int64_t prompt_tokens = static_cast<int64_t>(tokens.size());
      std::optional<RetentionConfig> retention;
      if (rng() % 3 == 0) {
        retention.emplace();
        retention->token_ranges.push_back(
            TokenRangeRetention{0, kTpb, static_cast<Priority>(rng() % 3) * 30, std::nullopt});
      }
      // Room for the new request: retire running ones, oldest first, until it fits.
      while (!running.empty() &&
             (running.size() >= 3 ||
              lru.cache().stats().device.held + static_cast<int64_t>(keys.size()) > device - 1)) {
        const int64_t done = running.front();
        running.erase(running.begin());
        ASSERT_TRUE(lru.cache().Release(RequestId(done)).ok());
        ASSERT_TRUE(
            gap.cache()
                .Release(RequestId(done), ReleaseRank{gap.cache().clock() - common_gap, false})
                .ok());
      }
      const StatusOr<PrefixMatch> m1 =
          lru.cache().AddRequest(RequestId(id), keys, prompt_tokens, retention);
      const StatusOr<PrefixMatch> m2 =
          gap.cache().AddRequest(RequestId(id), keys, prompt_tokens, retention);
      ASSERT_TRUE(m1.ok() && m2.ok());
      ASSERT_EQ(*m1, *m2) << "seed " << seed << " request " << id;
      ASSERT_TRUE(lru.cache().Reserve(RequestId(id), prompt_tokens).ok());
      ASSERT_TRUE(gap.cache().Reserve(RequestId(id), prompt_tokens).ok());
      const std::span<const BlockKey> rest =
          std::span(keys).subspan(static_cast<size_t>(m1->total_blocks()));
      ASSERT_EQ(lru.cache().Commit(RequestId(id), rest).ok(),
                gap.cache().Commit(RequestId(id), rest).ok());
      running.push_back(id);
      ASSERT_EQ(lru.cache().TakeEvents(), gap.cache().TakeEvents())
          << "seed " << seed << " request " << id;
      lru.CheckInvariants();
      gap.CheckInvariants();
    }
    for (const int64_t done : running) {
      ASSERT_TRUE(lru.cache().Release(RequestId(done)).ok());
      ASSERT_TRUE(gap.cache().Release(RequestId(done)).ok());
    }
    EXPECT_EQ(lru.cache().stats(), gap.cache().stats()) << "seed " << seed;
    EXPECT_EQ(gap.cache().stats().device.held, 0);
    EXPECT_EQ(gap.cache().active_requests(), 0);
    gap.CheckInvariants();
  }
}

// Property: under random traffic where sessions share a system prompt and end, no block of a
// live session is evicted while a block only an ended session used is still on the device (all
// of one priority), and nothing is held at the end.
TEST_F(GapOrderTest, EndedSessionsBlocksLeaveBeforeLiveOnes) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed);
    Build(24);
    constexpr int kSessions = 6;
    // Session slot k's context: the shared system prompt, then its own turns.
    std::vector<std::vector<int32_t>> context(kSessions);
    std::vector<std::vector<BlockKey>> dead_chains;
    int64_t id = 0;
    for (int step = 0; step < 300; ++step) {
      const auto k = static_cast<size_t>(rng() % kSessions);
      std::vector<int32_t>& ctx = context[k];
      if (ctx.empty()) ctx = Tokens(0, 4);
      for (int32_t t : Tokens(1000000 * (step + 1), 4)) ctx.push_back(t);
      const std::vector<BlockKey> keys = Keys(ctx);
      const bool ends = rng() % 5 == 0 || keys.size() >= 10;
      cache().AdvanceClock(TimeNs::Seconds(step));
      // The blocks only ended sessions used (not the shared prompt), still on the device.
      std::vector<BlockKey> dead;
      for (const std::vector<BlockKey>& chain : dead_chains) {
        for (size_t i = 1; i < chain.size(); ++i) {
          if (cache().FindTier(chain[i]) == Tier::kDevice) dead.push_back(chain[i]);
        }
      }
      harness_->Start(++id, keys);
      size_t dead_left = dead.size();
      for (const KvEvent& e : cache().TakeEvents()) {
        if (e.kind != KvEventKind::kDropped && e.kind != KvEventKind::kEvicted) continue;
        if (std::find(dead.begin(), dead.end(), e.key) != dead.end()) {
          --dead_left;
        } else {
          ASSERT_EQ(dead_left, 0u) << "seed " << seed << " step " << step
                                   << ": a live block left before an ended session's";
        }
      }
      ASSERT_TRUE(cache()
                      .Release(RequestId(id), ends ? ReleaseRank{std::nullopt, true}
                                                   : At(static_cast<double>(step)))
                      .ok());
      harness_->CheckInvariants();
      if (ends) {
        dead_chains.push_back(keys);
        ctx.clear();
      }
    }
    EXPECT_EQ(cache().stats().device.held, 0);
    EXPECT_EQ(cache().active_requests(), 0);
  }
}

}  // namespace
}  // namespace agentkv::kv
