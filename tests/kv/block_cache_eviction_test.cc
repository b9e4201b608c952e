// Scenario tests of BlockCache's eviction (block_cache.h), driven through the KvCacheManager
// fixture, which hands requests without a session or conversation straight to the core:
// priority-then-LRU victim order, held blocks and refused allocations that change nothing, cascades
// to dependents on both tiers, the offload threshold that decides offload versus drop, host hits
// that onboard, and tiers of size zero.
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
}  // namespace
}  // namespace agentkv::kv
