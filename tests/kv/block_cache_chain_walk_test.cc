// Tests of how BlockCache walks a chain of keys (Match, AddRequest): it follows each block's
// newest child while that child is the next slot of the arena and the wanted key, and probes the
// index (with a prefetch window from where the links stopped) otherwise. Whichever path a step
// takes, a match must be what the keys alone say: the longest run of leading keys cached on the
// device, then the run of the following ones cached on the host (keys are chained hashes, so a
// cached key is cached under its own parent). A randomized test checks that against
// FindTier(key), which only probes the index, on caches big enough for the prefetch window,
// with forks (a fork's newest child is another branch), slots reused in scattered order after
// evictions, and a host tier.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/kv/block_cache.h"
#include "block_cache_harness.h"

namespace agentkv::kv {
namespace {

constexpr int32_t kTokensPerBlock = 1;

BlockCache Build(int64_t device_blocks, int64_t host_blocks) {
  KvCacheOptions o = testing_internal::BlockCacheHarness::Options(device_blocks, host_blocks);
  o.tokens_per_block = kTokensPerBlock;
  o.offload_threshold = 0;  // every evicted block goes to the host tier when there is one
  return std::move(BlockCache::Create(o)).value();
}

// A uniform offset in [0, n].
ptrdiff_t Below(Rng& rng, size_t n) { return rng.Uniform(0, static_cast<int64_t>(n)); }

// What a match must find, from the index alone.
PrefixMatch Expected(const BlockCache& cache, std::span<const BlockKey> keys) {
  PrefixMatch m;
  size_t i = 0;
  while (i < keys.size() && cache.FindTier(keys[i]) == Tier::kDevice) ++i;
  m.device_blocks = static_cast<int64_t>(i);
  while (i < keys.size() && cache.FindTier(keys[i]) == Tier::kHost) ++i;
  m.host_blocks = static_cast<int64_t>(i) - m.device_blocks;
  return m;
}

TEST(BlockCacheChainWalkTest, TwoBranchesOfAForkAreBothFoundWhicheverIsNewest) {
  BlockCache cache = Build(64, 0);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> b = {1, 2, 3, 40, 50, 60};
  const std::vector<BlockKey> ka = cache.hasher().KeysFromTokens(a, kTokensPerBlock);
  const std::vector<BlockKey> kb = cache.hasher().KeysFromTokens(b, kTokensPerBlock);
  int64_t id = 1;
  for (const std::vector<BlockKey>* keys : {&ka, &kb}) {
    const PrefixMatch m = cache.AddRequest(RequestId(id), *keys).value();
    ASSERT_TRUE(cache.Reserve(RequestId(id), static_cast<int64_t>(keys->size())).ok());
    ASSERT_TRUE(
        cache.Commit(RequestId(id), std::span(*keys).subspan(static_cast<size_t>(m.device_blocks)))
            .ok());
    ASSERT_TRUE(cache.Release(RequestId(id++)).ok());
  }
  // Block 3's newest child is b's 40, in the slot after a's blocks: a's 4 is found by the index.
  EXPECT_EQ(cache.Match(ka).device_blocks, 6);
  EXPECT_EQ(cache.Match(kb).device_blocks, 6);
  std::vector<BlockKey> mixed(ka.begin(), ka.begin() + 4);
  mixed.push_back(kb[4]);  // b's 50 under a's 4: not a cached chain
  EXPECT_EQ(cache.Match(mixed).device_blocks, 4);
}

TEST(BlockCacheChainWalkTest, RandomizedMatchesAreTheCachedPrefixOfTheKeys) {
  int64_t long_matches = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    Rng rng(seed);
    // Past the size where matches prefetch (2^16 blocks), so the index window is exercised.
    BlockCache cache = Build(70'000, rng.Bernoulli(0.5) ? 20'000 : 0);
    // Sessions grow by turns; some fork from another session's history.
    std::vector<std::vector<int32_t>> sessions(40);
    int32_t next_token = 1;
    int64_t id = 1;
    for (int op = 0; op < 1'500; ++op) {
      std::vector<int32_t>& s = sessions[static_cast<size_t>(rng.Uniform(0, 39))];
      if (s.empty() || s.size() > 3'000 || rng.Bernoulli(0.1)) {
        const std::vector<int32_t> other = sessions[static_cast<size_t>(rng.Uniform(0, 39))];
        s.assign(other.begin(), other.begin() + Below(rng, std::min<size_t>(other.size(), 2'000)));
      }
      const auto turn = static_cast<int32_t>(rng.Uniform(20, 400));
      for (int32_t t = 0; t < turn; ++t) s.push_back(next_token++);
      const std::vector<BlockKey> keys = cache.hasher().KeysFromTokens(s, kTokensPerBlock);
      // A probe that differs from the session past a random point (a miss past a hit).
      std::vector<int32_t> probe(s.begin(), s.begin() + Below(rng, s.size()));
      probe.push_back(-1);
      const std::vector<BlockKey> probe_keys =
          cache.hasher().KeysFromTokens(probe, kTokensPerBlock);
      ASSERT_EQ(cache.Match(probe_keys), Expected(cache, probe_keys));

      const PrefixMatch expected = Expected(cache, keys);
      ASSERT_EQ(cache.Match(keys), expected) << "op " << op;
      if (expected.device_blocks >= 200) ++long_matches;
      const StatusOr<PrefixMatch> m = cache.AddRequest(RequestId(id), keys);
      ASSERT_TRUE(m.ok());
      // Onboarding stops where the device cannot make room; otherwise the whole host run.
      ASSERT_EQ(m->device_blocks, expected.device_blocks) << "op " << op;
      ASSERT_LE(m->host_blocks, expected.host_blocks) << "op " << op;
      if (cache.Reserve(RequestId(id), static_cast<int64_t>(keys.size())).ok()) {
        ASSERT_TRUE(cache
                        .Commit(RequestId(id),
                                std::span(keys).subspan(static_cast<size_t>(m->total_blocks())))
                        .ok());
      }
      ASSERT_TRUE(cache.Release(RequestId(id++)).ok());
      if (rng.Bernoulli(0.05)) cache.EvictDevice(static_cast<int64_t>(rng.Uniform(1, 5'000)));
    }
    ASSERT_TRUE(cache.CheckInvariants().ok());
  }
  EXPECT_GT(long_matches, 500) << "sessions must be found cached often";
}

}  // namespace
}  // namespace agentkv::kv
