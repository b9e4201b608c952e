// The offline-optimal eviction mode of BlockCache (next_use_ranking.h): victims follow the
// caller's ranking (farthest next use, deeper on ties), held blocks stay, re-ranking, the
// preconditions of SetNextUseRanking, and the invariant that ties keep the cache closed under
// prefixes (a parent never leaves before a child needed with it: no cascades).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/next_use_ranking.h"
#include "block_cache_harness.h"

namespace agentkv::kv {
namespace {

using testing_internal::BlockCacheHarness;

// A ranking the test sets key by key; unknown keys are never needed again.
class MapRanking final : public NextUseRanking {
 public:
  void Set(BlockKey key, int64_t next_use) { ranks_[key.value()] = next_use; }
  void Set(const std::vector<BlockKey>& keys, int64_t next_use) {
    for (const BlockKey k : keys) Set(k, next_use);
  }
  int64_t NextUse(BlockKey key) const override {
    auto it = ranks_.find(key.value());
    return it == ranks_.end() ? kNever : it->second;
  }

 private:
  std::unordered_map<uint64_t, int64_t> ranks_;
};

class BlockCacheNextUseTest : public ::testing::Test {
 protected:
  BlockCacheNextUseTest() : h_(BlockCacheHarness::Options(/*device_blocks=*/6)) {
    EXPECT_TRUE(h_.cache().SetNextUseRanking(&ranking_).ok());
  }

  void Run(int64_t id, const std::vector<BlockKey>& keys) {
    h_.Start(id, keys);
    h_.Finish(id);
  }
  bool Cached(BlockKey key) { return h_.cache().FindTier(key).has_value(); }

