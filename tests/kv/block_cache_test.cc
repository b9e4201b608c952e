// Unit tests of BlockCache's own contract (block_cache.h), driven directly rather than through
// KvCacheManager: the request lifecycle and what it refuses, committed chains, and the by-key
// content interface the agentic layers use (Find, KeyOf, ExtendedOutside, SetBlockPriority,
// ReleaseIfUnused, key references and the eviction class they set). The cache's eviction and
// retention scenarios are in block_cache_eviction_test.cc and block_cache_retention_test.cc.
#include "agentkv/kv/block_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

class BlockCacheTest : public ::testing::Test {
 protected:
  static constexpr int32_t kTokensPerBlock = 4;

  void Build(int64_t device_blocks, int64_t host_blocks = 0) {
    KvCacheOptions o;
    o.tokens_per_block = kTokensPerBlock;
    o.device_blocks = device_blocks;
    o.host_blocks = host_blocks;
    o.hash_seed = 99;
    o.event_log_capacity = 64;
    StatusOr<BlockCache> created = BlockCache::Create(o);
    ASSERT_TRUE(created.ok()) << created.status();
    cache_.reset();
    cache_.emplace(std::move(created).value());
    CheckInvariants();
  }

  BlockCache& cache() { return *cache_; }

  void CheckInvariants() {
    const Status s = cache_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }

  // The full-block keys of `blocks` blocks whose tokens start at `first`.
  std::vector<BlockKey> Chain(int32_t first, int32_t blocks) {
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < blocks * kTokensPerBlock; ++i) tokens.push_back(first + i);
    return cache().hasher().KeysFromTokens(tokens, kTokensPerBlock);
  }

  // Admits request `id` for `keys`, computes and commits the blocks it did not match, and
  // leaves it running.
  void Start(int64_t id, const std::vector<BlockKey>& keys) {
    const StatusOr<PrefixMatch> m = cache().AddRequest(RequestId(id), keys);
    ASSERT_TRUE(m.ok()) << m.status();
    const int64_t tokens = static_cast<int64_t>(keys.size()) * kTokensPerBlock;
    ASSERT_TRUE(cache().Reserve(RequestId(id), tokens).ok());
    const std::span<const BlockKey> rest =
        std::span<const BlockKey>(keys).subspan(static_cast<size_t>(m->total_blocks()));
    ASSERT_TRUE(cache().Commit(RequestId(id), rest).ok());
    CheckInvariants();
  }
  void Finish(int64_t id) {
    ASSERT_TRUE(cache().Release(RequestId(id)).ok());
    CheckInvariants();
  }
  void Run(int64_t id, const std::vector<BlockKey>& keys) {
    Start(id, keys);
    Finish(id);
  }
  // Runs a one-block request on fresh tokens, which evicts one block when the device is full.
  void RunFresh(int64_t id) { Run(id, Chain(static_cast<int32_t>(1000 + 10 * id), 1)); }

  bool Cached(const std::vector<BlockKey>& keys) { return cache().Find(keys.back()).has_value(); }

  std::optional<BlockCache> cache_;
};

TEST_F(BlockCacheTest, CreateRejectsInvalidOptions) {
  KvCacheOptions o;
  o.tokens_per_block = 0;
  const StatusOr<BlockCache> created = BlockCache::Create(o);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BlockCacheTest, RequestLifecycleCommitsAndReleases) {
  Build(8);
  const std::vector<BlockKey> keys = Chain(1, 3);
  Start(1, keys);
  EXPECT_EQ(cache().active_requests(), 1);
  EXPECT_TRUE(cache().RequestActive(RequestId(1)));
  EXPECT_EQ(cache().stats().device.held, 3);
  Finish(1);
  EXPECT_EQ(cache().active_requests(), 0);
  EXPECT_EQ(cache().Match(keys), (PrefixMatch{3, 0}));
  EXPECT_EQ(cache().stats().device.evictable, 3);
  EXPECT_EQ(cache().Release(RequestId(1)).code(), StatusCode::kNotFound);
}

