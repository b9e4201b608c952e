// Tests of BlockCache's payloads (block_cache.h, "Payloads"): a committed block's int64 that
// Match reads back for the device prefix and every event carries, as an engine adapter keeps
// the page of KV slots each block was computed in. Scenarios, then a model-based randomized
// test that keeps its own key -> payload map from the events alone, as the adapter does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/kv/block_cache.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr int32_t kTokensPerBlock = 4;

BlockCache Build(int64_t device_blocks, int64_t host_blocks = 0) {
  KvCacheOptions o;
  o.tokens_per_block = kTokensPerBlock;
  o.device_blocks = device_blocks;
  o.host_blocks = host_blocks;
  o.offload_threshold = 0;  // every evicted block goes to the host tier when there is one
  o.hash_seed = 7;
  o.event_log_capacity = 1 << 12;
  StatusOr<BlockCache> created = BlockCache::Create(o);
  AGENTKV_CHECK(created.ok());
  return std::move(created).value();
}

std::vector<BlockKey> Chain(const BlockCache& cache, int32_t first, int32_t blocks) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < blocks * kTokensPerBlock; ++i) tokens.push_back(first + i);
  return cache.hasher().KeysFromTokens(tokens, kTokensPerBlock);
}

// Admits `id` for `keys`, reserves them all and commits the unmatched ones with `payloads`
// (one per unmatched key); returns what it matched.
PrefixMatch Start(BlockCache& cache, int64_t id, const std::vector<BlockKey>& keys,
                  const std::vector<int64_t>& payloads) {
  const StatusOr<PrefixMatch> m = cache.AddRequest(RequestId(id), keys);
  AGENTKV_CHECK(m.ok());
  AGENTKV_CHECK(
      cache.Reserve(RequestId(id), static_cast<int64_t>(keys.size()) * kTokensPerBlock).ok());
  const auto rest = std::span<const BlockKey>(keys).subspan(static_cast<size_t>(m->total_blocks()));
  const Status s =
      cache.Commit(RequestId(id), rest, std::span<const int64_t>(payloads).first(rest.size()));
  AGENTKV_CHECK(s.ok());
  return *m;
}

std::vector<int64_t> MatchedPayloads(const BlockCache& cache, const std::vector<BlockKey>& keys) {
  std::vector<int64_t> payloads;
  const PrefixMatch m = cache.Match(keys, payloads);
  EXPECT_EQ(static_cast<int64_t>(payloads.size()), m.device_blocks);
  return payloads;
}