  MapRanking ranking_;
  BlockCacheHarness h_;
};

TEST_F(BlockCacheNextUseTest, EvictsTheBlockNeededFarthestAheadNotTheLeastRecent) {
  const std::vector<BlockKey> a = h_.Chain(0, 2);
  const std::vector<BlockKey> b = h_.Chain(100, 2);
  const std::vector<BlockKey> c = h_.Chain(200, 2);
  ranking_.Set(a, 3);  // Needed soon: LRU would evict it first.
  ranking_.Set(b, 9);  // Needed last: the oracle's victim.
  ranking_.Set(c, 5);
  Run(1, a);
  Run(2, b);
  Run(3, c);
  Run(4, h_.Chain(300, 2));  // Needs two blocks: both of b go.
  EXPECT_TRUE(Cached(a[0]) && Cached(a[1]));
  EXPECT_FALSE(Cached(b[0]) || Cached(b[1]));
  EXPECT_TRUE(Cached(c[0]) && Cached(c[1]));
  EXPECT_EQ(h_.cache().stats().device_evictions, 2);
}

TEST_F(BlockCacheNextUseTest, EqualNextUseEvictsTheDeeperBlockSoNothingCascades) {
  const std::vector<BlockKey> a = h_.Chain(0, 4);
  ranking_.Set(a, NextUseRanking::kNever);
  Run(1, a);
  Run(2, h_.Chain(100, 4));  // Two blocks short; a's two leaves go, deepest first.
  EXPECT_TRUE(Cached(a[0]) && Cached(a[1]));
  EXPECT_FALSE(Cached(a[2]) || Cached(a[3]));
  EXPECT_EQ(h_.cache().stats().drops, 2);
  EXPECT_EQ(h_.cache().stats().device_evictions, 2);
}

TEST_F(BlockCacheNextUseTest, HeldBlocksAreNeverVictims) {
  const std::vector<BlockKey> a = h_.Chain(0, 3);
  ranking_.Set(a, NextUseRanking::kNever);
  h_.Start(1, a);
  const std::vector<BlockKey> b = h_.Chain(100, 3);
  ranking_.Set(b, 1);
  Run(2, b);
  EXPECT_TRUE(Cached(a[0]) && Cached(a[1]) && Cached(a[2]));
  // Full: a is held, so the next request must take b's blocks although they rank nearer.
  h_.Start(3, h_.Chain(200, 1));
  EXPECT_FALSE(Cached(b[2]));
  h_.Finish(3);
  h_.Finish(1);
}

TEST_F(BlockCacheNextUseTest, RefreshNextUseReRanksAnEvictableBlock) {
  const std::vector<BlockKey> a = h_.Chain(0, 3);
  const std::vector<BlockKey> b = h_.Chain(100, 3);
  ranking_.Set(a, 2);
  ranking_.Set(b, 8);
  Run(1, a);
  Run(2, b);
  ranking_.Set(a, 20);  // The caller learns a is needed later now; a chain re-ranks deepest first.
  for (size_t i = a.size(); i-- > 0;) h_.cache().RefreshNextUse(a[i]);
  h_.cache().RefreshNextUse(h_.Chain(500, 1)[0]);  // Not cached: a no-op.
  h_.CheckInvariants();
  Run(3, h_.Chain(200, 3));
  EXPECT_FALSE(Cached(a[0]) || Cached(a[1]) || Cached(a[2]));
  EXPECT_TRUE(Cached(b[0]) && Cached(b[1]) && Cached(b[2]));
}

TEST_F(BlockCacheNextUseTest, AReRankedBlockNeverRanksAfterItsCachedChildren) {
  const std::vector<BlockKey> a = h_.Chain(0, 2);
  const std::vector<BlockKey> b = h_.Chain(100, 2);
  ranking_.Set(a, 4);
  ranking_.Set(b, 6);
  Run(1, a);
  Run(2, b);
  // a's root alone is "never needed again", but its child still is (at 4): evicting the root
  // would take the child along, so both stay ranked at 4 and b (at 6) goes first.
  ranking_.Set(a[0], NextUseRanking::kNever);
  h_.cache().RefreshNextUse(a[0]);
  h_.CheckInvariants();
  Run(3, h_.Chain(200, 4));
  EXPECT_TRUE(Cached(a[0]) && Cached(a[1]));
  EXPECT_FALSE(Cached(b[0]) || Cached(b[1]));
  EXPECT_EQ(h_.cache().stats().drops, 2);
}

TEST_F(BlockCacheNextUseTest, ResetKeepsTheModeAndEmptiesTheHeap) {
  Run(1, h_.Chain(0, 3));
  ASSERT_TRUE(h_.cache().Reset().ok());
  h_.CheckInvariants();
  Run(2, h_.Chain(100, 6));
  Run(3, h_.Chain(200, 6));
  EXPECT_TRUE(h_.cache().has_next_use_ranking());
}

TEST(BlockCacheNextUseOptionsTest, SetOnAnEmptyDeviceOnlyCache) {
  MapRanking ranking;
  BlockCacheHarness tiered(BlockCacheHarness::Options(4, /*host_blocks=*/4));
  EXPECT_EQ(tiered.cache().SetNextUseRanking(&ranking).code(), StatusCode::kInvalidArgument);

  BlockCacheHarness h(BlockCacheHarness::Options(4));
  h.Start(1, h.Chain(0, 1));
  EXPECT_EQ(h.cache().SetNextUseRanking(&ranking).code(), StatusCode::kFailedPrecondition);
  h.Finish(1);
  EXPECT_EQ(h.cache().SetNextUseRanking(&ranking).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(h.cache().Reset().ok());
  EXPECT_TRUE(h.cache().SetNextUseRanking(&ranking).ok());
  EXPECT_TRUE(h.cache().has_next_use_ranking());
  EXPECT_TRUE(h.cache().SetNextUseRanking(nullptr).ok());
  EXPECT_FALSE(h.cache().has_next_use_ranking());
  // Back to priority and LRU.
  h.Start(2, h.Chain(0, 4));
  h.Finish(2);
  h.Start(3, h.Chain(100, 1));
  EXPECT_FALSE(h.cache().FindTier(h.Chain(0, 4)[3]).has_value());
  h.Finish(3);
}

}  // namespace
}  // namespace agentkv::kv