TEST_F(BlockCacheTest, CheckNewRequestRefusesWhatAddRequestWouldWithoutSideEffects) {
  Build(8);
  Start(1, Chain(1, 1));
  RetentionConfig bad;
  bad.decode_priority = 101;
  EXPECT_EQ(cache().CheckNewRequest(RequestId(2), -1, std::nullopt).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cache().CheckNewRequest(RequestId(2), 4, bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache().CheckNewRequest(RequestId(1), 4, std::nullopt).code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(cache().CheckNewRequest(RequestId(2), 4, std::nullopt).ok());
  EXPECT_EQ(cache().stats().lookups, 1);
  EXPECT_EQ(cache().active_requests(), 1);
  EXPECT_EQ(cache().AddRequest(RequestId(2), Chain(1, 1), 4, bad).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cache().AddRequest(RequestId(1), Chain(1, 1)).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(cache().stats().lookups, 1);
  CheckInvariants();
}

TEST_F(BlockCacheTest, CommittedChainOfNamesTheReusedPrefixAndTheNewBlocks) {
  Build(8);
  const std::vector<BlockKey> keys = Chain(1, 3);
  Run(1, std::vector<BlockKey>(keys.begin(), keys.begin() + 2));
  Start(2, keys);
  const StatusOr<CommittedChain> chain = cache().CommittedChainOf(RequestId(2));
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_THAT(chain->keys, ElementsAreArray(keys));
  EXPECT_EQ(chain->reused_blocks, 2);
  EXPECT_EQ(cache().CommittedChainOf(RequestId(3)).status().code(), StatusCode::kNotFound);
}

TEST_F(BlockCacheTest, CommittedChainOfOmitsUncommittedBlocks) {
  Build(8);
  const std::vector<BlockKey> keys = Chain(1, 2);
  ASSERT_TRUE(cache().AddRequest(RequestId(1), {}).ok());
  ASSERT_TRUE(cache().Reserve(RequestId(1), 3 * kTokensPerBlock).ok());
  ASSERT_TRUE(cache().Commit(RequestId(1), std::span<const BlockKey>(keys).first(1)).ok());
  const StatusOr<CommittedChain> chain = cache().CommittedChainOf(RequestId(1));
  ASSERT_TRUE(chain.ok());
  EXPECT_THAT(chain->keys, ElementsAre(keys[0]));
  EXPECT_EQ(chain->reused_blocks, 0);
  CheckInvariants();
}

TEST_F(BlockCacheTest, FindAndKeyOfNameCachedBlocksOnEitherTier) {
  Build(1, 4);
  const std::vector<BlockKey> a = Chain(1, 1);
  Run(1, a);
  RunFresh(2);  // Offloads `a` to the host.
  ASSERT_EQ(cache().FindTier(a[0]), Tier::kHost);
  const std::optional<BlockId> b = cache().Find(a[0]);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(cache().KeyOf(*b), a[0]);
  EXPECT_FALSE(cache().Find(Chain(500, 1)[0]).has_value());
}

TEST_F(BlockCacheTest, ExtendedOutsideSeesChildrenMissingFromTheSet) {
  Build(8);
  const std::vector<BlockKey> left = Chain(1, 2);
  std::vector<BlockKey> right = {left[0]};
  right.push_back(BlockKeyHasher::TokenBlockKey(left[0], std::vector<int32_t>{90, 91, 92, 93}));
  Run(1, left);
  Run(2, right);
  const BlockId root = *cache().Find(left[0]);
  const BlockId l = *cache().Find(left[1]);
  const BlockId r = *cache().Find(right[1]);
  EXPECT_TRUE(cache().ExtendedOutside(root, {}));
  EXPECT_TRUE(cache().ExtendedOutside(root, {l}));
  EXPECT_FALSE(cache().ExtendedOutside(root, {l, r}));
  EXPECT_FALSE(cache().ExtendedOutside(l, {}));  // A leaf.
}

TEST_F(BlockCacheTest, SetBlockPriorityReplacesAPendingDuration) {
  Build(8);
  const std::vector<BlockKey> a = Chain(1, 1);
  Run(1, a);
  ASSERT_TRUE(cache().SetPriority(a[0], 80, Step(5)).ok());
  cache().SetBlockPriority(*cache().Find(a[0]), 10);
  CheckInvariants();
  cache().AdvanceSteps(10);
  EXPECT_EQ(*cache().GetPriority(a[0]), 10);
  EXPECT_EQ(cache().stats().expirations, 0);
}

TEST_F(BlockCacheTest, ReleaseIfUnusedSparesHeldAndExtendedBlocks) {
  Build(8);
  const std::vector<BlockKey> keys = Chain(1, 2);
  Start(1, keys);
  EXPECT_FALSE(cache().ReleaseIfUnused(keys[1]));  // Held.
  Finish(1);
  cache().TakeEvents();
  EXPECT_FALSE(cache().ReleaseIfUnused(keys[0]));  // Extended by keys[1].
  EXPECT_TRUE(cache().ReleaseIfUnused(keys[1]));
  EXPECT_TRUE(cache().ReleaseIfUnused(keys[0]));
  EXPECT_FALSE(cache().ReleaseIfUnused(keys[0]));  // No longer cached.
  CheckInvariants();
  const std::vector<KvEvent> events = cache().TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, KvEventKind::kReleased);
  EXPECT_EQ(events[0].key, keys[1]);
  EXPECT_EQ(events[1].key, keys[0]);
  // Released blocks are not evictions.
  EXPECT_EQ(cache().stats().device_evictions, 0);
  EXPECT_EQ(cache().stats().drops, 0);
}

TEST_F(BlockCacheTest, AReferencedKeyIsEvictedAfterUnreferencedOnes) {
  Build(2);
  const std::vector<BlockKey> older = Chain(1, 1);
  const std::vector<BlockKey> newer = Chain(100, 1);
  Run(1, older);
  Run(2, newer);
  cache().ReferenceKey(older[0]);
  CheckInvariants();
  EXPECT_EQ(cache().KeyReferences(older[0]), 1);
  EXPECT_EQ(cache().referenced_keys(), 1);
  RunFresh(3);  // LRU alone would evict `older`.
  EXPECT_TRUE(Cached(older));
  EXPECT_FALSE(Cached(newer));
}

TEST_F(BlockCacheTest, TheLastDereferenceCanPutABlockFirstInLine) {
  Build(3);
  const std::vector<BlockKey> a = Chain(1, 1);
  const std::vector<BlockKey> b = Chain(100, 1);
  const std::vector<BlockKey> c = Chain(200, 1);
  Run(1, a);
  Run(2, b);
  Run(3, c);
  cache().ReferenceKey(c[0]);
  cache().ReferenceKey(c[0]);
  cache().DereferenceKey(c[0], /*evict_first=*/true);  // Still referenced once.
  EXPECT_EQ(cache().KeyReferences(c[0]), 1);
  CheckInvariants();
  RunFresh(4);
  EXPECT_FALSE(Cached(a));
  EXPECT_TRUE(Cached(c));
  cache().DereferenceKey(c[0], /*evict_first=*/true);
  EXPECT_EQ(cache().KeyReferences(c[0]), 0);
  EXPECT_EQ(cache().referenced_keys(), 0);
  CheckInvariants();
  RunFresh(5);  // `c` goes before the older `b`.
  EXPECT_FALSE(Cached(c));
  EXPECT_TRUE(Cached(b));
}

TEST_F(BlockCacheTest, KeyReferencesOutliveTheBlockAndApplyToItsRecomputation) {
  Build(2);
  const std::vector<BlockKey> a = Chain(1, 1);
  cache().ReferenceKey(a[0]);  // Before the block exists.
  Run(1, a);
  ASSERT_TRUE(cache().Reset().ok());
  EXPECT_EQ(cache().KeyReferences(a[0]), 1);  // Reset keeps references.
  CheckInvariants();
  Run(2, a);  // Recomputed: referenced again.
  Run(3, Chain(100, 1));
  RunFresh(4);
  EXPECT_TRUE(Cached(a));
}

TEST_F(BlockCacheTest, MovesKeepTheCacheUsable) {
  Build(4);
  const std::vector<BlockKey> a = Chain(1, 2);
  Run(1, a);
  BlockCache moved = std::move(*cache_);
  EXPECT_EQ(moved.Match(a), (PrefixMatch{2, 0}));
  EXPECT_TRUE(moved.CheckInvariants().ok());
}

// ---- Stall offload: OffloadChain and PrefetchChain --------------------------------------

// The number of events of `kind` in `events` that found their block in `tier`.
int64_t CountEvents(const std::vector<KvEvent>& events, KvEventKind kind,
                    std::optional<Tier> tier = std::nullopt) {
  int64_t n = 0;
  for (const KvEvent& e : events) {
    n += e.kind == kind && (!tier.has_value() || e.tier == *tier) ? 1 : 0;
  }
  return n;
}

TEST_F(BlockCacheTest, OffloadChainMovesAnUnheldChainToTheHostWithoutEvicting) {
  Build(/*device_blocks=*/8, /*host_blocks=*/8);
  const std::vector<BlockKey> chain = Chain(0, 4);
  Run(1, chain);
  cache().TakeEvents();
  EXPECT_EQ(cache().OffloadChain(chain), 4);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{0, 4}));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.stall_offloaded_blocks, 4);
  EXPECT_EQ(s.device_evictions, 0);
  EXPECT_EQ(s.offloads, 0);
  EXPECT_EQ(s.device.free, 8);
  EXPECT_EQ(CountEvents(cache().TakeEvents(), KvEventKind::kOffloaded), 4);
  // A request of the chain finds it on the host and onboards it, as any host hit.
  const StatusOr<PrefixMatch> hit = cache().AddRequest(RequestId(2), chain);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(*hit, (PrefixMatch{0, 4}));
  EXPECT_EQ(cache().stats().onboards, 4);
  Finish(2);
}