TEST(BlockCachePayloadTest, MatchReadsTheDevicePrefixsPayloadsInChainOrder) {
  BlockCache cache = Build(8);
  const std::vector<BlockKey> keys = Chain(cache, 1, 3);
  Start(cache, 1, keys, {160, 32, 480});
  ASSERT_TRUE(cache.Release(RequestId(1)).ok());
  EXPECT_THAT(MatchedPayloads(cache, keys), ElementsAre(160, 32, 480));
  // A chain that leaves the cache after two blocks reads two.
  std::vector<BlockKey> other = Chain(cache, 1, 2);
  other.push_back(Chain(cache, 900, 1)[0]);
  EXPECT_THAT(MatchedPayloads(cache, other), ElementsAre(160, 32));
  EXPECT_EQ(cache.Payload(keys[2]).value(), 480);
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

TEST(BlockCachePayloadTest, ASharedBlockKeepsThePayloadItWasStoredWith) {
  BlockCache cache = Build(8);
  const std::vector<BlockKey> keys = Chain(cache, 1, 2);
  // Two requests compute the same blocks side by side; the second commits after the first.
  ASSERT_TRUE(cache.AddRequest(RequestId(1), {}).ok());
  ASSERT_TRUE(cache.AddRequest(RequestId(2), {}).ok());
  ASSERT_TRUE(cache.Reserve(RequestId(1), 8).ok());
  ASSERT_TRUE(cache.Reserve(RequestId(2), 8).ok());
  const std::vector<int64_t> first = {10, 20};
  const std::vector<int64_t> second = {30, 40};
  ASSERT_TRUE(cache.Commit(RequestId(1), keys, first).ok());
  ASSERT_TRUE(cache.Commit(RequestId(2), keys, second).ok());
  EXPECT_THAT(MatchedPayloads(cache, keys), ElementsAre(10, 20));
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

TEST(BlockCachePayloadTest, CommitRefusesMismatchedSizesWithNothingChanged) {
  BlockCache cache = Build(8);
  const std::vector<BlockKey> keys = Chain(cache, 1, 2);
  ASSERT_TRUE(cache.AddRequest(RequestId(1), {}).ok());
  ASSERT_TRUE(cache.Reserve(RequestId(1), 8).ok());
  const std::vector<int64_t> one = {5};
  EXPECT_EQ(cache.Commit(RequestId(1), keys, one).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.stats().device.cached, 0);
  const std::vector<int64_t> two = {5, 6};
  EXPECT_TRUE(cache.Commit(RequestId(1), keys, two).ok());
  EXPECT_EQ(cache.stats().device.cached, 2);
}

TEST(BlockCachePayloadTest, SetPayloadAndPayloadNeedACachedBlock) {
  BlockCache cache = Build(8);
  const std::vector<BlockKey> keys = Chain(cache, 1, 1);
  EXPECT_EQ(cache.SetPayload(keys[0], 3).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache.Payload(keys[0]).status().code(), StatusCode::kNotFound);
  Start(cache, 1, keys, {64});
  ASSERT_TRUE(cache.SetPayload(keys[0], 128).ok());
  EXPECT_EQ(cache.Payload(keys[0]).value(), 128);
}

TEST(BlockCachePayloadTest, BlocksStoredWithoutPayloadsReadZeroEvenInAReusedSlot) {
  BlockCache cache = Build(1);
  const std::vector<BlockKey> a = Chain(cache, 1, 1);
  Start(cache, 1, a, {77});
  ASSERT_TRUE(cache.Release(RequestId(1)).ok());
  // The only device block is evicted and reused by a commit that gives no payload.
  const std::vector<BlockKey> b = Chain(cache, 50, 1);
  ASSERT_TRUE(cache.AddRequest(RequestId(2), b).ok());
  ASSERT_TRUE(cache.Reserve(RequestId(2), 4).ok());
  ASSERT_TRUE(cache.Commit(RequestId(2), b).ok());
  EXPECT_EQ(cache.Payload(b[0]).value(), 0);
  EXPECT_FALSE(cache.Payload(a[0]).ok());
}

TEST(BlockCachePayloadTest, EventsCarryThePayloadTheBlockHadWhenTheyHappened) {
  BlockCache cache = Build(2, 2);
  const std::vector<BlockKey> a = Chain(cache, 1, 2);
  Start(cache, 1, a, {16, 32});
  ASSERT_TRUE(cache.Release(RequestId(1)).ok());
  (void)cache.TakeEvents();
  // A new chain needs the device: both blocks of `a` go to the host with their device pages.
  Start(cache, 2, Chain(cache, 100, 2), {48, 64});
  std::vector<std::pair<KvEventKind, int64_t>> seen;
  for (const KvEvent& e : cache.TakeEvents()) {
    if (e.kind == KvEventKind::kOffloaded) seen.emplace_back(e.kind, e.payload);
  }
  EXPECT_THAT(seen, ElementsAre(std::pair{KvEventKind::kOffloaded, 32},
                                std::pair{KvEventKind::kOffloaded, 16}));
  // The adapter records where the host copies are.
  ASSERT_TRUE(cache.SetPayload(a[0], 1000).ok());
  ASSERT_TRUE(cache.SetPayload(a[1], 1004).ok());
  ASSERT_TRUE(cache.Release(RequestId(2)).ok());
  // Admitting `a` again onboards it: each onboarded event names the host copy.
  ASSERT_TRUE(cache.AddRequest(RequestId(3), a).ok());
  std::vector<int64_t> onboarded;
  for (const KvEvent& e : cache.TakeEvents()) {
    if (e.kind == KvEventKind::kOnboarded) onboarded.push_back(e.payload);
  }
  EXPECT_THAT(onboarded, ElementsAre(1000, 1004));
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

TEST(BlockCachePayloadTest, AHostCopyPromotedAtCommitTakesTheCommittersPayload) {
  BlockCache cache = Build(2, 2);
  const std::vector<BlockKey> a = Chain(cache, 1, 1);
  // Request 2 starts computing `a`'s block before request 1's copy goes to the host.
  ASSERT_TRUE(cache.AddRequest(RequestId(2), {}).ok());
  ASSERT_TRUE(cache.Reserve(RequestId(2), 4).ok());
  Start(cache, 1, a, {8});
  ASSERT_TRUE(cache.Release(RequestId(1)).ok());
  Start(cache, 3, Chain(cache, 100, 1), {24});  // fills the device: `a` is offloaded
  ASSERT_EQ(cache.FindTier(a[0]), Tier::kHost);
  ASSERT_TRUE(cache.SetPayload(a[0], 2000).ok());
  const std::vector<int64_t> mine = {40};
  ASSERT_TRUE(cache.Commit(RequestId(2), a, mine).ok());
  EXPECT_EQ(cache.FindTier(a[0]), Tier::kDevice);
  EXPECT_EQ(cache.Payload(a[0]).value(), 40);
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

TEST(BlockCachePayloadTest, EvictDeviceFreesBeyondTheFreeBlocksInTheCachesOrder) {
  BlockCache cache = Build(6);
  const std::vector<BlockKey> a = Chain(cache, 1, 2);
  const std::vector<BlockKey> b = Chain(cache, 100, 2);
  Start(cache, 1, a, {0, 4});
  ASSERT_TRUE(cache.Release(RequestId(1)).ok());
  Start(cache, 2, b, {8, 12});  // b stays held
  (void)cache.TakeEvents();
  ASSERT_EQ(cache.stats().device.free, 2);
  // One block asked for: a's deepest (LRU picks leaves), its slots named by the event.
  EXPECT_EQ(cache.EvictDevice(1), 1);
  std::vector<int64_t> dropped;
  for (const KvEvent& e : cache.TakeEvents()) {
    if (e.kind == KvEventKind::kDropped) dropped.push_back(e.payload);
  }
  EXPECT_THAT(dropped, ElementsAre(4));
  EXPECT_EQ(cache.stats().device.free, 3);
  // More than is evictable: only the unheld block goes; held ones stay.
  EXPECT_EQ(cache.EvictDevice(10), 1);
  EXPECT_EQ(cache.stats().device.free, 4);
  EXPECT_EQ(cache.Match(b), (PrefixMatch{2, 0}));
  EXPECT_EQ(cache.EvictDevice(0), 0);
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

// The model: what an adapter knows from the events and its own calls only. Random sessions
// over shared prefixes, with a host tier, under eviction; after every call the cache's
// payloads equal the model's, and each event's payload is the one the model has for it.
TEST(BlockCachePayloadTest, RandomizedEventsKeepAnAdaptersTableExact) {
  std::map<KvEventKind, int64_t> kinds_seen;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    Rng rng(seed);
    BlockCache cache = Build(24, rng.Bernoulli(0.5) ? 12 : 0);
    std::map<uint64_t, int64_t> model;
    int64_t next_payload = 1;
    const auto follow = [&] {
      for (const KvEvent& e : cache.TakeEvents()) {
        const uint64_t key = e.key.value();
        ++kinds_seen[e.kind];
        if (e.kind == KvEventKind::kStored) {
          ASSERT_FALSE(model.contains(key));
          model[key] = e.payload;
          continue;
        }
        ASSERT_TRUE(model.contains(key)) << e.key;
        EXPECT_EQ(e.payload, model[key]) << KvEventKindName(e.kind);
        if (e.kind == KvEventKind::kOffloaded || e.kind == KvEventKind::kOnboarded) {
          // The adapter moved the bytes: the block now lives at a new place.
          model[key] = next_payload++;
          ASSERT_TRUE(cache.SetPayload(e.key, model[key]).ok());
        } else {
          model.erase(key);
        }
      }
    };
    int64_t id = 1;
    for (int op = 0; op < 300; ++op) {
      // One of four shared prefixes, then a tail of one of 30 turns: chains that fork.
      std::vector<int32_t> tokens;
      const int32_t prefix = static_cast<int32_t>(rng.Uniform(0, 3)) * 1000;
      for (int32_t t = 0; t < static_cast<int32_t>(rng.Uniform(1, 4)) * kTokensPerBlock; ++t) {
        tokens.push_back(prefix + t);
      }
      const int32_t turn = static_cast<int32_t>(rng.Uniform(1, 30)) * 100 + 10000;
      for (int32_t t = 0; t < static_cast<int32_t>(rng.Uniform(0, 4)) * kTokensPerBlock; ++t) {
        tokens.push_back(turn + t);
      }
      const std::vector<BlockKey> keys = cache.hasher().KeysFromTokens(tokens, kTokensPerBlock);
      const StatusOr<PrefixMatch> m = cache.AddRequest(RequestId(id), keys);
      ASSERT_TRUE(m.ok());
      follow();
      const Status reserved =
          cache.Reserve(RequestId(id), static_cast<int64_t>(keys.size()) * kTokensPerBlock);
      if (reserved.ok()) {
        const auto rest =
            std::span<const BlockKey>(keys).subspan(static_cast<size_t>(m->total_blocks()));
        std::vector<int64_t> payloads;
        for (size_t i = 0; i < rest.size(); ++i) payloads.push_back(next_payload++);
        const Status committed = cache.Commit(RequestId(id), rest, payloads);
        ASSERT_TRUE(committed.ok()) << committed;
      }
      follow();
      ASSERT_TRUE(cache.Release(RequestId(id)).ok());
      follow();
      ++id;
      for (const auto& [key, payload] : model) {
        ASSERT_EQ(cache.Payload(BlockKey(key)).value(), payload);
      }
      std::vector<int64_t> matched;
      const PrefixMatch found = cache.Match(keys, matched);
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < found.device_blocks; ++i) {
        expected.push_back(model.at(keys[static_cast<size_t>(i)].value()));
      }
      EXPECT_THAT(matched, ElementsAreArray(expected));
      ASSERT_TRUE(cache.CheckInvariants().ok());
    }
  }
  // Every kind the adapter follows happened.
  for (const KvEventKind kind : {KvEventKind::kStored, KvEventKind::kDropped,
                                 KvEventKind::kOffloaded, KvEventKind::kOnboarded}) {
    EXPECT_GT(kinds_seen[kind], 10) << KvEventKindName(kind);
  }
}

}  // namespace
}  // namespace agentkv::kv
