// Tests of BlockCache::Match(keys, resume): a match resumed where the previous match of the same
// chain ended gives what a full match gives, whatever happened to the cache in between (blocks
// committed, evicted, offloaded to the host tier, onboarded, dropped, the cache reset). A
// model-based randomized test checks it after every call against Match(keys).
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/kv/block_cache.h"

namespace agentkv::kv {
namespace {

constexpr int32_t kTokensPerBlock = 4;

BlockCache Build(int64_t device_blocks, int64_t host_blocks) {
  KvCacheOptions o;
  o.tokens_per_block = kTokensPerBlock;
  o.device_blocks = device_blocks;
  o.host_blocks = host_blocks;
  o.offload_threshold = 0;  // every evicted block goes to the host tier when there is one
  o.hash_seed = 3;
  StatusOr<BlockCache> created = BlockCache::Create(o);
  AGENTKV_CHECK(created.ok());
  return std::move(created).value();
}

std::vector<BlockKey> Chain(const BlockCache& cache, int32_t first, int32_t blocks) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < blocks * kTokensPerBlock; ++i) tokens.push_back(first + i);
  return cache.hasher().KeysFromTokens(tokens, kTokensPerBlock);
}

// Admits `keys` as request `id`, computes and commits every block, releases it.
void Serve(BlockCache& cache, int64_t id, std::span<const BlockKey> keys) {
  const StatusOr<PrefixMatch> m = cache.AddRequest(RequestId(id), keys);
  AGENTKV_CHECK(m.ok());
  if (cache.Reserve(RequestId(id), static_cast<int64_t>(keys.size()) * kTokensPerBlock).ok()) {
    AGENTKV_CHECK(
        cache.Commit(RequestId(id), keys.subspan(static_cast<size_t>(m->total_blocks()))).ok());
  }
  AGENTKV_CHECK(cache.Release(RequestId(id)).ok());
}

TEST(BlockCacheMatchResumeTest, AResumedMatchGrowsWithCommitsAndShrinksWithEvictions) {
  BlockCache cache = Build(16, 0);
  const std::vector<BlockKey> keys = Chain(cache, 0, 10);
  MatchResume resume;
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{0, 0}));
  Serve(cache, 1, std::span(keys).first(4));
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{4, 0}));
  Serve(cache, 2, std::span(keys).first(7));
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{7, 0}));
  // A shorter chain than the last one resumes nothing and still answers right.
  EXPECT_EQ(cache.Match(std::span(keys).first(3), resume), (PrefixMatch{3, 0}));
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{7, 0}));
  EXPECT_EQ(cache.EvictDevice(16), 7);
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{0, 0}));
}

TEST(BlockCacheMatchResumeTest, AHostRunStopsWhereItStoppedUntilSomethingMoves) {
  BlockCache cache = Build(8, 8);
  const std::vector<BlockKey> keys = Chain(cache, 0, 6);
  Serve(cache, 1, std::span(keys).first(4));
  EXPECT_EQ(cache.OffloadChain(std::span(keys).first(4)), 4);
  MatchResume resume;
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{0, 4}));
  // Another chain committed meanwhile changes nothing for this one.
  Serve(cache, 2, Chain(cache, 500, 2));
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{0, 4}));
  // Serving the chain onboards its host blocks (a move) and commits the rest.
  Serve(cache, 3, keys);
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{6, 0}));
  ASSERT_TRUE(cache.Reset().ok());
  EXPECT_EQ(cache.Match(keys, resume), (PrefixMatch{0, 0}));
}

// Random traffic over chains that share prefixes and fork, with and without a host tier, under
// eviction, offloads and resets; watched chains (some growing) are matched with their own resume
// after every call and must equal a full match.
TEST(BlockCacheMatchResumeTest, RandomizedResumedMatchesEqualFullMatches) {
  int64_t resumed_nonzero = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    Rng rng(seed);
    BlockCache cache = Build(20, rng.Bernoulli(0.5) ? 10 : 0);
    // Chain c: prefix p then a tail; the watched ones are prefixes of growing length.
    const auto chain = [&](int32_t prefix, int32_t tail, int32_t blocks) {
      std::vector<int32_t> tokens;
      for (int32_t t = 0; t < 2 * kTokensPerBlock; ++t) tokens.push_back(prefix * 1000 + t);
      for (int32_t t = 0; t < (blocks - 2) * kTokensPerBlock; ++t) {
        tokens.push_back(100000 + tail * 1000 + t);
      }
      return cache.hasher().KeysFromTokens(tokens, kTokensPerBlock);
    };
    struct Watched {
      std::vector<BlockKey> keys;
      size_t length = 0;
      MatchResume resume;
    };
    std::vector<Watched> watched;
    for (int32_t w = 0; w < 6; ++w) {
      watched.push_back(Watched{chain(w % 3, w, 12), 3, MatchResume()});
    }
    int64_t id = 1;
    const auto check = [&] {
      for (Watched& w : watched) {
        if (rng.Bernoulli(0.2) && w.length < w.keys.size()) ++w.length;
        const std::span<const BlockKey> keys = std::span(w.keys).first(w.length);
        const PrefixMatch resumed = cache.Match(keys, w.resume);
        ASSERT_EQ(resumed, cache.Match(keys)) << "length " << w.length;
        if (resumed.total_blocks() > 0) ++resumed_nonzero;
      }
    };
    for (int op = 0; op < 400; ++op) {
      const double r = rng.UniformDouble();
      if (r < 0.7) {
        const int32_t blocks = static_cast<int32_t>(rng.Uniform(2, 12));
        const std::vector<BlockKey> keys = chain(static_cast<int32_t>(rng.Uniform(0, 2)),
                                                 static_cast<int32_t>(rng.Uniform(0, 8)), blocks);
        Serve(cache, id++, keys);
      } else if (r < 0.8) {
        const Watched& w = watched[static_cast<size_t>(rng.Uniform(0, 5))];
        cache.OffloadChain(std::span(w.keys).first(w.length));
      } else if (r < 0.95) {
        cache.EvictDevice(static_cast<int64_t>(rng.Uniform(1, 6)));
      } else if (r < 0.97) {
        ASSERT_TRUE(cache.Reset().ok());
      }
      check();
      ASSERT_TRUE(cache.CheckInvariants().ok());
    }
  }
  EXPECT_GT(resumed_nonzero, 1000) << "the watched chains must be cached often";
}

}  // namespace
}  // namespace agentkv::kv