TEST_F(BlockCacheTest, OffloadChainNeverMovesBlocksARunningRequestHolds) {
  Build(8, 8);
  const std::vector<BlockKey> chain = Chain(0, 4);
  Start(1, chain);
  EXPECT_EQ(cache().OffloadChain(chain), 0);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{4, 0}));
  Finish(1);
  // A request holding only the first two blocks keeps those two; the tail moves.
  Start(2, std::vector<BlockKey>(chain.begin(), chain.begin() + 2));
  EXPECT_EQ(cache().OffloadChain(chain), 2);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{2, 2}));
  Finish(2);
}

TEST_F(BlockCacheTest, OffloadChainKeepsASharedPrefixOnTheDevice) {
  Build(12, 12);
  // Two chains share their first two blocks (a system prompt).
  std::vector<int32_t> ta;
  std::vector<int32_t> tb;
  for (int32_t i = 0; i < 2 * kTokensPerBlock; ++i) {
    ta.push_back(i);
    tb.push_back(i);
  }
  for (int32_t i = 0; i < 2 * kTokensPerBlock; ++i) {
    ta.push_back(500 + i);
    tb.push_back(900 + i);
  }
  const std::vector<BlockKey> a = cache().hasher().KeysFromTokens(ta, kTokensPerBlock);
  const std::vector<BlockKey> b = cache().hasher().KeysFromTokens(tb, kTokensPerBlock);
  ASSERT_EQ(a[1], b[1]);
  Run(1, a);
  Run(2, b);
  // a's own two blocks go; the fork (b extends the shared prefix) stops the walk.
  EXPECT_EQ(cache().OffloadChain(a), 2);
  CheckInvariants();
  EXPECT_EQ(cache().Match(a), (PrefixMatch{2, 2}));
  EXPECT_EQ(cache().Match(b), (PrefixMatch{4, 0}));
}

TEST_F(BlockCacheTest, OffloadChainOnlyFillsFreeHostRoom) {
  Build(8, /*host_blocks=*/2);
  const std::vector<BlockKey> chain = Chain(0, 4);
  Run(1, chain);
  EXPECT_EQ(cache().OffloadChain(chain), 2);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{2, 2}));
  // The host is full now: nothing more moves, and nothing on the host is evicted for it.
  const std::vector<BlockKey> other = Chain(300, 2);
  Run(2, other);
  EXPECT_EQ(cache().OffloadChain(other), 0);
  EXPECT_EQ(cache().stats().drops, 0);
  CheckInvariants();
}

TEST_F(BlockCacheTest, OffloadChainNeedsAHostTier) {
  Build(8, 0);
  const std::vector<BlockKey> chain = Chain(0, 3);
  Run(1, chain);
  EXPECT_EQ(cache().OffloadChain(chain), 0);
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{3, 0}));
}

TEST_F(BlockCacheTest, PrefetchChainLoadsTheHostRunBackUnheldAndCountsPrefetches) {
  Build(8, 8);
  const std::vector<BlockKey> chain = Chain(0, 4);
  Run(1, chain);
  ASSERT_EQ(cache().OffloadChain(chain), 4);
  cache().TakeEvents();
  EXPECT_EQ(cache().PrefetchChain(chain, /*max_blocks=*/3), 3);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{3, 1}));
  EXPECT_EQ(cache().PrefetchChain(chain, 8), 1);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{4, 0}));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.prefetched_blocks, 4);
  EXPECT_EQ(s.onboards, 0);
  EXPECT_EQ(s.device.held, 0);
  EXPECT_EQ(s.device.evictable, 4);
  EXPECT_EQ(CountEvents(cache().TakeEvents(), KvEventKind::kOnboarded), 4);
  // The next request finds everything on the device.
  const StatusOr<PrefixMatch> hit = cache().AddRequest(RequestId(2), chain);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(*hit, (PrefixMatch{4, 0}));
  Finish(2);
}

TEST_F(BlockCacheTest, PrefetchChainMakesRoomInEvictionOrderButNeverFromHeldBlocks) {
  Build(4, 8);
  const std::vector<BlockKey> chain = Chain(0, 2);
  Run(1, chain);
  ASSERT_EQ(cache().OffloadChain(chain), 2);
  // A running request holds three of the four device blocks; one is free.
  Start(2, Chain(200, 3));
  EXPECT_EQ(cache().PrefetchChain(chain, 8), 1);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{1, 1}));
  Finish(2);
  // Now the held blocks are evictable: the rest comes back, evicting the oldest of them (to
  // the host).
  EXPECT_EQ(cache().PrefetchChain(chain, 8), 1);
  CheckInvariants();
  EXPECT_EQ(cache().Match(chain), (PrefixMatch{2, 0}));
  EXPECT_EQ(cache().stats().offloads, 1);
}

TEST_F(BlockCacheTest, StallMovesConserveEveryBlock) {
  // Every block a stall offload moved is, at the end, back on the device (prefetched or
  // onboarded), still on the host, or gone from the host by its own eviction order: counted
  // from the events, nothing is lost silently and nothing is pinned (every block evictable).
  Build(6, 4);
  const std::vector<BlockKey> a = Chain(0, 3);
  const std::vector<BlockKey> b = Chain(100, 3);
  Run(1, a);
  Run(2, b);
  int64_t offloaded = cache().OffloadChain(a);
  offloaded += cache().OffloadChain(b);  // The host has room for one more block only.
  EXPECT_EQ(offloaded, 4);
  EXPECT_EQ(cache().PrefetchChain(a, 8), 3);
  for (int64_t id = 3; id < 9; ++id) RunFresh(id);  // Pushes blocks through both tiers.
  CheckInvariants();
  const std::vector<KvEvent> events = cache().TakeEvents();
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.stall_offloaded_blocks, 4);
  EXPECT_EQ(s.prefetched_blocks, 3);
  EXPECT_EQ(s.device.held, 0);
  EXPECT_EQ(s.device.evictable + s.device.free, s.device.capacity);
  // Host occupancy is exactly what moved in less what moved out or left the host.
  EXPECT_EQ(CountEvents(events, KvEventKind::kOffloaded) -
                CountEvents(events, KvEventKind::kOnboarded) -
                CountEvents(events, KvEventKind::kEvicted) -
                CountEvents(events, KvEventKind::kDropped, Tier::kHost) -
                CountEvents(events, KvEventKind::kReleased, Tier::kHost),
            s.host.cached);
  EXPECT_GT(CountEvents(events, KvEventKind::kEvicted), 0);
}

}  // namespace
}  // namespace agentkv::kv
